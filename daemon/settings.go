package daemon

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gossipd/gossipd/daemon/apiserver"
	"github.com/gossipd/gossipd/daemon/p2p"
	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/device"
	"github.com/gossipd/gossipd/privacy"
)

// Settings are everything `gossipd run` takes: the job's settings (or
// the ID of a running job to join), where this peer's data, store,
// network and API are, and its own limits. Launch runs a daemon with
// them. Their flags (Register) are also what `gossipd init` writes.
type Settings struct {
	Job  job.Settings
	Data job.Data
	// Shard is the i/n piece of the data this peer trains on ("": all).
	Shard string

	Join             string        // a running job's ID to join ("": create the job)
	JoinTimeout      time.Duration // how long Join waits for the announcement
	AnnounceInterval time.Duration
	Members          string // allowlist: IDs, comma-separated, or @FILE

	Store, Key                   string
	StoreRecover, StoreReset     bool
	CheckpointEvery, Keep        int
	EvalInterval                 time.Duration
	EvalSubset                   int
	Listen, Bootstrap            string
	Consortium, DHT, Relays      string
	MDNS, PEX, AutoNAT           bool
	HolePunching, PortMap        bool
	RelayService, BehindNAT      bool
	MaxConns                     int
	PeerRate, PeerFrames         float64
	SendRate, MaxNorm            float64
	API, APIToken, APICert       string
	APIKey                       string
	Device, MemoryLimit          string
	LogFormat, LogLevel          string
	testFractionGiven, partGiven bool
}

// Register declares the daemon's flags on fs, in groups.
func (s *Settings) Register(fs *flag.FlagSet) {
	cli.Group(fs, "Settings file", func() {
		fs.String("config", "", "YAML config file (keys are these flags' names); flags > $GOSSIPD_* > file > defaults")
	})
	cli.Group(fs, "Job (every peer of a job agrees on these; --join takes them from the job)", func() {
		s.Job.RegisterJob(fs, job.Daemon)
		fs.StringVar(&s.Join, "join", "", "join the running job with this ID (or a prefix of 8+ hex digits), given no job flags")
		fs.DurationVar(&s.JoinTimeout, "join-timeout", time.Minute, "how long --join waits for the job's announcement")
		fs.DurationVar(&s.AnnounceInterval, "announce-interval", DefaultAnnounceInterval,
			"how often the job is announced; a member silent for 3 of them is dropped")
		fs.StringVar(&s.Members, "members", "", "allowlist: admit only these peer IDs (comma-separated, or @FILE)")
	})
	cli.Group(fs, "Training (this peer's own)", func() { s.Job.RegisterTraining(fs) })
	cli.Group(fs, "Privacy (DP-SGD)", func() { s.Job.RegisterPrivacy(fs) })
	cli.Group(fs, "Data", func() {
		s.Data.Register(fs)
		fs.StringVar(&s.Shard, "shard", "", "train on shard i/n of the data (e.g. 0/5), cut by --partition")
	})
	cli.Group(fs, "Network", func() {
		fs.StringVar(&s.Listen, "listen", "/ip4/0.0.0.0/tcp/4001,/ip4/0.0.0.0/udp/4001/quic-v1", "libp2p listen multiaddrs, comma-separated")
		fs.StringVar(&s.Bootstrap, "bootstrap", "",
			"peers to join through: multiaddrs with /p2p/ID or http(s)://HOST:PORT of an API; comma-separated or @FILE")
		fs.BoolVar(&s.MDNS, "mdns", true, "discover peers on the LAN with mDNS")
		fs.StringVar(&s.Consortium, "consortium", "", "consortium file: join its private network (TCP only), admit its members only")
		fs.BoolVar(&s.PEX, "pex", true, "exchange peer addresses with connected peers")
		fs.BoolVar(&s.BehindNAT, "behind-nat", false, "treat this node as unreachable from outside: use --relays at once")
		fs.StringVar(&s.DHT, "dht", p2p.DHTAuto, "Kademlia DHT: off|auto (on with --bootstrap; off under partial views)|client|server")
		fs.BoolVar(&s.AutoNAT, "autonat", false, "AutoNAT: learn this node's reachability and answer others' checks")
		fs.BoolVar(&s.HolePunching, "hole-punching", false, "upgrade relayed connections to direct ones (DCUtR)")
		fs.BoolVar(&s.PortMap, "nat-portmap", false, "ask the gateway for a port mapping (UPnP, NAT-PMP)")
		fs.StringVar(&s.Relays, "relays", "", "circuit-relay v2 relays to be reachable through (multiaddrs with /p2p/ID)")
		fs.BoolVar(&s.RelayService, "relay-service", false, "act as a circuit-relay v2 relay for other peers")
		fs.IntVar(&s.MaxConns, "max-conns", 256, "most libp2p connections")
		cli.RateVar(fs, &s.PeerRate, "peer-rate", 256<<20, "read at most `RATE` from one peer (e.g. 1MiB/s); frames that would wait >30 s dropped (negative: no limit)")
		fs.Float64Var(&s.PeerFrames, "peer-frames", 200, "frames per second one peer may send (negative: no limit)")
		cli.RateVar(fs, &s.SendRate, "send-rate", 0, "pace all that this node sends to `RATE` (e.g. 256KiB/s; 0: unpaced)")
		fs.Float64Var(&s.MaxNorm, "max-norm", 0, "drop received parameters of larger L2 norm (0: 1000·√n; negative: no bound)")
	})
	cli.Group(fs, "API and store", func() {
		fs.StringVar(&s.API, "api", "127.0.0.1:8080", "HTTP API address (dashboard, /status, /metrics); beyond loopback it needs --api-token")
		fs.StringVar(&s.APIToken, "api-token", "", "bearer token file (mode 0600; created if missing) for job control and remote reads")
		fs.StringVar(&s.APICert, "api-tls-cert", "", "serve the API over TLS with this PEM certificate (with --api-tls-key)")
		fs.StringVar(&s.APIKey, "api-tls-key", "", "the PEM private key of --api-tls-cert")
		fs.StringVar(&s.Store, "store", "gossipd-data", "directory of the checkpoint store")
		fs.BoolVar(&s.StoreRecover, "store-recover", false, "if the store is damaged: move it aside and start from what is readable")
		fs.BoolVar(&s.StoreReset, "store-reset", false, "if the store is damaged: move it aside and start afresh, keeping the privacy ledger")
		fs.StringVar(&s.Key, "key", "", "identity key file (default STORE/identity.key; created on first run, mode 0600)")
		fs.IntVar(&s.CheckpointEvery, "checkpoint-every", 10, "model updates between checkpoints")
		fs.IntVar(&s.Keep, "keep", 3, "checkpoints to keep")
		fs.DurationVar(&s.EvalInterval, "eval-interval", DefaultEvalInterval, "how often the model is evaluated for /status, /metrics and the dashboard")
		fs.IntVar(&s.EvalSubset, "eval-subset", 0, "evaluate on this many test examples, spread over the test split (0: all)")
	})
	cli.Group(fs, "Process", func() {
		fs.StringVar(&s.Device, "device", "auto", "where training runs: "+device.Values+" (auto: a GPU gossipd can use, else the CPU)")
		fs.StringVar(&s.MemoryLimit, "memory-limit", "", "soft memory limit of the Go runtime, e.g. 192MiB (\"\" given: $GOMEMLIMIT or none)")
		fs.StringVar(&s.LogFormat, "log-format", "auto", "log format: auto (text on a terminal, else JSON)|text|json")
		fs.StringVar(&s.LogLevel, "log-level", "info", "log level: debug|info|warn|error")
	})
}

// Bounds are the values the daemon's numeric flags take. --peer-rate and
// --peer-frames take a negative value for no limit (0 would silently be
// the default), --max-norm 0 for its default bound.
var Bounds = cli.WithBounds(job.Bounds, cli.Bounds{
	"init-seed": "[0,inf)", "checkpoint-every": "[1,inf)", "keep": "[1,inf)", "test-fraction": "(0,1)",
	"join-timeout": "(0,inf)", "announce-interval": "(0,inf)", "max-conns": "[1,inf)",
	"eval-interval": "(0,inf)", "eval-subset": "[0,inf)",
	"peer-rate": "(-inf,0)|(0,inf)", "peer-frames": "(-inf,0)|(0,inf)", "send-rate": "[0,inf)", "max-norm": "(-inf,inf)",
})

// checked is what the settings resolve to once checked.
type checked struct {
	dp      privacy.Config
	members []string
	agg     merge.Aggregator
	api     apiserver.Config
	// host is the libp2p host's configuration, checked, but for the
	// identity key, the consortium and the logger, which Launch fills in.
	host p2p.Config
}

// check refuses bad settings as usage errors naming the flags, before
// the daemon loads its data, opens its store or joins the network:
// numbers out of range, options that do not apply, malformed values
// (addresses, the job ID, the job's own settings, DP-SGD's) and a device
// it cannot have. set names the flags given.
func (s *Settings) check(fs *flag.FlagSet) (checked, error) {
	var ok checked
	usage := func(err error) error { return fmt.Errorf("%w: %v", cli.ErrUsage, err) }
	if err := cli.CheckNumbers(fs, Bounds); err != nil {
		return ok, err
	}
	s.testFractionGiven, s.partGiven = cli.FlagSet(fs, "test-fraction"), cli.FlagSet(fs, "partition")
	ok.dp = s.Job.DP
	if err := ok.dp.Validate(); err != nil {
		return ok, usage(err)
	}
	if spec, err := device.Parse(s.Device); err != nil {
		return ok, usage(err)
	} else if _, _, err := device.Open(spec); err != nil {
		return ok, usage(err)
	}
	if s.StoreRecover && s.StoreReset {
		return ok, usage(fmt.Errorf("--store-recover keeps what is readable of a damaged store, --store-reset starts afresh: give one or the other"))
	}
	// A missing store is created; anything else there must be a directory.
	if st, err := os.Stat(s.Store); err == nil && !st.IsDir() {
		return ok, usage(fmt.Errorf("--store %s is a file, not a directory", s.Store))
	}
	var err error
	if ok.members, err = cli.ReadList("members", s.Members, p2p.CheckPeerID); err != nil {
		return ok, err
	}
	if ok.agg, err = merge.ParseAggregator(s.Job.Aggregator); err != nil {
		return ok, usage(fmt.Errorf("--aggregator: %v", err))
	}
	if sh := (gossip.SecureShape{Protocol: s.Job.Protocol, Aggregator: ok.agg.Name()}); s.Job.SecureAggregation && sh.Refusal() != "" {
		return ok, usage(fmt.Errorf("--secure-aggregation: %s", sh.Refusal()))
	}
	if s.Shard != "" {
		if _, _, err := dataset.ParseShard(s.Shard); err != nil {
			return ok, usage(fmt.Errorf("--shard: %v", err))
		}
	}
	if s.partGiven {
		if s.Shard == "" {
			return ok, usage(fmt.Errorf("--partition %s cuts --shard, which is not given", s.Data.Partition))
		}
		if _, err := dataset.ParsePartitioner(s.Data.Partition); err != nil {
			return ok, usage(fmt.Errorf("--partition: %v", err))
		}
	}
	var set []string
	fs.Visit(func(f *flag.Flag) { set = append(set, f.Name) })
	if s.Join != "" {
		var jobSet []string
		for _, f := range job.JobFlags {
			if slices.Contains(set, f) {
				jobSet = append(jobSet, "--"+f)
			}
		}
		if len(jobSet) > 0 {
			return ok, usage(fmt.Errorf("%s: part of the job, which --join takes from the job's announcement; leave them out",
				strings.Join(jobSet, ", ")))
		}
		if err := CheckJobID(s.Join); err != nil {
			return ok, usage(fmt.Errorf("--join: %v", err))
		}
	} else {
		if err := job.Check(set, s.Job.Shape()); err != nil {
			return ok, usage(err)
		}
		if err := dataset.CheckScaling(job.ScaleFor(s.Job.Scale, job.Daemon)); err != nil {
			return ok, usage(fmt.Errorf("--scale: %v", err))
		}
		// The job's own settings, with a stand-in for the data's shape
		// (the model's inputs and classes come from the data); a
		// layered model's shapes are checked once the data is loaded.
		if model.IsLayered(s.Job.Model) {
			if err := model.CheckLayers(s.Job.Model); err != nil {
				return ok, usage(fmt.Errorf("--model: %v", err))
			}
		} else if _, err := s.Job.Spec(1, 2, nil); err != nil {
			return ok, usage(err)
		}
	}
	bootstrap, err := cli.ReadList("bootstrap", s.Bootstrap, p2p.CheckBootstrap)
	if err != nil {
		return ok, err
	}
	ok.host = p2p.Config{Limits: p2p.Limits{Conns: s.MaxConns, PeerBytes: s.PeerRate, PeerFrames: s.PeerFrames},
		Listen: cli.SplitList(s.Listen), Bootstrap: bootstrap, MDNS: s.MDNS, DHT: s.DHT, NoPEX: !s.PEX,
		NAT: p2p.NATConfig{PortMap: s.PortMap, AutoNAT: s.AutoNAT, HolePunching: s.HolePunching,
			Relays: cli.SplitList(s.Relays), RelayService: s.RelayService, ForcePrivate: s.BehindNAT}}
	if err := ok.host.Validate(); err != nil {
		return ok, usage(err)
	}
	ok.api = apiserver.Config{Addr: s.API, TokenFile: s.APIToken, CertFile: s.APICert, KeyFile: s.APIKey,
		Public: PublicPaths, ReadOnlyPosts: ReadOnlyPosts}
	if err := ok.api.Validate(); err != nil {
		return ok, usage(err)
	}
	if err := ok.api.CheckFiles(); err != nil {
		return ok, usage(err)
	}
	return ok, nil
}

// Profiles are the settings `gossipd init --profile NAME` writes over the
// defaults, each with why.
var Profiles = map[string][]struct{ Flag, Value, Why string }{
	"default": nil,
	// Small boards (ARM, 512 MB or less), slow or metered uplinks.
	"edge": {
		{"memory-limit", "192MiB", "keep the heap small: the collector runs more often instead of letting it double"},
		{"max-conns", "32", "fewer connections, fewer buffers"},
		{"dht", p2p.DHTClient, "do not serve the DHT to others"},
		{"send-rate", "256KiB/s", "send at most 256 KiB/s: models wait their turn instead of flooding the uplink"},
		{"announce-interval", "15s", "announce less often (a member silent for 45 s is dropped)"},
		{"peer-rate", "1MiB/s", "read at most 1 MiB/s from any one peer"},
		{"peer-frames", "20", "at most 20 frames per second from any one peer"},
		{"checkpoint-every", "50", "write the store less often (flash wear)"},
		{"keep", "2", "keep two checkpoints"},
		{"eval-interval", "30s", "evaluate the model every 30 s instead of every 2 s"},
		{"eval-subset", "1000", "on 1,000 test examples, not the whole test split"},
	},
}
