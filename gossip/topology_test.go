package gossip

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCheckTopology: CheckTopology refuses what ParseTopology refuses,
// over the same node counts, without building a graph; a name takes no
// argument it would ignore.
func TestCheckTopology(t *testing.T) {
	for _, tc := range []struct {
		spec string
		n    int
		ok   bool
	}{
		{"ring", 5, true}, {"torus", 9, true}, {"complete", 3, true}, {"exponential", 8, true},
		{"regular:2", 5, true}, {"regular:3", 6, true}, {"regular:3", 0, true},
		{"regular:3", 5, false}, {"regular:5", 5, false}, {"regular:0", 5, false}, {"regular:x", 5, false},
		{"ring:3", 5, false}, {"rnig", 5, false}, {"", 5, false}, {"edges", 5, false},
	} {
		err := CheckTopology(tc.spec, tc.n)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("CheckTopology(%q, %d) = %v, want ok %v", tc.spec, tc.n, err, tc.ok)
		}
		if tc.n > 0 {
			_, perr := ParseTopology(tc.spec, tc.n, rand.New(rand.NewPCG(1, 2)))
			if (perr == nil) != (err == nil) {
				t.Errorf("%q over %d: CheckTopology %v, ParseTopology %v", tc.spec, tc.n, err, perr)
			}
		}
	}
}

// TestRandomRegularDense: degrees the configuration model cannot draw
// simple (7 of 8 nodes: the complete graph; 6 of 8) still come out
// k-regular and simple, through the complement (a fuzz find: --topology
// regular:7 passed CheckTopology for 8 members and then failed to draw).
func TestRandomRegularDense(t *testing.T) {
	for _, k := range []int{5, 6, 7} {
		g, err := RandomRegular(8, k, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatalf("%d-regular on 8: %v", k, err)
		}
		for i, out := range g.Out {
			if len(out) != k || slices.Contains(out, i) {
				t.Errorf("%d-regular on 8: node %d has neighbours %v", k, i, out)
			}
			for _, j := range out {
				if !slices.Contains(g.Out[j], i) {
					t.Errorf("%d-regular on 8: edge %d→%d has no way back", k, i, j)
				}
			}
		}
	}
}

// TestRandomRegularLarge: an 8-regular graph on 200 nodes, which the
// configuration model almost never draws simple, comes out 8-regular and
// simple, and the same seed draws the same graph.
func TestRandomRegularLarge(t *testing.T) {
	g, err := RandomRegular(200, 8, rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := RandomRegular(200, 8, rand.New(rand.NewPCG(3, 4)))
	for i, out := range g.Out {
		if len(out) != 8 || slices.Contains(out, i) {
			t.Fatalf("node %d has neighbours %v", i, out)
		}
		for _, j := range out {
			if !slices.Contains(g.Out[j], i) {
				t.Fatalf("edge %d→%d has no way back", i, j)
			}
		}
		if !slices.Equal(out, again.Out[i]) {
			t.Fatalf("node %d: %v, then %v from the same seed", i, out, again.Out[i])
		}
	}
}
