package gossip_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
)

// TestBeside: a driver that holds a quiet training result back and steps
// the shuffles and ticks the core calls beside it (StepsBeside,
// TicksBeside) before handing it over sends the same messages, in the
// same order, and leaves every node in the same state, as one that hands
// every result over at once; and it does hold some back, except where
// the hand-over is not apart (the um variant's first update, tokens'
// owed replies) or the sampling has no Cyclon view.
func TestBeside(t *testing.T) {
	tokens, err := gossip.ParseTokens("2:4")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		edit func(i int, c *gossip.Config)
		held bool // results held back beside something
	}{
		"randomwalk": {func(int, *gossip.Config) {}, true},
		"variant um": {func(_ int, c *gossip.Config) { c.Variant = "um" }, true},
		"variant rw": {func(_ int, c *gossip.Config) { c.Variant = "rw" }, true},
		"tokens":     {func(_ int, c *gossip.Config) { c.Tokens = tokens }, true},
		"oracle":     {func(_ int, c *gossip.Config) { c.Sampling = gossip.SamplingOracle }, false},
		"hyparview":  {func(_ int, c *gossip.Config) { c.Sampling = gossip.SamplingHyParView }, false},
		"dpsgd": {func(i int, c *gossip.Config) {
			c.Protocol = gossip.DPSGD
			c.Neighbors, c.SelfWeight = gossip.Ring(12).MHWeights(i, name)
		}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			strict := runBeside(t, tc.edit, false)
			beside := runBeside(t, tc.edit, true)
			if strict.besides != 0 {
				t.Fatalf("%d events stepped beside a result in strict order", strict.besides)
			}
			if tc.held != (beside.besides > 0) {
				t.Fatalf("%d events stepped beside a held result", beside.besides)
			}
			if len(strict.log) == 0 || !reflect.DeepEqual(strict.log, beside.log) {
				t.Fatalf("the messages differ: %d sent in strict order, %d beside\nfirst difference: %s", len(strict.log), len(beside.log), firstDiff(strict.log, beside.log))
			}
			if !reflect.DeepEqual(strict.end, beside.end) {
				t.Fatalf("the nodes end differently: %s", firstDiff(strict.end, beside.end))
			}
		})
	}
}

// besideRun is one run of TestBeside's driver.
type besideRun struct {
	t       *testing.T
	nodes   []*gossip.Core
	beside  bool
	held    map[int]*gossip.TrainResult
	queue   []gossip.Message
	log     []string // every message sent, in order
	besides int      // events stepped beside a held result
	end     []string // each node's state at the end
}

// runBeside runs 12 nodes for 20 s, ticking every 100 ms and delivering
// in FIFO order; beside: holding quiet results back as long as the cores
// allow.
func runBeside(t *testing.T, edit func(int, *gossip.Config), beside bool) *besideRun {
	h := newHarness(t, 12, func(i int, c *gossip.Config) { c.Jitter = 0.3; edit(i, c) })
	r := &besideRun{t: t, nodes: h.nodes, beside: beside, held: map[int]*gossip.TrainResult{}}
	h.connectAll()
	for now := time.Duration(0); now <= 20*time.Second; now += 100 * time.Millisecond {
		for i := range r.nodes {
			r.event(i, now, nil)
			for len(r.queue) > 0 {
				m := r.queue[0]
				r.queue = r.queue[1:]
				r.event(h.byID[m.To], now, &m)
			}
		}
	}
	for i := range r.nodes {
		r.handOver(i)
	}
	for _, nd := range r.nodes {
		s := nd.Snapshot()
		r.end = append(r.end, fmt.Sprintf("%s: %+v, view %v, wake %v", nd.ID(), s, nd.ViewMembers(), nd.NextWake()))
	}
	return r
}

// event ticks node i (m nil) or steps m, handing over its held result
// first unless the core takes the event beside it.
func (r *besideRun) event(i int, now time.Duration, m *gossip.Message) {
	nd := r.nodes[i]
	// A result handed over may ask for another update, held in turn.
	for r.held[i] != nil {
		if (m == nil && nd.TicksBeside(now)) || (m != nil && nd.StepsBeside(m.Kind)) {
			r.besides++
			break
		}
		r.handOver(i)
	}
	if m == nil {
		nd.Tick(now)
	} else {
		nd.Step(m)
	}
	r.drain(i)
}

func (r *besideRun) handOver(i int) {
	if res := r.held[i]; res != nil {
		delete(r.held, i)
		r.nodes[i].TrainDone(res)
		r.drain(i)
	}
}

// drain sends what node i asks to and trains at once, holding a quiet
// result back when beside.
func (r *besideRun) drain(i int) {
	nd := r.nodes[i]
	for nd.HasReady() {
		rd := nd.Ready()
		nd.Advance()
		for _, m := range rd.Messages {
			first := float32(0)
			if len(m.Params) > 0 {
				first = m.Params[0]
			}
			r.log = append(r.log, fmt.Sprintf("%s>%s %v age %v view %v params %d:%v", m.From, m.To, m.Kind, m.Age, m.View, len(m.Params), first))
			r.queue = append(r.queue, m)
		}
		if req := rd.Train; req != nil {
			req.Resolve()
			res := &gossip.TrainResult{ID: req.ID, Params: make([]float32, len(req.Params)), Grad: make([]float32, len(req.Params)), Examples: 1}
			for k, v := range req.Params {
				res.Params[k] = v*0.5 + float32(i+k)*0.01 // a new model, different for each node
			}
			if r.beside && nd.QuietTrainDone() {
				r.held[i] = res
				continue
			}
			nd.TrainDone(res)
		}
	}
}

// firstDiff describes the first entry where a and b differ.
func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("#%d: %q against %q", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d, %d)", len(a), len(b))
}
