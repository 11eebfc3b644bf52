package gossip

import (
	"math"
	"testing"
)

// TestAdmits: Config.Admits says of a sum what the node's own checks
// say of a vector with that sum: finite, within the norm bound (the
// default's, a set one, or none).
func TestAdmits(t *testing.T) {
	const n = 100
	for _, maxNorm := range []float64{0, 5, -1} {
		c := Config{MaxNorm: maxNorm}
		node := &Core{cfg: c}
		for _, ss := range []float64{0, 24, 25, 26, 1e8, 1.01e8, math.Inf(1), math.NaN()} {
			want := node.checkSum("parameters", make([]float32, n), ss) == nil
			if got := c.Admits(ss, n); got != want {
				t.Errorf("MaxNorm %v, Σx² %v: Admits %v, the node's check %v", maxNorm, ss, got, want)
			}
		}
	}
	if (&Config{}).Admits(1.01e8, n) || !(&Config{}).Admits(1e8, n) || (&Config{MaxNorm: 5}).Admits(26, n) {
		t.Fatal("the bounds are not where the checks put them")
	}
}
