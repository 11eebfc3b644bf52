package merge

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// honest returns n vectors near (1, 2, 3, 4) and one Byzantine vector far
// away (−1000·x: a scaled bit-flip).
func honestAndByzantine(n int) [][]float32 {
	var xs [][]float32
	for i := 0; i < n; i++ {
		d := float32(i) * 0.01
		xs = append(xs, []float32{1 + d, 2 - d, 3 + d, 4})
	}
	return append(xs, []float32{-1000, -2000, -3000, -4000})
}

func near(t *testing.T, name string, got []float32, want []float32, tol float64) {
	t.Helper()
	for k := range got {
		if math.Abs(float64(got[k]-want[k])) > tol {
			t.Fatalf("%s: %v, want about %v", name, got, want)
		}
	}
}

// TestRobustRulesResistOneOutlier: with four honest inputs and one huge
// Byzantine one, median, trimmed mean, Krum, Multi-Krum and clipped gossip stay near the
// honest inputs, while the plain mean is dragged off.
func TestRobustRulesResistOneOutlier(t *testing.T) {
	xs := honestAndByzantine(4)
	ws := []float64{0.2, 0.2, 0.2, 0.2, 0.2}
	want := []float32{1.015, 1.985, 3.015, 4}
	dst := make([]float32, 4)
	for _, a := range []Aggregator{Median{}, TrimmedMean{Trim: 1}, Krum{F: 1}, Krum{F: 1, Multi: true}, ClippedGossip{}} {
		if err := a.Aggregate(dst, xs, ws, 0); err != nil {
			t.Fatalf("%s: %v", a.Name(), err)
		}
		near(t, a.Name(), dst, want, 0.05)
	}
	WeightedMean{}.Aggregate(dst, xs, ws, 0)
	if dst[0] > -100 {
		t.Fatalf("the plain mean resisted the outlier (%v): the test data is wrong", dst)
	}
}

// TestRobustRulesExact: hand-checked values.
func TestRobustRulesExact(t *testing.T) {
	xs := [][]float32{{1, 10}, {2, 40}, {9, 20}, {4, 30}}
	dst := make([]float32, 2)
	Median{}.Aggregate(dst, xs, nil, -1)
	near(t, "median", dst, []float32{3, 25}, 1e-6)
	TrimmedMean{Trim: 1}.Aggregate(dst, xs, nil, -1)
	near(t, "trimmed mean", dst, []float32{3, 25}, 1e-6)
	// Krum with F = 1 over five inputs scores each by its 5−1−2 = 2 nearest
	// squared distances: (0,0) 1+1 = 2, (1,0) 1+2 = 3, (0,1) 1+2 = 3,
	// (10,10) 181+181 = 362, (−1,0) 1+2 = 3. Krum keeps (0,0); Multi-Krum
	// averages the four best, (0,0), (1,0), (0,1), (−1,0): (0, ¼).
	five := [][]float32{{0, 0}, {1, 0}, {0, 1}, {10, 10}, {-1, 0}}
	Krum{F: 1}.Aggregate(dst, five, nil, 0)
	near(t, "krum", dst, []float32{0, 0}, 1e-6)
	Krum{F: 1, Multi: true}.Aggregate(dst, five, nil, 0)
	near(t, "multi-krum", dst, []float32{0, 0.25}, 1e-6)
	// Clipped gossip with τ = 1 from x0 = (0,0) and one neighbour at (3,4)
	// (distance 5), weight 1/2: x0 moves by ½·(3,4)/5.
	if err := (ClippedGossip{Tau: 1}).Aggregate(dst, [][]float32{{0, 0}, {3, 4}}, []float64{0.5, 0.5}, 0); err != nil {
		t.Fatal(err)
	}
	near(t, "clipped gossip", dst, []float32{0.3, 0.4}, 1e-6)
	// Without clipping (τ large) it is the weighted mean.
	ClippedGossip{Tau: 100}.Aggregate(dst, [][]float32{{0, 0}, {3, 4}}, []float64{0.5, 0.5}, 0)
	near(t, "clipped gossip, τ large", dst, []float32{1.5, 2}, 1e-6)
}

func TestRobustRulesRefuse(t *testing.T) {
	dst := make([]float32, 2)
	two := [][]float32{{1, 2}, {3, 4}}
	for _, c := range []struct {
		a    Aggregator
		self int
	}{{TrimmedMean{Trim: 1}, 0}, {Krum{F: 1}, 0}, {Krum{F: 1, Multi: true}, 0}, {ClippedGossip{}, -1}} {
		if err := c.a.Aggregate(dst, two, []float64{0.5, 0.5}, c.self); !errors.Is(err, ErrAggregate) {
			t.Errorf("%s with 2 inputs: %v", c.a.Name(), err)
		}
	}
	if err := (Median{}).Aggregate(dst, [][]float32{{1}}, nil, 0); !errors.Is(err, ErrAggregate) {
		t.Errorf("wrong length accepted: %v", err)
	}
}

func TestParseAggregator(t *testing.T) {
	for spec, want := range map[string]string{"mean": "mean", "": "mean", "median": "median", "trimmed:2": "trimmed:2",
		"krum:1": "krum:1", "multikrum:2": "multikrum:2", "clipped": "clipped", "clipped:0.5": "clipped:0.5"} {
		a, err := ParseAggregator(spec)
		if err != nil || a.Name() != want {
			t.Errorf("%q: %v, %v", spec, a, err)
		}
	}
	for _, bad := range []string{"max", "trimmed", "trimmed:-1", "krum:x", "multikrum", "multikrum:-1", "clipped:0", "clipped:-1", "median:3", "mean:1"} {
		if _, err := ParseAggregator(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestCheck: Check gives the error each robust rule's Aggregate gives,
// word for word, or nil where it combines, over counts of inputs,
// weights and selves that pass and fail, without combining anything.
func TestCheck(t *testing.T) {
	rules := []Aggregator{Median{}, TrimmedMean{Trim: 1}, TrimmedMean{Trim: 2}, TrimmedMean{Trim: -1}, Krum{F: 1}, Krum{F: 1, Multi: true}, ClippedGossip{}, ClippedGossip{Tau: 0.5}, ClippedWindow{Pulls: 1}, ClippedWindow{Pulls: 2}, ClippedWindow{Tau: 0.5, Pulls: 2}, ClippedWindow{Pulls: -1}}
	weights := [][]float64{nil, {1}, {1, 1}, {0.5, 0.25, 0.25}, {1, -1, 1}, {0, 0, 0}, {1, math.NaN(), 1}, {1, 1, 1, 1, 1}}
	tried, failed := 0, 0
	for _, a := range rules {
		if !Checked(a) {
			t.Fatalf("Checked(%s) = false", a.Name())
		}
		for n := range 6 {
			for _, ws := range weights {
				for _, self := range []int{-1, 0, 2} {
					xs := make([][]float32, n)
					for i := range xs {
						xs[i] = []float32{float32(i), 1, -float32(i)}
					}
					want := a.Aggregate(make([]float32, 3), xs, ws, self)
					got := Check(a, n, ws, self)
					if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
						t.Fatalf("%s, %d inputs, weights %v, self %d: Check = %v, Aggregate = %v", a.Name(), n, ws, self, got, want)
					}
					tried++
					if want != nil {
						failed++
					}
				}
			}
		}
	}
	if failed == 0 || failed == tried {
		t.Fatalf("%d of %d cases failed: the cases test nothing", failed, tried)
	}
	if Checked(WeightedMean{}) {
		t.Fatal("Checked(mean) = true")
	}
}

// TestClippedWindow: push-sum's clipped gossip is the node's own vector
// pulled by the first inputs after it, clipped to the window's median
// distance (MedianDistance, then ClippedGossip with that τ), or the
// node's own vector itself, bit for bit, where nothing pulls or the
// window sets no τ.
func TestClippedWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	vec := func() []float32 {
		v := make([]float32, 7)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		v[3] = float32(math.Copysign(0, -1)) // kept as -0 where the result is the node's own
		return v
	}
	own := vec()
	fresh, window := [][]float32{vec(), vec(), own}, [][]float32{vec(), vec(), vec()}
	combined := 0
	for _, tau := range []float64{0, 0.5} {
		for p := range len(fresh) + 1 {
			for w := range len(window) + 1 {
				for _, same := range []bool{false, true} { // a window at distance 0 sets τ 0
					win := window[:w]
					if same {
						win = [][]float32{own, own, own}[:w]
					}
					xs := append(append([][]float32{own}, fresh[:p]...), win...)
					ws := []float64{1}
					for j := range p {
						ws = append(ws, 0.25*float64(j+1))
					}
					ws = append(ws, make([]float64, w)...)
					got := make([]float32, len(own))
					if err := (ClippedWindow{Tau: tau, Pulls: p}).Aggregate(got, xs, ws, 0); err != nil {
						t.Fatal(err)
					}
					want := slices.Clone(own)
					if tc := tau; p > 0 && (tc > 0 || w > 0) {
						if tc == 0 {
							tc = MedianDistance(own, win)
						}
						if tc != 0 {
							if err := (ClippedGossip{Tau: tc}).Aggregate(want, xs[:1+p], ws[:1+p], 0); err != nil {
								t.Fatal(err)
							}
							combined++
						}
					}
					for k := range want {
						if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
							t.Fatalf("τ %v, %d pulls, window of %d (at distance 0: %v): got %v, want %v", tau, p, w, same, got, want)
						}
					}
				}
			}
		}
	}
	if combined == 0 {
		t.Fatal("no case clipped anything")
	}
}
