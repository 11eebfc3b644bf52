package daemon

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gossipd/gossipd/daemon/apiserver"
	"github.com/gossipd/gossipd/daemon/p2p"
	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/job"
)

// Launch runs a daemon with settings s, whose flags are fs (parsed, with
// the environment and config file applied), until ctx ends or the
// daemon leaves its job; logs go to stderr. It checks every setting, then
// the data, before it creates or changes anything in the store: the
// identity is made in memory and written with the store. Bad settings
// are errors wrapping cli.ErrUsage that name the flag.
func Launch(ctx context.Context, s *Settings, fs *flag.FlagSet, stderr io.Writer) error {
	ok, err := s.check(fs)
	if err != nil {
		return err
	}
	log, err := cli.NewLogger(stderr, s.LogFormat, s.LogLevel)
	if err != nil {
		return err
	}
	ok.api.Logger = log
	if err := cli.SetMemoryLimit(s.MemoryLimit); err != nil {
		return err
	}
	keyPath := cmp.Or(s.Key, filepath.Join(s.Store, "identity.key"))
	key, newKey, err := p2p.LoadOrNewKey(keyPath)
	if err != nil {
		return err
	}
	var club *p2p.Consortium
	if s.Consortium != "" {
		if club, err = p2p.LoadConsortium(s.Consortium); err != nil {
			return err
		}
	}
	var spec job.Spec
	var d data
	var initParams []float32
	if s.Join == "" {
		if d, err = s.load(s.Job.Scale, s.Job.InitSeed, ok.dp.Enabled()); err != nil {
			return err
		}
		shape, err := s.Data.ShapeOf(d.train)
		if err != nil {
			return fmt.Errorf("%w: %v", cli.ErrUsage, err)
		}
		if spec, err = s.Job.Spec(d.train.D, d.train.Classes, shape); err != nil {
			return fmt.Errorf("%w: %v", cli.ErrUsage, err)
		}
		if initParams, err = s.Job.InitWeights(&spec); err != nil {
			return fmt.Errorf("%w: %v", cli.ErrUsage, err)
		}
	}
	ok.host.Key, ok.host.Consortium, ok.host.Logger = key, club, log
	host, err := p2p.New(ok.host)
	if err != nil {
		return err
	}
	defer host.Close()
	var origin *transport.Announcement
	if s.Join != "" {
		if spec, origin, d, err = s.join(ctx, host, fs, ok, log); err != nil {
			return err
		}
	}
	// A job of partial views connects to its members' neighbours only.
	host.SetPartialViews(spec.Sampling == gossip.SamplingHyParView)
	ifDamaged := DamagedRefuse
	switch {
	case s.StoreRecover:
		ifDamaged = DamagedRecover
	case s.StoreReset:
		ifDamaged = DamagedReset
	}
	store, err := OpenStore(filepath.Join(s.Store, "checkpoints"), StoreOptions{Keep: s.Keep, Logger: log, IfDamaged: ifDamaged})
	if err != nil {
		return err
	}
	defer store.Close()
	if newKey {
		if err := p2p.SaveKey(keyPath, key); err != nil {
			return err
		}
		log.Info("created the identity key", "file", keyPath)
	}
	n, err := New(Config{Job: spec, Local: Local{LR: s.Job.LR, Batch: s.Job.Batch, LocalEpochs: s.Job.LocalEpochs, Members: ok.members},
		Join: origin != nil, Origin: origin, InitParams: initParams, AnnounceInterval: s.AnnounceInterval,
		Train: d.train, Test: d.test, Transport: host, Addrs: host.Addrs(), Store: store, Scaler: d.scaler,
		CheckpointEvery: s.CheckpointEvery, EvalInterval: s.EvalInterval, Logger: log, Aggregator: ok.agg, MaxNorm: s.MaxNorm, DP: ok.dp,
		DataFingerprint: d.train.Fingerprint, SendRate: s.SendRate, Device: s.Device})
	if err != nil {
		return err
	}
	srv, err := apiserver.Listen(ok.api, n.Handler())
	if err != nil {
		return err
	}
	if srv.TokenCreated {
		log.Info("created the API token", "file", s.APIToken)
	}
	go srv.Serve()
	log.Info("gossipd started", "peer", host.ID(), "addrs", strings.Join(host.Addrs(), " "), "api", srv.Addr(), "dashboard", srv.URL()+"/",
		"job", n.JobID().Short(), "train_examples", d.train.N, "test_examples", d.test.N)
	runErr := n.Run(ctx)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	why := "stopped"
	if ctx.Err() == nil {
		why = "left the job" // POST /leave
	}
	log.Info("gossipd stopped", "why", why, "updates", n.Status().Updates, "checkpoint", n.Status().Checkpoint)
	return nil
}

// data is a daemon's local data, scaled.
type data struct {
	train, test *dataset.Dataset
	scaler      *dataset.Scaler
}

// load reads this peer's data, scaled by scale, its test split drawn
// with seed.
func (s *Settings) load(scale string, seed uint64, fingerprint bool) (data, error) {
	var d data
	testFraction := s.Data.TestFraction
	if !s.testFractionGiven {
		testFraction = 0 // the loader's default, and no error for a source with a test split
	}
	var err error
	d.train, d.test, d.scaler, err = dataset.Load(s.Data.Dataset, dataset.LoadOptions{Shard: s.Shard, Partition: s.partition(),
		Scale: job.ScaleFor(scale, job.Daemon), Fingerprint: fingerprint,
		OpenOptions: dataset.OpenOptions{CSV: dataset.CSVOptions{LabelColumn: s.Data.LabelColumn}, TestFraction: testFraction, Seed: seed}})
	if err != nil {
		return d, cli.DatasetUsage(err)
	}
	d.test = d.test.Spread(s.EvalSubset)
	// The whole data set is garbage once a shard is cut from it: give
	// its memory back now rather than as the scavenger gets to it.
	debug.FreeOSMemory()
	return d, nil
}

// partition is how the shard is cut ("": the loader's default).
func (s *Settings) partition() string {
	if !s.partGiven {
		return ""
	}
	return s.Data.Partition
}

// join finds the job s.Join names on the network, checks the flags
// given against it and loads the data its spec says how to scale.
func (s *Settings) join(ctx context.Context, host *p2p.Host, fs *flag.FlagSet, ok checked, log *slog.Logger) (job.Spec, *transport.Announcement, data, error) {
	log.Info("waiting for the job's announcement", "job", s.Join, "timeout", s.JoinTimeout.String())
	spec, origin, err := FindJob(ctx, host, s.Join, s.JoinTimeout)
	if err != nil {
		return spec, nil, data{}, err
	}
	var set []string
	fs.Visit(func(f *flag.Flag) { set = append(set, f.Name) })
	if err := job.Check(set, spec.Shape(ok.dp.Enabled())); err != nil {
		return spec, nil, data{}, fmt.Errorf("job %.12s: %w: %v", origin.JobID, cli.ErrUsage, err)
	}
	if spec.Protocol == gossip.SFB && origin.Members >= gossip.SFBMaxPeers {
		return spec, nil, data{}, fmt.Errorf("job %.12s: sfb sends every update to every member, so it runs jobs of at most %d members; this one has %d",
			origin.JobID, gossip.SFBMaxPeers, origin.Members)
	}
	log.Info("joining job", "job", origin.JobID[:12], "name", spec.Name, "protocol", spec.Protocol, "model", spec.Model.String(),
		"creator", origin.Creator, "from", origin.Peer)
	d, err := s.load(spec.Scale, spec.InitSeed, ok.dp.Enabled())
	if err != nil {
		return spec, nil, d, err
	}
	if d.train.D != spec.Model.Inputs || d.train.Classes > spec.Model.Classes {
		return spec, nil, d, fmt.Errorf("%w: --dataset %s has %d features and %d classes; job %.12s's model takes %d inputs and %d classes",
			cli.ErrUsage, s.Data.Dataset, d.train.D, d.train.Classes, origin.JobID, spec.Model.Inputs, spec.Model.Classes)
	}
	return spec, origin, d, nil
}
