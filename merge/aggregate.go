package merge

// Aggregator combines several parameter vectors, with non-negative weights,
// into one. The plain weighted mean is the default; robust rules (median,
// trimmed mean, Krum, clipped gossip) implement the same interface so that
// D-PSGD, push-sum and random-walk can use any of them.
type Aggregator interface {
	// Aggregate writes the combination of xs into dst. self, when ≥ 0, is
	// the index in xs of the aggregating node's own vector (clipped gossip
	// clips the others relative to it).
	Aggregate(dst []float32, xs [][]float32, ws []float64, self int) error
	// Name names the rule, e.g. "mean".
	Name() string
}

// WeightedMean is the Aggregator of plain (renormalised) weighted averaging.
type WeightedMean struct{}

// Name implements Aggregator.
func (WeightedMean) Name() string { return "mean" }

// Aggregate implements Aggregator.
func (WeightedMean) Aggregate(dst []float32, xs [][]float32, ws []float64, self int) error {
	return Weighted(dst, xs, ws)
}
