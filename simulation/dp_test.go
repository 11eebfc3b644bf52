package simulation

import (
	"testing"

	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/privacy"
)

// TestDPSimulation: with DP-SGD every peer reports its spent ε, none beyond
// the budget; a tight budget halts peers; runs are reproducible; and
// without a budget peers still learn under noise.
func TestDPSimulation(t *testing.T) {
	for _, m := range testModels {
		t.Run(m.model, func(t *testing.T) { dpSimulation(t, m.model) })
	}
}

// dpSimulation checks DP-SGD for one model: per-example clipping, the
// accountant, budgets.
func dpSimulation(t *testing.T, mdl string) {
	base := Config{Settings: job.Settings{Model: mdl, LR: 0.5, DP: privacy.Config{Clip: 1, Noise: 1.1}}, Peers: 5, Rounds: 30, Seed: 2, EvalPeers: 5, EvalExamples: 200, FinalEvalPeers: 5}
	a, res := csvOf(t, base)
	if b, _ := csvOf(t, base); a != b {
		t.Fatal("two DP runs with one seed differ")
	}
	if len(res.DPEpsilon) != 5 || !(res.DPEpsilonMax > 0) || res.Halted != 0 {
		t.Fatalf("ε per peer %v, max %v, halted %d", res.DPEpsilon, res.DPEpsilonMax, res.Halted)
	}
	if res.FinalAccuracy < 0.7 {
		t.Fatalf("DP-SGD without a budget: accuracy %.3f", res.FinalAccuracy)
	}
	budget := base
	budget.DP.Epsilon = res.DPEpsilonMax / 2
	_, half := csvOf(t, budget)
	if half.Halted == 0 {
		t.Fatalf("a budget of half the spent ε halted no peer (max ε %v)", half.DPEpsilonMax)
	}
	for i, e := range half.DPEpsilon {
		if e > budget.DP.Epsilon {
			t.Fatalf("peer %d spent ε %v over its budget %v", i, e, budget.DP.Epsilon)
		}
	}
	bad := base
	bad.Protocol = FedAvg
	if _, err := Run(t.Context(), bad, nil); err == nil {
		t.Fatal("DP-SGD accepted for the FedAvg baseline")
	}
}

// TestRobustAggregatorSelection: D-PSGD learns with every robust rule
// and every test model on a complete graph (six inputs), and with clipped gossip on a ring. (On a ring
// the coordinate-wise median of three does not contract: a median filter
// leaves monotone sequences around the ring in place, and the replicas drift
// apart, as He et al. 2022 observe for sparse topologies.) A rule that needs
// more inputs than a node has, or a protocol or variant without robust
// merging, is refused.
func TestRobustAggregatorSelection(t *testing.T) {
	for _, m := range sweepModels() {
		// A median of CNNs learns more slowly than their mean, and at the
		// mean's rate its accuracy swings from round to round.
		rounds, lr := max(60, 3*roundsFor(m, "dpsgd")/2), m.lr
		if m.model != "softmax" {
			lr = 0.3
		}
		for _, c := range []struct{ agg, topo string }{{"median", "complete"}, {"trimmed:1", "complete"}, {"krum:1", "complete"}, {"multikrum:1", "complete"}, {"clipped", "ring"}} {
			if c.agg == "krum:1" && m.model != "softmax" {
				// Krum keeps one input: each D-PSGD step then follows one
				// peer's minibatch, and the CNN at the rate that suits
				// averaging diverges; Multi-Krum, its average of the n−F
				// best-scored inputs, is the rule for networks
				// (docs/explanation/robustness.md).
				continue
			}
			_, res := csvOf(t, Config{Settings: job.Settings{Protocol: "dpsgd", Model: m.model, Topology: c.topo, LR: lr, Aggregator: c.agg}, Peers: 6, Rounds: rounds, Seed: 1, EvalPeers: 2, EvalExamples: 100, FinalEvalPeers: 6})
			if res.FinalAccuracy < 0.8 {
				t.Errorf("%s: dpsgd on a %s graph with %s: accuracy %.3f", m.model, c.topo, c.agg, res.FinalAccuracy)
			}
		}
	}
	for _, c := range []Config{
		{Settings: job.Settings{Protocol: "dpsgd", Aggregator: "krum:1"}, Peers: 6},                     // needs 4 inputs, a ring gives 3
		{Settings: job.Settings{Protocol: "randomwalk", Variant: "rw", Aggregator: "median"}, Peers: 6}, // robust random walk merges (mu)
		{Settings: job.Settings{Protocol: "randomwalk", Compression: "subsample:0.5", Aggregator: "median"}, Peers: 6},
		{Settings: job.Settings{Protocol: "sfb", Aggregator: "median"}, Peers: 6},
		{Settings: job.Settings{Protocol: "adpsgd", Aggregator: "median"}, Peers: 6},
		{Settings: job.Settings{Protocol: "dpsgd", Aggregator: "max"}, Peers: 6},
	} {
		if _, err := Run(t.Context(), c, nil); err == nil {
			t.Errorf("%s with %s accepted", c.Protocol, c.Aggregator)
		}
	}
}

// TestAttacks: 20% bit-flip attackers wreck plain averaging on a complete
// graph while Krum (softmax) and Multi-Krum (a CNN, which Krum's single
// pick does not train) keep the honest peers learning; every attack runs,
// reproducibly, and evaluations cover honest peers only.
func TestAttacks(t *testing.T) {
	base := Config{Settings: job.Settings{Protocol: "dpsgd", Topology: "complete", LR: 0.5}, Peers: 10, Rounds: 60, Seed: 1, EvalPeers: 4, EvalExamples: 200, Byzantine: 0.2, Attack: "bitflip"}
	for _, c := range []struct {
		model, agg string
		rounds     int
	}{{"softmax", "krum:2", 60}, {"small-cnn", "multikrum:2", 150}} {
		if c.model != "softmax" && trimmed() {
			continue // two CNN runs of 150 rounds take minutes under the race detector; make kernels runs them
		}
		plain := base
		plain.Model, plain.Rounds = c.model, c.rounds
		_, mean := csvOf(t, plain)
		robust := plain
		robust.Aggregator = c.agg
		_, rob := csvOf(t, robust)
		t.Logf("%s: mean %.3f, %s %.3f", c.model, mean.FinalAccuracy, c.agg, rob.FinalAccuracy)
		if mean.ByzantinePeers != 2 || !(mean.FinalAccuracy < 0.5) || !(rob.FinalAccuracy > 0.8) {
			t.Fatalf("%s, %d attackers: mean %.3f, %s %.3f", c.model, mean.ByzantinePeers, mean.FinalAccuracy, c.agg, rob.FinalAccuracy)
		}
		if mean.EvaluatedPeers != 8 {
			t.Fatalf("%d peers evaluated, want the 8 honest ones", mean.EvaluatedPeers)
		}
	}
	for _, a := range Attacks {
		c := base
		c.Attack, c.Rounds = a, 10
		x, _ := csvOf(t, c)
		if y, _ := csvOf(t, c); x != y {
			t.Fatalf("%s: two runs differ", a)
		}
	}
	for _, c := range []Config{
		{Settings: job.Settings{Protocol: "dpsgd"}, Peers: 10, Byzantine: 0.5, Attack: "bitflip"},
		{Settings: job.Settings{Protocol: "dpsgd"}, Peers: 10, Byzantine: 0.1, Attack: "nonsense"},
		{Settings: job.Settings{Protocol: "sfb"}, Peers: 10, Byzantine: 0.1, Attack: "bitflip"},
	} {
		if _, err := Run(t.Context(), c, nil); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestRobustRandomWalkAndPushSum: with 20% bit-flip attackers, random walk's
// age-weighted merge and push-sum's sum are steered off while Krum and
// clipped gossip over each peer's cache of received models keep the honest
// peers learning. Softmax only: robust merges over a cache do not train a
// CNN yet (docs/explanation/robustness.md).
func TestRobustRandomWalkAndPushSum(t *testing.T) {
	// Floors: robust push-sum learns more slowly (its window holds stale
	// de-biased models) than robust random walk.
	for proto, floor := range map[string]float64{"randomwalk": 0.8, "pushsum": 0.45} {
		base := Config{Settings: job.Settings{Protocol: proto, LR: 0.5}, Peers: 20, Rounds: 60, Seed: 1, EvalPeers: 4, EvalExamples: 200, Byzantine: 0.2, Attack: "bitflip"}
		_, mean := csvOf(t, base)
		for _, agg := range []string{"krum:4", "clipped"} {
			c := base
			c.Aggregator = agg
			_, robust := csvOf(t, c)
			t.Logf("%s: mean %.3f, %s %.3f", proto, mean.FinalAccuracy, agg, robust.FinalAccuracy)
			// Margin: with Cyclon sampling the plain mean holds up better
			// (0.666 against 0.858 for random walk; it was lower under
			// Newscast), so 0.15 rather than 0.2.
			if robust.FinalAccuracy < mean.FinalAccuracy+0.15 || robust.FinalAccuracy < floor {
				t.Errorf("%s under bit-flip: %s %.3f, mean %.3f", proto, agg, robust.FinalAccuracy, mean.FinalAccuracy)
			}
		}
	}
	// A CNN: clipped random walk is the plain walk's merge with the pull
	// bounded, so the walk carries its progress on and learns as the
	// plain walk does without attackers (a robust aggregate of the
	// cache, as median and Krum take, undoes a CNN's training: 0.20;
	// under bit-flip no rule saves a CNN: docs/explanation/robustness.md).
	// Push-sum with clipped gossip likewise averages the estimate with
	// the fresh models only (push-sum learns a CNN more slowly: 0.58 in
	// 60 rounds; clipped 0.46, against 0.13 when it clipped toward the
	// whole window).
	if trimmed() {
		return // 4 CNN runs of 60 rounds take minutes under the race detector; make kernels runs them
	}
	for proto, c := range map[string]struct{ floor, margin float64 }{"randomwalk": {0.85, 0.05}, "pushsum": {0.35, 0.2}} {
		cnn := Config{Settings: job.Settings{Protocol: proto, LR: 0.5, Model: "small-cnn"}, Peers: 20, Rounds: 60, Seed: 1, EvalPeers: 4, EvalExamples: 200}
		_, mean := csvOf(t, cnn)
		cnn.Aggregator = "clipped"
		_, clipped := csvOf(t, cnn)
		t.Logf("small-cnn, %s: mean %.3f, clipped %.3f", proto, mean.FinalAccuracy, clipped.FinalAccuracy)
		if clipped.FinalAccuracy < c.floor || clipped.FinalAccuracy < mean.FinalAccuracy-c.margin {
			t.Errorf("small-cnn, %s: clipped %.3f, mean %.3f", proto, clipped.FinalAccuracy, mean.FinalAccuracy)
		}
	}
}
