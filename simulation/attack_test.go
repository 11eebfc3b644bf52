package simulation

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// TestNoiseMaker: the gaussian attack's k-th vector is the k-th PCG
// stream's draws whichever goroutine made it, two makers of one seed give
// the same vectors in the same order, a shorter message takes the first
// values, a longer one the same stream drawn further, and the sums given
// are merge.SumSquares's.
func TestNoiseMaker(t *testing.T) {
	const n, seed = 1000, 42
	a, b := newNoiseMaker(n, seed), newNoiseMaker(n, seed)
	defer a.close()
	defer b.close()
	for k := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, k))
		want := make([]float32, n+5)
		for i := range want {
			want[i] = float32(rng.NormFloat64())
		}
		size := n
		switch k % 3 {
		case 1:
			size = n / 2
		case 2:
			size = n + 5
		}
		x, ss := a.get(size)
		y, _ := b.get(size)
		if !slices.Equal(x, want[:size]) || !slices.Equal(y, x) {
			t.Fatalf("vector %d of %d values: not the stream's draws", k, size)
		}
		if (ss != nil) != (size == n) {
			t.Fatalf("vector %d of %d values: sum given %v, want one only for whole vectors", k, size, ss != nil)
		}
		if ss != nil && ss() != merge.SumSquares(x) {
			t.Fatalf("vector %d: sum %v, want %v", k, ss(), merge.SumSquares(x))
		}
	}
}

// TestBitflipCoresThatMix: where the cores mix their models themselves
// (an outer optimizer) though the run has a mixer, a bitflip attacker's
// −x is made on the host from the values of what it sent, so a run on a
// device gives the CPU's numbers; and through the wire codec, which
// encodes the attacker's vector, too.
func TestBitflipCoresThatMix(t *testing.T) {
	for _, c := range []Config{
		{Settings: job.Settings{Protocol: gossip.DPSGD, LocalSteps: 3}},
		{Settings: job.Settings{Protocol: gossip.DPSGD}, Codec: true},
	} {
		c.Peers, c.Rounds, c.Seed, c.EvalPeers, c.EvalExamples, c.FinalEvalPeers, c.PeerBatch = 10, 4, 3, 4, 200, 10, 4
		c.Byzantine, c.Attack, c.Device = 0.2, "bitflip", "cpu"
		want, _ := csvOf(t, c)
		testDevice = backendtest.NewDevice()
		c.Device = "cuda"
		got, _ := csvOf(t, c)
		testDevice = nil
		if got != want {
			t.Fatalf("local steps %d, codec %v: on the device\n%s\non the CPU\n%s", c.LocalSteps, c.Codec, got, want)
		}
	}
}

// TestMomentsPerPeriod: ipm's and alie's honest moments are taken once
// per period Δ, shared by the period's other attacking messages, and
// every period that attacks takes its own (at most rounds + 1 of them).
func TestMomentsPerPeriod(t *testing.T) {
	for _, proto := range []string{gossip.RandomWalk, gossip.DPSGD} {
		c := Config{Settings: job.Settings{Protocol: proto}, Peers: 20, Rounds: 6, Seed: 3, EvalPeers: 4, EvalExamples: 100, Byzantine: 0.2, Attack: "alie"}
		var asked, taken int
		afterRun = func(s *sim) { asked, taken = s.adv.asked, s.adv.taken }
		defer func() { afterRun = nil }()
		csvOf(t, c)
		if taken < c.Rounds || taken > c.Rounds+1 || asked < 3*taken {
			t.Errorf("%s: %d attacking messages took the moments %d times, want once in each of %d or %d periods", proto, asked, taken, c.Rounds, c.Rounds+1)
		}
	}
}
