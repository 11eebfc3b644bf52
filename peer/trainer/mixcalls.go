package trainer

import (
	"fmt"
	"math"
	"slices"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model/compute"
)

// mixCalls gathers the lists of the calls one Mix makes over the arena:
// each item's result is a row d of it, its terms the rows of its inputs
// (slots) and of its gradient (g, or −1).
type mixCalls struct {
	comb          rowLists // CombineRows's, with their weights
	wts           []float32
	brows, ba, bb []int32 // InterpolateRows's (Blend)
	bw            []float32
	trim          rowLists // TrimmedRows's, with their trims
	ttrim         []int32
	avg           rowLists // AverageRows's (multi-Krum)
	clip          rowLists // ClipRows's (clipped gossip), with their scales
	cscale        []float64
	qrows, qfrom  [2][]int32 // QuantizeRows's, by kind (fp16, int8)
	// MaskRows's: each row mrows[i] from mfrom[i] at the indices
	// keeps[i], laid end to end in mkeep (in the buffer keepBuf points
	// to, the workspace's, reused) when the calls run: thousands of lists
	// of thousands of indices a round, copied once.
	mrows, mfrom, mstart, mkeep []int32
	keeps                       [][]uint32
	keepBuf                     *[]int32
	tops                        []topCall // TopKRows's, by k
	// pa and pb are the pairs whose distances Krum and clipped gossip
	// choose by (PairDistanceRows); picks are their items, completed once
	// the distances are known.
	pa, pb []int32
	picks  []pick
}

// topCall is a TopKRows call's lists: rows from from, each keeping the
// top k, its index bytes to out (nil: not asked for).
type topCall struct {
	k          int
	rows, from []int32
	out        []*int32
}

// rowLists are the lists of a Rows call that writes each row rows[i]
// from the source rows from[start[i]:start[i+1]].
type rowLists struct{ rows, start, from []int32 }

// add lists row d, written from the rows from.
func (l *rowLists) add(d int32, from ...int32) {
	if len(l.start) == 0 {
		l.start = append(l.start, 0)
	}
	l.rows, l.from = append(l.rows, d), append(l.from, from...)
	l.start = append(l.start, int32(len(l.from)))
}

// pick is a Krum or clipped-gossip item waiting for its distances:
// pairs from pair on in pa and pb.
type pick struct {
	it    MixItem
	d, g  int32
	slots []int32
	pair  int
}

// placed reports whether the arena can compute it: every mix but a
// robust rule of no kernel, or a trimmed mean of more inputs than a
// device sorts.
func (c *mixCalls) placed(it MixItem) bool {
	switch it.Agg.(type) {
	case nil:
		return it.Quantize == compress.None || it.Quantize == compress.FP16 || it.Quantize == compress.Int8
	case merge.Krum, merge.ClippedGossip, merge.ClippedWindow:
		return true
	case merge.Median, merge.TrimmedMean:
		return len(it.Xs) <= compute.MaxTrimmedInputs
	}
	return false
}

// quantization is QuantizeRows' rounding of a compressed kind (placed
// admits FP16 and Int8 only).
func quantization(k compress.Kind) compute.Quantization {
	switch k {
	case compress.FP16:
		return compute.QuantFP16
	case compress.Int8:
		return compute.QuantInt8
	}
	panic(fmt.Sprintf("trainer: a mix rounding vectors to %v", k))
}

// trimOf returns the trim of TrimmedRows that computes a's combination
// (compute.Median for the median); ok is false for a rule it does not.
func trimOf(a merge.Aggregator) (trim int, ok bool) {
	switch a := a.(type) {
	case merge.Median:
		return compute.Median, true
	case merge.TrimmedMean:
		return a.Trim, true
	}
	return 0, false
}

// add places it, whose result is row d (placed said yes).
func (c *mixCalls) add(it MixItem, d int32, slots []int32, g int32) {
	if it.Top > 0 {
		i := 0
		for i < len(c.tops) && c.tops[i].k != it.Top {
			i++
		}
		if i == len(c.tops) {
			c.tops = append(c.tops, topCall{k: it.Top})
		}
		t := &c.tops[i]
		t.rows, t.from, t.out = append(t.rows, d), append(t.from, slots[0]), append(t.out, it.IndexBytes)
		return
	}
	if it.Mask {
		if len(c.mstart) == 0 {
			c.mstart = append(c.mstart, 0)
		}
		c.mrows, c.mfrom, c.keeps = append(c.mrows, d), append(c.mfrom, slots[0]), append(c.keeps, it.Keep)
		c.mstart = append(c.mstart, c.mstart[len(c.mstart)-1]+int32(len(it.Keep)))
		return
	}
	if it.Quantize != compress.None {
		k := quantization(it.Quantize) - compute.QuantFP16
		c.qrows[k], c.qfrom[k] = append(c.qrows[k], d), append(c.qfrom[k], slots[0])
		return
	}
	if it.Blend {
		c.brows, c.ba, c.bb, c.bw = append(c.brows, d), append(c.ba, slots[0]), append(c.bb, slots[1]), append(c.bw, it.W[0])
		return
	}
	if trim, ok := trimOf(it.Agg); ok {
		c.trim.add(d, slots...)
		c.ttrim = append(c.ttrim, int32(trim))
		c.step(d, d, g, it.A)
		return
	}
	switch it.Agg.(type) {
	case merge.Krum: // every pair
		c.picks = append(c.picks, pick{it, d, g, slots, len(c.pa)})
		for i := range slots {
			for j := i + 1; j < len(slots); j++ {
				c.pa, c.pb = append(c.pa, slots[i]), append(c.pb, slots[j])
			}
		}
		return
	case merge.ClippedGossip, merge.ClippedWindow: // each from the node's own
		if a, ok := it.Agg.(merge.ClippedWindow); ok && a.Own(len(slots)) {
			c.step(d, slots[0], g, it.A) // the node's own, whatever the values
			return
		}
		c.picks = append(c.picks, pick{it, d, g, slots, len(c.pa)})
		for _, s := range slots[1:] {
			c.pa, c.pb = append(c.pa, s), append(c.pb, slots[0])
		}
		return
	}
	from, w := slots, it.W
	if g >= 0 {
		from, w = append(from, g), append(w[:len(w):len(w)], it.A)
	}
	c.combine(d, from, w)
}

// combine adds row d ← Σ w[k]·(row from[k]) to CombineRows.
func (c *mixCalls) combine(d int32, from []int32, w []float32) {
	c.comb.add(d, from...)
	c.wts = append(c.wts, w...)
}

// step adds row d ← 1·(row x) + a·(row g) to CombineRows, after the
// call that computed x (none without a gradient where x is d itself;
// a copy of x where g < 0).
func (c *mixCalls) step(d, x, g int32, a float32) {
	switch {
	case g >= 0:
		c.combine(d, []int32{x, g}, []float32{1, a})
	case x != d:
		c.combine(d, []int32{x}, []float32{1})
	}
}

// run makes the calls: the distances first and the choices they give,
// then the robust combinations, then the weighted sums (which add the
// robust ones' steps) and the blends.
func (c *mixCalls) run(be compute.Backend, arena compute.Tensor, n int) {
	if len(c.pa) > 0 {
		dist := make([]float64, len(c.pa))
		be.PairDistanceRows(dist, arena, n, c.pa, c.pb)
		for _, p := range c.picks {
			c.choose(p, dist[p.pair:])
		}
	}
	if t := c.trim; len(t.rows) > 0 {
		be.TrimmedRows(arena, arena, n, t.rows, t.start, t.from, c.ttrim)
	}
	if a := c.avg; len(a.rows) > 0 {
		be.AverageRows(arena, arena, n, a.rows, a.start, a.from)
	}
	if l := c.clip; len(l.rows) > 0 {
		be.ClipRows(arena, arena, n, l.rows, l.start, l.from, c.cscale)
	}
	if l := c.comb; len(l.rows) > 0 {
		be.CombineRows(arena, arena, n, l.rows, l.start, l.from, c.wts)
	}
	if len(c.brows) > 0 {
		be.InterpolateRows(arena, arena, n, c.brows, c.ba, c.bb, c.bw)
	}
	for k, q := range []compute.Quantization{compute.QuantFP16, compute.QuantInt8} {
		if len(c.qrows[k]) > 0 {
			be.QuantizeRows(arena, arena, n, c.qrows[k], c.qfrom[k], q, compress.Int8Chunk)
		}
	}
	if len(c.mrows) > 0 {
		var buf []int32
		if c.keepBuf != nil {
			buf = *c.keepBuf
		}
		c.mkeep = slices.Grow(buf[:0], int(c.mstart[len(c.mstart)-1]))
		for _, keep := range c.keeps {
			for _, k := range keep {
				c.mkeep = append(c.mkeep, int32(k))
			}
		}
		if c.keepBuf != nil {
			*c.keepBuf = c.mkeep
		}
		be.MaskRows(arena, arena, n, c.mrows, c.mstart, c.mfrom, c.mkeep)
	}
	for _, t := range c.tops {
		bytes := make([]int32, len(t.rows))
		be.TopKRows(arena, arena, n, t.rows, t.from, t.k, bytes)
		for i, p := range t.out {
			if p != nil {
				*p = bytes[i]
			}
		}
	}
}

// choose completes a Krum or clipped-gossip item from its distances
// (PairDistanceRows' from its pair on), as the rule chooses on the host
// (merge.Krum.Keep, merge.ClippedGossip.Scales).
func (c *mixCalls) choose(p pick, dist []float64) {
	k := len(p.slots)
	switch a := p.it.Agg.(type) {
	case merge.Krum:
		d := make([]float64, k*k)
		q := 0
		for i := range k {
			for j := i + 1; j < k; j++ {
				d[i*k+j] = dist[q]
				q++
			}
		}
		keep := a.Keep(k, d)
		if !a.Multi {
			c.step(p.d, p.slots[keep[0]], p.g, p.it.A)
			return
		}
		from := make([]int32, len(keep))
		for q, i := range keep {
			from[q] = p.slots[i]
		}
		c.avg.add(p.d, from...)
		c.step(p.d, p.d, p.g, p.it.A)
	case merge.ClippedGossip:
		ds := make([]float64, k) // ds[0], the node's own, unread
		for j := 1; j < k; j++ {
			ds[j] = math.Sqrt(dist[j-1])
		}
		pulls, scales := a.Scales(ds, p.it.Ws, 0)
		c.clipped(p, pulls, scales)
	case merge.ClippedWindow:
		ds := make([]float64, k)
		for j := 1; j < k; j++ {
			ds[j] = math.Sqrt(dist[j-1])
		}
		pulls, scales, own := a.Scales(ds, p.it.Ws)
		if own {
			c.step(p.d, p.slots[0], p.g, p.it.A)
			return
		}
		c.clipped(p, pulls, scales)
	}
}

// clipped completes a clipped-gossip item whose inputs pulls pull the
// node's own with scales (ClipRows), then adds its step.
func (c *mixCalls) clipped(p pick, pulls []int, scales []float64) {
	from := []int32{p.slots[0]} // the node's own, its scale unread
	for _, j := range pulls {
		from = append(from, p.slots[j])
	}
	c.clip.add(p.d, from...)
	c.cscale = append(append(c.cscale, 0), scales...)
	c.step(p.d, p.d, p.g, p.it.A)
}
