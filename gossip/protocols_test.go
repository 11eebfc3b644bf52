package gossip_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
)

// mhMatrix builds the dense Metropolis–Hastings matrix of g.
func mhMatrix(g *gossip.Graph) *mat.SymDense {
	w := mat.NewSymDense(g.N, nil)
	for i := 0; i < g.N; i++ {
		nbrs, self := g.MHWeights(i, name)
		w.SetSym(i, i, self)
		for _, nb := range nbrs {
			var j int
			for j = 0; name(j) != nb.ID; j++ {
			}
			if w.At(i, j) != 0 && w.At(i, j) != nb.Weight {
				panic("asymmetric weights")
			}
			w.SetSym(i, j, nb.Weight)
		}
	}
	return w
}

func eigen(t *testing.T, w *mat.SymDense) []float64 {
	var es mat.EigenSym
	if !es.Factorize(w, false) {
		t.Fatal("eigendecomposition failed")
	}
	return es.Values(nil) // ascending
}

// TestMHWeights: doubly stochastic on every topology, and the ring's
// spectrum matches the published values (1 + 2cos(2πk/n))/3.
func TestMHWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, spec := range []string{"ring", "torus", "regular:3", "regular:4", "exponential", "complete"} {
		g, err := gossip.ParseTopology(spec, 16, rng)
		if err != nil {
			t.Fatal(err)
		}
		w := mhMatrix(g)
		for i := 0; i < g.N; i++ {
			row := 0.0
			for j := 0; j < g.N; j++ {
				if w.At(i, j) < 0 {
					t.Fatalf("%s: negative weight W[%d][%d]", spec, i, j)
				}
				row += w.At(i, j)
			}
			if math.Abs(row-1) > 1e-12 {
				t.Fatalf("%s: row %d sums to %v", spec, i, row)
			}
		}
	}
	for _, c := range []struct {
		n          int
		lam2, lmin float64
	}{{8, 0.80474, -1.0 / 3}, {16, 0.94925, -1.0 / 3}} {
		ev := eigen(t, mhMatrix(gossip.Ring(c.n)))
		if got := ev[len(ev)-2]; math.Abs(got-c.lam2) > 1e-5 {
			t.Errorf("ring %d: λ2 = %.6f, published %.5f", c.n, got, c.lam2)
		}
		if math.Abs(ev[len(ev)-1]-1) > 1e-12 {
			t.Errorf("ring %d: λ1 = %v", c.n, ev[len(ev)-1])
		}
		if math.Abs(ev[0]-c.lmin) > 1e-5 {
			t.Errorf("ring %d: λmin = %.6f, want %.5f", c.n, ev[0], c.lmin)
		}
	}
}

// TestDPSGDConsensusRate: with zero gradients, D-PSGD on a 16-ring is
// x ← W·x; started on W's second eigenvector, the consensus distance shrinks
// by exactly λ2² each round.
func TestDPSGDConsensusRate(t *testing.T) {
	const n = 16
	g := gossip.Ring(n)
	lam2 := (1 + 2*math.Cos(2*math.Pi/n)) / 3
	h := newHarness(t, n, func(i int, c *gossip.Config) {
		c.Protocol = gossip.DPSGD
		c.Neighbors, c.SelfWeight = g.MHWeights(i, name)
		v := float32(math.Cos(2 * math.Pi * float64(i) / n)) // eigenvector of λ2
		for k := range c.Init {
			c.Init[k] = v * float32(k+1)
		}
	})
	h.train = zeroGrad
	prev := merge.ConsensusDistance(h.params())
	for r := 1; r <= 20; r++ {
		h.run(time.Duration(r)*time.Second-time.Millisecond, time.Second)
		d := merge.ConsensusDistance(h.params())
		if ratio := d / prev; math.Abs(ratio-lam2*lam2) > 1e-4 {
			t.Fatalf("round %d: distance ratio %.6f, λ2² = %.6f", r, ratio, lam2*lam2)
		}
		prev = d
	}
	for _, nd := range h.nodes {
		if nd.Round() != 20 {
			t.Fatalf("%s at round %d, want 20", nd.ID(), nd.Round())
		}
	}
}

// ringDPSGD returns n D-PSGD peers on a ring with a 500 ms round deadline,
// zero gradients, and node i starting at the vector of all i.
func ringDPSGD(t *testing.T, n int) *harness {
	g := gossip.Ring(n)
	h := newHarness(t, n, func(i int, c *gossip.Config) {
		c.Protocol = gossip.DPSGD
		c.Neighbors, c.SelfWeight = g.MHWeights(i, name)
		c.RoundTimeout = 500 * time.Millisecond
		for k := range c.Init {
			c.Init[k] = float32(i)
		}
	})
	h.train = zeroGrad
	return h
}

// TestDPSGDDeadPeer: a dead neighbour delays rounds by the deadline only;
// the others keep averaging (renormalised) and converge among themselves.
func TestDPSGDDeadPeer(t *testing.T) {
	h := ringDPSGD(t, 6)
	h.dead[3] = true
	h.run(30*time.Second, 100*time.Millisecond)
	var live [][]float32
	for i, nd := range h.nodes {
		if i == 3 {
			continue
		}
		if nd.Round() < 29 {
			t.Fatalf("%s stalled at round %d", nd.ID(), nd.Round())
		}
		live = append(live, nd.Params())
	}
	if d := merge.ConsensusDistance(live); d > 1e-3 {
		t.Fatalf("live peers did not converge: consensus distance %v", d)
	}
	missing := 0
	for _, tr := range h.traces {
		if tr.Event == "missing" {
			missing++
		}
	}
	if missing == 0 {
		t.Fatal("no round was traced as missing the dead neighbour")
	}
}

// TestPushSumConservesAndAverages: with no drops, Σw (nodes plus messages in
// flight, which the harness delivers at once) stays n, and every estimate
// x/w converges to the average of the initial values on the directed
// exponential graph.
func TestPushSumConservesAndAverages(t *testing.T) {
	const n = 12
	g := gossip.Exponential(n)
	var want float64
	h := newHarness(t, n, func(i int, c *gossip.Config) {
		c.Protocol = gossip.PushSum
		for _, j := range g.Out[i] {
			c.Neighbors = append(c.Neighbors, gossip.Neighbor{ID: name(j), Weight: 1})
		}
		for k := range c.Init {
			c.Init[k] = float32(i*i) + float32(k)
		}
		want += float64(i * i)
	})
	want /= n
	h.train = zeroGrad
	for s := 1; s <= 60; s++ {
		h.run(time.Duration(s)*time.Second, time.Second)
		total := h.totalWeight()
		if math.Abs(total-n) > 1e-9 {
			t.Fatalf("after %d s: total weight %v, want %d", s, total, n)
		}
	}
	for _, nd := range h.nodes {
		for k, v := range nd.Params() {
			if math.Abs(float64(v)-(want+float64(k))) > 1e-3 {
				t.Fatalf("%s coordinate %d: estimate %v, average %v", nd.ID(), k, v, want+float64(k))
			}
		}
	}
}

// TestGoSGDConservesAndAverages: GoSGD, push-sum to one peer drawn from
// the sampling service each round, keeps the weights summing to the
// nodes' number after every step and takes every node's estimate to the
// average, without a topology.
func TestGoSGDConservesAndAverages(t *testing.T) {
	const n = 12
	var want float64
	var all []gossip.PeerID
	for i := 0; i < n; i++ {
		all = append(all, name(i))
	}
	h := newHarness(t, n, func(i int, c *gossip.Config) {
		c.Protocol, c.Sampling = gossip.GoSGD, gossip.SamplingOracle
		for k := range c.Init {
			c.Init[k] = float32(i*i) + float32(k)
		}
		want += float64(i * i)
	})
	for _, nd := range h.nodes {
		nd.SetPeers(all)
	}
	want /= n
	h.train = zeroGrad
	targets := map[gossip.PeerID]map[gossip.PeerID]bool{}
	h.drop = func(m *gossip.Message) bool {
		if m.Kind != gossip.KindPushSum {
			t.Fatalf("gosgd sent a %v", m.Kind)
		}
		if targets[m.From] == nil {
			targets[m.From] = map[gossip.PeerID]bool{}
		}
		targets[m.From][m.To] = true
		return false
	}
	for s := 1; s <= 120; s++ {
		h.run(time.Duration(s)*time.Second, time.Second)
		total := h.totalWeight()
		if math.Abs(total-n) > 1e-9 {
			t.Fatalf("after %d s: total weight %v, want %d", s, total, n)
		}
	}
	for _, nd := range h.nodes {
		if k := len(targets[nd.ID()]); k < n/2 {
			t.Errorf("%s pushed to %d distinct peers in 120 rounds; a random draw reaches most of %d", nd.ID(), k, n-1)
		}
		for k, v := range nd.Params() {
			if math.Abs(float64(v)-(want+float64(k))) > 1e-3 {
				t.Fatalf("%s coordinate %d: estimate %v, average %v", nd.ID(), k, v, want+float64(k))
			}
		}
	}
}

// totalWeight sums the nodes' push-sum weights.
func (h *harness) totalWeight() float64 {
	total := 0.0
	for _, nd := range h.nodes {
		total += nd.PushSumWeight()
	}
	return total
}

// TestADPSGDNoDeadlock: with a dead peer and random message loss, every live
// node keeps making updates, round after round.
func TestADPSGDNoDeadlock(t *testing.T) {
	const n = 8
	g := gossip.Ring(n)
	rng := rand.New(rand.NewPCG(3, 3))
	h := newHarness(t, n, func(i int, c *gossip.Config) {
		c.Protocol = gossip.ADPSGD
		c.Neighbors, _ = g.MHWeights(i, name)
		c.Jitter = 0.5
		for k := range c.Init {
			c.Init[k] = float32(i)
		}
	})
	h.train = zeroGrad
	h.drop = func(*gossip.Message) bool { return rng.Float64() < 0.3 }
	h.dead[5] = true
	before := make([]uint64, n)
	for window := 1; window <= 5; window++ {
		h.run(time.Duration(window*10)*time.Second, 100*time.Millisecond)
		for i, nd := range h.nodes {
			if h.dead[i] {
				continue
			}
			if nd.Updates() <= before[i] {
				t.Fatalf("window %d: %s made no update (deadlock?)", window, nd.ID())
			}
			before[i] = nd.Updates()
		}
	}
}

// TestRandomWalkAgeWeighted: an MU receiver merges by ω = a_m/(a + a_m),
// then updates; its age becomes max(age, a_m) + examples.
func TestRandomWalkAgeWeighted(t *testing.T) {
	h := newHarness(t, 2, func(i int, c *gossip.Config) {
		c.Sampling = "oracle"
		for k := range c.Init {
			c.Init[k] = float32(10 * i)
		}
	})
	var got []float32
	h.train = func(i int, req *gossip.TrainRequest) *gossip.TrainResult {
		got = append([]float32(nil), req.Params...)
		return &gossip.TrainResult{ID: req.ID, Params: req.Params, Examples: 5}
	}
	for i, nd := range h.nodes {
		nd.SetPeers([]gossip.PeerID{name(1 - i)})
	}
	// Node 1 has age 0: the first model it receives (age 0) keeps its own.
	m := gossip.Message{Kind: gossip.KindModel, From: name(0), To: name(1), Params: []float32{1, 1, 1, 1, 1, 1, 1, 1}, Age: 15}
	h.nodes[1].Tick(0)
	h.nodes[1].Step(&m)
	h.drain(1)
	// age 0 vs 15: ω = 1, the merged model is the received one.
	if got[0] != 1 || h.nodes[1].Age() != 20 {
		t.Fatalf("merge with age 0: params %v, age %v", got, h.nodes[1].Age())
	}
	m2 := m
	m2.Params = []float32{41, 41, 41, 41, 41, 41, 41, 41}
	m2.Age = 60
	h.nodes[1].Step(&m2)
	h.drain(1)
	// ω = 60/(20+60) = 0.75: 0.25·1 + 0.75·41 = 31; age max(20,60)+5.
	if math.Abs(float64(got[3])-31) > 1e-5 || h.nodes[1].Age() != 65 {
		t.Fatalf("merge: params %v, age %v; want 31s and age 65", got, h.nodes[1].Age())
	}
}

// TestInvalidMessagesDropped: wrong kind, size or non-finite values are
// traced as drops and change nothing.
func TestInvalidMessagesDropped(t *testing.T) {
	h := newHarness(t, 2, func(i int, c *gossip.Config) { c.Sampling = "oracle" })
	h.train = zeroGrad
	nd := h.nodes[0]
	nd.Tick(0)
	h.drain(0)
	nan := float32(math.NaN())
	for _, m := range []gossip.Message{
		{Kind: gossip.KindModel, From: name(1), Params: make([]float32, 7)},
		{Kind: gossip.KindModel, From: name(1), Params: []float32{0, 0, 0, nan, 0, 0, 0, 0}},
		{Kind: gossip.KindModel, From: name(1), Params: make([]float32, 8), Age: -1},
		{Kind: gossip.KindParams, From: name(1), Params: make([]float32, 8)},
		{Kind: gossip.KindModel, From: "", Params: make([]float32, 8)},
		{Kind: gossip.KindModel, From: name(0), Params: make([]float32, 8)},
		{Kind: 99, From: name(1)},
	} {
		h.traces = nil
		nd.Step(&m)
		h.drain(0)
		if len(h.traces) != 1 || h.traces[0].Event != "drop" || nd.Updates() != 0 || nd.Busy() {
			t.Fatalf("message %+v: traces %+v, updates %d", m.Kind, h.traces, nd.Updates())
		}
	}
}

// TestCompressedMessages: a job with fp16 sends packed vectors, takes
// them back as plain ones, and drops a vector packed another way, one
// that claims more values than the model has, and a plain vector.
func TestCompressedMessages(t *testing.T) {
	h := newHarness(t, 2, func(i int, c *gossip.Config) { c.Sampling, c.Quantize = "oracle", compress.Spec{Kind: compress.FP16} })
	h.train = zeroGrad
	nd := h.nodes[0]
	for i, nd := range h.nodes {
		nd.SetPeers([]gossip.PeerID{name(1 - i)})
	}
	var sent []gossip.Message
	h.drop = func(m *gossip.Message) bool {
		if m.Kind == gossip.KindModel {
			sent = append(sent, *m)
		}
		return false
	}
	h.run(5*time.Second, 100*time.Millisecond)
	h.drop = nil
	if len(sent) == 0 || sent[0].Packed == nil || sent[0].Packed.Kind != compress.FP16 || len(sent[0].Params) != 0 {
		t.Fatalf("sent %+v, want an fp16-packed model", sent)
	}
	pack := func(kind compress.Kind, n int) *compress.Payload {
		var p compress.Payload
		compress.Compress(&p, make([]float32, n), compress.Spec{Kind: kind}, rand.New(rand.NewPCG(1, 1)))
		return &p
	}
	good := gossip.Message{Kind: gossip.KindModel, From: name(1), Packed: pack(compress.FP16, 8), Age: 1}
	h.traces = nil
	nd.Step(&good)
	h.drain(0)
	if len(good.Params) != 8 || good.Packed != nil {
		t.Fatalf("an fp16 model was not unpacked: %+v", good)
	}
	for _, m := range []gossip.Message{
		{Kind: gossip.KindModel, From: name(1), Packed: pack(compress.Int8, 8), Age: 1},
		{Kind: gossip.KindModel, From: name(1), Packed: pack(compress.FP16, 9), Age: 1},
		{Kind: gossip.KindModel, From: name(1), Params: make([]float32, 8), Age: 1},
	} {
		h.traces = nil
		nd.Step(&m)
		h.drain(0)
		if len(h.traces) == 0 || h.traces[len(h.traces)-1].Event != "drop" {
			t.Fatalf("message %+v: traces %+v, want a drop", m, h.traces)
		}
	}
}

// TestDPSGDRejoin: a peer that was down for many rounds catches up with its
// neighbours' round when it returns and mixes with them again.
func TestDPSGDRejoin(t *testing.T) {
	h := ringDPSGD(t, 6)
	h.dead[2] = true
	h.run(20*time.Second, 100*time.Millisecond)
	h.dead[2] = false
	h.run(40*time.Second, 100*time.Millisecond)
	r2, r1 := h.nodes[2].Round(), h.nodes[1].Round()
	if r2+2 < r1 {
		t.Fatalf("rejoined peer at round %d, its neighbour at %d", r2, r1)
	}
	if d := merge.ConsensusDistance(h.params()); d > 1e-3 {
		t.Fatalf("rejoined peer did not mix back in: consensus distance %v", d)
	}
}

// TestPartitionedMerge: a partition message merges only its coordinates,
// with that partition's age, and updates that age.
func TestPartitionedMerge(t *testing.T) {
	h := newHarness(t, 2, func(i int, c *gossip.Config) {
		c.Sampling, c.Partitions = "oracle", 4
	})
	var got []float32
	h.train = func(i int, req *gossip.TrainRequest) *gossip.TrainResult {
		got = append([]float32(nil), req.Params...)
		return &gossip.TrainResult{ID: req.ID, Params: req.Params, Examples: 2}
	}
	nd := h.nodes[1]
	nd.Tick(0)
	h.drain(1)
	// Partition 1 of 8 coordinates: 1 and 5. Local ages are 0: ω = 1.
	nd.Step(&gossip.Message{Kind: gossip.KindModel, From: name(0), Params: []float32{4, 6}, Partition: 1, Age: 10})
	h.drain(1)
	want := []float32{0, 4, 0, 0, 0, 6, 0, 0}
	for k := range want {
		if got[k] != want[k] {
			t.Fatalf("merged %v, want %v", got, want)
		}
	}
	// Ages: partition 1 is max(0,10)+2, the others 0+2: mean 4.5.
	if nd.Age() != 4.5 {
		t.Fatalf("age %v, want 4.5", nd.Age())
	}
	for _, bad := range []gossip.Message{
		{Kind: gossip.KindModel, From: name(0), Params: []float32{1, 2}, Partition: 4},
		{Kind: gossip.KindModel, From: name(0), Params: []float32{1, 2, 3}, Partition: 1},
		{Kind: gossip.KindModel, From: name(0), Params: make([]float32, 8)},
		{Kind: gossip.KindModel, From: name(0), Params: []float32{1, 2}, Indices: []uint32{1, 5}, Partition: 1},
	} {
		h.traces = nil
		nd.Step(&bad)
		h.drain(1)
		if len(h.traces) != 1 || h.traces[0].Event != "drop" {
			t.Fatalf("%+v not dropped: %+v", bad, h.traces)
		}
	}
}

// TestSubsampledMessages: a subsampling node sends about the fraction asked
// for, in ascending order, and rejects bad index lists.
func TestSubsampledMessages(t *testing.T) {
	h := newHarness(t, 2, func(i int, c *gossip.Config) {
		c.Sampling, c.Subsample = "oracle", 0.5
		c.Spec = model.Spec{Kind: model.Softmax, Inputs: 99, Classes: 2} // 200 parameters
		c.Init = make([]float32, 200)
	})
	h.train = zeroGrad
	for i, nd := range h.nodes {
		nd.SetPeers([]gossip.PeerID{name(1 - i)})
	}
	var models []gossip.Message
	h.drop = func(m *gossip.Message) bool {
		if m.Kind == gossip.KindModel {
			models = append(models, *m)
		}
		return false
	}
	h.run(20*time.Second, time.Second)
	h.drop = nil
	if h.sent == 0 || len(models) == 0 {
		t.Fatal("nothing sent")
	}
	// A subsampled model names its coordinates by a seed: half of them,
	// as float32.
	for _, m := range models {
		if p := m.Packed; p == nil || p.Kind != compress.RandK || p.N != 200 || len(p.Values) != 100 || len(m.Params) != 0 || len(m.Indices) != 0 {
			t.Fatalf("sent %+v, want a randk payload of 100 of 200 values", m)
		}
	}
	nd := h.nodes[0]
	pack := func(kind compress.Kind, n int) *compress.Payload {
		var p compress.Payload
		compress.Compress(&p, make([]float32, n), compress.Spec{Kind: kind, Fraction: 0.5}, rand.New(rand.NewPCG(1, 1)))
		return &p
	}
	for _, tc := range []struct {
		p    *compress.Payload
		code string
	}{{pack(compress.RandKInt8, 200), "compression"}, {pack(compress.TopK, 200), "compression"}, {pack(compress.RandK, 100), "shape"}} {
		h.traces = nil
		nd.Step(&gossip.Message{Kind: gossip.KindModel, From: name(1), Packed: tc.p, Age: 1})
		h.drain(0)
		if len(h.traces) != 1 || h.traces[0].Event != "drop" || h.traces[0].Code != tc.code {
			t.Errorf("%v payload of %d in a float32 subsampling job: %+v, want a %s drop", tc.p.Kind, tc.p.N, h.traces, tc.code)
		}
	}
	// Plain indices and values (the older form) are still checked.
	for _, bad := range [][]uint32{{5, 3}, {1, 1}, {200}} {
		h.traces = nil
		nd.Step(&gossip.Message{Kind: gossip.KindModel, From: name(1), Params: make([]float32, len(bad)), Indices: bad})
		h.drain(0)
		if len(h.traces) != 1 || h.traces[0].Event != "drop" {
			t.Fatalf("indices %v not dropped: %+v", bad, h.traces)
		}
	}
	if _, err := gossip.ParseCompression("subsample:1.5"); err == nil {
		t.Fatal("subsample:1.5 accepted")
	}
	if c, err := gossip.ParseCompression("subsample:0.1+int8"); err != nil || c.Subsample != 0.1 || c.Quantize.Kind != compress.Int8 {
		t.Fatalf("subsample:0.1+int8 → %+v %v", c, err)
	}
	for _, bad := range []string{"subsample:0.1+fp16", "subsample:0.1+", "subsample:+int8"} {
		if _, err := gossip.ParseCompression(bad); !errors.Is(err, gossip.ErrConfig) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if c, err := gossip.ParseCompression("partition:8"); err != nil || c.Subsample != 0 || c.Partitions != 8 {
		t.Fatalf("partition:8 → %+v %v", c, err)
	}
	for spec, want := range map[string]compress.Kind{"fp16": compress.FP16, "int8": compress.Int8, "none": compress.None} {
		if c, err := gossip.ParseCompression(spec); err != nil || c.Quantize.Kind != want || c.Subsample != 0 || c.Partitions != 0 {
			t.Fatalf("%s → %+v %v", spec, c, err)
		}
	}
	for spec, want := range map[string]compress.Spec{"topk:0.01": {Kind: compress.TopK, Fraction: 0.01}, "randk:0.1": {Kind: compress.RandK, Fraction: 0.1}} {
		if c, err := gossip.ParseCompression(spec); err != nil || c.Sparse != want || c.Quantize.Kind != compress.None {
			t.Fatalf("%s → %+v %v", spec, c, err)
		}
	}
	if c, err := gossip.ParseCompression("topk:0.01:0.05"); err != nil || c.ConsensusStep != 0.05 || c.Sparse.Fraction != 0.01 {
		t.Fatalf("topk:0.01:0.05 → %+v %v", c, err)
	}
	for _, spec := range []string{"topk:0", "randk:2", "fp16:2", "zip", "topk:0.1:0", "topk:0.1:2", "topk:0.1:x", "randk:0.1:NaN"} {
		if _, err := gossip.ParseCompression(spec); !errors.Is(err, gossip.ErrConfig) {
			t.Fatalf("%s: err %v, want ErrConfig", spec, err)
		}
	}
}

// TestTokenAccount: with the randomized token account a node never sends
// more than one message per Δ in the long run (it earns one token per Δ and
// every send spends one or replaces saving one), yet models keep flowing;
// without it every node sends exactly once per Δ.
func TestTokenAccount(t *testing.T) {
	count := func(tokens gossip.TokenConfig) int {
		h := newHarness(t, 10, func(i int, c *gossip.Config) {
			c.Sampling, c.Tokens = "oracle", tokens
		})
		h.train = func(i int, req *gossip.TrainRequest) *gossip.TrainResult {
			return &gossip.TrainResult{ID: req.ID, Params: req.Params, Examples: 1}
		}
		var all []gossip.PeerID
		for i := range h.nodes {
			all = append(all, name(i))
		}
		for _, nd := range h.nodes {
			nd.SetPeers(all)
		}
		h.run(200*time.Second, 100*time.Millisecond)
		return h.sent
	}
	plain := count(gossip.TokenConfig{})
	if plain < 10*199 || plain > 10*201 {
		t.Fatalf("proactive: %d sends by 10 nodes in 200 s, want one per node per second", plain)
	}
	tok := count(gossip.TokenConfig{A: 2, B: 6})
	if tok > plain || tok < plain/2 {
		t.Fatalf("token account: %d sends, proactive %d", tok, plain)
	}
	if err := (&gossip.Config{ID: "x", Spec: tinySpec, Init: make([]float32, 8), Rand: rand.New(rand.NewPCG(1, 1)), Tokens: gossip.TokenConfig{A: 3, B: 2}}).Validate(); err == nil {
		t.Fatal("B < A accepted")
	}
}

// TestSnapshotResume: a node rebuilt from its snapshot has the same model,
// age, counters, push-sum weight and view.
func TestSnapshotResume(t *testing.T) {
	for _, proto := range []string{gossip.RandomWalk, gossip.PushSum} {
		g := gossip.Exponential(4)
		h := newHarness(t, 4, func(i int, c *gossip.Config) {
			c.Protocol = proto
			if proto == gossip.PushSum {
				for _, j := range g.Out[i] {
					c.Neighbors = append(c.Neighbors, gossip.Neighbor{ID: name(j), Weight: 1})
				}
			}
			for k := range c.Init {
				c.Init[k] = float32(i + k)
			}
		})
		h.train = func(i int, req *gossip.TrainRequest) *gossip.TrainResult {
			return &gossip.TrainResult{ID: req.ID, Params: req.Params, Grad: make([]float32, 8), Examples: 3}
		}
		for i, nd := range h.nodes {
			nd.SetPeers([]gossip.PeerID{name((i + 1) % 4)})
		}
		h.run(10*time.Second, 100*time.Millisecond)
		old := h.nodes[2]
		st := old.Snapshot()
		c := old.Config()
		c.Resume, c.Init = &st, nil
		nu, err := gossip.New(c)
		if err != nil {
			t.Fatal(err)
		}
		if nu.Age() != old.Age() || nu.Updates() != old.Updates() || nu.Round() != old.Round() ||
			nu.PushSumWeight() != old.PushSumWeight() || !slices.Equal(nu.Params(), old.Params()) ||
			!slices.Equal(nu.ViewMembers(), old.ViewMembers()) {
			t.Fatalf("%s: resumed node differs from the snapshot", proto)
		}
		if old.Updates() == 0 {
			t.Fatalf("%s: nothing happened before the snapshot", proto)
		}
		bad := st
		bad.Params = bad.Params[:3]
		c.Resume = &bad
		if _, err := gossip.New(c); err == nil {
			t.Fatalf("%s: wrong-size state accepted", proto)
		}
	}
}

// TestNewscastSkewedClocks: daemons' clocks start at their own start, so
// they disagree. With small views every node must still stay in others'
// views and receive models (timestamps made late starters look stale and
// dropped them from every view; ages do not).
func TestNewscastSkewedClocks(t *testing.T) {
	const n = 12
	h := newHarness(t, n, func(i int, c *gossip.Config) { c.ViewSize = 3 })
	h.train = func(i int, req *gossip.TrainRequest) *gossip.TrainResult {
		return &gossip.TrainResult{ID: req.ID, Params: req.Params, Examples: 1}
	}
	h.skew = map[int]time.Duration{}
	for i, nd := range h.nodes {
		h.skew[i] = time.Duration(n-i) * 100 * time.Second // node 11 started last
		nd.SetPeers([]gossip.PeerID{name((i + 1) % n)})
	}
	h.run(30*time.Second, 100*time.Millisecond)
	half := make([]uint64, n)
	for i, nd := range h.nodes {
		half[i] = nd.Updates()
	}
	h.run(90*time.Second, 100*time.Millisecond)
	for i, nd := range h.nodes {
		if nd.Updates() <= half[i]+10 {
			t.Fatalf("%s received %d models in the last minute: starved", nd.ID(), nd.Updates()-half[i])
		}
	}
}

// TestKept: a random-walk node that processes a model at once (merging it
// into a new training request) does not keep the message, so the caller may
// overwrite it; one that must wait for its trainer keeps the message and
// later trains on what it held.
func TestKept(t *testing.T) {
	h := newHarness(t, 2, func(i int, c *gossip.Config) { c.Sampling = "oracle"; c.Variant = "rw" })
	nd := h.nodes[1]
	nd.SetPeers([]gossip.PeerID{name(0)})
	nd.Tick(0)
	for nd.HasReady() { // a fresh node may train before anything arrives
		if rd := nd.Ready(); rd.Train != nil {
			nd.Advance()
			nd.TrainDone(&gossip.TrainResult{ID: rd.Train.ID, Params: rd.Train.Params, Examples: 1})
			continue
		}
		nd.Advance()
	}
	msg := func(v float32) *gossip.Message {
		p := make([]float32, 8)
		for k := range p {
			p[k] = v
		}
		return &gossip.Message{Kind: gossip.KindModel, From: name(0), To: name(1), Params: p, Age: 1}
	}
	m1 := msg(1)
	nd.Step(m1)
	if nd.Kept() {
		t.Fatal("a model processed at once was kept")
	}
	req := nd.Ready().Train
	if req == nil {
		t.Fatal("no training request for the received model")
	}
	nd.Advance()
	for k := range m1.Params {
		m1.Params[k] = float32(math.NaN()) // the caller reuses the buffer
	}
	if req.Params[0] != 1 {
		t.Fatalf("the request shares the released message's memory: %v", req.Params)
	}
	m2 := msg(2)
	nd.Step(m2) // the trainer is busy: m2 waits
	if !nd.Kept() {
		t.Fatal("a model waiting for the trainer was not reported kept")
	}
	nd.TrainDone(&gossip.TrainResult{ID: req.ID, Params: req.Params, Examples: 1})
	if next := nd.Ready().Train; next == nil || next.Params[0] != 2 {
		t.Fatalf("the waiting model was not trained next: %+v", next)
	}
}

// TestQuietTrainDone: a node calls its outstanding training result quiet
// (the simulator then hands it over later, on another core) only where
// handing it over sends nothing; the harness fails a quiet result that
// sends. Random walk's results are quiet unless tokens owe replies;
// D-PSGD's, which answer with the new model, never are.
func TestQuietTrainDone(t *testing.T) {
	tokens, err := gossip.ParseTokens("1:3")
	if err != nil {
		t.Fatal(err)
	}
	g := gossip.Ring(6)
	cases := []struct {
		name            string
		edit            func(i int, c *gossip.Config)
		quiet, notQuiet bool // which kinds of result must occur
	}{
		{"randomwalk", func(i int, c *gossip.Config) { c.Sampling = "oracle" }, true, false},
		{"randomwalk tokens", func(i int, c *gossip.Config) { c.Sampling, c.Tokens = "oracle", tokens }, true, true},
		{"dpsgd", func(i int, c *gossip.Config) {
			c.Protocol = gossip.DPSGD
			c.Neighbors, c.SelfWeight = g.MHWeights(i, name)
		}, false, true},
		{"randomwalk outer", func(i int, c *gossip.Config) {
			c.Sampling, c.Outer = "oracle", gossip.OuterConfig{Steps: 3}
		}, false, true},
	}
	for _, tc := range cases {
		h := newHarness(t, 6, tc.edit)
		h.train = zeroGrad
		for i, nd := range h.nodes {
			if nd.QuietTrainDone() {
				t.Fatalf("%s: node %d quiet with no request out", tc.name, i)
			}
		}
		h.connectAll()
		h.run(30*time.Second, 250*time.Millisecond)
		if (h.quiet[true] > 0) != tc.quiet || (h.quiet[false] > 0) != tc.notQuiet {
			t.Errorf("%s: %d quiet results, %d not quiet", tc.name, h.quiet[true], h.quiet[false])
		}
	}
}

// TestDPSGDSendsOneCopy: a D-PSGD round's parameters go to every
// neighbour as one shared copy (a message's Params are read-only), and
// not as the node's own vector, which becomes a later round's scratch.
func TestDPSGDSendsOneCopy(t *testing.T) {
	h := ringDPSGD(t, 6)
	byRound := map[uint64][]gossip.Message{}
	h.drop = func(m *gossip.Message) bool {
		if m.Kind == gossip.KindParams && m.From == name(0) {
			byRound[m.Round] = append(byRound[m.Round], *m)
		}
		return false
	}
	h.run(3*time.Second, time.Second)
	if len(byRound) < 2 {
		t.Fatalf("node 0 sent parameters in %d rounds, want several", len(byRound))
	}
	own := &h.nodes[0].Params()[0]
	for r, ms := range byRound {
		if len(ms) != 2 {
			t.Fatalf("round %d: %d messages, want one to each of 2 ring neighbours", r, len(ms))
		}
		if &ms[0].Params[0] != &ms[1].Params[0] {
			t.Errorf("round %d: the neighbours got two copies", r)
		}
		if &ms[0].Params[0] == own {
			t.Errorf("round %d: the node sent its own vector", r)
		}
	}
}
