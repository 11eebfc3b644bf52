// Package gossip is gossipd's protocol core: random-walk gossip learning,
// D-PSGD and AD-PSGD, push-sum (SGP) and sufficient-factor broadcasting, with
// a Newscast peer-sampling view and token-account flow control.
//
// The core is pure and deterministic. It performs no I/O, starts no
// goroutines, reads no clock and uses no global randomness: the shell (the
// daemon in node/, or the simulator in simulation/) drives it with events
// and carries out the actions it asks for, like etcd's raft:
//
//	n.Tick(now)            // the shell's clock, real or virtual
//	n.Step(msg)            // a decoded message
//	n.TrainDone(result)    // the shell ran a training request
//	n.SetPeers(peers)      // membership known to the shell
//	rd := n.Ready()        // messages to send, training to run, commits, traces
//	n.Advance()
//
// Time is a time.Duration since the shell's epoch; randomness is the
// injected *rand.Rand. Same seed, same events: same numbers.
package gossip

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
)

// Protocol names.
const (
	RandomWalk = "randomwalk"
	DPSGD      = "dpsgd"
	ADPSGD     = "adpsgd"
	PushSum    = "pushsum"
	SFB        = "sfb"
)

// Protocols lists the protocols the core implements.
var Protocols = []string{RandomWalk, DPSGD, ADPSGD, PushSum, SFB}

// Sentinel errors.
var (
	ErrConfig  = errors.New("gossip: invalid config")
	ErrInvalid = errors.New("gossip: invalid message")
)

// TrainOp says what a training request asks for.
type TrainOp uint8

const (
	// OpUpdate: run local SGD from Params for Steps minibatches (0: one pass
	// over the local data) and return the new parameters.
	OpUpdate TrainOp = iota + 1
	// OpGradient: return the mean gradient of one minibatch at Params.
	OpGradient
	// OpFactors: return the sufficient factors of the weight layers listed
	// in FactorLayers and the dense gradient of every other tensor, for one
	// minibatch at Params.
	OpFactors
)

// TrainRequest asks the shell to run training on the node's local data.
type TrainRequest struct {
	// ID matches the result to the request.
	ID uint64
	Op TrainOp
	// Params is the starting point; the request owns this copy.
	Params []float32
	// Steps of local SGD for OpUpdate; 0 means one pass over the local data.
	Steps int
	// Age is the number of examples the starting model has seen (random
	// walk); step sizes that decay with age (Pegasos) use it.
	Age float64
	// FactorLayers names the weight tensors to return as factors (OpFactors).
	FactorLayers []string
}

// TrainResult is the shell's answer to a TrainRequest.
type TrainResult struct {
	ID uint64
	// Params are the new parameters (OpUpdate).
	Params []float32
	// Grad is the gradient (OpGradient) or, for OpFactors, the dense part:
	// a full-length gradient whose factor-sent weights may be left zero.
	Grad []float32
	// Factors are the sufficient factors (OpFactors).
	Factors []model.Factors
	// Examples is how many examples the training used.
	Examples int
	// Loss is the mean training loss.
	Loss float64
}

// Commit tells the shell that the node has a new model: persist it or
// export it. The parameters are read with Node.Params.
type Commit struct {
	Age     float64
	Round   uint64
	Updates uint64
}

// TraceEvent records something a shell may count or log.
type TraceEvent struct {
	Time time.Duration
	// Event is e.g. "drop", "merge", "round", "stale", "missing".
	Event string
	Peer  PeerID
	// Reason explains drops.
	Reason string
	// Code classifies a drop of an invalid message (InvalidError.Code);
	// empty for other events.
	Code  string
	Value float64
}

// Ready is what the core wants the shell to do.
type Ready struct {
	Messages []Message
	// Train, when set, is a training request to run; the core issues at most
	// one at a time and waits for its TrainDone.
	Train  *TrainRequest
	Commit *Commit
	Trace  []TraceEvent
}

// Empty reports whether there is nothing to do.
func (r *Ready) Empty() bool {
	return len(r.Messages) == 0 && r.Train == nil && r.Commit == nil && len(r.Trace) == 0
}

// Config configures a Node. Zero values take the documented defaults;
// Validate fills them.
type Config struct {
	// ID is this node's identity. Required.
	ID PeerID
	// Protocol is one of Protocols. Default randomwalk.
	Protocol string
	// Spec is the model all nodes of the job train. Required.
	Spec model.Spec
	// Init is the initial parameter vector (len = the spec's layout size).
	// Required; the node keeps its own copy.
	Init []float32
	// Rand is the node's random source. Required.
	Rand *rand.Rand
	// Delta is the protocol period Δ: random-walk sends, D-PSGD rounds,
	// AD-PSGD and push-sum steps, SFB clocks. Default 1s.
	Delta time.Duration
	// Jitter spreads periodic actions uniformly over ±Jitter·Δ. Default 0.
	Jitter float64
	// LR is the step size γ of dpsgd, adpsgd, pushsum and sfb. Default 0.1.
	LR float64
	// LocalSteps is the number of local SGD steps of a random-walk update
	// (0: one pass over the local data).
	LocalSteps int
	// Variant is the random-walk variant: "mu" (default: merge then
	// update), "rw" (update the received model) or "um" (update both, then
	// merge).
	Variant string
	// Subsample, in (0,1), makes random walk send a random fraction of the
	// coordinates (Hegedűs et al. 2019); receivers merge only those.
	Subsample float64
	// Partitions, when ≥ 2, splits the model into partitions (coordinate k in
	// partition k mod Partitions), each with its own age, sent round-robin
	// (random walk).
	Partitions int
	// CacheSize is how many received models are kept for voting prediction.
	// Default 10; negative turns the cache off.
	CacheSize int
	// Tokens configures token-account flow control (random walk). Zero: off.
	Tokens TokenConfig
	// Neighbors are the static neighbours of dpsgd, adpsgd and pushsum (for
	// pushsum: out-neighbours) and the peers of sfb, with Metropolis–Hastings
	// weights for dpsgd.
	Neighbors []Neighbor
	// SelfWeight is dpsgd's W_ii.
	SelfWeight float64
	// RoundTimeout is how long dpsgd and sfb wait for contributions before
	// going on without the missing ones. Default 4·Δ.
	RoundTimeout time.Duration
	// Staleness is SFB's SSP bound s (0: BSP).
	Staleness int
	// Fanout is how many peers an SFB update or a push-sum share goes to
	// per step (0: sfb all peers; pushsum one, cycling through the
	// out-neighbours, SGP's time-varying exponential graph).
	Fanout int
	// Batch is the minibatch size the shell trains with; SFB's cost formula
	// uses it. Default 32.
	Batch int
	// Broadcast says the shell can deliver one message to every peer of the
	// job (gossipsub in the daemon): SFB then sends each full broadcast once,
	// addressed to Broadcast, instead of once per peer.
	Broadcast bool
	// SFBMode chooses what SFB sends per layer: "auto" (default: factors
	// where the cost formula says they are cheaper), "factors" or "dense".
	SFBMode string
	// Sampling is the random-walk peer sampling: "newscast" (default) or
	// "oracle" (uniform over the peers given to SetPeers).
	Sampling string
	// ViewSize is the Newscast view size. Default 20.
	ViewSize int
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

// Validate checks the config and fills defaults.
func (c *Config) Validate() error {
	if c.ID == "" {
		return fmt.Errorf("%w: no ID", ErrConfig)
	}
	if c.Protocol == "" {
		c.Protocol = RandomWalk
	}
	if !slices.Contains(Protocols, c.Protocol) {
		return fmt.Errorf("%w: protocol %q", ErrConfig, c.Protocol)
	}
	if err := c.Spec.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if c.Rand == nil {
		return fmt.Errorf("%w: no Rand", ErrConfig)
	}
	if c.Delta == 0 {
		c.Delta = time.Second
	}
	if c.Delta < 0 || c.Jitter < 0 || c.Jitter >= 1 {
		return fmt.Errorf("%w: delta %v, jitter %v", ErrConfig, c.Delta, c.Jitter)
	}
	if c.LR == 0 {
		c.LR = 0.1
	}
	if c.Variant == "" {
		c.Variant = "mu"
	}
	if !slices.Contains([]string{"mu", "rw", "um"}, c.Variant) {
		return fmt.Errorf("%w: variant %q, want mu|rw|um", ErrConfig, c.Variant)
	}
	if c.CacheSize == 0 {
		c.CacheSize = 10
	}
	if c.RoundTimeout == 0 {
		c.RoundTimeout = 4 * c.Delta
	}
	if c.Sampling == "" {
		c.Sampling = "newscast"
	}
	if c.Sampling != "newscast" && c.Sampling != "oracle" {
		return fmt.Errorf("%w: sampling %q, want newscast|oracle", ErrConfig, c.Sampling)
	}
	if c.ViewSize == 0 {
		c.ViewSize = 20
	}
	if c.Batch == 0 {
		c.Batch = 32
	}
	if c.SFBMode == "" {
		c.SFBMode = "auto"
	}
	if !slices.Contains([]string{"auto", "factors", "dense"}, c.SFBMode) {
		return fmt.Errorf("%w: sfb mode %q, want auto|factors|dense", ErrConfig, c.SFBMode)
	}
	if c.Aggregator == nil {
		c.Aggregator = merge.WeightedMean{}
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
	if c.Subsample > 0 && c.Partitions > 0 {
		return fmt.Errorf("%w: subsampling and partitioning are exclusive", ErrConfig)
	}
	if (c.Subsample > 0 || c.Partitions > 0) && c.Variant != "mu" {
		return fmt.Errorf("%w: compression needs the mu variant (merge, then update)", ErrConfig)
	}
	if err := c.Tokens.validate(); err != nil {
		return err
	}
	switch c.Protocol {
	case DPSGD, ADPSGD, PushSum, SFB:
		if len(c.Neighbors) == 0 {
			return fmt.Errorf("%w: %s needs neighbours", ErrConfig, c.Protocol)
		}
	}
	if !c.robust() {
		return nil
	}
	need := minInputs(c.Aggregator)
	switch c.Protocol {
	case DPSGD:
		if len(c.Neighbors)+1 < need {
			return fmt.Errorf("%w: aggregator %s needs %d inputs; this node has %d neighbours and itself", ErrConfig, c.Aggregator.Name(), need, len(c.Neighbors))
		}
	case RandomWalk, PushSum:
		if c.Protocol == RandomWalk && (c.Variant != "mu" || c.Subsample > 0 || c.Partitions > 0) {
			return fmt.Errorf("%w: aggregator %s: robust random walk merges whole models (variant mu, no compression)", ErrConfig, c.Aggregator.Name())
		}
		if c.CacheSize == 0 {
			c.CacheSize = max(need-1, DefaultRobustCache)
		}
		if c.CacheSize+1 < need {
			return fmt.Errorf("%w: aggregator %s needs %d inputs; a cache of %d models and the node's own give %d", ErrConfig, c.Aggregator.Name(), need, c.CacheSize, c.CacheSize+1)
		}
	default:
		return fmt.Errorf("%w: aggregator %s: robust aggregation is available for dpsgd, randomwalk and pushsum", ErrConfig, c.Aggregator.Name())
	}
	return nil
}

// DefaultRobustCache is how many received models a robust random-walk or
// push-sum node keeps by default (more when its aggregator needs more).
const DefaultRobustCache = 8

// robust reports whether the aggregator is a robust rule.
func (c *Config) robust() bool {
	_, mean := c.Aggregator.(merge.WeightedMean)
	return c.Aggregator != nil && !mean
}

// aggregateEqual combines xs (the node's own vector first) with equal
// weights by the configured aggregator into dst and reports whether it
// did; with too few inputs, or when the rule fails (traced), dst gets the
// node's own vector xs[0].
func (n *Node) aggregateEqual(dst []float32, xs [][]float32) bool {
	if len(xs) >= minInputs(n.cfg.Aggregator) {
		ws := make([]float64, len(xs))
		for i := range ws {
			ws[i] = 1
		}
		err := n.cfg.Aggregator.Aggregate(dst, xs, ws, 0)
		if err == nil {
			return true
		}
		n.trace("drop", "", "robust merge: "+err.Error(), 0)
	}
	copy(dst, xs[0])
	return false
}

// minInputs is how many vectors an aggregator needs (1 if it does not say).
func minInputs(a merge.Aggregator) int {
	if m, ok := a.(merge.MinInputs); ok {
		return m.MinInputs()
	}
	return 1
}

// ParseCompression reads "none", "subsample:S" (0 < S < 1) or
// "partition:P" (P ≥ 2) into Config's Subsample and Partitions.
func ParseCompression(spec string) (subsample float64, partitions int, err error) {
	name, arg, _ := strings.Cut(spec, ":")
	switch name {
	case "", "none":
		return 0, 0, nil
	case "subsample":
		v, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(v > 0 && v < 1) {
			return 0, 0, fmt.Errorf("%w: compression %q: fraction must be in (0,1)", ErrConfig, spec)
		}
		return v, 0, nil
	case "partition":
		v, err := strconv.Atoi(arg)
		if err != nil || v < 2 {
			return 0, 0, fmt.Errorf("%w: compression %q: partitions must be an integer ≥ 2", ErrConfig, spec)
		}
		return 0, v, nil
	}
	return 0, 0, fmt.Errorf("%w: compression %q, want none|subsample:S|partition:P", ErrConfig, spec)
}

// protocol is one learning protocol behind the Node.
type protocol interface {
	start(n *Node)
	// wake is when the protocol next needs a Tick (Never: only on events).
	wake(n *Node) time.Duration
	tick(n *Node)
	step(n *Node, m *Message)
	trainDone(n *Node, r *TrainResult)
}

// Node is one peer's protocol core. It is not safe for concurrent use.
type Node struct {
	cfg    Config
	rng    *rand.Rand
	layout *model.Layout
	now    time.Duration
	params []float32
	age    float64

	started  bool
	training bool
	trainID  uint64
	updates  uint64
	round    uint64

	halted bool
	// kept says the last Step kept a reference to its message's vectors.
	kept bool

	view  *view
	peers []PeerID // from SetPeers, sorted
	proto protocol
	rd    Ready
}

// New returns a node; it starts at its first Tick.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	layout, err := model.LayoutOf(cfg.Spec)
	if err != nil {
		return nil, err
	}
	if cfg.Resume != nil && cfg.Init == nil {
		cfg.Init = cfg.Resume.Params
	}
	if len(cfg.Init) != layout.Size {
		return nil, fmt.Errorf("%w: initial parameters %d, layout %d", ErrConfig, len(cfg.Init), layout.Size)
	}
	n := &Node{cfg: cfg, rng: cfg.Rand, layout: layout, params: slices.Clone(cfg.Init)}
	n.view = newView(cfg.ID, cfg.ViewSize)
	switch cfg.Protocol {
	case RandomWalk:
		n.proto = newRandomWalk(&n.cfg)
	case DPSGD:
		n.proto = newDPSGD(&n.cfg)
	case ADPSGD:
		n.proto = &adpsgd{}
	case PushSum:
		n.proto = newPushSum(&n.cfg)
	case SFB:
		n.proto = newSFB(&n.cfg, layout)
	}
	if cfg.Resume != nil {
		if err := n.restore(cfg.Resume); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// Never is a wake time that never comes.
const Never = time.Duration(1<<63 - 1)

// NextWake returns when the node next needs a Tick if nothing else happens
// (before its first Tick: now). Event-driven shells schedule a tick then;
// others may simply tick periodically.
func (n *Node) NextWake() time.Duration {
	if n.halted {
		return Never
	}
	if !n.started {
		return n.now
	}
	w := n.proto.wake(n)
	if n.cfg.Protocol == RandomWalk && n.cfg.Sampling == "newscast" {
		w = min(w, n.view.next)
	}
	return w
}

// ID returns the node's ID.
func (n *Node) ID() PeerID { return n.cfg.ID }

// Config returns the node's validated config.
func (n *Node) Config() Config { return n.cfg }

// Layout returns the parameter layout.
func (n *Node) Layout() *model.Layout { return n.layout }

// Params returns the node's current model parameters (for push-sum, the
// de-biased estimate x/w). The slice is valid until the next call into the
// node; callers must not modify it.
func (n *Node) Params() []float32 {
	if ps, ok := n.proto.(*pushSum); ok {
		return ps.estimate(n)
	}
	return n.params
}

// Age returns the model's age: the examples it has seen (random walk: merged
// by the age-weighted rule; other protocols: the examples of this node's own
// training steps).
func (n *Node) Age() float64 { return n.age }

// Updates returns how many model updates the node has made.
func (n *Node) Updates() uint64 { return n.updates }

// Round returns the current D-PSGD round or SFB clock.
func (n *Node) Round() uint64 { return n.round }

// Busy reports whether a training request is outstanding.
func (n *Node) Busy() bool { return n.training }

// Tick advances the node's clock to now and runs what is due.
func (n *Node) Tick(now time.Duration) {
	if now > n.now {
		n.now = now
	}
	if n.halted {
		return
	}
	n.ensureStarted()
	if n.cfg.Protocol == RandomWalk && n.cfg.Sampling == "newscast" {
		n.view.tick(n)
	}
	n.proto.tick(n)
}

// Step hands the node a message from a peer. Invalid messages are dropped
// and traced, never trusted.
//
// Step may keep m and the vectors it points to (a model waiting for the
// trainer, a neighbour's parameters waiting for the round); Kept says
// whether it did. When it did not, the caller may reuse their memory — a
// transport recycles its receive buffers this way.
func (n *Node) Step(m *Message) {
	n.kept = false
	if n.halted {
		return
	}
	if err := n.validate(m); err != nil {
		n.trace("drop", m.From, err.Error(), 0)
		var ie *InvalidError
		if errors.As(err, &ie) {
			n.rd.Trace[len(n.rd.Trace)-1].Code = ie.Code
		}
		return
	}
	n.ensureStarted()
	switch m.Kind {
	case KindViewPush, KindViewReply:
		n.view.step(n, m)
		return
	}
	n.proto.step(n, m)
}

// Kept reports whether the last Step kept a reference to its message or to
// the vectors (Params, Factors, Indices) the message points to. When it
// returns false the caller may overwrite them.
func (n *Node) Kept() bool { return n.kept }

// keep records that Step keeps its message's memory.
func (n *Node) keep() { n.kept = true }

// Halt stops the node for good: it trains no more, sends nothing and ignores
// what arrives; its model stays as it is. A shell halts a node whose
// privacy budget is spent (an outstanding training request is then simply
// never answered).
func (n *Node) Halt() {
	n.halted = true
	n.rd.Messages, n.rd.Train = nil, nil
}

// Halted reports whether Halt was called.
func (n *Node) Halted() bool { return n.halted }

// ensureStarted starts the protocol at the node's first event, Tick or Step,
// so that a message arriving before the first Tick finds it running.
func (n *Node) ensureStarted() {
	if !n.started {
		n.started = true
		n.proto.start(n)
	}
}

// TrainDone hands the node the result of its outstanding training request.
func (n *Node) TrainDone(r *TrainResult) {
	if !n.training || r.ID != n.trainID {
		n.trace("drop", "", fmt.Sprintf("train result %d does not match the outstanding request %d", r.ID, n.trainID), 0)
		return
	}
	n.training = false
	n.proto.trainDone(n, r)
}

// SetPeers tells the node which peers the shell knows (bootstrap addresses
// for the Newscast view; the sampling population in oracle mode).
func (n *Node) SetPeers(peers []PeerID) {
	n.peers = slices.Clone(peers)
	n.peers = slices.DeleteFunc(n.peers, func(p PeerID) bool { return p == n.cfg.ID })
	slices.Sort(n.peers)
	n.peers = slices.Compact(n.peers)
	n.view.seed(n.peers, n.rng)
}

// Ready returns what the node wants done. Call Advance once it is handled.
func (n *Node) Ready() Ready { return n.rd }

// HasReady reports whether Ready has anything.
func (n *Node) HasReady() bool { return !n.rd.Empty() }

// Advance acknowledges the last Ready.
func (n *Node) Advance() { n.rd = Ready{} }

// send queues a message.
func (n *Node) send(m Message) {
	m.From = n.cfg.ID
	n.rd.Messages = append(n.rd.Messages, m)
}

// train queues a training request; the caller checks !n.training first.
func (n *Node) train(op TrainOp, params []float32, steps int, layers []string) *TrainRequest {
	n.trainID++
	n.training = true
	n.rd.Train = &TrainRequest{ID: n.trainID, Op: op, Params: slices.Clone(params), Steps: steps, FactorLayers: layers, Age: n.age}
	return n.rd.Train
}

// commit records a new model.
func (n *Node) commit() {
	n.updates++
	n.rd.Commit = &Commit{Age: n.age, Round: n.round, Updates: n.updates}
}

func (n *Node) trace(event string, peer PeerID, reason string, v float64) {
	n.rd.Trace = append(n.rd.Trace, TraceEvent{Time: n.now, Event: event, Peer: peer, Reason: reason, Value: v})
}

// firstWake is when a periodic action first runs: uniformly within one
// period from now, so that nodes started together do not move in step.
func (n *Node) firstWake() time.Duration {
	return n.now + time.Duration(n.rng.Float64()*float64(n.cfg.Delta))
}

// jittered returns Δ spread by ±Jitter.
func (n *Node) jittered() time.Duration {
	if n.cfg.Jitter == 0 {
		return n.cfg.Delta
	}
	f := 1 + n.cfg.Jitter*(2*n.rng.Float64()-1)
	return time.Duration(float64(n.cfg.Delta) * f)
}

// randomPeer draws a peer to gossip with: from the Newscast view, or
// uniformly from the known peers in oracle mode.
func (n *Node) randomPeer() (PeerID, bool) {
	if n.cfg.Sampling == "oracle" {
		if len(n.peers) == 0 {
			return "", false
		}
		return n.peers[n.rng.IntN(len(n.peers))], true
	}
	return n.view.random(n.rng)
}
