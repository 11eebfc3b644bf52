package merge

import (
	"fmt"
	"math"
)

// ClippedWindow is push-sum's clipped gossip: the node's own vector
// xs[0] plus the clipped pulls of the Pulls inputs after it (the models
// received since the last merge), each weighted by ws as in
// ClippedGossip, where τ is Tau or, for Tau 0, the lower median distance
// from xs[0] of the inputs after those (the window of recent models,
// whose weights count for nothing). The window sets how far an honest
// model lies; the estimate keeps its own progress, pulled only by what
// is new. With no pulls, or no window to set an adaptive τ, or an
// adaptive τ of 0, the result is xs[0] itself.
//
// It is a rule of its own, not a ClippedGossip, so that a caller that
// combines later (gossip.Mixer.Aggregate) hands over the whole merge,
// window and all: τ depends on the values.
type ClippedWindow struct {
	Tau   float64
	Pulls int
}

// Name implements Aggregator: the rule's name as --aggregator gives it.
func (c ClippedWindow) Name() string { return ClippedGossip{Tau: c.Tau}.Name() }

// Aggregate implements Aggregator; self must be 0, and ws holds a weight
// for every input (the window's unread).
func (c ClippedWindow) Aggregate(dst []float32, xs [][]float32, ws []float64, self int) error {
	if err := checkInputs(dst, xs, 1); err != nil {
		return err
	}
	pulls, err := c.check(len(xs), ws, self)
	if err != nil {
		return err
	}
	x := xs[0]
	if !pulls {
		copy(dst, x)
		return nil
	}
	dist := make([]float64, len(xs))
	for j := 1; j < len(xs); j++ {
		dist[j] = math.Sqrt(SquaredDistance(xs[j], x))
	}
	ps, scales, own := c.Scales(dist, ws)
	if own {
		copy(dst, x)
		return nil
	}
	clipInto(dst, x, xs, ps, scales)
	return nil
}

// check returns Aggregate's error for n inputs with weights ws and self,
// and whether any input may pull the node's own: the weights are checked
// only then.
func (c ClippedWindow) check(n int, ws []float64, self int) (pulls bool, err error) {
	if err := tooFew(n, 1); err != nil {
		return false, err
	}
	if c.Pulls < 0 || c.Pulls >= n {
		return false, fmt.Errorf("%w: clipped gossip of %d pulls over %d inputs", ErrAggregate, c.Pulls, n)
	}
	if c.Own(n) {
		return false, nil
	}
	if self != 0 {
		return false, fmt.Errorf("%w: clipped gossip over a window needs the node's own vector first", ErrAggregate)
	}
	return true, ClippedGossip{}.weights(n, ws, self)
}

// Own reports whether the combination of n inputs is the node's own
// xs[0] whatever their values: nothing pulls, or no window sets an
// adaptive τ.
func (c ClippedWindow) Own(n int) bool { return c.Pulls == 0 || (c.Tau == 0 && n == 1+c.Pulls) }

// Scales returns the inputs that pull the node's own xs[0] and their
// scales, as ClippedGossip.Scales gives them for the inputs 1 to Pulls
// with τ set (Tau, or the lower median of the window's distances), given
// each input's distance from the node's own (math.Sqrt of
// SquaredDistance(x_j, x); dist[0] unread); own reports that the result
// is the node's own vector itself, as for an adaptive τ of 0. The inputs
// passed Check, with some to pull.
func (c ClippedWindow) Scales(dist, ws []float64) (pulls []int, scales []float64, own bool) {
	tau := c.Tau
	if tau == 0 {
		tau = lowerMedian(append([]float64(nil), dist[1+c.Pulls:]...))
		if tau == 0 {
			return nil, nil, true
		}
	}
	pulls, scales = ClippedGossip{Tau: tau}.Scales(dist[:1+c.Pulls], ws[:1+c.Pulls], 0)
	return pulls, scales, false
}
