//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"fmt"

	"github.com/gossipd/gossipd/model/compute"
)

// The layers of convolutional networks (compute.Layers): im2col into
// the tensor the network keeps (or the backend's scratch), the
// convolution's products as strided-batched GEMMs over the examples,
// and one kernel per element-wise step (kernels.cu).

var _ compute.Layers = (*Backend)(nil)

// dims are a window's sizes as kernel arguments.
type dims struct{ C, H, W, K, S, P, OH, OW int32 }

func dimsOf(g compute.Window) dims {
	return dims{int32(g.C), int32(g.H), int32(g.W), int32(g.K), int32(g.S), int32(g.P), int32(g.OH), int32(g.OW)}
}

// ConvForward implements compute.Layers.
func (b *Backend) ConvForward(out, cols, x, w, bias compute.Tensor, g compute.Window, ch, m int) {
	compute.CheckWindow("ConvForward", g, m, ch, x, out)
	if m == 0 {
		return
	}
	defer b.enter()()
	po, done := b.ptr(out, 0, false, true)
	px, _ := b.ptr(x, 1, true, false)
	pw, _ := b.ptr(w, 2, true, false)
	pb, _ := b.ptr(bias, 3, true, false)
	pc := b.colsAt(cols, 4, m*g.Cols())
	d, mm := dimsOf(g), int32(m)
	b.launch("im2col", blocks(m*g.Cols(), threads), threads, arg(&pc), arg(&px), arg(&mm), arg(&d.C), arg(&d.H), arg(&d.W), arg(&d.K), arg(&d.S), arg(&d.P), arg(&d.OH), arg(&d.OW))
	ckk, pos := g.Cols()/g.Positions(), g.Positions()
	b.gemmStrided(false, false, ch, pos, ckk, 1, pw, ckk, 0, pc, pos, g.Cols(), 0, po, pos, ch*pos, m)
	c, p := int32(ch), int32(pos)
	b.launch("channel_bias", blocks(m*ch*pos, threads), threads, arg(&po), arg(&pb), arg(&mm), arg(&c), arg(&p))
	done()
}

// colsAt is where the unrolled inputs go: cols, or the backend's scratch
// where the caller keeps none.
func (b *Backend) colsAt(cols compute.Tensor, slot, n int) uint64 {
	if cols.Len() == 0 {
		return b.grow(&b.conv[0], uintptr(4*n))
	}
	if cols.Len() < n {
		panic(fmt.Sprintf("cuda: ConvForward: cols of %d values, want %d", cols.Len(), n))
	}
	if cols.OnHost() {
		panic("cuda: ConvForward: cols must be a tensor of the backend's (it keeps the unrolled inputs for ConvBackward on the device)")
	}
	p, _ := b.ptr(cols, slot, false, false)
	return p
}

// ConvBackward implements compute.Layers.
func (b *Backend) ConvBackward(dx, dw, db, dout, cols, w compute.Tensor, g compute.Window, ch, m, stride int) {
	if m == 0 {
		return
	}
	compute.CheckConvBackward(g, ch, m, stride, dx, dw, db, dout, cols)
	ckk, pos := g.Cols()/g.Positions(), g.Positions()
	wn := ch * ckk
	defer b.enter()()
	pdw, doneW := b.ptr(dw, 0, true, true)
	pdb, doneB := b.ptr(db, 1, true, true)
	pd, _ := b.ptr(dout, 2, true, false)
	pc, _ := b.ptr(cols, 3, true, false)
	pw, _ := b.ptr(w, 4, true, false)
	if stride > 0 {
		b.gemmStrided(false, true, ch, ckk, pos, 1, pd, pos, ch*pos, pc, pos, g.Cols(), 1, pdw, ckk, stride, m)
	} else {
		// Each example's weight gradient, then their column sums added.
		s := b.grow(&b.conv[1], uintptr(4*m*wn))
		b.gemmStrided(false, true, ch, ckk, pos, 1, pd, pos, ch*pos, pc, pos, g.Cols(), 0, s, ckk, wn, m)
		one, mm, n := float32(1), int32(m), int32(wn)
		b.launch("column_sums_axpby", blocks(wn, 32), 32*colGroups, arg(&pdw), arg(&one), arg(&s), arg(&one), arg(&mm), arg(&n))
	}
	b.channelSums(pdb, pd, m, ch, pos, stride)
	if dx.Len() > 0 {
		pdx, doneX := b.ptr(dx, 5, false, true)
		dc := b.grow(&b.conv[2], uintptr(4*m*g.Cols()))
		b.gemmStrided(true, false, ckk, pos, ch, 1, pw, ckk, 0, pd, pos, ch*pos, 0, dc, pos, g.Cols(), m)
		d, mm := dimsOf(g), int32(m)
		b.launch("col2im", blocks(m*g.In(), threads), threads, arg(&pdx), arg(&dc), arg(&mm), arg(&d.C), arg(&d.H), arg(&d.W), arg(&d.K), arg(&d.S), arg(&d.P), arg(&d.OH), arg(&d.OW))
		doneX()
	}
	doneW()
	doneB()
}

func (b *Backend) channelSums(dst, src uint64, m, ch, pos, stride int) {
	mm, c, p, s := int32(m), int32(ch), int32(pos), int32(stride)
	n := ch
	if stride > 0 {
		n = m * ch
	}
	b.launch("channel_sums", blocks(n, threads), threads, arg(&dst), arg(&src), arg(&mm), arg(&c), arg(&p), arg(&s))
}

// ChannelSums implements compute.Layers.
func (b *Backend) ChannelSums(dst, src compute.Tensor, m, ch, pos, stride int) {
	compute.CheckChannelSums(m, ch, pos, stride, dst, src)
	if m == 0 {
		return
	}
	defer b.enter()()
	pd, done := b.ptr(dst, 0, true, true)
	ps, _ := b.ptr(src, 1, true, false)
	b.channelSums(pd, ps, m, ch, pos, stride)
	done()
}

// Pool implements compute.Layers.
func (b *Backend) Pool(out, in compute.Tensor, g compute.Window, m int, isMax bool) {
	compute.CheckWindow("Pool", g, m, g.C, in, out)
	b.pool("pool", out, in, compute.Tensor{}, g, m, isMax, m*g.C*g.Positions())
}

// PoolBackward implements compute.Layers.
func (b *Backend) PoolBackward(din, dout, in compute.Tensor, g compute.Window, m int, isMax bool) {
	compute.CheckWindow("PoolBackward", g, m, g.C, in, dout)
	compute.CheckWindow("PoolBackward", g, m, g.C, din, dout)
	b.pool("pool_backward", din, dout, in, g, m, isMax, m*g.In())
}

// pool launches a pool kernel writing n values of dst from src (and in).
func (b *Backend) pool(name string, dst, src, in compute.Tensor, g compute.Window, m int, isMax bool, n int) {
	if g.P != 0 {
		panic("cuda: a pool with padding")
	}
	if m == 0 {
		return
	}
	defer b.enter()()
	pd, done := b.ptr(dst, 0, false, true)
	ps, _ := b.ptr(src, 1, true, false)
	d, mm, mx := dimsOf(g), int32(m), int32(0)
	if isMax {
		mx = 1
	}
	args := []karg{arg(&pd), arg(&ps)}
	var pi uint64
	if in.Len() > 0 {
		pi, _ = b.ptr(in, 2, true, false)
		args = append(args, arg(&pi))
	}
	args = append(args, arg(&mm), arg(&d.C), arg(&d.H), arg(&d.W), arg(&d.K), arg(&d.S), arg(&d.OH), arg(&d.OW), arg(&mx))
	b.launch(name, blocks(n, threads), threads, args...)
	done()
}

func sameLen(name string, ts ...compute.Tensor) {
	for _, t := range ts[1:] {
		if t.Len() != ts[0].Len() {
			panic(fmt.Sprintf("cuda: %s of tensors of %d and %d values", name, ts[0].Len(), t.Len()))
		}
	}
}

// Activate implements compute.Layers.
func (b *Backend) Activate(out, in compute.Tensor, f compute.Activation) {
	sameLen("Activate", out, in)
	if in.Len() == 0 {
		return
	}
	defer b.enter()()
	po, done := b.ptr(out, 0, false, true)
	pi, _ := b.ptr(in, 1, true, false)
	n, k := int64(in.Len()), int32(f)
	b.launch("activate", blocks(in.Len(), threads), threads, arg(&po), arg(&pi), arg(&n), arg(&k))
	done()
}

// ActivateBackward implements compute.Layers.
func (b *Backend) ActivateBackward(din, dout, in, out compute.Tensor, f compute.Activation) {
	sameLen("ActivateBackward", din, dout, in, out)
	if in.Len() == 0 {
		return
	}
	defer b.enter()()
	pdi, done := b.ptr(din, 0, false, true)
	pdo, _ := b.ptr(dout, 1, true, false)
	pi, _ := b.ptr(in, 2, true, false)
	po, _ := b.ptr(out, 3, true, false)
	n, k := int64(in.Len()), int32(f)
	b.launch("activate_backward", blocks(in.Len(), threads), threads, arg(&pdi), arg(&pdo), arg(&pi), arg(&po), arg(&n), arg(&k))
	done()
}

// Norm implements compute.Layers.
func (b *Backend) Norm(out, stats, in, w, bias compute.Tensor, m, groups, size, hw int) {
	compute.CheckNorm("Norm", m, groups, size, hw, 0, in, out, stats, w)
	if m == 0 {
		return
	}
	defer b.enter()()
	po, done := b.ptr(out, 0, false, true)
	ps, doneS := b.ptr(stats, 1, false, true)
	pi, _ := b.ptr(in, 2, true, false)
	pw, _ := b.ptr(w, 3, true, false)
	pb, _ := b.ptr(bias, 4, true, false)
	mm, gg, ss, hh := int32(m), int32(groups), int32(size), int32(hw)
	b.launch("norm_forward", blocks(m*groups, threads), threads, arg(&po), arg(&ps), arg(&pi), arg(&pw), arg(&pb), arg(&mm), arg(&gg), arg(&ss), arg(&hh))
	done()
	doneS()
}

// NormBackward implements compute.Layers.
func (b *Backend) NormBackward(din, dw, db, dout, in, w, stats compute.Tensor, m, groups, size, hw, stride int) {
	compute.CheckNorm("NormBackward", m, groups, size, hw, stride, in, dout, stats, w, dw, db)
	nw := groups * size / hw
	if m == 0 {
		return
	}
	defer b.enter()()
	pdw, doneW := b.ptr(dw, 0, true, true)
	pdb, doneB := b.ptr(db, 1, true, true)
	pdo, _ := b.ptr(dout, 2, true, false)
	pi, _ := b.ptr(in, 3, true, false)
	pw, _ := b.ptr(w, 4, true, false)
	ps, _ := b.ptr(stats, 5, true, false)
	mm, gg, ss, hh, st := int32(m), int32(groups), int32(size), int32(hw), int32(stride)
	n := nw
	if stride > 0 {
		n = m * nw
	}
	b.launch("norm_param_grads", blocks(n, threads), threads, arg(&pdw), arg(&pdb), arg(&pdo), arg(&pi), arg(&ps), arg(&mm), arg(&gg), arg(&ss), arg(&hh), arg(&st))
	if din.Len() > 0 {
		pdi, doneI := b.ptr(din, 6, false, true)
		b.launch("norm_input_grad", blocks(m*groups, threads), threads, arg(&pdi), arg(&pdo), arg(&pi), arg(&pw), arg(&ps), arg(&mm), arg(&gg), arg(&ss), arg(&hh))
		doneI()
	}
	doneW()
	doneB()
}

// Mul implements compute.Layers.
func (b *Backend) Mul(dst, a, c compute.Tensor) {
	sameLen("Mul", dst, a, c)
	if dst.Len() == 0 {
		return
	}
	defer b.enter()()
	pd, done := b.ptr(dst, 0, false, true)
	pa, _ := b.ptr(a, 1, true, false)
	pc, _ := b.ptr(c, 2, true, false)
	n := int64(dst.Len())
	b.launch("mul", blocks(dst.Len(), threads), threads, arg(&pd), arg(&pa), arg(&pc), arg(&n))
	done()
}

// Zero implements compute.Layers.
func (b *Backend) Zero(x compute.Tensor) {
	if x.Len() == 0 {
		return
	}
	defer b.enter()()
	px, done := b.ptr(x, 0, false, true)
	n := int64(x.Len())
	b.launch("zero", blocks(x.Len(), threads), threads, arg(&px), arg(&n))
	done()
}
