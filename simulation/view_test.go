package simulation

import (
	"context"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
)

// TestViewInDegree: with Cyclon-style peer sampling at 2,000 peers, after
// 20 rounds every peer is in at least five others' views (the view size
// is 20) and has received and merged a model. The first policy (Newscast,
// keep the youngest) left 8% of 3,000 peers in no view and some with the
// initial model. The run's summary (Result.Reach) reports the same
// figures as the peers' own views and counters.
func TestViewInDegree(t *testing.T) {
	cfg := Config{Data: job.Data{Dataset: "digits", Partition: "sample:4"}, Peers: 2000, Rounds: 20, EvalPeers: 1, FinalEvalPeers: 1, EvalEvery: 20}
	var s *sim
	afterRun = func(x *sim) { s = x }
	defer func() { afterRun = nil }()
	res, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	indeg := map[string]int{}
	for _, p := range s.peers {
		for _, m := range p.Core().ViewMembers() {
			indeg[string(m)]++
		}
	}
	low, never, noModel := 0, 0, 0
	least := len(s.peers)
	var received uint64
	for _, p := range s.peers {
		d := indeg[string(p.ID())]
		least = min(least, d)
		if d < 5 {
			low++
		}
		if p.Core().Updates() == 0 {
			never++
		}
		if p.modelsIn == 0 {
			noModel++
		}
		received += p.modelsIn
	}
	if low > 0 || never > 0 || noModel > 0 {
		t.Errorf("%d of %d peers are in fewer than 5 views (least: %d); %d never merged a model, %d never received one", low, len(s.peers), least, never, noModel)
	}
	r := res.Reach
	if r.ViewInDegree == nil || r.ViewInDegree.Min != float64(least) || r.PeersInNoView != 0 || r.PeersNeverReceived != noModel {
		t.Errorf("summary: %+v, in-degree %+v; want least in-degree %d, none in no view, %d never received", r, r.ViewInDegree, least, noModel)
	}
	if mean := float64(received) / float64(len(s.peers)); r.ModelsReceived.Mean != mean || r.ModelsReceived.Min > r.ModelsReceived.P50 || r.ModelsReceived.P50 > r.ModelsReceived.Max {
		t.Errorf("models received %+v, want mean %g and min ≤ median ≤ max", r.ModelsReceived, mean)
	}
	t.Logf("least in-degree %d (view size 20); models received %+v", least, r.ModelsReceived)
}

// TestReachWithoutView: under oracle sampling there is no view to report;
// two peers that gossip for 5 rounds each receive models, and the count
// is the messages that carried them.
func TestReachWithoutView(t *testing.T) {
	res, err := Run(context.Background(), Config{Data: job.Data{Dataset: "digits"}, Peers: 2, Rounds: 5, Sampling: gossip.SamplingOracle}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Reach
	if r.ViewInDegree != nil || r.PeersNeverReceived != 0 || r.ModelsReceived.Min < 1 {
		t.Errorf("two peers, oracle sampling: reach %+v, want no view and both reached", r)
	}
	if total := 2 * r.ModelsReceived.Mean; total > float64(res.Messages) {
		t.Errorf("%g models received, more than the %d messages sent", total, res.Messages)
	}
}

// TestSpreadOf: nearest-rank percentiles over a known set.
func TestSpreadOf(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i) // 100 … 1, unsorted
	}
	got := spreadOf(xs)
	want := Spread{Min: 1, P1: 1, P10: 10, P50: 50, P90: 90, Max: 100, Mean: 50.5}
	if got != want {
		t.Errorf("spread %+v, want %+v", got, want)
	}
	if spreadOf(nil) != (Spread{}) {
		t.Error("spread of nothing is not zero")
	}
}
