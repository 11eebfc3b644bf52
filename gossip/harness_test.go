package gossip_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
)

// harness drives cores in memory: messages are delivered in FIFO order as
// soon as they are sent (or, with drop set, maybe lost), and training
// requests are answered at once by train.
type harness struct {
	t      *testing.T
	nodes  []*gossip.Core
	byID   map[gossip.PeerID]int
	now    time.Duration
	queue  []gossip.Message
	dead   map[int]bool
	train  func(i int, req *gossip.TrainRequest) *gossip.TrainResult
	drop   func(m *gossip.Message) bool
	traces []gossip.TraceEvent
	sent   int
	// skew offsets each node's clock (nodes started at different times).
	skew map[int]time.Duration
	// quiet counts training results handed over by whether the node
	// called them quiet; a quiet one that sent fails the test.
	quiet map[bool]int
	// recycle delivers each message's Params in a buffer of its own,
	// overwritten with NaN once the receiver says it did not keep it
	// (Core.Kept), as a daemon's receive buffer is reused; resolve, where
	// set, first makes a vector a Mixer holds pending (as a daemon's
	// encoder reads it).
	recycle bool
	resolve func([]float32)
	// accounts counts the Readies that carried push-sum's accounts.
	accounts int
}

func name(i int) gossip.PeerID { return gossip.PeerID(fmt.Sprintf("n%03d", i)) }

var tinySpec = model.Spec{Kind: model.Softmax, Inputs: 3, Classes: 2} // 8 parameters

func newHarness(t *testing.T, n int, mk func(i int, c *gossip.Config)) *harness {
	h := &harness{t: t, byID: map[gossip.PeerID]int{}, dead: map[int]bool{}, quiet: map[bool]int{}}
	for i := 0; i < n; i++ {
		c := gossip.Config{ID: name(i), Spec: tinySpec, Init: make([]float32, 8), Rand: rand.New(rand.NewPCG(uint64(i), 7)), Delta: time.Second}
		mk(i, &c)
		nd, err := gossip.New(c)
		if err != nil {
			t.Fatal(err)
		}
		h.nodes = append(h.nodes, nd)
		h.byID[c.ID] = i
	}
	return h
}

// zeroGrad answers every request with a zero gradient (pure averaging).
func zeroGrad(i int, req *gossip.TrainRequest) *gossip.TrainResult {
	return &gossip.TrainResult{ID: req.ID, Grad: make([]float32, len(req.Params)), Params: req.Params, Examples: 1}
}

func (h *harness) drain(i int) {
	nd := h.nodes[i]
	for nd.HasReady() {
		rd := nd.Ready()
		nd.Advance()
		h.traces = append(h.traces, rd.Trace...)
		if rd.Accounts != nil {
			h.accounts++
		}
		for _, m := range rd.Messages {
			h.sent++
			if h.drop != nil && h.drop(&m) {
				continue
			}
			h.queue = append(h.queue, m)
		}
		if rd.Train != nil {
			rd.Train.Resolve() // as a shell does first
			quiet := nd.QuietTrainDone()
			nd.TrainDone(h.train(i, rd.Train))
			if quiet && len(nd.Ready().Messages) > 0 {
				h.t.Errorf("%s sent %d messages on a training result it called quiet", nd.ID(), len(nd.Ready().Messages))
			}
			h.quiet[quiet]++
		}
	}
}

func (h *harness) deliver() {
	for len(h.queue) > 0 {
		m := h.queue[0]
		h.queue = h.queue[1:]
		if m.To == gossip.Broadcast { // one copy to every other node
			for k := range h.nodes {
				if c := m; name(k) != m.From {
					c.To = name(k)
					h.queue = append(h.queue, c)
				}
			}
			continue
		}
		j := h.byID[m.To]
		if h.dead[j] {
			continue
		}
		var buf []float32
		if h.recycle && len(m.Params) > 0 {
			if h.resolve != nil {
				h.resolve(m.Params)
			}
			buf = slices.Clone(m.Params)
			m.Params = buf
		}
		h.nodes[j].Step(&m)
		if buf != nil && !h.nodes[j].Kept() {
			for k := range buf {
				buf[k] = float32(math.NaN())
			}
		}
		h.drain(j)
	}
}

// run ticks every live node every step until the given time.
func (h *harness) run(until, step time.Duration) {
	for ; h.now <= until; h.now += step {
		for i, nd := range h.nodes {
			if h.dead[i] {
				continue
			}
			nd.Tick(h.now + h.skew[i])
			h.drain(i)
			h.deliver()
		}
	}
}

// connectAll gives every node all the others as its peers.
func (h *harness) connectAll() {
	for i, nd := range h.nodes {
		var others []gossip.PeerID
		for k := range h.nodes {
			if k != i {
				others = append(others, name(k))
			}
		}
		nd.SetPeers(others)
	}
}

func (h *harness) params() [][]float32 {
	out := make([][]float32, len(h.nodes))
	for i, nd := range h.nodes {
		out[i] = slices.Clone(nd.Params())
	}
	return out
}
