package gossip

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"

	"github.com/gossipd/gossipd/gossip/compress"
)

// Sentinel errors.
var (
	ErrConfig  = errors.New("gossip: invalid config")
	ErrInvalid = errors.New("gossip: invalid message")
)

// Variants are random walk's merge variants (Config.Variant: mu, the
// default, rw and um) and Samplings its peer-sampling services
// (Config.Sampling: cyclon, the default, and oracle).
var (
	Variants  = []string{"mu", "rw", "um"}
	Samplings = []string{SamplingCyclon, SamplingHyParView, SamplingOracle}
)

// Defaults that Validate fills in; each is documented on its Config field
// and defined here only.
const (
	// DefaultDelta is the protocol period Δ.
	DefaultDelta = time.Second
	// DefaultLR is the step size γ.
	DefaultLR = 0.1
	// DefaultJitter is the jitter that shells use for periodic actions
	// when their user sets none (the daemon always, the simulator's
	// --jitter default). The core's own zero value means no jitter, so
	// that tests can run in lockstep.
	DefaultJitter = 0.1
	// DefaultCacheSize is how many received models a random-walk node
	// keeps (for voting, or for a robust aggregator, which grows it to
	// what its rule needs).
	DefaultCacheSize = 10
	// DefaultRoundTimeout is RoundTimeout as a multiple of Δ.
	DefaultRoundTimeout = 4
	// DefaultViewSize is the Cyclon view size.
	DefaultViewSize = 20
	// DefaultActiveView and DefaultPassiveView are HyParView's view sizes:
	// the peers a node gossips with (and, in the daemon, holds
	// connections to), and the peers it knows to replace them.
	DefaultActiveView  = 8
	DefaultPassiveView = 32
	// DefaultBatch is the minibatch size.
	DefaultBatch = 32
	// DefaultVariant is random walk's merge: "merge then update".
	DefaultVariant = "mu"
	// DefaultSFBMode lets SFB choose factors or dense per layer by cost.
	DefaultSFBMode = "auto"
	// SFBMaxPeers is the largest job SFB runs: it sends every update to
	// every peer (with --fanout 0), so each member's traffic and work per
	// round grow with the job (Poseidon ran it on clusters of 8 to 32
	// machines; the documented comparisons here use 100 peers). Larger
	// jobs use dpsgd or randomwalk, with --sampling hyparview.
	SFBMaxPeers = 128
)

// Config configures a Core. Zero values take the documented defaults;
// Validate fills them.
type Config struct {
	// ID is this node's identity. Required.
	ID PeerID
	// Protocol is one of Protocols. Default randomwalk.
	Protocol string
	// Spec is the model all nodes of the job train. Required.
	Spec model.Spec
	// Init is the initial parameter vector (len = the spec's layout size).
	// Required; the node keeps its own copy, unless ShareInit.
	Init []float32
	// ShareInit lets the node start from Init itself, not a copy, where
	// its protocol never writes its model in place (random walk and
	// D-PSGD, which replace it with a new vector at each update, and a
	// core that hands its mixes to a Mixer: HandsMixes): a
	// simulator's thousands of peers then hold one initial model until
	// each first updates. The caller must not write Init while a node may
	// hold it. Default false.
	ShareInit bool
	// InitSum, where set, gives Init's Σ x² (merge.SumSquares), exactly:
	// a node whose model is still the shared Init hands it on with its
	// sends, and its receivers check the model by it instead of reading
	// it, so that Init is read once for all the nodes that share it.
	InitSum func() float64
	// Rand is the node's random source. Required.
	Rand *rand.Rand
	// Delta is the protocol period Δ: random-walk sends, D-PSGD rounds,
	// AD-PSGD and push-sum steps, SFB clocks. Default DefaultDelta (1s).
	Delta time.Duration
	// Jitter spreads periodic actions uniformly over ±Jitter·Δ. Default 0
	// (shells pass DefaultJitter).
	Jitter float64
	// LR is the step size γ of dpsgd, adpsgd, pushsum and sfb. Default
	// DefaultLR (0.1).
	LR float64
	// LocalSteps is the number of local SGD steps of a random-walk update
	// (0: one pass over the local data).
	LocalSteps int
	// Variant is the random-walk variant: "mu" (default: merge then
	// update), "rw" (update the received model) or "um" (update both, then
	// merge).
	Variant string
	// Subsample, in (0,1), makes random walk send a random fraction of the
	// coordinates (Hegedűs et al. 2019), drawn from a seed the message
	// carries (a compress.RandK payload, or RandKInt8 with Quantize
	// int8); receivers merge only those.
	Subsample float64
	// Partitions, when ≥ 2, splits the model into partitions (coordinate k in
	// partition k mod Partitions), each with its own age, sent round-robin
	// (random walk).
	Partitions int
	// Quantize compresses the values of every vector a node sends (fp16
	// or int8; gossip/compress): the receiver's Step decompresses them.
	// Exclusive with Partitions; with Subsample, int8 only.
	Quantize compress.Spec
	// Sparse, top-k or rand-k, makes D-PSGD send compressed steps of a
	// public copy of the model instead of the model (CHOCO gossip,
	// choco.go), with ConsensusStep γ (default DefaultConsensusStep) and a dense keyframe
	// every KeyframeEvery rounds (default 50; negative: only when needed);
	// and SFB send the dense part of its updates with error feedback
	// (sfb.go). Exclusive with Quantize.
	Sparse        compress.Spec
	ConsensusStep float64
	KeyframeEvery int
	// Outer makes D-PSGD a local-SGD method with an outer optimizer
	// (outer.go): each round trains Outer.Steps local steps and mixes the
	// results. Zero: one gradient step a round (plain D-PSGD).
	Outer OuterConfig
	// CacheSize is how many received models a random-walk node keeps, for
	// voting prediction and robust merging; push-sum with a robust
	// aggregator keeps as many de-biased models. Default DefaultCacheSize
	// (10), and with a robust aggregator at least what its rule needs
	// (Krum with f attackers: 2f+2 besides the node's own). Negative turns
	// the cache off.
	CacheSize int
	// Tokens configures token-account flow control (random walk). Zero: off.
	Tokens TokenConfig
	// Neighbors are the static neighbours of dpsgd, adpsgd and pushsum (for
	// pushsum: out-neighbours) and the peers of sfb, with Metropolis–Hastings
	// weights for dpsgd. Leave it empty with Topology set.
	Neighbors []Neighbor
	// Topology, when set (ParseTopology's specs but edge lists), builds
	// the neighbours of dpsgd, adpsgd, pushsum and sfb over the live
	// members given to SetMembers, and rebuilds them when those change
	// (membership.go). Until then the node has no neighbours and trains
	// alone.
	Topology string
	// TopologySeed draws random topologies (regular:K): the same for every
	// member of a job (the daemon derives it from the job ID).
	TopologySeed uint64
	// Join makes the node start by pulling the newest model and protocol
	// state from a live member (join.go) instead of from Init.
	Join bool
	// Incarnation identifies this start of the node (new at each start; 0:
	// none), for the shell's membership layer.
	Incarnation uint64
	// Accounts, when set, are push-sum's saved accounts (Ready.Accounts):
	// the weight and running sums replace Resume's, and the model is
	// rescaled to that weight.
	Accounts *Accounts
	// NoAccounts says that the shell keeps no push-sum accounts, so the
	// node makes none (Ready.Accounts stays nil): a simulator's peers,
	// which no store restarts, and whose thousands of links would be
	// listed at every change of a weight. Default false: a daemon makes
	// them durable before its shares leave.
	NoAccounts bool
	// SelfWeight is dpsgd's W_ii.
	SelfWeight float64
	// RoundTimeout is how long dpsgd and sfb wait for contributions before
	// going on without the missing ones. Default DefaultRoundTimeout·Δ.
	RoundTimeout time.Duration
	// Staleness is SFB's SSP bound s (0: BSP).
	Staleness int
	// Fanout is how many peers an SFB update or a push-sum share goes to
	// per step (0: sfb all peers; pushsum one, cycling through the
	// out-neighbours, SGP's time-varying exponential graph).
	Fanout int
	// Batch is the minibatch size the shell trains with; SFB's cost formula
	// uses it. Default DefaultBatch (32).
	Batch int
	// Broadcast says the shell can deliver one message to every peer of the
	// job (gossipsub in the daemon): SFB then sends each full broadcast once,
	// addressed to Broadcast, instead of once per peer.
	Broadcast bool
	// SFBMode chooses what SFB sends per layer: "auto" (default: factors
	// where the cost formula says they are cheaper), "factors" or "dense".
	SFBMode string
	// Sampling is the random-walk peer sampling: SamplingCyclon (the
	// default; SamplingNewscast is taken for it), SamplingHyParView or
	// SamplingOracle.
	Sampling string
	// ViewSize is the Cyclon view size. Default DefaultViewSize (20).
	ViewSize int
	// ActiveView and PassiveView are HyParView's view sizes. Defaults
	// DefaultActiveView (8) and DefaultPassiveView (32).
	ActiveView, PassiveView int
	// Resume, when set, restores a saved State (a restart from a checkpoint);
	// Init is then ignored.
	Resume *State
	// Aggregator combines parameters: merge.WeightedMean (default) or a
	// robust rule (merge.ParseAggregator). In dpsgd it combines the node's
	// own vector with its neighbours'. In randomwalk (variant mu, no
	// compression) and pushsum a robust rule combines the node's model with
	// the last CacheSize models it received (push-sum: de-biased, x/w),
	// instead of the age-weighted or push-sum sum that one attacker could
	// steer; until the cache holds enough models the node keeps its own.
	Aggregator merge.Aggregator
	// Mixer, when set, carries out the mixes of D-PSGD, push-sum, GoSGD
	// and AD-PSGD where HandsMixes says (mixer.go): a simulator's, which
	// defers them. Nil: the core mixes at once.
	Mixer Mixer
	// Secure turns on secure aggregation (dpsgd; secure.go).
	Secure SecureConfig
	// MaxNorm bounds the L2 norm of every received parameter vector (and
	// SFB factor); larger ones are dropped (code "norm"). Default (0):
	// DefaultMaxRMS·√n for a vector of n values. Negative: no bound.
	MaxNorm float64
}

// Neighbor is a static neighbour and its mixing weight.
type Neighbor struct {
	ID     PeerID
	Weight float64
}

// Validate checks the config and fills defaults. Checks that concern one
// protocol only are that protocol's (protocolDef.validate).
func (c *Config) Validate() error {
	if c.ID == "" {
		return fmt.Errorf("%w: no ID", ErrConfig)
	}
	if c.Protocol == "" {
		c.Protocol = RandomWalk
	}
	def, ok := registry[c.Protocol]
	if !ok {
		return fmt.Errorf("%w: protocol %q, want one of %v", ErrConfig, c.Protocol, Protocols)
	}
	if c.NoAccounts && c.Accounts != nil {
		return fmt.Errorf("%w: saved accounts given to a node that keeps none (NoAccounts)", ErrConfig)
	}
	if err := c.Spec.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if c.Rand == nil {
		return fmt.Errorf("%w: no Rand", ErrConfig)
	}
	if c.Delta == 0 {
		c.Delta = DefaultDelta
	}
	if c.Delta < 0 || c.Jitter < 0 || c.Jitter >= 1 {
		return fmt.Errorf("%w: delta %v, jitter %v", ErrConfig, c.Delta, c.Jitter)
	}
	if c.LR == 0 {
		c.LR = DefaultLR
	}
	if c.Variant == "" {
		c.Variant = DefaultVariant
	}
	if !slices.Contains(Variants, c.Variant) {
		return fmt.Errorf("%w: variant %q, want mu|rw|um", ErrConfig, c.Variant)
	}
	if c.RoundTimeout == 0 {
		c.RoundTimeout = DefaultRoundTimeout * c.Delta
	}
	if err := c.Secure.validate(c); err != nil {
		return err
	}
	if c.Sampling == "" || c.Sampling == SamplingNewscast {
		c.Sampling = SamplingCyclon
	}
	if !slices.Contains(Samplings, c.Sampling) {
		return fmt.Errorf("%w: sampling %q, want cyclon|hyparview|oracle", ErrConfig, c.Sampling)
	}
	if c.ViewSize == 0 {
		c.ViewSize = DefaultViewSize
	}
	if c.ActiveView == 0 {
		c.ActiveView = DefaultActiveView
	}
	if c.PassiveView == 0 {
		c.PassiveView = DefaultPassiveView
	}
	if c.ActiveView < 1 || c.PassiveView < 1 {
		return fmt.Errorf("%w: HyParView views of %d active and %d passive peers, want at least 1 each", ErrConfig, c.ActiveView, c.PassiveView)
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.SFBMode == "" {
		c.SFBMode = DefaultSFBMode
	}
	if !slices.Contains([]string{"auto", "factors", "dense"}, c.SFBMode) {
		return fmt.Errorf("%w: sfb mode %q, want auto|factors|dense", ErrConfig, c.SFBMode)
	}
	if c.Aggregator == nil {
		c.Aggregator = merge.WeightedMean{}
	}
	if c.CacheSize == 0 {
		c.CacheSize = CacheSizeFor(c.Aggregator)
	}
	if c.Staleness < 0 || c.Fanout < 0 || c.LocalSteps < 0 {
		return fmt.Errorf("%w: negative staleness, fanout or local steps", ErrConfig)
	}
	if c.Subsample < 0 || c.Subsample > 1 || c.Partitions < 0 {
		return fmt.Errorf("%w: subsample %v, partitions %d", ErrConfig, c.Subsample, c.Partitions)
	}
	if c.Subsample == 1 {
		c.Subsample = 0
	}
	if c.Partitions == 1 {
		c.Partitions = 0
	}
	if q := c.Quantize.Kind; q != compress.None && q != compress.FP16 && q != compress.Int8 {
		return fmt.Errorf("%w: quantize %v: only fp16 and int8", ErrConfig, c.Quantize)
	}
	if err := c.validateSparse(); err != nil {
		return err
	}
	if err := c.validateOuter(); err != nil {
		return err
	}
	if c.Quantize.Kind != compress.None && c.Partitions > 0 || c.Quantize.Kind == compress.FP16 && c.Subsample > 0 {
		return fmt.Errorf("%w: %v with partitioning, or fp16 with subsampling: not available (subsampling takes int8)", ErrConfig, c.Quantize)
	}
	if c.Subsample > 0 && c.Partitions > 0 {
		return fmt.Errorf("%w: subsampling and partitioning are exclusive", ErrConfig)
	}
	if (c.Subsample > 0 || c.Partitions > 0) && c.Variant != "mu" {
		return fmt.Errorf("%w: compression needs the mu variant (merge, then update)", ErrConfig)
	}
	if err := c.Tokens.validate(); err != nil {
		return err
	}
	hv := c.Sampling == SamplingHyParView && def.overView
	if c.Sampling == SamplingHyParView && !def.view && !def.overView {
		return fmt.Errorf("%w: %s does not draw its peers from a HyParView view (randomwalk, gosgd, dpsgd, adpsgd and pushsum do)", ErrConfig, c.Protocol)
	}
	if hv && (c.Topology != "" || len(c.Neighbors) > 0) {
		return fmt.Errorf("%w: under HyParView %s mixes with its active view: no topology or static neighbours", ErrConfig, c.Protocol)
	}
	if c.Topology != "" {
		if !def.neighbors {
			return fmt.Errorf("%w: %s does not mix over a topology (%q)", ErrConfig, c.Protocol, c.Topology)
		}
		if len(c.Neighbors) > 0 {
			return fmt.Errorf("%w: static neighbours and a live topology (%q) are exclusive", ErrConfig, c.Topology)
		}
		if _, err := ParseTopology(liveSpec(c.Topology, 16), 16, rand.New(rand.NewPCG(1, 1))); err != nil {
			return err
		}
	} else if def.neighbors && len(c.Neighbors) == 0 && !hv {
		return fmt.Errorf("%w: %s needs neighbours or a topology over its live members", ErrConfig, c.Protocol)
	}
	if c.robust() && def.robust == nil {
		return fmt.Errorf("%w: aggregator %s: robust aggregation is available for %s", ErrConfig, c.Aggregator.Name(), strings.Join(robustProtocols(), ", "))
	}
	if c.robust() {
		return def.robust(c, minInputs(c.Aggregator))
	}
	return nil
}

// mergesInTraining reports whether a random walk merges a received model
// in the training request it leads to (TrainRequest.MixWith), off the
// core's goroutine: merge-update of whole models, weighted by age.
func (c *Config) mergesInTraining() bool {
	return c.Variant == "mu" && !c.robust() && c.Subsample == 0 && c.Partitions == 0
}

// robust reports whether the aggregator is a robust rule.
func (c *Config) robust() bool {
	_, mean := c.Aggregator.(merge.WeightedMean)
	return c.Aggregator != nil && !mean
}

// CacheSizeFor is the default CacheSize for an aggregator:
// DefaultCacheSize, grown for a robust rule to the models it needs besides
// the node's own.
func CacheSizeFor(a merge.Aggregator) int {
	if _, mean := a.(merge.WeightedMean); a == nil || mean {
		return DefaultCacheSize
	}
	return max(DefaultCacheSize, minInputs(a)-1)
}

// robustCache checks that the cache of received models and the node's own
// give a robust rule the need inputs it needs (random walk, push-sum).
func (c *Config) robustCache(need int) error {
	if c.CacheSize+1 < need {
		return fmt.Errorf("%w: aggregator %s needs %d inputs; a cache of %d models and the node's own give %d", ErrConfig, c.Aggregator.Name(), need, c.CacheSize, c.CacheSize+1)
	}
	return nil
}

// minInputs is how many vectors an aggregator needs (1 if it does not say).
func minInputs(a merge.Aggregator) int {
	if m, ok := a.(merge.MinInputs); ok {
		return m.MinInputs()
	}
	return 1
}

// validateSparse checks Sparse and sets its defaults.
func (c *Config) validateSparse() error {
	if c.Sparse.Kind == compress.None {
		if c.ConsensusStep != 0 || c.KeyframeEvery != 0 {
			return fmt.Errorf("%w: a consensus step and keyframes need top-k or rand-k compression", ErrConfig)
		}
		return nil
	}
	switch {
	case c.Sparse.Kind != compress.TopK && c.Sparse.Kind != compress.RandK:
		return fmt.Errorf("%w: sparse compression %v: only topk and randk", ErrConfig, c.Sparse)
	case c.Protocol == RandomWalk:
		return fmt.Errorf("%w: compression %v: top-k and rand-k need public copies both ends keep (dpsgd, adpsgd, pushsum: CHOCO gossip) or updates that add up (sfb: error feedback); a random walk's model goes to a different peer each hop: randomwalk takes subsample:S, fp16 or int8", ErrConfig, c.Sparse)
	case c.Protocol == GoSGD:
		return fmt.Errorf("%w: compression %v: top-k and rand-k need public copies both ends of a link keep; gosgd sends to a different peer of its view each round: gosgd takes fp16 or int8", ErrConfig, c.Sparse)
	case c.Protocol == SFB && (c.ConsensusStep != 0 || c.KeyframeEvery != 0):
		return fmt.Errorf("%w: a consensus step and keyframes are CHOCO's (dpsgd, adpsgd, pushsum); sfb sends its gradients with error feedback", ErrConfig)
	case c.Protocol == ADPSGD && c.KeyframeEvery != 0:
		return fmt.Errorf("%w: adpsgd's compressed links send keyframes only when a link resets; KeyframeEvery is dpsgd's", ErrConfig)
	case c.Quantize.Kind != compress.None:
		return fmt.Errorf("%w: %v and %v together", ErrConfig, c.Sparse, c.Quantize)
	case c.Aggregator != nil && c.Aggregator.Name() != (merge.WeightedMean{}).Name():
		return fmt.Errorf("%w: compression %v mixes by the mean; aggregator %s does not apply", ErrConfig, c.Sparse, c.Aggregator.Name())
	case !(c.Sparse.Fraction > 0 && c.Sparse.Fraction <= 1):
		return fmt.Errorf("%w: compression %v: fraction must be in (0,1]", ErrConfig, c.Sparse)
	case c.ConsensusStep < 0 || c.ConsensusStep > 1 || c.ConsensusStep != c.ConsensusStep:
		return fmt.Errorf("%w: consensus step %v, want (0,1]", ErrConfig, c.ConsensusStep)
	}
	if c.Protocol == SFB {
		return nil
	}
	if c.ConsensusStep == 0 {
		c.ConsensusStep = DefaultConsensusStep(c.Sparse)
	}
	if c.KeyframeEvery == 0 && c.Protocol != ADPSGD {
		c.KeyframeEvery = 50
	}
	return nil
}

// DefaultConsensusStep is CHOCO's step γ for a sparse compression: the
// sparser the steps, the smaller γ must be for the public copies to keep
// up (Koloskova et al. bound it by the compression's quality). Measured
// on digits with D-PSGD (3 and 16 peers, lr 0.5): top-k diverged at
// F = 0.01 with γ = 0.5 and learned with 0.02–0.1; rand-k, unbiased but
// noisier, needed 0.05 at F = 0.01 and 0.2 at F = 0.1. So top-k takes
// min(0.5, 10·F) and rand-k min(0.2, 5·F).
func DefaultConsensusStep(s compress.Spec) float64 {
	if s.Kind == compress.RandK {
		return min(0.2, 5*s.Fraction)
	}
	return min(0.5, 10*s.Fraction)
}

// The random walk's peer samplings (Config.Sampling).
const (
	// SamplingCyclon keeps a partial view refreshed by Cyclon-style
	// shuffles with the peers.
	SamplingCyclon = "cyclon"
	// SamplingNewscast is the name earlier versions gave SamplingCyclon.
	SamplingNewscast = "newscast"
	// SamplingHyParView keeps HyParView's small symmetric active view
	// and larger passive view (hyparview.go).
	SamplingHyParView = "hyparview"
	// SamplingOracle draws from every live peer (the simulator's
	// idealised sampling).
	SamplingOracle = "oracle"
)
