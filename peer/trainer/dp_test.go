package trainer

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/privacy"
)

func dpSetup(t *testing.T, n int, dp privacy.Config, seed uint64) *Trainer {
	base, _ := setup(t, n)
	tr, err := New(base.Workspace, base.data, rand.New(rand.NewPCG(5, 5)), Config{Batch: 8, LR: 0.1, DP: dp, DPSource: privacy.NewSeededSourceForSimulation(seed)})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestDPClipping: with (almost) no noise, a DP gradient is the sum of
// per-example gradients each clipped to C, over the expected lot size: its
// norm is at most lot·C/Batch, and far below the unclipped gradient's.
func TestDPClipping(t *testing.T) {
	const C = 0.01
	tr := dpSetup(t, 50, privacy.Config{Clip: C, Noise: 1e-12}, 1)
	p := slices.Clone(tr.model.Params())
	lots := 0
	for k := 0; k < 200; k++ {
		r, err := tr.Run(&gossip.TrainRequest{ID: 1, Op: gossip.OpGradient, Params: slices.Clone(p)})
		if err != nil {
			t.Fatal(err)
		}
		var ss float64
		for _, v := range r.Grad {
			ss += float64(v) * float64(v)
		}
		if n := math.Sqrt(ss); n > float64(r.Examples)*C/8*(1+1e-4) {
			t.Fatalf("lot of %d: gradient norm %v exceeds %v", r.Examples, n, float64(r.Examples)*C/8)
		}
		lots += r.Examples
	}
	// Poisson sampling with rate 8/50: the mean lot is 8 (±0.2 for 200
	// steps at 4 standard errors).
	if mean := float64(lots) / 200; math.Abs(mean-8) > 4*math.Sqrt(8*(1-8.0/50)/200) {
		t.Fatalf("mean lot %v, want 8", mean)
	}
	if _, err := tr.Run(&gossip.TrainRequest{ID: 2, Op: gossip.OpFactors, Params: slices.Clone(p), FactorLayers: []string{"fc1.weight"}}); err == nil {
		t.Fatal("DP-SGD returned sufficient factors")
	}
}

// TestDPNoise: the noise has standard deviation σ·C/Batch per coordinate.
func TestDPNoise(t *testing.T) {
	const C, sigma = 1e-6, 3.0 // clipped signal ≤ lot·1e-6: negligible
	tr := dpSetup(t, 50, privacy.Config{Clip: C, Noise: sigma}, 2)
	p := slices.Clone(tr.model.Params())
	var ss float64
	n := 0
	for k := 0; k < 50; k++ {
		r, _ := tr.Run(&gossip.TrainRequest{ID: 1, Op: gossip.OpGradient, Params: slices.Clone(p)})
		for _, v := range r.Grad {
			ss += float64(v) * float64(v)
			n++
		}
	}
	std, want := math.Sqrt(ss/float64(n)), sigma*C/8
	if math.Abs(std/want-1) > 0.05 {
		t.Fatalf("noise std %v, want %v", std, want)
	}
}

// TestDPSeededReproducible: the simulation source gives the same numbers
// for the same seed, and different ones for another.
func TestDPSeededReproducible(t *testing.T) {
	run := func(seed uint64) []float32 {
		tr := dpSetup(t, 30, privacy.Config{Clip: 1, Noise: 1}, seed)
		r, err := tr.Run(&gossip.TrainRequest{ID: 1, Op: gossip.OpUpdate, Params: slices.Clone(tr.model.Params()), Steps: 3})
		if err != nil {
			t.Fatal(err)
		}
		return r.Params
	}
	if a, b := run(7), run(7); !slices.Equal(a, b) {
		t.Fatal("same seed, different DP-SGD result")
	}
	if a, b := run(7), run(8); slices.Equal(a, b) {
		t.Fatal("different seeds, same DP-SGD result")
	}
}
