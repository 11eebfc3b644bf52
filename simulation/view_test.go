package simulation

import (
	"context"
	"testing"

	"github.com/gossipd/gossipd/job"
)

// TestViewInDegree: with Cyclon-style peer sampling at 2,000 peers, after
// 20 rounds every peer is in at least five others' views (the view size
// is 20) and has received and merged a model. The first policy (Newscast,
// keep the youngest) left 8% of 3,000 peers in no view and some with the
// initial model.
func TestViewInDegree(t *testing.T) {
	cfg := Config{Data: job.Data{Dataset: "digits", Partition: "sample:4"}, Peers: 2000, Rounds: 20, EvalPeers: 1, FinalEvalPeers: 1, EvalEvery: 20}
	var s *sim
	afterRun = func(x *sim) { s = x }
	defer func() { afterRun = nil }()
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	indeg := map[string]int{}
	for _, p := range s.peers {
		for _, m := range p.Core().ViewMembers() {
			indeg[string(m)]++
		}
	}
	low, never := 0, 0
	least := len(s.peers)
	for _, p := range s.peers {
		d := indeg[string(p.ID())]
		least = min(least, d)
		if d < 5 {
			low++
		}
		if p.Core().Updates() == 0 {
			never++
		}
	}
	if low > 0 || never > 0 {
		t.Errorf("%d of %d peers are in fewer than 5 views (least: %d); %d never merged a model", low, len(s.peers), least, never)
	}
	t.Logf("least in-degree %d (view size 20)", least)
}
