package simulation

import (
	"encoding/json"
	"math"
	"testing"
)

// TestSummaryNonFinite: a diverged run's summary is still JSON, its
// non-finite results named in non_finite.
func TestSummaryNonFinite(t *testing.T) {
	s := Summary{Protocol: "dpsgd", Result: &Result{FinalAccuracy: 0.1, FinalLoss: math.Inf(1), DPEpsilon: []float64{1, math.NaN()}}}
	b, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	nf, _ := got["non_finite"].([]any)
	if len(nf) != 2 || nf[0] != "final_loss=+Inf" || nf[1] != "dp_epsilon_per_peer[1]=NaN" || got["final_accuracy"] != 0.1 || got["final_loss"] != 0.0 {
		t.Fatalf("summary %s", b)
	}
	if math.IsInf(s.Result.FinalLoss, 1) != true {
		t.Fatal("JSON changed the result it summarises")
	}
}
