package trainer

import (
	"fmt"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model/compute"
)

// MixItem is one weighted sum for Mix: Dst = Σ_k W[k]·Xs[k] + A·G (no
// A·G where G is nil), each product rounded apart from its sum, the terms
// added in that order (merge.Combine; compute.Rows's CombineRows): a
// D-PSGD round's mix of a peer's and its neighbours' models and its
// gradient step, or one of push-sum's steps, shares and sums.
//
// With Blend, Dst = Xs[0] + W[0]·(Xs[1] − Xs[0]) instead
// (merge.Interpolate; compute.Rows's InterpolateRows): AD-PSGD's pairwise
// average.
//
// With Agg, Dst = Agg's combination of Xs with weights Ws, Xs[0] the
// node's own (Agg.Aggregate(Dst, Xs, Ws, 0)), + A·G added as merge.Axpy
// adds it; W is unused: a D-PSGD round's robust mix or push-sum's, whose inputs
// merge.Check has passed. On a device the median and trimmed means run
// there (compute.Rows' TrimmedRows; on the host over more than
// compute.MaxTrimmedInputs), and so do Krum, multi-Krum and clipped
// gossip, push-sum's too (merge.ClippedWindow) (PairDistanceRows, the
// choice on the host, then CombineRows, AverageRows or ClipRows); any
// other rule runs on the host.
//
// With Quantize (compress.FP16 or Int8), Dst = Xs[0] compressed so and
// decompressed: what the receiver of Xs[0] sent compressed holds
// (compute.Rows' QuantizeRows on a device).
//
// With Mask, Dst = Xs[0] at the indices Keep (ascending, distinct) and 0
// elsewhere: CHOCO's rand-k step as its receivers decompress it
// (compute.Rows' MaskRows on a device).
//
// With Top k > 0, Dst = Xs[0] at its k largest magnitudes and 0
// elsewhere (compute.TopKInto), and *IndexBytes, where set, the bytes of
// the kept indices' encoding: CHOCO's top-k step as its receivers
// decompress it (compute.Rows' TopKRows on a device).
type MixItem struct {
	Dst      []float32
	Xs       [][]float32
	W        []float32
	G        []float32
	A        float32
	Blend    bool
	Agg      merge.Aggregator
	Ws       []float64
	Quantize compress.Kind
	Mask     bool
	Keep     []uint32
	Top      int
	// IndexBytes is written once the item is computed (Top).
	IndexBytes *int32
}

// Mix computes the items' sums where the workspace keeps its models, and
// sets sums[i] to Σ Dst² (merge.SumSquares) of item i. On a device, each
// sum is one row of the Rows calls over the models kept there (mixCalls:
// a CombineRows, an InterpolateRows, the robust rules' and the roundings'
// calls; its terms read there, or copied in), left there in a slot of
// its own: its host vector is stale until
// Fetch, as LeaveOnDevice leaves trained models, and KnownSum gives its
// Σx². On the CPU, and for an item the arena has no room for, the sum is
// computed on the host. No item's Dst may be a term of another in the
// same call.
func (w *BatchWorkspace) Mix(items []MixItem, sums []float64) {
	if len(sums) < len(items) {
		panic(fmt.Sprintf("trainer: Mix of %d items into %d sums", len(items), len(sums)))
	}
	r := w.res
	if r == nil {
		compute.ForEachRow(len(items), w.stack.NumParams(), func(i int) { sums[i] = items[i].OnHost() })
		return
	}
	c := mixCalls{keepBuf: &w.keepBuf}
	var kept, host []int
	var keptRows []int32
	for i, it := range items {
		var slots []int32
		ok := c.placed(it)
		if ok {
			slots, ok = r.slotsOf(it.Xs)
		}
		g := int32(-1)
		if ok && it.G != nil {
			g, ok = r.slot(it.G)
		}
		d, room := int32(0), false
		if ok {
			d, room = r.alloc()
		}
		if !ok || !room {
			if ok {
				r.full++
			}
			host = append(host, i)
			continue
		}
		c.add(it, d, slots, g)
		kept, keptRows = append(kept, i), append(keptRows, d)
	}
	if len(kept) > 0 {
		be := w.stack.Backend()
		c.run(be, r.arena, r.size)
		out := make([]float64, len(kept))
		be.SumSquaresRows(out, r.arena, r.size, keptRows)
		for k, i := range kept {
			sums[i] = out[k]
			r.keepSum(items[i].Dst, keptRows[k], out[k])
		}
		if w.poison {
			for _, i := range kept {
				poisonStale([][]float32{items[i].Dst})
			}
		}
		r.mu.Lock()
		r.mixed += uint64(len(kept))
		r.mu.Unlock()
	}
	for _, i := range host {
		it := items[i]
		r.fetch(it.G)
		for _, x := range it.Xs {
			r.fetch(x)
		}
		sums[i] = it.OnHost()
	}
}

// OnHost computes it on the host, its terms' values there, and returns
// Σ Dst².
func (it MixItem) OnHost() float64 {
	switch {
	case it.Quantize != compress.None: // as compress.Compress and Decompress round it
		compute.RoundTrip(it.Dst, it.Xs[0], quantization(it.Quantize), compress.Int8Chunk)
	case it.Top > 0:
		b := compute.TopKInto(it.Dst, it.Xs[0], it.Top)
		if it.IndexBytes != nil {
			*it.IndexBytes = int32(b)
		}
	case it.Mask:
		clear(it.Dst)
		for _, i := range it.Keep {
			it.Dst[i] = it.Xs[0][i]
		}
	case it.Blend:
		merge.Interpolate(it.Dst, it.Xs[0], it.Xs[1], it.W[0])
	case it.Agg != nil:
		if err := it.Agg.Aggregate(it.Dst, it.Xs, it.Ws, 0); err != nil {
			panic(fmt.Sprintf("trainer: a robust mix merge.Check passed: %v", err))
		}
		if it.G != nil {
			merge.Axpy(it.Dst, it.A, it.G)
		}
	default:
		merge.Combine(it.Dst, it.Xs, it.W, it.G, it.A)
	}
	return merge.SumSquares(it.Dst)
}

// KnownSum returns Σ v² as Mix measured it, where v is a result Mix left
// on the device. It may run beside the workspace's calls.
func (w *BatchWorkspace) KnownSum(v []float32) (float64, bool) {
	if w.res == nil || len(v) == 0 {
		return 0, false
	}
	return w.res.knownSum(v)
}

// Stale reports whether v is a vector the workspace left on its device
// that the host does not hold yet (Fetch copies it). It may run beside
// the workspace's calls.
func (w *BatchWorkspace) Stale(v []float32) bool {
	if w.res == nil || len(v) == 0 {
		return false
	}
	r := w.res
	r.mu.Lock()
	defer r.mu.Unlock()
	e, _ := r.entry(v)
	return e.stale
}

// load sets the stack's models 0 to len(vs)−1 to vs, which the calls
// only read: on a device, those the arena holds from their slots (a
// stale vector is always there), the others from the host; on the CPU,
// from the host.
func (w *BatchWorkspace) load(vs [][]float32) error {
	r := w.res
	if r == nil {
		return w.stack.Load(vs)
	}
	if len(vs) > w.stack.Cap() {
		return fmt.Errorf("trainer: %d models for a stack of %d", len(vs), w.stack.Cap())
	}
	for i, v := range vs {
		if len(v) != r.size {
			return fmt.Errorf("trainer: parameter vector %d has %d values, want %d", i, len(v), r.size)
		}
	}
	if len(vs) == 0 {
		return nil
	}
	dst := w.stack.ParamRows(len(vs))
	w.cpRows, w.cpSrc = w.cpRows[:0], w.cpSrc[:0]
	for i, v := range vs {
		s, ok := r.find(v)
		if !ok {
			w.stack.Backend().Copy(dst.Slice(i*r.size, (i+1)*r.size), compute.Host(v))
			continue
		}
		r.hits++
		w.cpRows, w.cpSrc = append(w.cpRows, int32(i)), append(w.cpSrc, s)
	}
	w.copySlots(dst, r.arena, w.cpRows, w.cpSrc)
	return nil
}

// LeaveGradients makes the workspace leave the gradients it computes
// (OpGradient, without DP-SGD) on its device, as LeaveOnDevice leaves
// trained models: each in a slot of its own, its host vector stale until
// Fetch, its Σx² measured there (TrainResult.Measured). For a caller
// that hands them to Mix, which reads them there. Up to block of a
// batch's gradients share a host allocation (compute.UnzeroedRows), for
// a caller that drops them about together: one still held keeps the
// others' memory and slots. It reports whether the workspace has a
// device to leave them on.
func (w *BatchWorkspace) LeaveGradients(poison bool, block int) bool {
	if w.res == nil {
		return false
	}
	w.leaveGrads, w.poison, w.gradBlock = true, w.poison || poison, max(1, block)
	return true
}

// keepGradients copies the k gradients the stack computed to slots of
// their own, named by their host vectors (w.grads), which stay stale.
func (w *BatchWorkspace) keepGradients(k int) {
	r := w.res
	w.cpRows, w.cpSrc = w.cpRows[:0], w.cpSrc[:0]
	for i := range k {
		s, _ := r.alloc() // room said yes
		r.keep(w.grads[i], s, true)
		w.cpRows, w.cpSrc = append(w.cpRows, s), append(w.cpSrc, int32(i))
	}
	w.copySlots(r.arena, w.stack.GradTensor(k), w.cpRows, w.cpSrc)
	if w.poison {
		poisonStale(w.grads[:k])
	}
	r.mu.Lock()
	r.grads += uint64(k)
	r.mu.Unlock()
}
