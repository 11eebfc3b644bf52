package peer_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/peer"
	"github.com/gossipd/gossipd/peer/trainer"
	"github.com/gossipd/gossipd/privacy"
)

// recorder is a world that records what the driver asks of it.
type recorder struct {
	p       *peer.Peer
	sent    []gossip.Message
	trains  []*gossip.TrainRequest
	commits []gossip.Commit
	rejects []string
	halt    error
}

func (r *recorder) Send(m *gossip.Message)         { r.sent = append(r.sent, *m) }
func (r *recorder) Train(req *gossip.TrainRequest) { r.trains = append(r.trains, req) }
func (r *recorder) Commit(c gossip.Commit)         { r.commits = append(r.commits, c) }
func (r *recorder) SaveAccounts(gossip.Accounts)   {}
func (r *recorder) Reject(reason string, _ gossip.PeerID, _ error) {
	r.rejects = append(r.rejects, reason)
}
func (r *recorder) Halt(err error) { r.halt = err }

// do carries out what the peer asked, in order.
func (r *recorder) do(ds []peer.Do) {
	for _, d := range ds {
		switch {
		case d.Send != nil:
			r.Send(d.Send)
		case d.Train != nil:
			r.Train(d.Train)
		case d.Commit != nil:
			r.Commit(*d.Commit)
		case d.SaveAccounts != nil:
			r.SaveAccounts(*d.SaveAccounts)
		case d.Reject != nil:
			r.Reject(d.Reject.Reason, d.Reject.From, d.Reject.Err)
		case d.Halt != nil:
			r.Halt(d.Halt)
		}
	}
}

// got carries out what a received message asks and says what became of it.
func (r *recorder) got(rc peer.Received) (stepped, kept bool) {
	r.do(rc.Do)
	return rc.Stepped, rc.Kept
}

var spec = model.Spec{Kind: model.Softmax, Inputs: 3, Classes: 2} // 8 parameters

func newTrainer(t *testing.T) *trainer.Trainer {
	t.Helper()
	m, err := model.New(spec, model.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	X := make([]float32, 20*3)
	Y := make([]int32, 20)
	idx := make([]int, 20)
	for i := range Y {
		Y[i], idx[i] = int32(i%2), i
		X[3*i+i%3] = 1
	}
	tr, err := trainer.New(trainer.NewWorkspace(m), &trainer.Data{X: X, Y: Y, D: 3, Idx: idx}, rand.New(rand.NewPCG(1, 2)), trainer.Config{Batch: 20})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func newPeer(t *testing.T, c gossip.Config, mod func(*peer.Config)) (*peer.Peer, *recorder) {
	t.Helper()
	c.Spec, c.Init, c.Rand = spec, make([]float32, 8), rand.New(rand.NewPCG(1, 1))
	pc := peer.Config{Core: c, Trainer: newTrainer(t), Job: [32]byte{7}}
	if mod != nil {
		mod(&pc)
	}
	w := &recorder{}
	p, err := peer.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	w.p = p
	return p, w
}

func encode(t *testing.T, m *gossip.Message) []byte {
	t.Helper()
	b, err := peer.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var snake = regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)

// TestRejectsByCode: every check of what arrives, the driver's and the
// core's, reports a snake_case code (the daemon once counted the core's
// rejects by code and the simulator by their free-text reason).
func TestRejectsByCode(t *testing.T) {
	p, w := newPeer(t, gossip.Config{ID: "me"}, func(c *peer.Config) {
		c.Members = []gossip.PeerID{"a", "b", "c", "self"}
	})
	good := func() *gossip.Message {
		return &gossip.Message{Kind: gossip.KindModel, From: "a", Params: make([]float32, 8), Age: 1}
	}
	env := func(m *gossip.Message) peer.Envelope {
		return peer.Envelope{From: "a", Job: [32]byte{7}, Kind: m.Kind, Payload: encode(t, m)}
	}
	nan := good()
	nan.Params[3] = float32(math.NaN())
	short := good()
	short.Params = short.Params[:5]
	spoof := good()
	spoof.From = "b"
	cases := []struct {
		want string
		e    peer.Envelope
	}{
		{"wrong_job", func() peer.Envelope { e := env(good()); e.Job = [32]byte{8}; return e }()},
		{"not_member", func() peer.Envelope { e := env(good()); e.From = "outsider"; return e }()},
		{"undecodable", func() peer.Envelope { e := env(good()); e.Payload = e.Payload[:20]; return e }()},
		{"undecodable", func() peer.Envelope { e := env(good()); e.Payload[30] ^= 1; return e }()}, // checksum
		{"spoofed_sender", env(spoof)},
		{"kind_mismatch", func() peer.Envelope { e := env(good()); e.Kind = gossip.KindParams; return e }()},
		{"non_finite", env(nan)},
		{"shape", env(short)},
		{"kind", env(&gossip.Message{Kind: gossip.KindParams, From: "a", Params: make([]float32, 8)})},
	}
	for _, c := range cases {
		w.rejects = nil
		w.got(p.Receive(c.e))
		if !slices.Equal(w.rejects, []string{c.want}) {
			t.Errorf("want reject %q, got %q", c.want, w.rejects)
		}
		for _, r := range w.rejects {
			if !snake.MatchString(r) {
				t.Errorf("reject reason %q is not a snake_case code", r)
			}
		}
	}
	// The in-memory path (a simulation without the codec) applies the
	// same sender checks.
	w.rejects = nil
	w.got(p.Deliver("a", spoof))
	w.got(p.Deliver("outsider", good()))
	if !slices.Equal(w.rejects, []string{"spoofed_sender", "not_member"}) {
		t.Errorf("Deliver: rejects %q", w.rejects)
	}
	// A good message reaches the core, which merges it and asks to train.
	w.rejects, w.trains = nil, nil
	if stepped, _ := w.got(p.Receive(env(good()))); !stepped || len(w.rejects) != 0 || len(w.trains) != 1 {
		t.Errorf("a good model: stepped %v, rejects %q, %d training requests", stepped, w.rejects, len(w.trains))
	}
}

// TestHaltAfterCommit: when a Ready carries both a new model and a
// training request the budget cannot pay for, the model is still
// committed before the peer halts (the daemon once skipped the commit,
// and so its checkpoint, while the simulator counted it).
func TestHaltAfterCommit(t *testing.T) {
	dp := privacy.Config{Clip: 1, Noise: 1, Delta: 1e-5}
	tr := newTrainer(t)
	probe, err := privacy.NewBudget(dp, tr.SamplingRate(), privacy.Spending{})
	if err != nil {
		t.Fatal(err)
	}
	one, _ := probe.EpsilonAfter(1)
	dp.Epsilon = one * 1.0001 // pays for one step, not two
	budget, err := privacy.NewBudget(dp, tr.SamplingRate(), privacy.Spending{})
	if err != nil {
		t.Fatal(err)
	}
	var reserved []uint64
	p, w := newPeer(t, gossip.Config{ID: "me", Protocol: gossip.DPSGD, Delta: time.Second,
		Neighbors: []gossip.Neighbor{{ID: "n", Weight: 0.5}}, SelfWeight: 0.5}, func(c *peer.Config) {
		c.Trainer, c.Budget = tr, budget
		c.Ledger = ledgerFunc(func(s privacy.Spending) error { reserved = append(reserved, s.Steps); return nil })
	})
	w.do(p.Tick(0)) // round 0: send parameters, ask for a gradient (1 step)
	if len(w.trains) != 1 || !slices.Equal(reserved, []uint64{1}) {
		t.Fatalf("round 0: %d training requests, ledger %v", len(w.trains), reserved)
	}
	r, err := p.Run(w.trains[0])
	if err != nil {
		t.Fatal(err)
	}
	w.do(p.TrainDone(r))
	// Past the deadline the round closes without the neighbour (commit)
	// and round 1 starts at once (a request the budget cannot pay).
	w.do(p.Tick(10 * time.Second))
	if len(w.commits) != 1 || !errors.Is(w.halt, peer.ErrBudgetSpent) || len(w.trains) != 1 {
		t.Fatalf("commits %d, halt %v, training requests %d: want the commit, then the halt", len(w.commits), w.halt, len(w.trains))
	}
	if !p.Core().Halted() || budget.Steps() != 1 || len(reserved) != 1 {
		t.Errorf("halted %v, steps %d, ledger %v", p.Core().Halted(), budget.Steps(), reserved)
	}
}

// TestLedgerFailureHalts: a step whose spending cannot be recorded is not
// taken.
func TestLedgerFailureHalts(t *testing.T) {
	dp := privacy.Config{Clip: 1, Noise: 1, Delta: 1e-5}
	tr := newTrainer(t)
	budget, _ := privacy.NewBudget(dp, tr.SamplingRate(), privacy.Spending{})
	disk := errors.New("disk full")
	p, w := newPeer(t, gossip.Config{ID: "me", Protocol: gossip.DPSGD,
		Neighbors: []gossip.Neighbor{{ID: "n", Weight: 0.5}}, SelfWeight: 0.5}, func(c *peer.Config) {
		c.Trainer, c.Budget = tr, budget
		c.Ledger = ledgerFunc(func(privacy.Spending) error { return disk })
	})
	w.do(p.Tick(0))
	if !errors.Is(w.halt, disk) || len(w.trains) != 0 || budget.Steps() != 0 {
		t.Errorf("halt %v, %d training requests, %d steps spent", w.halt, len(w.trains), budget.Steps())
	}
}

type ledgerFunc func(privacy.Spending) error

func (f ledgerFunc) Reserve(s privacy.Spending) error { return f(s) }

// TestEncodeBorrows: Encode lays messages out so that Receive uses their
// vectors in place, whatever the sender's name length.
func TestEncodeBorrows(t *testing.T) {
	for _, from := range []gossip.PeerID{"a", "ab", "abc", "abcd"} {
		m := &gossip.Message{Kind: gossip.KindModel, From: from, Params: []float32{1, 2, 3}}
		b := encode(t, m)
		d, err := gossip.Decode(b, gossip.DecodeLimits{Borrow: true})
		if err != nil {
			t.Fatal(err)
		}
		if !gossip.Borrows(d, b) {
			t.Errorf("from %q: the decoded vector does not borrow the encoding", from)
		}
	}
}

func TestLocalSteps(t *testing.T) {
	for _, c := range []struct{ epochs, n, batch, want int }{{1, 100, 32, 0}, {0, 100, 32, 0}, {2, 100, 32, 8}, {3, 64, 32, 6}} {
		if got := peer.LocalSteps(c.epochs, c.n, c.batch); got != c.want {
			t.Errorf("LocalSteps(%d, %d, %d) = %d, want %d", c.epochs, c.n, c.batch, got, c.want)
		}
	}
}

// TestPaused: a paused peer takes no training step and spends no privacy
// budget, yet its rounds go on (it still sends its parameters and
// averages); resumed, it trains again.
func TestPaused(t *testing.T) {
	dp := privacy.Config{Clip: 1, Noise: 1, Delta: 1e-5}
	tr := newTrainer(t)
	budget, err := privacy.NewBudget(dp, tr.SamplingRate(), privacy.Spending{})
	if err != nil {
		t.Fatal(err)
	}
	var reserved int
	p, w := newPeer(t, gossip.Config{ID: "me", Protocol: gossip.DPSGD, Delta: time.Second,
		Neighbors: []gossip.Neighbor{{ID: "n", Weight: 0.5}}, SelfWeight: 0.5}, func(c *peer.Config) {
		c.Trainer, c.Budget = tr, budget
		c.Ledger = ledgerFunc(func(privacy.Spending) error { reserved++; return nil })
	})
	p.SetPaused(true)
	if !p.Paused() {
		t.Fatal("Paused() = false after SetPaused(true)")
	}
	before := slices.Clone(p.Core().Params())
	for r := range 3 { // each deadline closes a round without the neighbour
		w.do(p.Tick(time.Duration(r) * 10 * time.Second))
	}
	if len(w.trains) != 0 || budget.Steps() != 0 || reserved != 0 {
		t.Fatalf("paused: %d training requests, %d DP steps, %d ledger entries; want none", len(w.trains), budget.Steps(), reserved)
	}
	if p.Core().Round() < 2 || len(w.sent) < 2 {
		t.Fatalf("paused: round %d, %d messages sent; the rounds should go on", p.Core().Round(), len(w.sent))
	}
	if !slices.Equal(p.Core().Params(), before) {
		t.Errorf("paused: the parameters moved without a neighbour's and without training")
	}
	p.SetPaused(false)
	w.do(p.Tick(40 * time.Second))
	if len(w.trains) != 1 || budget.Steps() != 1 {
		t.Errorf("resumed: %d training requests, %d DP steps; want 1 and 1", len(w.trains), budget.Steps())
	}
	if len(w.rejects) != 0 {
		t.Errorf("rejects %v: skipped steps are not bad training results", w.rejects)
	}
}
