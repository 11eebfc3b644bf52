package gossip

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// TestLiveNeighborsAgree: for every topology and every roster size, the
// members that see the same sorted set derive the same graph: D-PSGD's
// neighbour relation is symmetric, its Metropolis–Hastings weights form a
// doubly stochastic matrix, and push-sum's out-neighbours are members.
func TestLiveNeighborsAgree(t *testing.T) {
	for _, spec := range []string{"ring", "torus", "regular:3", "regular:4", "exponential", "complete"} {
		for k := 1; k <= 13; k++ {
			members := make([]PeerID, k)
			for i := range members {
				members[i] = fmt.Sprintf("p%02d", (i*7+3)%13) // distinct names in no order; LiveNeighbors wants them sorted
			}
			slices.Sort(members)
			w := map[[2]PeerID]float64{}
			for _, self := range members {
				nbs, sw, err := LiveNeighbors(DPSGD, spec, 42, members, self)
				if err != nil {
					t.Fatalf("%s over %d: %v", spec, k, err)
				}
				w[[2]PeerID{self, self}] = sw
				for _, nb := range nbs {
					w[[2]PeerID{self, nb.ID}] = nb.Weight
				}
				out, _, _ := LiveNeighbors(PushSum, spec, 42, members, self)
				for _, nb := range out {
					if !slices.Contains(members, nb.ID) || nb.ID == self {
						t.Fatalf("%s over %d: push-sum out-neighbour %s of %s", spec, k, nb.ID, self)
					}
				}
			}
			for _, i := range members {
				row := 0.0
				for _, j := range members {
					row += w[[2]PeerID{i, j}]
					if math.Abs(w[[2]PeerID{i, j}]-w[[2]PeerID{j, i}]) > 1e-12 {
						t.Fatalf("%s over %d: W[%s][%s] = %v, W[%s][%s] = %v", spec, k, i, j, w[[2]PeerID{i, j}], j, i, w[[2]PeerID{j, i}])
					}
				}
				if math.Abs(row-1) > 1e-12 {
					t.Fatalf("%s over %d: row %s sums to %v", spec, k, i, row)
				}
			}
		}
	}
	if _, _, err := LiveNeighbors(DPSGD, "ring", 1, []PeerID{"a", "b"}, "c"); err == nil {
		t.Fatal("a node outside the members got neighbours")
	}
}
