// Package gossip is gossipd's protocol core: random-walk gossip learning,
// D-PSGD and AD-PSGD, push-sum (SGP) and sufficient-factor broadcasting, with
// a Newscast peer-sampling view and token-account flow control.
//
// The core is pure and deterministic. It performs no I/O, starts no
// goroutines, reads no clock and uses no global randomness. A driver (the
// peer package, used by both the daemon and the simulator) feeds it events
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
// injected *rand.Rand. Same seed, same events: same numbers. Each protocol
// implements one interface (protocol.go) in a file of its own.
package gossip

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
)

// Core is one peer's protocol core. It is not safe for concurrent use.
type Core struct {
	cfg    Config
	def    protocolDef
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
	hv    *hyparview
	peers []PeerID // from SetPeers, sorted
	// members are the live members from SetMembers, sorted, self included.
	members    []PeerID
	membersSet bool
	// Joining a running job (join.go).
	joining   bool
	joinAsked PeerID
	joinAt    time.Duration
	joinTries int
	stateSent map[PeerID]time.Duration
	proto     protocol
	rd        Ready
}

// New returns a node; it starts at its first Tick.
func New(cfg Config) (*Core, error) {
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
	n := &Core{cfg: cfg, def: registry[cfg.Protocol], rng: cfg.Rand, layout: layout, params: cfg.Init}
	if !cfg.ShareInit || !(n.def.replaces || cfg.HandsMixes()) {
		n.params = slices.Clone(cfg.Init)
	}
	n.view = newView(cfg.ID, cfg.ViewSize)
	n.hv = newHyParView(cfg.ID, cfg.ActiveView, cfg.PassiveView)
	n.proto = n.def.new(&n.cfg, layout)
	if cfg.Resume != nil {
		if err := n.restore(cfg.Resume); err != nil {
			return nil, err
		}
	}
	if cfg.Accounts != nil {
		a, ok := n.proto.(interface {
			resumeAccounts(n *Core, a *Accounts) error
		})
		if !ok {
			return nil, fmt.Errorf("%w: accounts are push-sum's; this node runs %s", ErrConfig, cfg.Protocol)
		}
		if err := a.resumeAccounts(n, cfg.Accounts); err != nil {
			return nil, err
		}
	}
	// A secure node starts from its initial model even when it joins: no
	// member sends its model in the clear (answerState), and its
	// neighbours' adverts bring it to their round (catchUp).
	n.joining = cfg.Join && cfg.Resume == nil && !cfg.Secure.Enabled
	return n, nil
}

// Never is a wake time that never comes.
const Never = time.Duration(1<<63 - 1)

// viewOn reports whether the node runs a Cyclon view.
func (n *Core) viewOn() bool { return n.def.view && n.cfg.Sampling == SamplingCyclon }

// NextWake returns when the node next needs a Tick if nothing else happens
// (before its first Tick: now). Event-driven shells schedule a tick then;
// others may simply tick periodically.
func (n *Core) NextWake() time.Duration {
	if n.halted {
		return Never
	}
	if !n.started {
		return n.now
	}
	if n.joining {
		return n.joinAt
	}
	w := n.proto.wake(n)
	if n.viewOn() {
		w = min(w, n.view.next)
	}
	if n.hvOn() {
		w = min(w, n.hv.next)
	}
	return w
}

// ID returns the node's ID.
func (n *Core) ID() PeerID { return n.cfg.ID }

// Config returns the node's validated config.
func (n *Core) Config() Config { return n.cfg }

// HandsMixes reports whether the core hands its mixes to its Mixer
// (Config.HandsMixes), without copying its Config.
func (n *Core) HandsMixes() bool { return n.cfg.HandsMixes() }

// TrainedModelsUnread reports whether the core never reads, on its own
// goroutine, the values of the models its training returns: it checks
// them by the sums measured where they trained, leaves their merges to
// training requests and sends them as they are. A driver that keeps those
// models where they trained (a device) may then leave them there until it
// reads them itself. A plain random walk does: merge-update, weighted by
// age or by a robust rule merge.Check answers for, with no compression
// or outer optimizer.
func (n *Core) TrainedModelsUnread() bool {
	c := &n.cfg
	merges := c.mergesInTraining() || (c.Variant == "mu" && c.robust() && merge.Checked(c.Aggregator) && c.Subsample == 0 && c.Partitions == 0)
	return c.Protocol == RandomWalk && merges && c.Quantize.Kind == compress.None && !c.Outer.Enabled()
}

// Layout returns the parameter layout.
func (n *Core) Layout() *model.Layout { return n.layout }

// Params returns the node's current model parameters (for push-sum, the
// de-biased estimate x/w). The slice is valid until the next call into the
// node; callers must not modify it.
func (n *Core) Params() []float32 { return n.resolved(n.proto.params(n)) }

// ParamsLater returns Params without resolving it: a vector the Mixer
// may still have to make (push-sum's estimate, a D-PSGD mix), which the
// shell resolves, with others at once, before it reads it; Params then
// returns the same vector while the model does not change.
func (n *Core) ParamsLater() []float32 { return n.proto.params(n) }

// Cache returns the models kept for voting prediction (random walk; nil
// for other protocols). The slices must not be modified.
func (n *Core) Cache() [][]float32 { return n.proto.cache() }

// PushSumWeight returns the node's push-sum weight (1 for other protocols).
func (n *Core) PushSumWeight() float64 { return n.proto.weight() }

// Age returns the model's age: the examples it has seen (random walk: merged
// by the age-weighted rule; other protocols: the examples of this node's own
// training steps).
func (n *Core) Age() float64 { return n.age }

// Updates returns how many model updates the node has made.
func (n *Core) Updates() uint64 { return n.updates }

// Round returns the current D-PSGD round or SFB clock.
func (n *Core) Round() uint64 { return n.round }

// Busy reports whether a training request is outstanding.
func (n *Core) Busy() bool { return n.training }

// Tick advances the node's clock to now and runs what is due.
func (n *Core) Tick(now time.Duration) {
	if now > n.now {
		n.now = now
	}
	if n.halted {
		return
	}
	n.ensureStarted()
	if n.viewOn() {
		n.view.tick(n)
	}
	if n.hvOn() {
		n.hv.tick(n)
	}
	if n.joining {
		n.joinTick()
		return
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
func (n *Core) Step(m *Message) {
	n.kept = false
	if n.halted {
		return
	}
	err := n.unpack(m)
	if err == nil {
		err = n.validate(m)
	}
	if err != nil {
		code := "invalid"
		var ie *InvalidError
		if errors.As(err, &ie) {
			code = ie.Code
		}
		n.drop(code, m.From, err.Error())
		return
	}
	n.ensureStarted()
	switch m.Kind {
	case KindViewPush, KindViewReply:
		n.view.step(n, m)
		return
	case KindHVJoin, KindHVForwardJoin, KindHVNeighbor, KindHVNeighborReply, KindHVDisconnect, KindHVShuffle, KindHVShuffleReply, KindHVPing:
		n.hv.step(n, m)
		return
	case KindStateRequest:
		n.answerState(m)
		return
	}
	if n.joining {
		n.stepJoin(m)
		return
	}
	if m.Kind == KindStateReply {
		n.drop(DropUnsolicited, m.From, "a state reply to a node that is not joining")
		return
	}
	if n.hvOn() {
		n.hv.stray(n, m.From)
	}
	n.proto.step(n, m)
}

// Kept reports whether the last Step kept a reference to its message or to
// the vectors (Params, Factors, Indices) the message points to. When it
// returns false the caller may overwrite them.
func (n *Core) Kept() bool { return n.kept }

// keep records that Step keeps its message's memory.
func (n *Core) keep() { n.kept = true }

// Halt stops the node for good: it trains no more, sends nothing and ignores
// what arrives; its model stays as it is. A shell halts a node whose
// privacy budget is spent (an outstanding training request is then simply
// never answered).
func (n *Core) Halt() {
	n.halted = true
	n.rd.Messages, n.rd.Train = nil, nil
}

// Halted reports whether Halt was called.
func (n *Core) Halted() bool { return n.halted }

// ensureStarted starts the protocol at the node's first event, Tick or Step,
// so that a message arriving before the first Tick finds it running.
func (n *Core) ensureStarted() {
	if !n.started {
		n.started = true
		if n.joining {
			n.joinAt = n.now
			return // the protocol starts once the state is in (join.go)
		}
		n.proto.start(n)
	}
}

// TrainDone hands the node the result of its outstanding training request.
func (n *Core) TrainDone(r *TrainResult) {
	if !n.training || r.ID != n.trainID {
		n.drop(DropTrainResult, "", fmt.Sprintf("train result %d does not match the outstanding request %d", r.ID, n.trainID))
		return
	}
	n.training = false
	n.proto.trainDone(n, r)
}

// SetPeers tells the node which peers the shell knows (bootstrap addresses
// for the Newscast view; the sampling population in oracle mode).
func (n *Core) SetPeers(peers []PeerID) {
	n.peers = slices.Clone(peers)
	n.peers = slices.DeleteFunc(n.peers, func(p PeerID) bool { return p == n.cfg.ID })
	slices.Sort(n.peers)
	n.peers = slices.Compact(n.peers)
	if n.hvOn() {
		n.hv.setContacts(n, n.peers)
	} else {
		n.view.seed(n.peers)
	}
}

// Ready returns what the node wants done. Call Advance once it is handled.
func (n *Core) Ready() Ready { return n.rd }

// HasReady reports whether Ready has anything.
func (n *Core) HasReady() bool { return !n.rd.Empty() }

// Advance acknowledges the last Ready.
func (n *Core) Advance() { n.rd = Ready{} }

// send queues a message, its vector compressed under Config.Quantize.
func (n *Core) send(m Message) {
	m.From = n.cfg.ID
	if n.cfg.Secure.Enabled && (len(m.Params) > 0 || m.Packed != nil) {
		// The last line of defence: a secure node's vectors leave masked
		// (Message.Secure) or not at all.
		n.trace("withheld", m.To, fmt.Sprintf("a %s message with parameters in the clear, which secure aggregation never sends", m.Kind), 0)
		return
	}
	if n.hvOn() {
		n.hv.sent(n, m.To)
	}
	if n.cfg.Quantize.Kind != compress.None && len(m.Params) > 0 {
		if n.cfg.HandsMixes() {
			// Compressed where the receiver's mixer rounds it (fp16 and
			// int8 draw nothing from the rng): the vector never changes.
			m.Packed = &compress.Payload{Kind: n.cfg.Quantize.Kind, N: len(m.Params), Deferred: m.Params}
		} else {
			m.Packed = new(compress.Payload)
			compress.Compress(m.Packed, n.resolved(m.Params), n.cfg.Quantize, n.rng)
		}
		m.Params = nil
	}
	n.rd.Messages = append(n.rd.Messages, m)
}

// commit records a new model.
func (n *Core) commit() {
	n.updates++
	n.rd.Commit = &Commit{Age: n.age, Round: n.round, Updates: n.updates}
}

func (n *Core) trace(event string, peer PeerID, reason string, v float64) {
	n.rd.Trace = append(n.rd.Trace, TraceEvent{Time: n.now, Event: event, Peer: peer, Reason: reason, Value: v})
}

// drop traces something dropped, classified by code.
func (n *Core) drop(code string, peer PeerID, reason string) {
	n.rd.Trace = append(n.rd.Trace, TraceEvent{Time: n.now, Event: "drop", Peer: peer, Reason: reason, Code: code})
}

// firstWake is when a periodic action first runs: uniformly within one
// period from now, so that nodes started together do not move in step.
func (n *Core) firstWake() time.Duration {
	return n.now + time.Duration(n.rng.Float64()*float64(n.cfg.Delta))
}

// jittered returns Δ spread by ±Jitter.
func (n *Core) jittered() time.Duration {
	if n.cfg.Jitter == 0 {
		return n.cfg.Delta
	}
	f := 1 + n.cfg.Jitter*(2*n.rng.Float64()-1)
	return time.Duration(float64(n.cfg.Delta) * f)
}

// randomPeer draws a peer to gossip with: from the Newscast view, or
// uniformly from the known peers in oracle mode.
func (n *Core) randomPeer() (PeerID, bool) {
	if n.cfg.Sampling == SamplingOracle {
		if len(n.peers) == 0 {
			return "", false
		}
		return n.peers[n.rng.IntN(len(n.peers))], true
	}
	if n.hvOn() {
		return n.hv.random(n)
	}
	return n.view.random(n.rng)
}

// aggregateEqual combines xs (the node's own vector first) with equal
// weights by the configured aggregator into dst and reports whether it
// did; with too few inputs, or when the rule fails (traced), dst gets the
// node's own vector xs[0].
func (n *Core) aggregateEqual(dst []float32, xs [][]float32) bool {
	if len(xs) >= minInputs(n.cfg.Aggregator) {
		ws := make([]float64, len(xs))
		for i := range ws {
			ws[i] = 1
		}
		err := n.cfg.Aggregator.Aggregate(dst, xs, ws, 0)
		if err == nil {
			return true
		}
		n.drop(DropAggregation, "", "robust merge: "+err.Error())
	}
	copy(dst, xs[0])
	return false
}

// robustMix returns the node's rule's (agg's) combination of xs with
// weights ws, xs[0] the node's own vector, in a new vector: one the
// Mixer makes where the core hands its mixes, after merge.Check has
// passed the inputs. Where the rule cannot combine them it returns xs[0]
// itself: quietly for fewer inputs than the rule needs, else dropped
// (DropAggregation).
func (n *Core) robustMix(xs [][]float32, ws []float64, agg merge.Aggregator) []float32 {
	if len(xs) < minInputs(agg) {
		return xs[0]
	}
	if n.cfg.HandsMixes() {
		if err := merge.Check(agg, len(xs), ws, 0); err != nil {
			n.drop(DropAggregation, "", "robust merge: "+err.Error())
			return xs[0]
		}
		z := n.cfg.Mixer.Vector(len(n.params))
		n.cfg.Mixer.Aggregate(z, xs, ws, agg, nil, 0)
		return z
	}
	z := make([]float32, len(n.params))
	if err := agg.Aggregate(z, xs, ws, 0); err != nil {
		n.drop(DropAggregation, "", "robust merge: "+err.Error())
		return xs[0]
	}
	return z
}

// badVector reports whether training returned, in r, a vector v of the
// wrong length or with non-finite values, tracing the drop. A sum the
// trainer measured says whether v is finite without reading it.
func (n *Core) badVector(r *TrainResult, v []float32, what string) bool {
	if len(v) == len(n.params) {
		if ss, ok := r.measuredSum(v); ok {
			if AdmitsTrained(ss) {
				return false
			}
		} else if merge.Finite(v) {
			return false
		}
	}
	n.drop(DropBadTraining, "", "training returned a bad "+what)
	return true
}
