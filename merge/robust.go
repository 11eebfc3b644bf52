package merge

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gossipd/gossipd/model/compute"
)

// Robust aggregation rules (He, Karimireddy, Jaggi 2022 and references):
// they bound what a minority of Byzantine inputs can do to the result.
// Median, trimmed mean and Krum treat the inputs alike and ignore the
// weights; clipped gossip keeps the mixing weights and bounds each
// neighbour's pull.

// MinInputs is implemented by aggregators that need a least number of
// inputs (the node's own vector included) to tolerate what they promise.
type MinInputs interface {
	MinInputs() int
}

// MinInputs implements MinInputs: 2·Trim+1.
func (t TrimmedMean) MinInputs() int { return 2*t.Trim + 1 }

// MinInputs implements MinInputs: F+3.
func (k Krum) MinInputs() int { return k.F + 3 }

// Median is the coordinate-wise median (for an even count, the mean of the
// two middle values). The values are ordered the same way on every
// machine (compute.Trimmed: NaNs first whatever their sign, −0 before
// +0), so that a device picks the same one.
type Median struct{}

// Name implements Aggregator.
func (Median) Name() string { return "median" }

// Aggregate implements Aggregator.
func (Median) Aggregate(dst []float32, xs [][]float32, ws []float64, self int) error {
	if err := checkInputs(dst, xs, 1); err != nil {
		return err
	}
	TrimmedInto(dst, xs, compute.Median)
	return nil
}

// TrimmedMean drops the Trim largest and Trim smallest values of every
// coordinate and averages the rest (TM(b)), ordered as Median orders
// them.
type TrimmedMean struct{ Trim int }

// Name implements Aggregator.
func (t TrimmedMean) Name() string { return fmt.Sprintf("trimmed:%d", t.Trim) }

// Aggregate implements Aggregator.
func (t TrimmedMean) Aggregate(dst []float32, xs [][]float32, ws []float64, self int) error {
	if err := t.trim(); err != nil {
		return err
	}
	if err := checkInputs(dst, xs, 2*t.Trim+1); err != nil {
		return err
	}
	TrimmedInto(dst, xs, t.Trim)
	return nil
}

// TrimmedInto sets each value of dst to compute.Trimmed of the values of
// xs there (trim compute.Median: the median): TrimmedMean's and Median's
// arithmetic, for a caller that checked the inputs (at least 2·trim+1
// vectors of len(dst) values; one for a median).
func TrimmedInto(dst []float32, xs [][]float32, trim int) {
	col := make([]float32, len(xs))
	for k := range dst {
		for i, x := range xs {
			col[i] = x[k]
		}
		dst[k] = compute.Trimmed(col, trim)
	}
}

// Krum picks the input with the smallest sum of squared distances to its
// n−F−2 nearest others (Blanchard et al. 2017), tolerating F Byzantine
// inputs among n ≥ F+3. With Multi set (Multi-Krum, from the same paper)
// it averages the n−F inputs of the smallest such sums instead of keeping
// one: the result then has the variance of a mean over the honest inputs,
// which a network trained by steps from one input's minibatch lacks.
type Krum struct {
	F     int
	Multi bool
}

// Name implements Aggregator.
func (k Krum) Name() string {
	if k.Multi {
		return fmt.Sprintf("multikrum:%d", k.F)
	}
	return fmt.Sprintf("krum:%d", k.F)
}

// Aggregate implements Aggregator.
func (k Krum) Aggregate(dst []float32, xs [][]float32, ws []float64, self int) error {
	if err := checkInputs(dst, xs, k.F+3); err != nil {
		return err
	}
	n := len(xs)
	d := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			d[i*n+j] = SquaredDistance(xs[i], xs[j])
		}
	}
	keep := k.Keep(n, d)
	if !k.Multi {
		copy(dst, xs[keep[0]])
		return nil
	}
	for c := range dst {
		var s float64
		for _, i := range keep {
			s += float64(xs[i][c])
		}
		dst[c] = float32(s / float64(len(keep)))
	}
	return nil
}

// trim refuses a negative Trim, which ParseAggregator never makes.
func (t TrimmedMean) trim() error {
	if t.Trim < 0 {
		return fmt.Errorf("%w: a trimmed mean dropping %d values", ErrAggregate, t.Trim)
	}
	return nil
}

// Keep returns the inputs Krum keeps of n ≥ F+3, given their squared
// distances d[i·n+j] for i < j (SquaredDistance; the rest unread): the
// one whose n−F−2 nearest others are nearest in all, or multi-Krum's n−F
// of the smallest such sums, in input order (so that their mean does
// not depend on the scores' ties).
func (k Krum) Keep(n int, d []float64) []int {
	dist := func(i, j int) float64 { return d[min(i, j)*n+max(i, j)] }
	scores := make([]float64, n)
	order := make([]int, n)
	others := make([]float64, 0, n-1)
	for i := 0; i < n; i++ {
		others = others[:0]
		for j := 0; j < n; j++ {
			if j != i {
				others = append(others, dist(i, j))
			}
		}
		slices.Sort(others)
		for _, v := range others[:n-k.F-2] {
			scores[i] += v
		}
		order[i] = i
	}
	// Ties go to the lowest index, deterministically.
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scores[a], scores[b]) })
	if !k.Multi {
		return order[:1]
	}
	keep := order[:n-k.F]
	slices.Sort(keep)
	return keep
}

// ClippedGossip is x_i + Σ_j W_ij·clip(x_j − x_i, τ) with
// clip(z, τ) = z·min(1, τ/‖z‖) (He et al. 2022): each neighbour pulls at most
// τ. Tau 0 chooses τ adaptively: the median of the neighbours' distances
// (the lower median for an even count), so that while fewer than half the
// neighbours are Byzantine, τ is an honest neighbour's distance and no
// attacker pulls further than an honest one.
type ClippedGossip struct{ Tau float64 }

// Name implements Aggregator.
func (c ClippedGossip) Name() string {
	if c.Tau == 0 {
		return "clipped"
	}
	return "clipped:" + strconv.FormatFloat(c.Tau, 'g', -1, 64)
}

// Aggregate implements Aggregator; self must index the node's own vector
// and ws are the mixing weights (renormalised to sum to 1).
func (c ClippedGossip) Aggregate(dst []float32, xs [][]float32, ws []float64, self int) error {
	if err := checkInputs(dst, xs, 1); err != nil {
		return err
	}
	if err := c.weights(len(xs), ws, self); err != nil {
		return err
	}
	x := xs[self]
	dist := make([]float64, len(xs))
	for j := range xs {
		if j != self {
			dist[j] = math.Sqrt(SquaredDistance(xs[j], x))
		}
	}
	pulls, scales := c.Scales(dist, ws, self)
	clipInto(dst, x, xs, pulls, scales)
	return nil
}

// clipInto sets dst to x + Σ_p scales[p]·(xs[pulls[p]] − x), summed in
// float64 in the order of p: clipped gossip's combination.
func clipInto(dst, x []float32, xs [][]float32, pulls []int, scales []float64) {
	acc := make([]float64, len(x))
	for p, j := range pulls {
		xj, s := xs[j], scales[p]
		for k := range acc {
			acc[k] += float64(s * (float64(xj[k]) - float64(x[k]))) // no fused multiply-add
		}
	}
	for k := range dst {
		dst[k] = float32(float64(x[k]) + acc[k])
	}
}

// Scales returns the inputs that pull the node's own (self) under
// clipped gossip, in order, and their scales w_j/Σw·min(1, τ/dist[j]),
// given each input's distance from the node's own (math.Sqrt of
// SquaredDistance(x_j, x); dist[self] unread): every input but self and
// those at distance 0; τ is Tau, or where 0 the lower median of the
// others' distances (MedianDistance). ws passed Check.
func (c ClippedGossip) Scales(dist, ws []float64, self int) (pulls []int, scales []float64) {
	var wsum float64
	for _, w := range ws {
		wsum += w
	}
	tau := c.Tau
	if tau == 0 {
		others := make([]float64, 0, len(dist))
		for j, d := range dist {
			if j != self {
				others = append(others, d)
			}
		}
		tau = lowerMedian(others)
	}
	for j, d := range dist {
		if j == self || d == 0 {
			continue
		}
		pulls, scales = append(pulls, j), append(scales, ws[j]/wsum*math.Min(1, tau/d))
	}
	return pulls, scales
}

// MedianDistance is the lower median of the L2 distances of others
// from x: clipped gossip's adaptive τ (0 for no others).
func MedianDistance(x []float32, others [][]float32) float64 {
	if len(others) == 0 {
		return 0
	}
	d := make([]float64, len(others))
	for i, o := range others {
		d[i] = math.Sqrt(SquaredDistance(o, x))
	}
	return lowerMedian(d)
}

// lowerMedian sorts d and returns its lower median (0 for none).
func lowerMedian(d []float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[(len(d)-1)/2]
}

// weights checks clipped gossip's inputs beyond their count: the node's
// own among the n, a weight each, none negative or NaN, not all 0.
func (ClippedGossip) weights(n int, ws []float64, self int) error {
	if self < 0 || self >= n || len(ws) != n {
		return fmt.Errorf("%w: clipped gossip needs the node's own vector and one weight per input", ErrAggregate)
	}
	var wsum float64
	for _, w := range ws {
		if w < 0 || math.IsNaN(w) {
			return fmt.Errorf("%w: weight %v", ErrAggregate, w)
		}
		wsum += w
	}
	if wsum == 0 {
		return fmt.Errorf("%w: weights sum to 0", ErrAggregate)
	}
	return nil
}

// Checked reports whether Check answers for a: the robust rules, whose
// Aggregate fails only for the number of inputs, the weights and self,
// never for the values.
func Checked(a Aggregator) bool {
	switch a.(type) {
	case Median, TrimmedMean, Krum, ClippedGossip, ClippedWindow:
		return true
	}
	return false
}

// Check returns the error a.Aggregate would return for n inputs of one
// length with weights ws and self, or nil where it would combine them,
// without combining anything: for a caller that decides now and
// combines later (gossip.Mixer.Aggregate). a is a rule Checked answers
// for.
func Check(a Aggregator, n int, ws []float64, self int) error {
	switch a := a.(type) {
	case Median:
		return tooFew(n, 1)
	case TrimmedMean:
		if err := a.trim(); err != nil {
			return err
		}
		return tooFew(n, a.MinInputs())
	case Krum:
		return tooFew(n, a.MinInputs())
	case ClippedGossip:
		if err := tooFew(n, 1); err != nil {
			return err
		}
		return a.weights(n, ws, self)
	case ClippedWindow:
		_, err := a.check(n, ws, self)
		return err
	}
	panic(fmt.Sprintf("merge: Check of aggregator %s", a.Name()))
}

// ErrAggregate marks inputs an aggregator cannot combine.
var ErrAggregate = fmt.Errorf("merge: cannot aggregate")

// tooFew is the error of n inputs to a rule that needs min.
func tooFew(n, min int) error {
	if n < min {
		return fmt.Errorf("%w: %d inputs, the rule needs at least %d", ErrAggregate, n, min)
	}
	return nil
}

func checkInputs(dst []float32, xs [][]float32, min int) error {
	if err := tooFew(len(xs), min); err != nil {
		return err
	}
	for _, x := range xs {
		if len(x) != len(dst) {
			return fmt.Errorf("%w: vector of %d values, want %d", ErrAggregate, len(x), len(dst))
		}
	}
	return nil
}

// Aggregators lists the rules ParseAggregator accepts.
var Aggregators = []string{"mean", "median", "trimmed:B", "krum:F", "multikrum:F", "clipped[:TAU]"}

// ParseAggregator reads "mean", "median", "trimmed:B", "krum:F",
// "multikrum:F", "clipped" (adaptive τ) or "clipped:TAU".
func ParseAggregator(spec string) (Aggregator, error) {
	name, arg, hasArg := strings.Cut(spec, ":")
	bad := func() (Aggregator, error) {
		return nil, fmt.Errorf("%w: aggregator %q, want %s", ErrAggregate, spec, strings.Join(Aggregators, "|"))
	}
	switch name {
	case "", "mean":
		if hasArg {
			return bad()
		}
		return WeightedMean{}, nil
	case "median":
		if hasArg {
			return bad()
		}
		return Median{}, nil
	case "trimmed", "krum", "multikrum":
		v, err := strconv.Atoi(arg)
		if err != nil || v < 0 {
			return bad()
		}
		if name == "trimmed" {
			return TrimmedMean{Trim: v}, nil
		}
		return Krum{F: v, Multi: name == "multikrum"}, nil
	case "clipped":
		if !hasArg {
			return ClippedGossip{}, nil
		}
		v, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return bad()
		}
		return ClippedGossip{Tau: v}, nil
	}
	return bad()
}
