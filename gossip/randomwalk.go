package gossip

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
)

// TokenConfig configures token-account flow control (Danner & Jelasity
// 2018), randomized variant: every Δ a node sends proactively with
// probability P(a) = clamp((a−A)/(B+1−A), 0, 1) and otherwise saves a token;
// on a useful receive it sends ⌊U + a/A⌋ reactive messages (U uniform in
// [0,1)), each spending a token. A = 0 is the purely proactive strategy,
// plain gossip learning's one send every Δ.
type TokenConfig struct {
	A, B int
}

func (t TokenConfig) enabled() bool { return t.A > 0 }

func (t TokenConfig) validate() error {
	if t.A < 0 || (t.A > 0 && t.B < t.A) {
		return fmt.Errorf("%w: token account A=%d B=%d, want 0 < A ≤ B or A = 0", ErrConfig, t.A, t.B)
	}
	return nil
}

// proactive is P(a).
func (t TokenConfig) proactive(a int) float64 {
	return math.Min(1, math.Max(0, float64(a-t.A)/float64(t.B+1-t.A)))
}

// randomWalk is gossip learning (Ormándi, Hegedűs & Jelasity 2013; Hegedűs,
// Danner & Jelasity 2019): models walk the network; each hop merges and/or
// updates them on the receiver's data.
type randomWalk struct {
	base
	cfg     *Config
	next    time.Duration
	pending *Message // the newest model received while training ran
	// baseAge is the age of the model the running update started from.
	baseAge float64
	// sum is the model's Σ x², where the trainer measured it.
	sum knownSum
	// UM keeps update(m) while update(current) runs.
	umStage  int
	umParams []float32
	umAge    float64
	tokens   int
	reactive int
	cached   []cachedModel
	cacheAt  int
	// Partitioned models: one age per partition, sent round-robin.
	partAge  []float64
	nextPart int
	// The outer optimizer (outer.go): the last local result, and the sum
	// and count of the results received since the last outer step.
	outer  outer
	local  []float32
	inbox  []float32
	inboxN int
}

type cachedModel struct {
	params []float32
	age    float64
}

func newRandomWalk(cfg *Config) *randomWalk {
	w := &randomWalk{cfg: cfg, outer: outer{cfg: &cfg.Outer}}
	if cfg.Partitions > 0 {
		w.partAge = make([]float64, cfg.Partitions)
	}
	return w
}

func (w *randomWalk) start(n *Core) {
	w.next = n.firstWake()
	if k, ok := w.cfg.initSum(n.params); ok {
		w.sum = k
	}
}

func (w *randomWalk) wake(n *Core) time.Duration { return w.next }

func (w *randomWalk) tick(n *Core) {
	if n.now < w.next {
		return
	}
	w.next = n.now + n.jittered()
	if w.cfg.Outer.Enabled() {
		w.outerTick(n)
		return
	}
	if t := w.cfg.Tokens; t.enabled() {
		if n.rng.Float64() >= t.proactive(w.tokens) {
			w.tokens++
			return
		}
	}
	w.sendModel(n)
}

func (w *randomWalk) sendModel(n *Core) {
	p, ok := n.randomPeer()
	if !ok {
		n.trace("idle", "", "no peer to send to", 0)
		return
	}
	switch {
	case w.cfg.Subsample > 0:
		// A random fraction of the coordinates, named by a seed the
		// receiver draws them from (compress.Sparse), the values as
		// float32 or, under int8, int8.
		pk := new(compress.Payload)
		compress.Compress(pk, n.params, compress.Spec{Kind: n.packedKind(), Fraction: w.cfg.Subsample}, n.rng)
		n.send(Message{Kind: KindModel, To: p, Packed: pk, Age: n.age})
	case w.cfg.Partitions > 0:
		k := w.nextPart
		w.nextPart = (k + 1) % w.cfg.Partitions
		vals := merge.Strided(nil, n.params, k, w.cfg.Partitions)
		n.send(Message{Kind: KindModel, To: p, Params: vals, Partition: uint32(k), Age: w.partAge[k]})
	default:
		// The message shares the model: a random walk replaces n.params
		// after each update and never writes it in place (Message.Params).
		// It carries the sum the trainer measured, if it did, for a
		// receiver in this process.
		n.send(Message{Kind: KindModel, To: p, Params: n.params, Age: n.age, sum: w.sum})
	}
}

func (w *randomWalk) step(n *Core, m *Message) {
	if w.cfg.Outer.Enabled() {
		w.receiveLocal(n, m)
		return
	}
	if len(m.Params) == len(n.params) { // voting needs whole models
		w.remember(n, m)
	}
	if n.training {
		if w.pending != nil {
			n.trace("superseded", w.pending.From, "a newer model arrived while training", 0)
		}
		w.pending = m
		n.keep()
		return
	}
	w.process(n, m)
}

// remember keeps the received model for voting prediction, a copy, and
// for the robust merges: then the message's vector itself, which nobody
// writes (Message.Params), so that it is not read here (the merges run
// where the requests do: TrainRequest.MixRule).
func (w *randomWalk) remember(n *Core, m *Message) {
	if w.cfg.CacheSize <= 0 {
		return
	}
	c := cachedModel{params: m.Params, age: m.Age}
	if w.cfg.robust() {
		n.keep()
	} else {
		c.params = slices.Clone(m.Params)
	}
	if len(w.cached) < w.cfg.CacheSize {
		w.cached = append(w.cached, c)
		return
	}
	w.cached[w.cacheAt] = c
	w.cacheAt = (w.cacheAt + 1) % w.cfg.CacheSize
}

func (w *randomWalk) process(n *Core, m *Message) {
	if t := w.cfg.Tokens; t.enabled() {
		useful := m.Age >= n.age
		r := 0.0
		if useful {
			r = float64(w.tokens) / float64(t.A)
		}
		w.reactive = min(w.tokens, int(math.Floor(n.rng.Float64()+r)))
		w.tokens -= w.reactive
	}
	steps := w.cfg.LocalSteps
	switch w.cfg.Variant {
	case "rw":
		w.baseAge = m.Age
		n.train(OpUpdate, m.Params, steps, nil).Age = w.baseAge
	case "mu":
		if w.cfg.mergesInTraining() {
			// The age-weighted merge of whole models is left to
			// whoever runs the request (TrainRequest.Resolve), off
			// this goroutine; the model and the message are only read.
			omega := merge.AgeWeight(n.age, m.Age)
			w.baseAge = math.Max(n.age, m.Age)
			n.trace("merge", m.From, "", omega)
			req := n.trainOwned(OpUpdate, n.params, steps, nil)
			req.MixWith, req.MixWeight, req.Age = m.Params, float32(omega), w.baseAge
			n.keep()
			return
		}
		if w.cfg.robust() {
			agg, xs, ws, age, ok := w.robustMerge(n, m)
			w.baseAge = age
			n.trace("merge", m.From, "", 0) // not an interpolation
			if !ok {
				// The node's own model, copied where the request runs
				// (clipped gossip with nothing to pull), not read here.
				agg, xs, ws = merge.ClippedWindow{}, [][]float32{n.params}, []float64{1}
			}
			// Merged by whoever runs the request, as the age-weighted
			// merge is; the models are only read.
			req := n.trainOwned(OpUpdate, n.params, steps, nil)
			req.MixRule, req.MixInputs, req.MixWeights, req.Age = agg, xs, ws, age
			n.keep()
			return
		}
		merged := make([]float32, len(n.params))
		var omega float64
		switch {
		case w.cfg.Subsample > 0:
			copy(merged, n.params)
			omega = merge.AgeWeight(n.age, m.Age)
			merge.InterpolateAt(merged, m.Indices, m.Params, float32(omega))
			w.baseAge = math.Max(n.age, m.Age)
		default: // partitions
			copy(merged, n.params)
			k := int(m.Partition)
			omega = merge.AgeWeight(w.partAge[k], m.Age)
			merge.InterpolateStrided(merged, k, w.cfg.Partitions, m.Params, float32(omega))
			w.partAge[k] = math.Max(w.partAge[k], m.Age)
			w.baseAge = n.age
		}
		n.trace("merge", m.From, "", omega)
		n.trainOwned(OpUpdate, merged, steps, nil).Age = w.baseAge // merged is this request's alone
	case "um":
		w.umStage = 1
		w.baseAge = m.Age
		n.train(OpUpdate, m.Params, steps, nil).Age = w.baseAge
	}
}

func (w *randomWalk) trainDone(n *Core, r *TrainResult) {
	if w.cfg.Outer.Enabled() {
		w.localDone(n, r)
		return
	}
	if n.badVector(r, r.Params, "parameter vector") {
		w.umStage = 0
		w.resume(n)
		return
	}
	if w.umStage == 1 { // update(m) done; now update(current)
		w.umParams, w.umAge = r.Params, w.baseAge+float64(r.Examples)
		w.umStage = 2
		w.baseAge = n.age
		n.train(OpUpdate, n.params, w.cfg.LocalSteps, nil)
		return
	}
	age := w.baseAge + float64(r.Examples)
	ss, measured := r.measuredSum(r.Params)
	if w.umStage == 2 {
		w.umStage = 0
		age = merge.AgeWeighted(r.Params, r.Params, age, w.umParams, w.umAge)
		w.umParams, measured = nil, false
	}
	n.params, n.age = r.Params, age
	w.sum = knownSum{}
	if measured {
		w.sum = sumOf(n.params, ss)
	}
	if w.partAge != nil { // every partition saw the update's examples
		var sum float64
		for k := range w.partAge {
			w.partAge[k] += float64(r.Examples)
			sum += w.partAge[k]
		}
		n.age = sum / float64(len(w.partAge))
	}
	n.commit()
	for ; w.reactive > 0; w.reactive-- {
		w.sendModel(n)
	}
	w.resume(n)
}

// quietTrainDone: an update's result sends only the reactive models that
// tokens owe (trainDone); resuming a pending message trains, it does not
// send.
func (w *randomWalk) quietTrainDone(*Core) bool {
	return w.reactive == 0 && !w.cfg.Outer.Enabled() // the outer optimizer sends each local result
}

// trainDoneApart: with no message waiting (resume) and no second update
// to ask for (the um variant's first), a quiet result sets the model, its
// age and sum, and commits: nothing the view holds, and no draw of the
// node's randomness.
func (w *randomWalk) trainDoneApart(*Core) bool {
	return w.pending == nil && w.umStage != 1
}

// resume starts on the model that arrived during training, if any.
func (w *randomWalk) resume(n *Core) {
	if m := w.pending; m != nil {
		w.pending = nil
		w.process(n, m)
	}
}

func (w *randomWalk) cache() [][]float32 {
	out := make([][]float32, len(w.cached))
	for i, c := range w.cached {
		out[i] = c.params
	}
	return out
}

func (w *randomWalk) snapshot(s *State) {
	w.outer.snapshot(s)
	s.Tokens = w.tokens
	s.PartitionAges = slices.Clone(w.partAge)
}

func (w *randomWalk) restore(s *State) error {
	if err := w.outer.restore(s); err != nil {
		return err
	}
	w.tokens = s.Tokens
	if w.partAge != nil && len(s.PartitionAges) == len(w.partAge) {
		copy(w.partAge, s.PartitionAges)
	}
	return nil
}

// robustMerge returns the robust merge of the node's model with the
// cached ones that the update it leads to starts from (the rule, its
// inputs, the node's model first, and their weights:
// TrainRequest.MixRule), and the age to give the result: the median age
// of the inputs (one attacker cannot inflate it). ok is false where the
// node keeps its own model: too few cached models, or inputs the rule
// cannot combine (merge.Check, traced as DropAggregation); the age is
// then the node's.
//
// Clipped gossip is the merge of a plain random walk with the arriving
// model's pull bounded: x + ω·clip(m − x, τ), ω the age weight, τ (when
// adaptive) the median distance of the cached models from the node's
// (merge.ClippedWindow, the arriving model its one pull and the cache its
// window). The walk's model carries its progress on, as in the plain
// merge, which a nonconvex model needs (averaging it with stale cached
// models undoes a CNN's training); the cache only sets how far an honest
// model lies. An age weight of 0 keeps the node's model, at the median
// age.
func (w *randomWalk) robustMerge(n *Core, m *Message) (agg merge.Aggregator, xs [][]float32, ws []float64, age float64, ok bool) {
	xs, ages := [][]float32{n.params}, []float64{n.age}
	for _, c := range w.cached {
		xs, ages = append(xs, c.params), append(ages, c.age)
	}
	agg = w.cfg.Aggregator
	if c, clipped := agg.(merge.ClippedGossip); clipped {
		if c.Tau == 0 && len(xs) < 2 {
			return nil, nil, nil, n.age, false // no cached model sets τ
		}
		omega := merge.AgeWeight(n.age, m.Age)
		if omega == 0 {
			return nil, nil, nil, median(ages), false
		}
		xs = append([][]float32{n.params, m.Params}, xs[1:]...)
		ws = make([]float64, len(xs))
		ws[0], ws[1] = 1-omega, omega
		agg = merge.ClippedWindow{Tau: c.Tau, Pulls: 1}
	} else {
		if len(xs) < minInputs(agg) {
			return nil, nil, nil, n.age, false
		}
		ws = make([]float64, len(xs))
		for i := range ws {
			ws[i] = 1
		}
	}
	if err := merge.Check(agg, len(xs), ws, 0); err != nil {
		n.drop(DropAggregation, "", "robust merge: "+err.Error())
		return nil, nil, nil, n.age, false
	}
	return agg, xs, ws, median(ages), true
}

// median sorts ages and returns their upper median.
func median(ages []float64) float64 {
	slices.Sort(ages)
	return ages[len(ages)/2]
}

// ParseTokens reads a token account "A:B" (TokenConfig); "" is off.
func ParseTokens(spec string) (TokenConfig, error) {
	if spec == "" {
		return TokenConfig{}, nil
	}
	a, b, ok := strings.Cut(spec, ":")
	ai, err1 := strconv.Atoi(a)
	bi, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return TokenConfig{}, fmt.Errorf("%w: token account %q, want A:B", ErrConfig, spec)
	}
	t := TokenConfig{A: ai, B: bi}
	return t, t.validate()
}

// outerTick is a Δ of random walk with the outer optimizer (outer.go):
// the outer step on the mix of the last local result and the ones
// received, then H local steps from the new model.
func (w *randomWalk) outerTick(n *Core) {
	if n.training {
		n.trace("busy", "", "local steps still running at the next outer step", 0)
		return
	}
	if w.local != nil {
		ybar := slices.Clone(w.local)
		if w.inboxN > 0 {
			merge.Axpy(ybar, 1, w.inbox)
			merge.Scale(ybar, 1/float32(1+w.inboxN))
			n.trace("merge", "", "outer step over received local results", float64(w.inboxN))
		}
		n.params = w.outer.stepOwn(n.params, w.local, ybar)
		w.local, w.inboxN = nil, 0
		n.round++
		n.commit()
	}
	n.train(OpUpdate, n.params, w.cfg.Outer.Steps, nil)
}

// localDone keeps the H local steps' result and sends it to a random
// peer.
func (w *randomWalk) localDone(n *Core, r *TrainResult) {
	if n.badVector(r, r.Params, "parameter vector") {
		w.local = slices.Clone(n.params) // mix without local progress
	} else {
		w.local = r.Params
		n.age += float64(r.Examples)
	}
	if p, ok := n.randomPeer(); ok {
		// The message shares the result: the outer step reads it, never
		// writes it (Message.Params).
		n.send(Message{Kind: KindModel, To: p, Params: w.local, Age: n.age})
	} else {
		n.trace("idle", "", "no peer to send to", 0)
	}
}

// receiveLocal adds a peer's local result (a whole model: validate
// refused any other length) to the next outer step's mix.
func (w *randomWalk) receiveLocal(n *Core, m *Message) {
	if w.inboxN == 0 {
		w.inbox = append(w.inbox[:0], m.Params...)
	} else {
		merge.Axpy(w.inbox, 1, m.Params)
	}
	w.inboxN++
}
