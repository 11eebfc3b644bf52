package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/gossipd/gossipd/bench"
	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/cuda"
	"github.com/gossipd/gossipd/node"
	"github.com/gossipd/gossipd/node/p2p"
	"github.com/gossipd/gossipd/privacy"
)

// runBounds are the values run's numeric flags take, beside the training
// flags it shares with simulate (trainingBounds). --peer-rate and
// --peer-frames take a negative value for no limit (0 would silently be
// the default), --max-norm 0 for its default bound.
var runBounds = withTrainingBounds(cli.Bounds{
	"init-seed": "[0,inf)", "checkpoint-every": "[1,inf)", "keep": "[1,inf)", "test-fraction": "(0,1)",
	"join-timeout": "(0,inf)", "announce-interval": "(0,inf)", "max-conns": "[1,inf)",
	"peer-rate": "(-inf,0)|(0,inf)", "peer-frames": "(-inf,0)|(0,inf)", "send-rate": "[0,inf)", "max-norm": "(-inf,inf)",
})

// trainingBounds are the bounds of the flags that run and simulate share
// (training, the protocols' settings, DP-SGD), so that a flag takes the
// same values in both. Where a zero would silently become the default (a
// count, a period, a rate) an explicit 0 is refused; where it means
// something, the flag's help says what.
var trainingBounds = cli.Bounds{
	"batch": "[1,inf)", "local-epochs": "[1,inf)", "local-steps": "[0,inf)", "lr": "(0,inf)", "delta": "(0,inf)",
	"staleness": "[0,inf)", "outer-lr": "(0,inf)", "outer-momentum": "[0,1)",
	"dp-clip": "(0,inf)", "dp-noise": "(0,inf)", "dp-delta": "(0,1)", "dp-epsilon": "[0,inf)",
}

// withTrainingBounds is b and trainingBounds.
func withTrainingBounds(b cli.Bounds) cli.Bounds {
	maps.Copy(b, trainingBounds)
	return b
}

// jobShape is what decides which of run's flags apply: the job's
// protocol, model and outer optimizer (from the flags of a daemon that
// creates the job, from the announcement for one that joins).
type jobShape struct {
	protocol, model, outer string
	localSteps             int
}

func (r *runFlags) shape() jobShape {
	return jobShape{protocol: r.protocol, model: r.modelKind, outer: r.outer, localSteps: r.localSteps}
}

func shapeOf(j node.JobSpec) jobShape {
	s := jobShape{protocol: j.Protocol, model: j.Model.Kind}
	if j.Outer != nil {
		s.outer, s.localSteps = j.Outer.Method, j.Outer.Steps
	}
	return s
}

// runScope says which jobs a flag applies to (to: in words).
type runScope struct {
	applies func(jobShape) bool
	to      string
}

// onOption scopes a flag to the protocols the core says use it
// (gossip.OptionProtocols).
func onOption(name string) runScope {
	ps, words := gossip.OptionProtocols(name)
	return runScope{func(s jobShape) bool { return slices.Contains(ps, s.protocol) }, words}
}

// runScopes say which jobs a flag applies to; given for another, it
// would be silently ignored.
var runScopes = map[string]runScope{
	"hidden":         {func(s jobShape) bool { return s.model == model.MLP }, "--model mlp"},
	"topology":       onOption("topology"),
	"variant":        onOption("variant"),
	"staleness":      onOption("staleness"),
	"sfb-mode":       onOption("sfb-mode"),
	"aggregator":     onOption("aggregator"),
	"local-epochs":   {func(s jobShape) bool { return s.protocol == gossip.RandomWalk && s.localSteps == 0 }, "randomwalk without --local-steps"},
	"outer":          {func(s jobShape) bool { return s.localSteps > 0 }, "--local-steps"},
	"outer-lr":       {func(s jobShape) bool { return s.localSteps > 0 && s.outer != gossip.OuterAverage }, "--local-steps with --outer nesterov"},
	"outer-momentum": {func(s jobShape) bool { return s.localSteps > 0 && s.outer != gossip.OuterAverage }, "--local-steps with --outer nesterov"},
}

// checkRunScopes refuses the flags set that do not apply to a job of
// shape s, and DP-SGD's δ and budget without DP-SGD.
func checkRunScopes(fs *flag.FlagSet, s jobShape, dp privacy.Config) error {
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		if sc, ok := runScopes[f.Name]; ok && !sc.applies(s) {
			bad = append(bad, fmt.Sprintf("--%s applies to %s, not to this job (protocol %s, model %s)", f.Name, sc.to, s.protocol, s.model))
		}
	})
	for _, f := range []string{"dp-delta", "dp-epsilon"} {
		if cli.FlagSet(fs, f) && !dp.Enabled() {
			bad = append(bad, "--"+f+" applies to DP-SGD (--dp-clip and --dp-noise)")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", errUsage, strings.Join(bad, "; "))
	}
	return nil
}

// jobFlags are the flags that make up a job (node.JobSpec); --join takes
// them from the job's announcement instead.
var jobFlags = []string{"protocol", "model", "hidden", "scale", "delta", "variant", "compression", "topology", "staleness", "sfb-mode", "init-seed", "name", "local-steps", "outer", "outer-lr", "outer-momentum"}

// checkJoin refuses job flags beside --join: they would be ignored.
func (r *runFlags) checkJoin(fs *flag.FlagSet) error {
	if r.join == "" {
		return nil
	}
	var set []string
	for _, f := range jobFlags {
		if cli.FlagSet(fs, f) {
			set = append(set, "--"+f)
		}
	}
	if len(set) > 0 {
		return fmt.Errorf("%w: %s: part of the job, which --join takes from the job's announcement; leave them out", errUsage, strings.Join(set, ", "))
	}
	return nil
}

// runChecked is what run's flags resolve to once checked.
type runChecked struct {
	dp      privacy.Config
	members []string
	agg     merge.Aggregator
	// host is the libp2p host's configuration, checked, but for the
	// identity key, the consortium and the logger, which run fills in.
	host p2p.Config
}

// check refuses bad flags as usage errors naming them, before the daemon
// loads its data, opens its store or joins the network: numbers out of
// range, options that do not apply, malformed values (addresses, the
// job ID, the job's own settings, DP-SGD's) and a device it cannot have.
func (r *runFlags) check(fs *flag.FlagSet) (runChecked, error) {
	var ok runChecked
	if err := cli.CheckNumbers(fs, runBounds); err != nil {
		return ok, err
	}
	if !cli.FlagSet(fs, "test-fraction") {
		r.testFraction = 0 // the loader's default, and no error for a source with a test split
	}
	ok.dp = privacy.Config{Clip: r.dpClip, Noise: r.dpNoise, Epsilon: r.dpEpsilon, Delta: r.dpDelta}
	if err := ok.dp.Validate(); err != nil {
		return ok, fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := checkDevice(r.device); err != nil {
		return ok, err
	}
	// A missing store is created; anything else there must be a directory.
	if r.storeRecover && r.storeReset {
		return ok, fmt.Errorf("%w: --store-recover keeps what is readable of a damaged store, --store-reset starts afresh: give one or the other", errUsage)
	}
	if st, err := os.Stat(r.store); err == nil && !st.IsDir() {
		return ok, fmt.Errorf("%w: --store %s is a file, not a directory", errUsage, r.store)
	}
	var err error
	if ok.members, err = cli.ReadList("members", r.members, p2p.CheckPeerID); err != nil {
		return ok, err
	}
	if ok.agg, err = merge.ParseAggregator(r.aggregator); err != nil {
		return ok, fmt.Errorf("%w: --aggregator: %v", errUsage, err)
	}
	if r.shard != "" {
		if _, _, err := dataset.ParseShard(r.shard); err != nil {
			return ok, fmt.Errorf("%w: --shard: %v", errUsage, err)
		}
	}
	if r.partition != "" {
		if r.shard == "" {
			return ok, fmt.Errorf("%w: --partition %s cuts --shard, which is not given", errUsage, r.partition)
		}
		if _, err := dataset.ParsePartitioner(r.partition); err != nil {
			return ok, fmt.Errorf("%w: --partition: %v", errUsage, err)
		}
	}
	if err := r.checkJoin(fs); err != nil {
		return ok, err
	}
	if r.join != "" {
		if err := node.CheckJobID(r.join); err != nil {
			return ok, fmt.Errorf("%w: --join: %v", errUsage, err)
		}
	} else {
		if err := checkRunScopes(fs, r.shape(), ok.dp); err != nil {
			return ok, err
		}
		if err := dataset.CheckScaling(r.scale); err != nil {
			return ok, fmt.Errorf("%w: --scale: %v", errUsage, err)
		}
		// The job's own settings, with a stand-in for the data's shape
		// (the model's inputs and classes come from the data).
		if _, err := r.jobSpec(&dataset.Dataset{D: 1, Classes: 2}); err != nil {
			return ok, err
		}
	}
	bootstrap, err := cli.ReadList("bootstrap", r.bootstrap, p2p.CheckBootstrap)
	if err != nil {
		return ok, err
	}
	ok.host = p2p.Config{Limits: p2p.Limits{Conns: r.maxConns, PeerBytes: r.peerBytes, PeerFrames: r.peerFrames},
		Listen: cli.SplitList(r.listen), Bootstrap: bootstrap, MDNS: r.mdns, DHT: r.dht, NoPEX: !r.pex,
		NAT: p2p.NATConfig{PortMap: r.portMap, AutoNAT: r.autonat, HolePunching: r.holePunching,
			Relays: cli.SplitList(r.relays), RelayService: r.relayService, ForcePrivate: r.behindNAT}}
	if err := ok.host.Validate(); err != nil {
		return ok, fmt.Errorf("%w: %v", errUsage, err)
	}
	return ok, nil
}

// envNotFlags are the GOSSIPD_* variables that are not run's flags, which
// cli.CheckEnv lets pass: any other is a misspelt setting.
var envNotFlags = []string{
	compute.KernelEnv, dataset.CacheDirEnv, dataset.DataDirEnv, cuda.DirEnv, bench.SeedsEnv,
	"GOSSIPD_IMAGE", // the image deploy/compose.yaml runs
	// Read by the tests, which start daemons in their environment.
	"GOSSIPD_PYTHON", "GOSSIPD_ARTIFACTS", "GOSSIPD_BENCH_PROCS", "GOSSIPD_ABICHECK_LIB",
}
