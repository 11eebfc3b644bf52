package simulation

import (
	"testing"

	"github.com/gossipd/gossipd/privacy"
)

// TestDPSimulation: with DP-SGD every peer reports its spent ε, none beyond
// the budget; a tight budget halts peers; runs are reproducible; and
// without a budget peers still learn under noise.
func TestDPSimulation(t *testing.T) {
	base := Config{Peers: 5, Rounds: 30, Seed: 2, LR: 0.5, EvalPeers: 5, EvalExamples: 200, FinalEvalPeers: 5,
		DP: privacy.Config{Clip: 1, Noise: 1.1}}
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
