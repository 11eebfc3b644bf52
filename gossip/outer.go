package gossip

import (
	"fmt"
	"slices"

	"github.com/gossipd/gossipd/merge"
)

// An outer optimizer over gossip (DiLoCo, Douillard et al. 2023; NoLoCo,
// Gensyn 2025, which averages with peers instead of all-reducing). With
// Config.Outer a D-PSGD round at node i is H local SGD steps from its
// model x, giving y_i, then a mix of the neighbours' results and an outer
// step on the pseudo-gradient:
//
//	y_i = x after H local steps              send y_i to the neighbours
//	ȳ   = Σ_j W_ij·y_j
//	Δ   = x − ȳ                               (the pseudo-gradient)
//	average:  x ← ȳ                           (local SGD with gossip)
//	nesterov: m ← μ·m + Δ;  x ← x − η·(Δ + μ·m)
//
// One message per neighbour per H steps instead of per step, so H times
// fewer bytes per example trained. The momentum m is part of the
// checkpointed state (State.Momentum).
//
// Random walk with Config.Outer is NoLoCo's gossip without pairing: every
// Δ a node mixes its last local result with the results that random
// peers sent it since, ȳ = (y_i + Σ_k y_k)/(1 + K), takes the outer step
// with the momentum on its own pseudo-gradient (outer.stepOwn), trains H
// local steps from the new x, and sends the result y_i to one random
// peer (randomWalk.outerTick). One model per node per Δ, as plain
// random walk.

// Outer methods.
const (
	OuterAverage  = "average"
	OuterNesterov = "nesterov"
)

// Nesterov's defaults: DiLoCo's outer learning rate and momentum.
const (
	DefaultOuterLR       = 0.7
	DefaultOuterMomentum = 0.9
)

// OuterConfig configures the outer optimizer.
type OuterConfig struct {
	// Steps is H, the local SGD steps of a round (0: off).
	Steps int
	// Method is "nesterov" (default) or "average".
	Method string
	// LR is the outer learning rate η (default 0.7) and Momentum μ
	// (default 0.9), DiLoCo's values; both for nesterov.
	LR, Momentum float64
}

// Enabled reports whether the outer optimizer is on.
func (o OuterConfig) Enabled() bool { return o.Steps > 0 }

// validateOuter checks Outer and sets its defaults.
func (c *Config) validateOuter() error {
	o := &c.Outer
	if !o.Enabled() {
		if o.Steps < 0 || o.Method != "" || o.LR != 0 || o.Momentum != 0 {
			return fmt.Errorf("%w: outer optimizer settings without local steps (%d)", ErrConfig, o.Steps)
		}
		return nil
	}
	switch {
	case c.Protocol == SFB && (c.Staleness != 0 || c.Fanout != 0):
		return fmt.Errorf("%w: sfb's outer optimizer (DiLoCo) averages every peer's pseudo-gradient of a clock: it needs BSP, not staleness %d or fanout %d", ErrConfig, c.Staleness, c.Fanout)
	case c.Sparse.Kind != 0 && c.Protocol != SFB:
		return fmt.Errorf("%w: the outer optimizer and %v together (only sfb's pseudo-gradients take top-k, with error feedback)", ErrConfig, c.Sparse)
	case c.Protocol == RandomWalk && (c.Subsample > 0 || c.Partitions > 0 || c.Tokens.enabled() || c.Variant != "mu" || c.robust()):
		return fmt.Errorf("%w: random walk's outer optimizer sends whole models and mixes them by its own rule: not with subsampling, partitions, tokens, variant %q or a robust aggregator", ErrConfig, c.Variant)
	}
	if o.Method == "" {
		o.Method = OuterNesterov
	}
	switch o.Method {
	case OuterAverage:
		if o.LR != 0 || o.Momentum != 0 {
			return fmt.Errorf("%w: outer average takes no learning rate or momentum", ErrConfig)
		}
	case OuterNesterov:
		if o.LR == 0 {
			o.LR = DefaultOuterLR
		}
		if o.Momentum == 0 {
			o.Momentum = DefaultOuterMomentum
		}
		if !(o.LR > 0 && o.LR <= 10) || !(o.Momentum >= 0 && o.Momentum < 1) {
			return fmt.Errorf("%w: outer learning rate %v (want (0,10]) and momentum %v (want [0,1))", ErrConfig, o.LR, o.Momentum)
		}
	default:
		return fmt.Errorf("%w: outer method %q, want nesterov or average", ErrConfig, o.Method)
	}
	return nil
}

// outer is a node's outer optimizer: the momentum, kept across restarts.
type outer struct {
	cfg      *OuterConfig
	momentum []float32
}

// nesterov takes coordinate k's pseudo-gradient Δ into the momentum,
// m ← μ·m + Δ, and returns Nesterov's direction Δ + μ·m (the step is η
// times it). The momentum has len(x) values from the first call on.
func (o *outer) nesterov(k int, delta float32) float32 {
	mu := float32(o.cfg.Momentum)
	m := mu*o.momentum[k] + delta
	o.momentum[k] = m
	return delta + mu*m
}

// sized makes the momentum as long as the model.
func (o *outer) sized(n int) {
	if len(o.momentum) != n {
		o.momentum = make([]float32, n)
	}
}

// step applies the outer update to the model x from the mixed result
// ybar, and returns the new model (ybar's memory is reused).
func (o *outer) step(x, ybar []float32) []float32 {
	if o.cfg.Method == OuterAverage {
		return ybar
	}
	o.sized(len(x))
	eta := float32(o.cfg.LR)
	out := ybar // becomes the new model: x − η·(Δ + μ·m), Δ = x − ȳ
	for k, xk := range x {
		out[k] = xk - eta*o.nesterov(k, xk-ybar[k])
	}
	return out
}

// stepOwn is the outer update with the momentum on the node's own
// pseudo-gradient Δ = x − y and the mixing outside it, from the mixed
// result ybar (reused for the result):
//
//	m ← μ·m + Δ;  x ← ȳ − (η·(Δ + μ·m) − Δ)
//
// Alone (ȳ = y) it is step's x − η·(Δ + μ·m); with local steps that
// change nothing it is plain averaging, x ← ȳ, as the momentum dies out.
// Random walk uses it: pushes to random peers do not mix by a doubly
// stochastic matrix, and momentum over the consensus gap (step) drove
// such mixing apart (TestRandomWalkOuterMixing).
func (o *outer) stepOwn(x, y, ybar []float32) []float32 {
	if o.cfg.Method == OuterAverage {
		return ybar
	}
	o.sized(len(x))
	eta := float32(o.cfg.LR)
	for k, xk := range x {
		delta := xk - y[k]
		ybar[k] -= eta*o.nesterov(k, delta) - delta
	}
	return ybar
}

// applyOwn adds to the model x the node's own progress over H local
// steps, start → y, through the outer step, while the protocol mixes x
// as it always does (AD-PSGD's pairwise averages, push-sum's shares may
// have moved x since start):
//
//	Δ = start − y;  m ← μ·m + Δ;  x ← x − s·η·(Δ + μ·m)
//
// (average: x ← x − s·Δ, local SGD). s scales the step: push-sum's
// model is its estimate times its weight.
func (o *outer) applyOwn(x, start, y []float32, s float32) {
	if o.cfg.Method == OuterAverage {
		for k := range x {
			x[k] -= s * (start[k] - y[k])
		}
		return
	}
	o.sized(len(x))
	eta := float32(o.cfg.LR)
	for k := range x {
		x[k] -= s * eta * o.nesterov(k, start[k]-y[k])
	}
}

// snapshot and restore keep the outer momentum across restarts.
func (o *outer) snapshot(s *State) {
	if o.momentum != nil {
		s.Momentum = slices.Clone(o.momentum)
	}
}

func (o *outer) restore(s *State) error {
	if len(s.Momentum) == 0 {
		return nil
	}
	if len(s.Momentum) != len(s.Params) || !merge.Finite(s.Momentum) {
		return fmt.Errorf("%w: saved outer momentum of %d values for %d parameters, or not finite", ErrConfig, len(s.Momentum), len(s.Params))
	}
	o.momentum = slices.Clone(s.Momentum)
	return nil
}
