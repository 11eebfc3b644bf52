package gossip_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model/compute"
)

// lazyMixer records each mix, its result NaN until something resolves
// it (Resolve, SumLater), as a simulator's that defers mixes: a read of a
// mix's result before it is resolved shows as NaN. It counts the mixes.
type lazyMixer struct {
	pending map[*float32]func()
	mixes   int
	robust  int // of mixes, by Aggregate
	// quantized counts the mixes by Quantize, masked those by Mask,
	// topped those by Top.
	quantized, masked, topped int
	// vouch makes SumLater give 0 for a pending vector and leave it
	// pending, as a simulator does on a device while it promises: a
	// core that reads such a vector before Resolve reads NaN.
	vouch bool
}

func (m *lazyMixer) Mix(dst []float32, xs [][]float32, w []float32, g []float32, a float32) {
	m.mixes++
	for i := range dst {
		dst[i] = float32(math.NaN())
	}
	m.pending[&dst[0]] = func() {
		for _, x := range append(slices.Clone(xs), g) {
			m.Resolve(x)
		}
		merge.Combine(dst, xs, w, g, a)
	}
}

func (m *lazyMixer) Blend(dst, a, b []float32, t float32) {
	m.mixes++
	for i := range dst {
		dst[i] = float32(math.NaN())
	}
	m.pending[&dst[0]] = func() {
		m.Resolve(a)
		m.Resolve(b)
		merge.Interpolate(dst, a, b, t)
	}
}

func (m *lazyMixer) Aggregate(dst []float32, xs [][]float32, ws []float64, agg merge.Aggregator, g []float32, a float32) {
	m.mixes++
	m.robust++
	for i := range dst {
		dst[i] = float32(math.NaN())
	}
	m.pending[&dst[0]] = func() {
		for _, x := range append(slices.Clone(xs), g) {
			m.Resolve(x)
		}
		if err := agg.Aggregate(dst, xs, ws, 0); err != nil {
			panic(err) // Check said it would not fail
		}
		if g != nil {
			merge.Axpy(dst, a, g)
		}
	}
}

func (m *lazyMixer) Quantize(dst, src []float32, kind compress.Kind) {
	m.mixes++
	m.quantized++
	for i := range dst {
		dst[i] = float32(math.NaN())
	}
	m.pending[&dst[0]] = func() {
		m.Resolve(src)
		var p compress.Payload
		compress.Compress(&p, src, compress.Spec{Kind: kind}, nil)
		compress.Decompress(dst, &p)
	}
}

func (m *lazyMixer) Mask(dst, src []float32, keep []uint32) {
	m.mixes++
	m.masked++
	for i := range dst {
		dst[i] = float32(math.NaN())
	}
	m.pending[&dst[0]] = func() {
		m.Resolve(src)
		clear(dst)
		for _, i := range keep {
			dst[i] = src[i]
		}
	}
}

func (m *lazyMixer) Top(dst, src []float32, k int) func(wait bool) (int, bool) {
	m.mixes++
	m.topped++
	for i := range dst {
		dst[i] = float32(math.NaN())
	}
	var bytes int
	m.pending[&dst[0]] = func() {
		m.Resolve(src)
		bytes = compute.TopKInto(dst, src, k)
	}
	return func(wait bool) (int, bool) {
		if _, pending := m.pending[&dst[0]]; pending && !wait {
			return 0, false
		}
		m.Resolve(dst)
		return bytes, true
	}
}

func (m *lazyMixer) Resolve(v []float32) {
	if len(v) == 0 {
		return
	}
	if f, ok := m.pending[&v[0]]; ok {
		delete(m.pending, &v[0])
		f()
	}
}

func (m *lazyMixer) SumLater(v []float32) func() float64 {
	if _, pending := m.pending[&v[0]]; pending && m.vouch {
		return func() float64 { return 0 } // as a device's promise: v stays NaN
	}
	return func() float64 { m.Resolve(v); return merge.SumSquares(v) }
}

func (m *lazyMixer) Vector(n int) []float32 { return make([]float32, n) }

// gradients answers node i's requests with the gradient whose value k
// is grad(i, k, v), v the parameter there, once mx (if any) has resolved
// the parameters, as a shell does.
func gradients(mx gossip.Mixer, grad func(i, k int, v float32) float32) func(int, *gossip.TrainRequest) *gossip.TrainResult {
	return func(i int, req *gossip.TrainRequest) *gossip.TrainResult {
		if mx != nil {
			mx.Resolve(req.Params)
		}
		g := make([]float32, len(req.Params))
		for k, v := range req.Params {
			g[k] = grad(i, k, v)
		}
		return &gossip.TrainResult{ID: req.ID, Grad: g, Examples: 4}
	}
}

// TestHandedMixes: push-sum's, GoSGD's and AD-PSGD's cores that hand their mixes to
// a Mixer that defers them give the numbers of the cores that mix on the
// spot, to the last bit: the models (de-biased estimates) and weights after rounds of
// gradient steps, shares and sums, with shares lost on the way (their
// running sums corrected), a node leaving (its weight handed on), and
// every share received in a buffer overwritten unless the core kept it,
// and a node joining (taking a member's state); with the vectors sent as
// fp16 or int8, which the receivers' mixer rounds (Mixer.Quantize),
// D-PSGD's too; with CHOCO's rand-k and top-k steps (D-PSGD's public
// copy, push-sum's and AD-PSGD's links), each compressed by a Mask or a
// Top; and with a
// mixer that vouches for the sums of pending
// vectors without resolving them, as a device does, so that a core that
// read one before resolving it would read NaN.
func TestHandedMixes(t *testing.T) {
	type run struct {
		proto  string
		q      compress.Kind
		sparse compress.Spec // D-PSGD's CHOCO steps
	}
	var runs []run
	for _, q := range []compress.Kind{compress.None, compress.FP16, compress.Int8} {
		for _, proto := range []string{gossip.PushSum, gossip.GoSGD, gossip.ADPSGD, gossip.DPSGD} {
			if proto != gossip.DPSGD || q != compress.None {
				runs = append(runs, run{proto: proto, q: q})
			}
		}
	}
	for _, proto := range []string{gossip.DPSGD, gossip.PushSum, gossip.ADPSGD} { // CHOCO's steps
		for _, kind := range []compress.Kind{compress.RandK, compress.TopK} {
			runs = append(runs, run{proto: proto, sparse: compress.Spec{Kind: kind, Fraction: 0.3}})
		}
	}
	for _, r := range runs {
		proto := r.proto
		sub := r.q.String()
		if r.sparse.Kind != compress.None {
			sub = r.sparse.String()
		}
		t.Run(proto+"/"+sub, func(t *testing.T) {
			// With a mixer the nodes start from their initial vectors
			// themselves (ShareInit), which they must never write.
			var inits, copies [][]float32
			joined := 0
			run := func(mx gossip.Mixer) ([][]float32, []float64) {
				h := newHarness(t, 6, func(i int, c *gossip.Config) {
					c.Protocol, c.LR, c.Mixer, c.ShareInit, c.Quantize, c.Sparse = proto, 0.3, mx, mx != nil, compress.Spec{Kind: r.q}, r.sparse
					c.Join = i == 5
					for k := range c.Init {
						c.Init[k] = float32(i*8+k) / 16
					}
					if mx != nil {
						inits, copies = append(inits, c.Init), append(copies, slices.Clone(c.Init))
					}
					for _, k := range []int{(i + 1) % 6, (i + 3) % 6} {
						c.Neighbors = append(c.Neighbors, gossip.Neighbor{ID: name(k), Weight: 1})
					}
				})
				h.connectAll()
				h.recycle = true
				if mx != nil {
					h.resolve = mx.Resolve
				}
				h.train = gradients(mx, func(i, k int, v float32) float32 { return v*0.5 - float32(k%3)/7 })
				sent := 0
				h.drop = func(m *gossip.Message) bool { sent++; return m.Kind == gossip.KindPushSum && sent%7 == 0 }
				h.run(8*time.Second, 250*time.Millisecond)
				h.nodes[2].Leave()
				h.drain(2)
				h.run(10*time.Second, 250*time.Millisecond)
				h.nodes[2].Depart()
				h.drain(2)
				h.deliver()
				h.dead[2] = true
				h.run(12*time.Second, 250*time.Millisecond)
				var ws []float64
				for _, nd := range h.nodes {
					ws = append(ws, nd.PushSumWeight())
				}
				for _, e := range h.traces {
					if e.Event == "joined" {
						joined++
					}
				}
				return h.params(), ws
			}
			vouching := &lazyMixer{pending: map[*float32]func(){}, vouch: true}
			vouched, vw := run(vouching)
			mx := &lazyMixer{pending: map[*float32]func(){}}
			handed, hw := run(mx)
			alone, aw := run(nil)
			if joined != 3 {
				t.Fatalf("%d of 3 runs saw node 5 join", joined)
			}
			for i := range vouched {
				if !slices.Equal(vouched[i], alone[i]) || vw[i] != aw[i] {
					t.Fatalf("node %d: mixes handed to a mixer that vouches %v (weight %v), mixed on the spot %v (weight %v)", i, vouched[i], vw[i], alone[i], aw[i])
				}
			}
			if mx.mixes == 0 || (mx.quantized == 0) != (r.q == compress.None) || (mx.masked == 0) != (r.sparse.Kind != compress.RandK) || (mx.topped == 0) != (r.sparse.Kind != compress.TopK) {
				t.Fatalf("%d mixes handed to the mixer, %d roundings of vectors sent %v, %d masks and %d top-k of steps sent %v", mx.mixes, mx.quantized, r.q, mx.masked, mx.topped, r.sparse)
			}
			for i := range inits {
				if !slices.Equal(inits[i], copies[i]) {
					t.Fatalf("node %d wrote the initial vector it shares: %v, was %v", i, inits[i], copies[i])
				}
			}
			for i := range handed {
				if !slices.Equal(handed[i], alone[i]) || hw[i] != aw[i] {
					t.Fatalf("node %d: handed mixes %v (weight %v), mixed on the spot %v (weight %v)", i, handed[i], hw[i], alone[i], aw[i])
				}
			}
		})
	}
}

// TestHandedRobustMixes: D-PSGD's and push-sum's cores that hand
// their robust mixes to a Mixer that defers them (Mixer.Aggregate;
// push-sum's clipped gossip as merge.ClippedWindow, its window's τ set
// where the mix runs) give the numbers of the cores that aggregate on
// the spot, to the last bit, models and weights, and so does a mixer that
// vouches for pending sums as a device does; with models lost on the way
// so that some D-PSGD rounds close with too few inputs for Krum (the step
// from the node's own model, as on the spot).
func TestHandedRobustMixes(t *testing.T) {
	for _, proto := range []string{gossip.DPSGD, gossip.PushSum} {
		for _, agg := range []merge.Aggregator{merge.Median{}, merge.TrimmedMean{Trim: 1}, merge.Krum{F: 1}, merge.Krum{F: 1, Multi: true}, merge.ClippedGossip{}, merge.ClippedGossip{Tau: 0.5}} {
			t.Run(proto+"/"+agg.Name(), func(t *testing.T) {
				run := func(mx gossip.Mixer) ([][]float32, []float64, uint64) {
					h := newHarness(t, 6, func(i int, c *gossip.Config) {
						c.Protocol, c.LR, c.Mixer, c.Aggregator = proto, 0.3, mx, agg
						for k := range c.Init {
							c.Init[k] = float32(i*8+k) / 16
						}
						for _, k := range []int{(i + 1) % 6, (i + 2) % 6, (i + 4) % 6, (i + 5) % 6} {
							c.Neighbors = append(c.Neighbors, gossip.Neighbor{ID: name(k), Weight: 1})
						}
					})
					h.connectAll()
					h.recycle = true
					if mx != nil {
						h.resolve = mx.Resolve
					}
					h.train = gradients(mx, func(i, k int, v float32) float32 { return v*0.5 - float32((k+i)%3)/7 })
					sent := 0
					h.drop = func(m *gossip.Message) bool {
						sent++
						return (m.Kind == gossip.KindParams && sent%5 < 2) || (m.Kind == gossip.KindPushSum && sent%7 == 0)
					}
					h.run(10*time.Second, 250*time.Millisecond)
					var failed uint64
					for _, e := range h.traces {
						if e.Code == gossip.DropAggregation {
							failed++
						}
					}
					var ws []float64
					for _, nd := range h.nodes {
						ws = append(ws, nd.PushSumWeight())
					}
					return h.params(), ws, failed
				}
				vouching := &lazyMixer{pending: map[*float32]func(){}, vouch: true}
				vouched, vw, vf := run(vouching)
				mx := &lazyMixer{pending: map[*float32]func(){}}
				handed, hw, hf := run(mx)
				alone, aw, af := run(nil)
				if mx.robust == 0 {
					t.Fatalf("no robust mix was handed to the mixer (%d mixes)", mx.mixes)
				}
				if m, ok := agg.(merge.MinInputs); ok && proto == gossip.DPSGD && m.MinInputs() == 4 && hf == 0 {
					t.Fatal("no round closed short of the 4 inputs Krum needs: the losses test nothing")
				}
				if hf != af || vf != af {
					t.Fatalf("rounds closed with too few inputs: %d handed, %d handed while vouching, %d on the spot", hf, vf, af)
				}
				for i := range handed {
					if !slices.Equal(handed[i], alone[i]) || hw[i] != aw[i] {
						t.Fatalf("node %d: handed mixes %v (weight %v), mixed on the spot %v (weight %v)", i, handed[i], hw[i], alone[i], aw[i])
					}
					if !slices.Equal(vouched[i], alone[i]) || vw[i] != aw[i] {
						t.Fatalf("node %d: mixes handed to a mixer that vouches %v (weight %v), mixed on the spot %v (weight %v)", i, vouched[i], vw[i], alone[i], aw[i])
					}
				}
			})
		}
	}
}
