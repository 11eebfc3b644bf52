package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/internal/apiclient"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/device"
	"github.com/gossipd/gossipd/node"
	"github.com/gossipd/gossipd/node/apiserver"
	"github.com/gossipd/gossipd/node/p2p"
	"github.com/gossipd/gossipd/node/transport"
)

// runFlags declares `gossipd run`'s flags (shared with `gossipd init`).
type runFlags struct {
	listen, bootstrap, api, store, key, dataset, shard, labelColumn, scale       string
	partition                                                                    string
	protocol, modelKind, hidden, variant, compression, name, logFormat, logLevel string
	outer                                                                        string
	outerLR, outerMomentum                                                       float64
	localSteps                                                                   int
	members, topology, dht, relays, join                                         string
	sfbMode, aggregator, consortium, memoryLimit, device                         string
	apiToken, apiCert, apiKey                                                    string
	testFraction, lr, dpEpsilon, dpDelta, dpClip, dpNoise, maxNorm               float64
	peerBytes, peerFrames, sendRate                                              float64
	batch, localEpochs, ckptEvery, keep, staleness, maxConns                     int
	delta, joinTimeout, announceEvery                                            time.Duration
	initSeed                                                                     uint64
	mdns, pex, autonat, holePunching, portMap, relayService, behindNAT           bool
	storeRecover, storeReset                                                     bool
}

func (r *runFlags) declare(fs *flag.FlagSet) {
	fs.String("config", "", "YAML config file (keys are these flags' names); precedence: flags > $GOSSIPD_* > file > defaults")
	fs.StringVar(&r.listen, "listen", "/ip4/0.0.0.0/tcp/4001,/ip4/0.0.0.0/udp/4001/quic-v1", "libp2p listen multiaddrs, comma-separated")
	fs.StringVar(&r.bootstrap, "bootstrap", "", "bootstrap peers: multiaddrs ending in /p2p/PEERID, or http(s)://HOST:PORT of a daemon's API (its GET /id names it); comma-separated, or @FILE with one per line")
	fs.BoolVar(&r.mdns, "mdns", true, "discover peers on the LAN with mDNS")
	fs.StringVar(&r.consortium, "consortium", "", "consortium file: join its private network (TCP only) and admit its members only")
	fs.BoolVar(&r.pex, "pex", true, "exchange peer addresses with connected peers")
	fs.BoolVar(&r.behindNAT, "behind-nat", false, "treat this node as unreachable from outside: use --relays at once")
	fs.StringVar(&r.dht, "dht", p2p.DHTAuto, "Kademlia DHT: off|auto (on when --bootstrap is given)|client|server")
	fs.BoolVar(&r.autonat, "autonat", false, "AutoNAT: learn this node's reachability and answer others' checks")
	fs.BoolVar(&r.holePunching, "hole-punching", false, "upgrade relayed connections to direct ones (DCUtR)")
	fs.BoolVar(&r.portMap, "nat-portmap", false, "ask the gateway for a port mapping (UPnP, NAT-PMP)")
	fs.StringVar(&r.relays, "relays", "", "circuit-relay v2 relays to be reachable through (multiaddrs with /p2p/ID, comma-separated)")
	fs.BoolVar(&r.relayService, "relay-service", false, "act as a circuit-relay v2 relay for other peers")
	fs.IntVar(&r.maxConns, "max-conns", 256, "most libp2p connections (libp2p's resource manager)")
	fs.Float64Var(&r.peerBytes, "peer-rate", 256<<20, "bytes per second one peer's frames are read at; faster senders are slowed, frames that would wait over 30 s dropped (negative: no limit)")
	fs.Float64Var(&r.peerFrames, "peer-frames", 200, "frames per second one peer may send (negative: no limit)")
	fs.Float64Var(&r.sendRate, "send-rate", 0, "pace what this node sends to this many payload bytes per second over all peers (0: unpaced), for slow or metered uplinks")
	fs.Float64Var(&r.maxNorm, "max-norm", 0, "drop received parameter vectors of larger L2 norm (0: 1000·√n for n values; negative: no bound)")
	fs.StringVar(&r.api, "api", "127.0.0.1:8080", "HTTP API address (the dashboard at /, /healthz, /status, /metrics, job control); beyond loopback it needs --api-token")
	fs.StringVar(&r.apiToken, "api-token", "", "bearer token file (mode 0600; created if missing): required by job control (POST /pause, /resume, /leave), and by every read but the probes when --api is beyond loopback")
	fs.StringVar(&r.apiCert, "api-tls-cert", "", "serve the API over TLS with this PEM certificate (with --api-tls-key; renewed files are picked up)")
	fs.StringVar(&r.apiKey, "api-tls-key", "", "the PEM private key of --api-tls-cert")
	fs.StringVar(&r.store, "store", "gossipd-data", "directory of the checkpoint store")
	fs.BoolVar(&r.storeRecover, "store-recover", false, "if the store is damaged: move it aside (STORE/checkpoints.damaged-TIME) and start from what is readable in it (default: refuse to start, saying what is wrong)")
	fs.BoolVar(&r.storeReset, "store-reset", false, "if the store is damaged: move it aside and start afresh, keeping only the privacy ledger")
	fs.StringVar(&r.device, "device", "auto", "where training runs: "+device.Values+" (auto: a GPU when gossipd can use one, else the CPU; /status says which and why)")
	fs.StringVar(&r.key, "key", "", "identity key file (default STORE/identity.key; created on first run, mode 0600)")
	fs.StringVar(&r.dataset, "dataset", "digits", "local data: digits, fashion-mnist or a path")
	fs.StringVar(&r.shard, "shard", "", "train on shard i/n of the dataset (e.g. 0/5), for demos and tests")
	fs.StringVar(&r.partition, "partition", "", "how --shard cuts the data: iid (default)|dirichlet:α|shards:k (k label-sorted pieces each: non-IID)|quantity:α")
	fs.StringVar(&r.labelColumn, "label-column", "", "CSV label column")
	fs.StringVar(&r.scale, "scale", "global", "feature scaling: global|minmax|standard|none (part of the job)")
	fs.Float64Var(&r.testFraction, "test-fraction", 0.2, "held-out fraction when the dataset has no test split")
	fs.StringVar(&r.protocol, "protocol", gossip.RandomWalk, "protocol: "+strings.Join(gossip.Protocols, "|")+" (part of the job)")
	fs.StringVar(&r.join, "join", "", "join the running job with this ID (or a prefix of 8+ hex digits) from its announcement: the job's spec, model and state come from its members, so no job flags are given")
	fs.DurationVar(&r.joinTimeout, "join-timeout", time.Minute, "how long --join waits for the job's announcement")
	fs.DurationVar(&r.announceEvery, "announce-interval", node.DefaultAnnounceInterval, "how often the job is announced; a member silent for 3 of them is dropped")
	fs.StringVar(&r.members, "members", "", "allowlist: admit only these peers (IDs, comma-separated, or @FILE with one per line); default every peer")
	fs.StringVar(&r.topology, "topology", "", "graph over the live members for dpsgd, adpsgd, pushsum: ring|torus|regular:K|exponential|complete (default ring; exponential for pushsum; part of the job)")
	fs.IntVar(&r.staleness, "staleness", 0, "sfb: SSP staleness bound (0: BSP; part of the job)")
	fs.StringVar(&r.aggregator, "aggregator", "mean", "how models combine (dpsgd: with the neighbours'; randomwalk (mu) and pushsum: robust rules over a cache of received models): "+strings.Join(merge.Aggregators, "|"))
	fs.StringVar(&r.sfbMode, "sfb-mode", "auto", "sfb: per-layer exchange auto|factors|dense (dense with DP-SGD; part of the job)")
	fs.Float64Var(&r.dpClip, "dp-clip", 0, "DP-SGD per-example clipping norm C (turns DP-SGD on, with --dp-noise)")
	fs.Float64Var(&r.dpNoise, "dp-noise", 0, "DP-SGD noise multiplier σ (noise std σ·C)")
	fs.Float64Var(&r.dpEpsilon, "dp-epsilon", 0, "privacy budget ε: stop training and sharing once the next step would exceed it (0: no limit; ε is still accounted)")
	fs.Float64Var(&r.dpDelta, "dp-delta", 1e-5, "DP-SGD δ")
	fs.StringVar(&r.modelKind, "model", "softmax", "model: "+strings.Join(model.Kinds, "|")+" (part of the job)")
	fs.StringVar(&r.hidden, "hidden", "128", "MLP hidden widths (mlp only; part of the job)")
	fs.DurationVar(&r.delta, "delta", time.Second, "gossip period Δ (part of the job)")
	fs.Float64Var(&r.lr, "lr", 0.1, "learning rate (this peer's own)")
	fs.IntVar(&r.batch, "batch", 32, "minibatch size (this peer's own; sfb's factor layers follow the creator's)")
	fs.IntVar(&r.localEpochs, "local-epochs", 1, "local epochs per update (this peer's own)")
	fs.StringVar(&r.variant, "variant", "mu", "random-walk variant: mu|rw|um (part of the job)")
	fs.StringVar(&r.compression, "compression", "none", "compression of what the node sends: "+gossip.CompressionValues+" (fp16 and int8 for every protocol; topk and randk for dpsgd, adpsgd and pushsum (CHOCO, an optional consensus step γ) and sfb (error feedback); subsample and partition for randomwalk; part of the job)")
	fs.IntVar(&r.localSteps, "local-steps", 0, "local SGD steps H between exchanges, with an outer optimizer (sfb: DiLoCo) (0: one gradient step a round; part of the job)")
	fs.StringVar(&r.outer, "outer", "nesterov", "with --local-steps: outer optimizer nesterov|average (part of the job)")
	fs.Float64Var(&r.outerLR, "outer-lr", 0.7, "with --local-steps and --outer nesterov: outer learning rate (part of the job)")
	fs.Float64Var(&r.outerMomentum, "outer-momentum", 0.9, "with --local-steps and --outer nesterov: outer momentum (part of the job)")
	fs.Uint64Var(&r.initSeed, "init-seed", 1, "seed of the initial model (part of the job)")
	fs.StringVar(&r.name, "name", "gossipd", "job name (part of the job)")
	fs.IntVar(&r.ckptEvery, "checkpoint-every", 10, "model updates between checkpoints")
	fs.IntVar(&r.keep, "keep", 3, "checkpoints to keep")
	fs.StringVar(&r.logFormat, "log-format", "auto", "log format: auto (text on a terminal, else JSON)|text|json")
	fs.StringVar(&r.logLevel, "log-level", "info", "log level: debug|info|warn|error")
	fs.StringVar(&r.memoryLimit, "memory-limit", "", "soft memory limit of the Go runtime (e.g. 192MiB; empty: $GOMEMLIMIT or none): the garbage collector works harder near it")
}

// profiles are the settings `gossipd init --profile NAME` writes over the
// defaults, each with why.
var profiles = map[string][]struct{ flag, value, why string }{
	"default": nil,
	// Small boards (ARM, 512 MB or less), slow or metered uplinks.
	"edge": {
		{"memory-limit", "192MiB", "keep the heap small: the collector runs more often instead of letting it double"},
		{"max-conns", "32", "fewer connections, fewer buffers"},
		{"dht", p2p.DHTClient, "do not serve the DHT to others"},
		{"send-rate", "262144", "send at most 256 KiB/s: models wait their turn instead of flooding the uplink"},
		{"announce-interval", "15s", "announce less often (a member silent for 45 s is dropped)"},
		{"peer-rate", "1048576", "read at most 1 MiB/s from any one peer"},
		{"peer-frames", "20", "at most 20 frames per second from any one peer"},
		{"checkpoint-every", "50", "write the store less often (flash wear)"},
		{"keep", "2", "keep two checkpoints"},
	},
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("run", "run [flags]\n\nRuns the daemon: joins peers over libp2p, trains on local data, exchanges\nmodels, checkpoints to --store and serves the API on --api.", stderr)
	var r runFlags
	r.declare(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := cli.CheckEnv(fs, "GOSSIPD_", envNotFlags...); err != nil {
		return err
	}
	if err := cli.ApplySettings(fs, "config", "GOSSIPD_"); err != nil {
		return err
	}
	ok, err := r.check(fs) // before the data is loaded and the network joined
	if err != nil {
		return err
	}
	dp := ok.dp
	log, err := cli.NewLogger(stderr, r.logFormat, r.logLevel)
	if err != nil {
		return err
	}
	api := apiserver.Config{Addr: r.api, TokenFile: r.apiToken, CertFile: r.apiCert, KeyFile: r.apiKey, Logger: log,
		Public: node.PublicPaths, ReadOnlyPosts: node.ReadOnlyPosts}
	if err := api.Validate(); err != nil { // before the data is loaded and the network joined
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := api.CheckFiles(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := setMemoryLimit(r.memoryLimit); err != nil {
		return err
	}
	// Nothing is created or changed in the store until the data and
	// every setting have been checked: the identity is made in memory
	// and written with the store.
	keyPath := r.key
	if keyPath == "" {
		keyPath = filepath.Join(r.store, "identity.key")
	}
	key, newKey, err := p2p.LoadOrNewKey(keyPath)
	if err != nil {
		return err
	}
	var club *p2p.Consortium
	if r.consortium != "" {
		if club, err = p2p.LoadConsortium(r.consortium); err != nil {
			return err
		}
	}
	var job node.JobSpec
	var train, test *dataset.Dataset
	var scaler *dataset.Scaler
	load := func(scale string, seed uint64) error {
		var err error
		train, test, scaler, err = dataset.Load(r.dataset, dataset.LoadOptions{Shard: r.shard, Partition: r.partition, Scale: scale, Fingerprint: dp.Enabled(),
			OpenOptions: dataset.OpenOptions{CSV: dataset.CSVOptions{LabelColumn: r.labelColumn}, TestFraction: r.testFraction, Seed: seed}})
		if err != nil {
			return datasetUsage(err)
		}
		// The whole data set is garbage once a shard is cut from it:
		// give its memory back now rather than as the scavenger gets to it.
		debug.FreeOSMemory()
		return nil
	}
	if r.join == "" {
		if err := load(r.scale, r.initSeed); err != nil {
			return err
		}
		if job, err = r.jobSpec(train); err != nil {
			return err
		}
	}
	ok.host.Key, ok.host.Consortium, ok.host.Logger = key, club, log
	host, err := p2p.New(ok.host)
	if err != nil {
		return err
	}
	defer host.Close()
	var origin *transport.Announcement
	if r.join != "" {
		log.Info("waiting for the job's announcement", "job", r.join, "timeout", r.joinTimeout.String())
		if job, origin, err = node.FindJob(ctx, host, r.join, r.joinTimeout); err != nil {
			return err
		}
		if err := checkRunScopes(fs, shapeOf(job), dp); err != nil {
			return fmt.Errorf("job %.12s: %w", origin.JobID, err)
		}
		log.Info("joining job", "job", origin.JobID[:12], "name", job.Name, "protocol", job.Protocol, "model", job.Model.String(), "creator", origin.Creator, "from", origin.Peer)
		if err := load(job.Scale, job.InitSeed); err != nil {
			return err
		}
		if train.D != job.Model.Inputs || train.Classes > job.Model.Classes {
			return fmt.Errorf("%w: --dataset %s has %d features and %d classes; job %.12s's model takes %d inputs and %d classes", errUsage,
				r.dataset, train.D, train.Classes, origin.JobID, job.Model.Inputs, job.Model.Classes)
		}
	}
	ifDamaged := node.DamagedRefuse
	switch {
	case r.storeRecover:
		ifDamaged = node.DamagedRecover
	case r.storeReset:
		ifDamaged = node.DamagedReset
	}
	store, err := node.OpenStore(filepath.Join(r.store, "checkpoints"), node.StoreOptions{Keep: r.keep, Logger: log, IfDamaged: ifDamaged})
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
	d, err := node.New(node.Config{Job: job, Local: node.Local{LR: r.lr, Batch: r.batch, LocalEpochs: r.localEpochs, Members: ok.members},
		Join: origin != nil, Origin: origin, AnnounceInterval: r.announceEvery,
		Train: train, Test: test, Transport: host, Addrs: host.Addrs(), Store: store, Scaler: scaler,
		CheckpointEvery: r.ckptEvery, Logger: log, Aggregator: ok.agg, MaxNorm: r.maxNorm, DP: dp, DataFingerprint: train.Fingerprint, SendRate: r.sendRate,
		Device: r.device})
	if err != nil {
		return err
	}
	srv, err := apiserver.Listen(api, d.Handler())
	if err != nil {
		return err
	}
	if srv.TokenCreated {
		log.Info("created the API token", "file", r.apiToken)
	}
	go srv.Serve()
	log.Info("gossipd started", "peer", host.ID(), "addrs", strings.Join(host.Addrs(), " "), "api", srv.Addr(), "dashboard", srv.URL()+"/",
		"job", d.JobID().Short(), "train_examples", train.N, "test_examples", test.N)
	runErr := d.Run(ctx)
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
	log.Info("gossipd stopped", "why", why, "updates", d.Status().Updates, "checkpoint", d.Status().Checkpoint)
	return nil
}

// jobSpec builds the job of a daemon that creates it from its flags.
func (r *runFlags) jobSpec(train *dataset.Dataset) (node.JobSpec, error) {
	spec := model.Spec{Kind: r.modelKind, Inputs: train.D, Classes: train.Classes}
	if r.modelKind == model.MLP {
		var err error
		if spec.Hidden, err = model.ParseHidden(r.hidden); err != nil {
			return node.JobSpec{}, fmt.Errorf("%w: --hidden: %v", errUsage, err)
		}
	}
	job := node.JobSpec{Name: r.name, Model: spec, Scale: r.scale, Protocol: r.protocol, DeltaMillis: r.delta.Milliseconds(),
		Variant: r.variant, Compression: r.compression, InitSeed: r.initSeed, Topology: r.topology, Staleness: r.staleness}
	if r.localSteps != 0 {
		o := gossip.OuterConfig{Steps: r.localSteps, Method: r.outer}
		if r.outer == gossip.OuterNesterov {
			o.LR, o.Momentum = r.outerLR, r.outerMomentum
		}
		job.Outer = &o
	}
	if r.protocol == gossip.SFB {
		job.FactorBatch = r.batch
		if r.sfbMode != "auto" {
			job.SFBMode = r.sfbMode
		}
	}
	if err := job.Validate(); err != nil {
		return node.JobSpec{}, fmt.Errorf("%w: %v", errUsage, err)
	}
	return job, nil
}

func runKeygen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("keygen", "keygen --out FILE [--keep] [--addr MULTIADDR --addr-out FILE]\n\nCreates an identity key (mode 0600) and prints its peer ID; with --addr, also\nwrites MULTIADDR/p2p/ID to --addr-out, for others' --bootstrap @FILE.", stderr)
	out := fs.String("out", "identity.key", "key file to create")
	keep := fs.Bool("keep", false, "use the key file if it exists (for a deployment's one-shot step) instead of refusing")
	addr := fs.String("addr", "", "this peer's address without /p2p (e.g. /dns4/node0/tcp/4001), for --addr-out")
	addrOut := fs.String("addr-out", "", "file to write ADDR/p2p/ID to")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if (*addr == "") != (*addrOut == "") {
		return fmt.Errorf("%w: keygen: --addr and --addr-out go together", errUsage)
	}
	if _, err := os.Stat(*out); err == nil && !*keep {
		return fmt.Errorf("%w: %s exists; refusing to overwrite an identity (--keep uses it)", errUsage, *out)
	}
	k, err := p2p.LoadOrCreateKey(*out)
	if err != nil {
		return err
	}
	id, err := p2p.PeerIDOf(k)
	if err != nil {
		return err
	}
	if *addr != "" {
		full := strings.TrimSuffix(*addr, "/") + "/p2p/" + id
		if err := p2p.CheckAddr(full); err != nil {
			return fmt.Errorf("%w: keygen: --addr: %v", errUsage, err)
		}
		if err := os.WriteFile(*addrOut, []byte(full+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout, id)
	return nil
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("status", "status [--api ADDR] [--api-token FILE] | --store DIR\n\nPrints a running daemon's /status, or the health and contents of a stopped\ndaemon's --store (read without changing any of its files; exit status 1\nwhere it is damaged).", stderr)
	var af apiclient.Flags
	af.Declare(fs)
	storeDir := fs.String("store", "", "a stopped daemon's --store directory")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if cli.FlagSet(fs, "store") {
		if cli.FlagSet(fs, "api") || cli.FlagSet(fs, "api-token") || cli.FlagSet(fs, "api-ca") {
			return fmt.Errorf("%w: status: --store reads a stopped daemon's store, --api asks a running one: give one or the other", errUsage)
		}
		return storeStatus(*storeDir, stdout)
	}
	b, _, err := af.Request(ctx, "status", http.MethodGet, "/status", 5*time.Second)
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}

func runInit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("init", "init [--out FILE] [--profile default|edge] [--api-token FILE]\n\nWrites a commented config file for `gossipd run --config FILE`: every\nsetting at its default, or at a profile's value (edge: small memory, paced\ntraffic, fewer connections). It also creates an API bearer token file\n(mode 0600; kept if it exists), which the config names, for job control\nand for an API beyond loopback.", stderr)
	out := fs.String("out", "gossipd.yaml", "file to write ('-' for stdout)")
	profile := fs.String("profile", "default", "settings for: default|edge")
	tokenFile := fs.String("api-token", "", "API token file to create (default api.token beside --out; \"\" given: none)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	settings, ok := profiles[*profile]
	if !ok {
		return fmt.Errorf("%w: --profile %q, want default|edge", errUsage, *profile)
	}
	if *out != "-" {
		if _, err := os.Stat(*out); err == nil {
			return fmt.Errorf("%w: %s exists", errUsage, *out)
		}
	}
	rf := flag.NewFlagSet("run", flag.ContinueOnError)
	var r runFlags
	r.declare(rf)
	header := "# gossipd run configuration. Keys are `gossipd run` flags; flags and\n# $GOSSIPD_* variables override what is set here.\n"
	if len(settings) > 0 {
		header += fmt.Sprintf("#\n# Profile %s:\n", *profile)
		for _, x := range settings {
			if err := rf.Set(x.flag, x.value); err != nil {
				return fmt.Errorf("profile %s: %s: %w", *profile, x.flag, err)
			}
			header += fmt.Sprintf("#   %s: %s (%s)\n", x.flag, x.value, x.why)
		}
	}
	if *tokenFile == "" && !cli.FlagSet(fs, "api-token") {
		dir := "."
		if *out != "-" {
			dir = filepath.Dir(*out)
		}
		*tokenFile = filepath.Join(dir, "api.token")
	}
	if *tokenFile != "" {
		abs, err := filepath.Abs(*tokenFile)
		if err != nil {
			return err
		}
		_, created, err := apiserver.LoadOrCreateTokenFile(abs)
		if err != nil {
			return err
		}
		rf.Set("api-token", abs)
		verb := "created"
		if !created {
			verb = "kept"
		}
		fmt.Fprintf(stderr, "%s the API token %s (mode 0600): give it to clients with --api-token\n", verb, abs)
	}
	return cli.WriteNew(*out, cli.SettingsTemplate(rf, header+"\n", "config"), stdout)
}

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("export", "export (--store DIR | --api ADDR [--api-token FILE]) --out FILE\n\nWrites a model as safetensors, with the job spec and the feature scaler in\nits metadata: the newest checkpoint of a stopped daemon's store (--store),\nor a running daemon's current model (--api: its GET /model).", stderr)
	storeDir := fs.String("store", "gossipd-data", "the daemon's --store directory")
	out := fs.String("out", "model.safetensors", "file to write")
	var af apiclient.Flags
	af.Declare(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	fromAPI := cli.FlagSet(fs, "api") || cli.FlagSet(fs, "api-token") || cli.FlagSet(fs, "api-ca")
	if fromAPI && cli.FlagSet(fs, "store") {
		return fmt.Errorf("%w: export: --store reads a stopped daemon's store, --api asks a running one: give one or the other", errUsage)
	}
	if fromAPI {
		return exportFromAPI(ctx, af, *out, stdout)
	}
	store, err := openExistingStore("export", *storeDir)
	if err != nil {
		return err
	}
	defer store.Close()
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	c, err := node.Export(store, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(*out)
		return fmt.Errorf("export %s: %w", *storeDir, err)
	}
	fmt.Fprintf(stdout, "wrote %s: %s, checkpoint %d (age %g, %s)\n", *out, c.Spec.Model, c.Seq, c.State.Age, c.Time.Format(time.RFC3339))
	return nil
}

// exportFromAPI writes a running daemon's /model to out, after checking
// that it is a safetensors file.
func exportFromAPI(ctx context.Context, af apiclient.Flags, out string, stdout io.Writer) error {
	b, base, err := af.Request(ctx, "export", http.MethodGet, "/model", time.Minute)
	if err != nil {
		return err
	}
	_, vals, meta, err := model.ReadSafetensors(b)
	if err != nil {
		return fmt.Errorf("export: %s/model: %w", base, err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d tensors of job %.12s (age %s) from %s\n", out, len(vals), meta["job_id"], meta["age"], base)
	return nil
}
