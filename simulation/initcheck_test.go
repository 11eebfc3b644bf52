package simulation

import (
	"context"
	"strings"
	"testing"
)

// Every run of the simulator's tests fails if it wrote the initial model
// its peers share (checkInit).
func init() { testInitCheck = true }

// TestInitCheck: a run whose shared initial model changed fails, naming
// it; the same run untouched passes.
func TestInitCheck(t *testing.T) {
	c := Config{Peers: 6, Rounds: 2, Seed: 1, EvalPeers: 2, EvalExamples: 100, FinalEvalPeers: 2}
	if _, err := Run(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}
	afterRun = func(s *sim) { s.init[3]++ }
	defer func() { afterRun = nil }()
	if _, err := Run(context.Background(), c, nil); err == nil || !strings.Contains(err.Error(), "shared initial model was written: [3]") {
		t.Fatalf("a run that wrote its initial model: %v", err)
	}
}
