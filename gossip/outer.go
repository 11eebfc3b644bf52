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

// Outer methods.
const (
	OuterAverage  = "average"
	OuterNesterov = "nesterov"
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
	case c.Protocol != DPSGD:
		return fmt.Errorf("%w: the outer optimizer mixes over D-PSGD's neighbourhood; %s does not take it", ErrConfig, c.Protocol)
	case c.Sparse.Kind != 0:
		return fmt.Errorf("%w: the outer optimizer and %v together", ErrConfig, c.Sparse)
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
			o.LR = 0.7
		}
		if o.Momentum == 0 {
			o.Momentum = 0.9
		}
		if !(o.LR > 0 && o.LR <= 10) || !(o.Momentum >= 0 && o.Momentum < 1) {
			return fmt.Errorf("%w: outer learning rate %v (want (0,10]) and momentum %v (want [0,1))", ErrConfig, o.LR, o.Momentum)
		}
	default:
		return fmt.Errorf("%w: outer method %q, want nesterov or average", ErrConfig, o.Method)
	}
	return nil
}

// outerStep applies the outer update to n.params from the mixed result
// ybar, and returns the new model (ybar's memory is reused).
func (d *dpsgd) outerStep(n *Node, ybar []float32) []float32 {
	o := d.cfg.Outer
	if o.Method == OuterAverage {
		return ybar
	}
	if len(d.momentum) != len(n.params) {
		d.momentum = make([]float32, len(n.params))
	}
	mu, eta := float32(o.Momentum), float32(o.LR)
	x := ybar // becomes the new model: x − η·(Δ + μ·m), Δ = x − ȳ
	for k, xk := range n.params {
		delta := xk - ybar[k]
		m := mu*d.momentum[k] + delta
		d.momentum[k] = m
		x[k] = xk - eta*(delta+mu*m)
	}
	return x
}

// snapshot and restore keep the outer momentum across restarts.
func (d *dpsgd) snapshot(s *State) {
	if d.momentum != nil {
		s.Momentum = slices.Clone(d.momentum)
	}
}

func (d *dpsgd) restore(s *State) error {
	if len(s.Momentum) == 0 {
		return nil
	}
	if len(s.Momentum) != len(s.Params) || !merge.Finite(s.Momentum) {
		return fmt.Errorf("%w: saved outer momentum of %d values for %d parameters, or not finite", ErrConfig, len(s.Momentum), len(s.Params))
	}
	d.momentum = slices.Clone(s.Momentum)
	return nil
}
