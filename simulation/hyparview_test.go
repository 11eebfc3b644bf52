package simulation

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
)

// viewCheck is what a run's HyParView views look like at its end, over the
// peers online then.
type viewCheck struct {
	live                 int
	minActive, maxActive int
	isolated             int // live peers with an empty active view
	asymmetric           int // links one live end holds and the other not
	toDead               int // active entries naming a peer that is offline
}

func checkViews(s *sim) viewCheck {
	c := viewCheck{minActive: 1 << 30}
	for _, p := range s.peers {
		if !p.online {
			continue
		}
		c.live++
		a := p.Core().ViewMembers()
		c.minActive, c.maxActive = min(c.minActive, len(a)), max(c.maxActive, len(a))
		if len(a) == 0 {
			c.isolated++
		}
		for _, q := range a {
			j, ok := s.index(q)
			if !ok {
				panic(fmt.Sprintf("%s's active view names %q, no peer of the run", p.ID(), q))
			}
			other := s.peers[j]
			if !other.online {
				c.toDead++
				continue
			}
			if !slices.Contains(other.Core().ViewMembers(), p.ID()) {
				c.asymmetric++
			}
		}
	}
	return c
}

// TestHyParViewViews: 600 random-walk peers join through a few random
// contacts each, all at once, under HyParView; after 20 rounds every
// active view is full or nearly (bounded by 8, at least 4), links are
// symmetric, and every peer received models. Then 30% of the peers die at
// once (round 10 of a second run): 20 rounds later no survivor is
// isolated, no active view names a dead peer, views are bounded, at
// least half full (a view below half splits a full view's link) and
// symmetric, and every survivor keeps receiving models.
func TestHyParViewViews(t *testing.T) {
	const peers, rounds = 600, 30
	base := Config{Data: job.Data{Partition: "iid"}, Peers: peers, Rounds: rounds,
		EvalPeers: 1, FinalEvalPeers: 1, EvalEvery: rounds, Sampling: gossip.SamplingHyParView, Jitter: 0.1}
	run := func(cfg Config) (*sim, *Result) {
		var s *sim
		afterRun = func(x *sim) { s = x }
		defer func() { afterRun = nil }()
		res, err := Run(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s, res
	}
	s, res := run(base)
	c := checkViews(s)
	calm := c
	if c.isolated > 0 || c.asymmetric > 0 || c.maxActive > gossip.DefaultActiveView || c.minActive < 4 {
		t.Errorf("no failures: %+v; want no isolated peer, symmetric links, active views of 4…%d", c, gossip.DefaultActiveView)
	}
	if res.Reach.PeersNeverReceived > 0 || res.Reach.ModelsReceived.Min < 5 {
		t.Errorf("no failures: reach %+v, want every peer to receive at least 5 models", res.Reach)
	}

	// 30% die at once, at 10 s (round 10): the trace keeps them online
	// until then; the others are not in it, so stay online.
	cfg := base
	dead := peers * 3 / 10
	for i := 0; i < dead; i++ {
		cfg.ChurnTrace = append(cfg.ChurnTrace, Interval{Peer: i * peers / dead, Start: 0, End: 10 * time.Second})
	}
	s, res = run(cfg)
	c = checkViews(s)
	if c.live != peers-dead {
		t.Fatalf("%d peers online at the end, want %d", c.live, peers-dead)
	}
	if c.isolated > 0 || c.toDead > 0 || c.asymmetric > 0 || c.maxActive > gossip.DefaultActiveView || c.minActive < gossip.DefaultActiveView/2 {
		t.Errorf("after 30%% died: %+v; want no isolated survivor, no dead neighbour, symmetric links, active views of %d…%d", c, gossip.DefaultActiveView/2, gossip.DefaultActiveView)
	}
	if res.Reach.PeersNeverReceived > 0 || res.Reach.PeersInNoView > 0 {
		t.Errorf("after 30%% died: reach over the survivors %+v, want every one reached and in a view", res.Reach)
	}
	t.Logf("no failures: %+v; after 30%% died: %+v; survivors' reach %+v, in-degree %+v", calm, c, res.Reach, *res.Reach.ViewInDegree)
}

// TestDPSGDOverViews: D-PSGD, AD-PSGD and push-sum under HyParView mix
// with each peer's active view: at the end every peer's neighbours are
// exactly its view, links are symmetric, D-PSGD learns as on a static
// random 8-regular graph of the same size (within 5 points), and
// push-sum's weights, with the shares still in flight, sum to the peers'
// number.
func TestDPSGDOverViews(t *testing.T) {
	base := Config{Data: job.Data{Dataset: "fashion-mnist", Partition: "iid"}, Peers: 100, Rounds: 20, EvalPeers: 10, FinalEvalPeers: 50, EvalEvery: 20, Jitter: 0.1}
	for _, proto := range []string{gossip.DPSGD, gossip.ADPSGD, gossip.PushSum} {
		cfg := base
		cfg.Protocol, cfg.Sampling = proto, gossip.SamplingHyParView
		var s *sim
		afterRun = func(x *sim) { s = x }
		res, err := Run(context.Background(), cfg, nil)
		afterRun = nil
		if err != nil {
			t.Fatal(err)
		}
		c := checkViews(s)
		if c.isolated > 0 || c.asymmetric > 0 || c.maxActive > gossip.DefaultActiveView || c.minActive < 2 {
			t.Errorf("%s: %+v; want symmetric views of 2…%d", proto, c, gossip.DefaultActiveView)
		}
		for _, p := range s.peers {
			var nbs []gossip.PeerID
			for _, nb := range p.Core().Config().Neighbors {
				nbs = append(nbs, nb.ID)
			}
			slices.Sort(nbs)
			if !slices.Equal(nbs, p.Core().ViewMembers()) {
				t.Fatalf("%s: %s mixes with %v, its view is %v", proto, p.ID(), nbs, p.Core().ViewMembers())
			}
		}
		if proto == gossip.PushSum {
			sum := massInFlight(s)
			if math.Abs(sum-float64(cfg.Peers)) > 1e-6 {
				t.Errorf("push-sum over views: weights and shares in flight sum to %.9g, want %d", sum, cfg.Peers)
			}
		}
		if proto != gossip.DPSGD {
			continue
		}
		static := base
		static.Protocol, static.Topology = gossip.DPSGD, "regular:8"
		ref, err := Run(context.Background(), static, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.FinalAccuracy < ref.FinalAccuracy-0.05 {
			t.Errorf("D-PSGD over views %.4f, on a static 8-regular graph %.4f", res.FinalAccuracy, ref.FinalAccuracy)
		}
		t.Logf("D-PSGD: over HyParView views %.4f, static 8-regular %.4f", res.FinalAccuracy, ref.FinalAccuracy)
	}
}

// TestSFBBound: SFB, which sends every update to every peer, refuses a
// job beyond gossip.SFBMaxPeers and names the bound and what to use.
func TestSFBBound(t *testing.T) {
	cfg := Config{Peers: gossip.SFBMaxPeers + 1, Rounds: 1}
	cfg.Protocol = gossip.SFB
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(gossip.SFBMaxPeers)) || !strings.Contains(err.Error(), "hyparview") {
		t.Errorf("sfb with %d peers: %v, want a refusal naming the bound of %d and hyparview", cfg.Peers, err, gossip.SFBMaxPeers)
	}
	cfg.Peers = gossip.SFBMaxPeers
	if err := cfg.Validate(); err != nil {
		t.Errorf("sfb with %d peers: %v", cfg.Peers, err)
	}
}

// TestGoSGDOverViews: GoSGD pushes to one peer of its view each round,
// over Cyclon and over HyParView: every peer receives shares, the weights
// with the shares in flight sum to the peers' number, and it learns as
// push-sum does on its exponential graph (within 5 points).
func TestGoSGDOverViews(t *testing.T) {
	base := Config{Data: job.Data{Dataset: "fashion-mnist", Partition: "iid"}, Peers: 100, Rounds: 20, EvalPeers: 10, FinalEvalPeers: 50, EvalEvery: 20, Jitter: 0.1}
	ref := base
	ref.Protocol = gossip.PushSum
	want, err := Run(context.Background(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sampling := range []string{gossip.SamplingCyclon, gossip.SamplingHyParView} {
		cfg := base
		cfg.Protocol, cfg.Sampling = gossip.GoSGD, sampling
		var s *sim
		afterRun = func(x *sim) { s = x }
		res, err := Run(context.Background(), cfg, nil)
		afterRun = nil
		if err != nil {
			t.Fatal(err)
		}
		if res.Reach.PeersNeverReceived != 0 {
			t.Errorf("gosgd over %s: reach %+v, want every peer to receive shares", sampling, res.Reach)
		}
		sum := massInFlight(s)
		if math.Abs(sum-float64(cfg.Peers)) > 1e-6 {
			t.Errorf("gosgd over %s: weights and shares in flight sum to %.9g, want %d", sampling, sum, cfg.Peers)
		}
		if res.FinalAccuracy < want.FinalAccuracy-0.05 {
			t.Errorf("gosgd over %s: %.4f, push-sum on its exponential graph %.4f", sampling, res.FinalAccuracy, want.FinalAccuracy)
		}
		t.Logf("gosgd over %s %.4f, push-sum %.4f", sampling, res.FinalAccuracy, want.FinalAccuracy)
	}
}

// massInFlight sums the peers' push-sum weights and the weights of the
// shares still to be delivered.
func massInFlight(s *sim) float64 {
	var sum float64
	for _, p := range s.peers {
		sum += p.Core().PushSumWeight()
	}
	s.q.each(func(e *event) {
		if (e.kind == evDeliver || e.kind == evSized) && e.orig != nil && e.orig.Kind == gossip.KindPushSum {
			sum += e.orig.Weight
		}
	})
	return sum
}
