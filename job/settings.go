package job

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/nn"
	"github.com/gossipd/gossipd/privacy"
)

// The settings' defaults, each stated once: the flags of `gossipd run`
// and `gossipd simulate` and the config files take them from here.
const (
	DefaultName        = "gossipd"
	DefaultModel       = model.Softmax
	DefaultHidden      = "128"
	DefaultScale       = ScaleAuto
	DefaultCompression = "none"
	DefaultOuter       = gossip.OuterNesterov
	DefaultAggregator  = "mean"
	DefaultLocalEpochs = 1
	DefaultDataset     = "digits"
	DefaultPartition   = "iid"
	// DefaultSimScale is the simulator's scaling (ScaleAuto there).
	DefaultSimScale = "minmax"
)

// ScaleAuto is the feature scaling chosen by what holds the data: global
// in a daemon's job, whose peers each hold a shard and must scale alike,
// minmax in the simulator, which holds all the data.
const ScaleAuto = "auto"

// Settings are a job's settings as a person gives them (flags, a config
// or scenario file): what every peer of the job must agree on, what each
// peer chooses for its own training, and DP-SGD's. The daemon turns them
// into a Spec (Spec), the simulator into its Config.
type Settings struct {
	// The job: every peer must agree (part of the Spec).
	Name, Protocol, Model, Hidden, Scale string
	Delta                                time.Duration
	// RoundTimeout is how long a dpsgd or sfb round waits for its
	// neighbours (0: gossip.DefaultRoundTimeout·Delta).
	RoundTimeout                   time.Duration
	Variant, Compression, Topology string
	Sampling, Tokens               string
	Staleness                      int
	SFBMode                        string
	LocalSteps                     int
	Outer                          string
	OuterLR, OuterMomentum         float64
	InitSeed                       uint64
	// InitFrom is a safetensors file of initial weights (PyTorch's
	// state_dict); their hash is part of the job.
	InitFrom string
	// SecureAggregation masks D-PSGD's exchanges so that a node learns
	// only its neighbours' weighted sum (gossip.SecureConfig), with
	// SecureThreshold the threshold as a fraction of a receiver's
	// neighbours (0: ⅔).
	SecureAggregation bool
	SecureThreshold   float64
	// DPDistributed splits DP-SGD's noise among that many contributors
	// of every masked sum (privacy.Config.Shares; 0: local DP), with
	// DPColluders the colluding contributors of a receiver it tolerates.
	DPDistributed, DPColluders int

	// Each peer's own training.
	LR          float64
	Batch       int
	LocalEpochs int
	Aggregator  string

	// DP-SGD (each peer's own).
	DP privacy.Config
}

// Command names what registers the flags: the daemon's job carries a
// name and its initial model's seed, which the simulator's --seed covers.
type Command int

const (
	Daemon Command = iota
	Simulator
)

// RegisterJob declares the job's flags on fs.
func (s *Settings) RegisterJob(fs *flag.FlagSet, cmd Command) {
	fs.StringVar(&s.Protocol, "protocol", gossip.RandomWalk,
		"protocol: "+strings.Join(gossip.Protocols, "|")+" (simulate also: fedavg|allreduce|centralized)")
	fs.StringVar(&s.Model, "model", DefaultModel, model.Help)
	fs.StringVar(&s.Hidden, "hidden", DefaultHidden, "MLP hidden widths, comma-separated (mlp only)")
	fs.StringVar(&s.Scale, "scale", DefaultScale,
		"feature scaling: auto|global|minmax|standard|none (auto: global for run, minmax for simulate)")
	fs.DurationVar(&s.Delta, "delta", gossip.DefaultDelta, "gossip period Δ (simulate: the length of a round)")
	fs.DurationVar(&s.RoundTimeout, "round-timeout", 0,
		"dpsgd, sfb: how long a round waits for its neighbours before it goes on without them; with --secure-aggregation each of its four exchanges closes at a quarter of it (default 4×delta)")
	fs.StringVar(&s.Variant, "variant", gossip.DefaultVariant, "random-walk variant: "+strings.Join(gossip.Variants, "|"))
	fs.StringVar(&s.Tokens, "tokens", "", "random walk: token-account flow control A:B (default: one send per Δ)")
	fs.StringVar(&s.Sampling, "sampling", gossip.SamplingCyclon,
		"peer sampling: randomwalk, gosgd cyclon|hyparview (simulate also oracle); dpsgd, adpsgd, pushsum hyparview")
	fs.StringVar(&s.Compression, "compression", DefaultCompression,
		"what is sent, compressed: "+gossip.CompressionValues+" (docs/reference/flags.md)")
	fs.StringVar(&s.Topology, "topology", "",
		"dpsgd, adpsgd, pushsum graph: ring|torus|regular:K|exponential|complete (default ring; exponential for pushsum)")
	fs.IntVar(&s.Staleness, "staleness", 0, "sfb: SSP staleness bound (0: BSP)")
	fs.StringVar(&s.SFBMode, "sfb-mode", gossip.DefaultSFBMode, "sfb: per-layer exchange auto|factors|dense")
	fs.IntVar(&s.LocalSteps, "local-steps", 0,
		"local SGD steps H between exchanges, with an outer optimizer (0: one step a round)")
	fs.StringVar(&s.Outer, "outer", DefaultOuter, "with --local-steps: outer optimizer nesterov|average")
	fs.Float64Var(&s.OuterLR, "outer-lr", gossip.DefaultOuterLR, "with --local-steps and --outer nesterov: outer learning rate")
	fs.Float64Var(&s.OuterMomentum, "outer-momentum", gossip.DefaultOuterMomentum,
		"with --local-steps and --outer nesterov: outer momentum")
	fs.StringVar(&s.InitFrom, "init-from", "", model.InitFromHelp)
	fs.BoolVar(&s.SecureAggregation, "secure-aggregation", false,
		"dpsgd: mask each exchange so that a peer learns only the weighted sum of its neighbours' models (docs/explanation/secure-aggregation.md)")
	fs.Float64Var(&s.SecureThreshold, "secure-threshold", 0,
		"with --secure-aggregation: the share of a peer's neighbours whose reveals unmask its round, in (0.5, 1] (default 2/3)")
	if cmd == Daemon {
		fs.StringVar(&s.Name, "name", DefaultName, "job name")
		fs.Uint64Var(&s.InitSeed, "init-seed", 1, "seed of the initial model")
	}
}

// RegisterTraining declares each peer's training flags on fs.
func (s *Settings) RegisterTraining(fs *flag.FlagSet) {
	fs.Float64Var(&s.LR, "lr", gossip.DefaultLR, "learning rate")
	fs.IntVar(&s.Batch, "batch", gossip.DefaultBatch, "minibatch size")
	fs.IntVar(&s.LocalEpochs, "local-epochs", DefaultLocalEpochs,
		"local epochs per random-walk update (simulate: or FedAvg client)")
	fs.StringVar(&s.Aggregator, "aggregator", DefaultAggregator,
		"how models combine (dpsgd, randomwalk, pushsum): "+strings.Join(merge.Aggregators, "|"))
}

// RegisterPrivacy declares DP-SGD's flags on fs.
func (s *Settings) RegisterPrivacy(fs *flag.FlagSet) {
	fs.Float64Var(&s.DP.Clip, "dp-clip", 0, "DP-SGD per-example clipping norm C (turns DP-SGD on, with --dp-noise)")
	fs.Float64Var(&s.DP.Noise, "dp-noise", 0, "DP-SGD noise multiplier σ (noise std σ·C)")
	fs.Float64Var(&s.DP.Epsilon, "dp-epsilon", 0,
		"privacy budget ε per peer: stop once the next step would exceed it (0: no limit)")
	fs.Float64Var(&s.DP.Delta, "dp-delta", privacy.DefaultDelta, "DP-SGD δ")
	fs.IntVar(&s.DPDistributed, "dp-distributed", 0,
		"with --secure-aggregation: distributed DP over M shares: each member adds 1/M of DP-SGD's noise variance, so that every masked sum of M honest members carries all of it (0: local DP)")
	fs.IntVar(&s.DPColluders, "dp-colluders", 0,
		"with --dp-distributed: the colluding members of a receiver's round it tolerates (a round must have a threshold of M plus these)")
}

// Data are where a peer's examples come from, for train, simulate and
// run alike.
type Data struct {
	Dataset, LabelColumn, Partition string
	TestFraction                    float64
	// InputShape is the examples' shape for a layered model ("C×H×W"),
	// where the data does not give one (CSV, LIBSVM).
	InputShape string
}

// Register declares the data flags on fs.
func (d *Data) Register(fs *flag.FlagSet) {
	fs.StringVar(&d.Dataset, "dataset", DefaultDataset,
		"data: digits (embedded), fashion-mnist, or a path (.csv[.gz], .libsvm, a directory of IDX files)")
	fs.StringVar(&d.LabelColumn, "label-column", "", "CSV label column: a header name or 0-based index (default: the last)")
	fs.Float64Var(&d.TestFraction, "test-fraction", dataset.DefaultTestFraction, "held-out fraction when the data has no test split")
	fs.StringVar(&d.InputShape, "input-shape", "",
		"each example's shape C×H×W for a layered --model, where the data gives none (CSV, LIBSVM; IDX images and digits give theirs)")
	fs.StringVar(&d.Partition, "partition", DefaultPartition,
		"how the data is cut among peers: iid|dirichlet:α|shards:k|quantity:α (simulate also: sample:k)")
}

// ScaleFor resolves ScaleAuto for cmd.
func ScaleFor(scale string, cmd Command) string {
	if scale != ScaleAuto {
		return scale
	}
	if cmd == Daemon {
		return "global"
	}
	return DefaultSimScale
}

// ShapeOf is the shape of d's examples for a layered model: --input-shape
// where given (it must hold d's features), else the data's own (nil:
// flat). Errors name the flag.
func (d Data) ShapeOf(ds *dataset.Dataset) ([]int, error) {
	if d.InputShape == "" {
		return ds.Shape, nil
	}
	sh, err := nn.ParseShape(d.InputShape)
	if err != nil {
		return nil, fmt.Errorf("--input-shape: %w", err)
	}
	if sh.Size() != ds.D {
		return nil, fmt.Errorf("--input-shape %s holds %d values, but %s has %d features", d.InputShape, sh.Size(), ds.Name, ds.D)
	}
	return []int{sh.C, sh.H, sh.W}, nil
}

// Spec is the job of a daemon that creates it from these settings, for
// data of inputs features and classes classes, shaped shape ([C, H, W]
// or nil: Data.ShapeOf). Errors name the flags.
func (s *Settings) Spec(inputs, classes int, shape []int) (Spec, error) {
	var hidden []int
	if s.Model == model.MLP {
		var err error
		if hidden, err = model.ParseHidden(s.Hidden); err != nil {
			return Spec{}, fmt.Errorf("--hidden: %w", err)
		}
	}
	ms := model.SpecFor(s.Model, hidden, inputs, classes, shape)
	j := Spec{Name: s.Name, Model: ms, Scale: ScaleFor(s.Scale, Daemon), Protocol: s.Protocol,
		DeltaMillis: s.Delta.Milliseconds(), RoundTimeoutMillis: s.RoundTimeout.Milliseconds(), Variant: s.Variant, Compression: s.Compression,
		InitSeed: s.InitSeed, Topology: s.Topology, Staleness: s.Staleness,
		SecureAggregation: s.SecureAggregation, SecureThreshold: s.SecureThreshold,
		DPShares: s.DPDistributed, DPColluders: s.DPColluders}
	if s.Sampling != gossip.SamplingCyclon && s.Sampling != gossip.SamplingNewscast {
		j.Sampling = s.Sampling // the default is left out: earlier jobs keep their IDs
	}
	j.Tokens = s.Tokens
	if s.LocalSteps != 0 {
		o := gossip.OuterConfig{Steps: s.LocalSteps, Method: s.Outer}
		if s.Outer == gossip.OuterNesterov {
			o.LR, o.Momentum = s.OuterLR, s.OuterMomentum
		}
		j.Outer = &o
	}
	if s.Protocol == gossip.SFB {
		// SFB decides which layers travel as factors by the batch size:
		// every member decides by the creator's.
		j.FactorBatch = s.Batch
		if s.SFBMode != gossip.DefaultSFBMode {
			j.SFBMode = s.SFBMode
		}
	}
	if err := j.Validate(); err != nil {
		return Spec{}, err
	}
	return j, nil
}

// JobFlags are the flags that make up a job's Spec; a daemon that joins a
// running job takes them from its announcement instead.
var JobFlags = []string{"protocol", "model", "hidden", "scale", "delta", "round-timeout", "variant", "compression", "topology",
	"staleness", "sfb-mode", "init-seed", "init-from", "name", "local-steps", "outer", "outer-lr", "outer-momentum",
	"secure-aggregation", "secure-threshold", "dp-distributed", "dp-colluders"}

// InitWeights reads --init-from's weights for spec's model and sets the
// spec's InitHash to their hash; nil without --init-from. Errors name
// the flag.
func (s *Settings) InitWeights(spec *Spec) ([]float32, error) {
	if s.InitFrom == "" {
		return nil, nil
	}
	p, err := model.InitFromFile(s.InitFrom, spec.Model)
	if err != nil {
		return nil, fmt.Errorf("--init-from: %w", err)
	}
	spec.InitHash = model.ParamsHash(p)
	return p, nil
}

// Bounds are the values the job's numeric flags take (cli.Bounds'
// intervals), the same in every command. Where a zero would silently
// become the default (a count, a period, a rate) an explicit 0 is
// refused; where it means something, the flag's help says what.
var Bounds = map[string]string{
	"batch": "[1,inf)", "local-epochs": "[1,inf)", "local-steps": "[0,inf)", "lr": "(0,inf)", "delta": "(0,inf)",
	"staleness": "[0,inf)", "outer-lr": "(0,inf)", "outer-momentum": "[0,1)",
	"dp-clip": "(0,inf)", "dp-noise": "(0,inf)", "dp-delta": "(0,1)", "dp-epsilon": "[0,inf)",
	"test-fraction": "(0,1)", "secure-threshold": "(0.5,1]", "round-timeout": "(0,inf)",
	"dp-distributed": "[2,inf)", "dp-colluders": "[0,inf)",
}
