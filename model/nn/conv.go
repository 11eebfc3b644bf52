package nn

import "runtime"

// conv is a 2-D convolution, computed as matrix products (im2col): each
// example's input windows are unrolled into a (C·K·K)×(OH·OW) matrix,
// which the (OUT)×(C·K·K) weight multiplies on the backend's GEMM
// kernels. Examples are split between GOMAXPROCS workers, each with its
// own scratch and, going backward, its own weight-gradient accumulator,
// summed in worker order (the result does not depend on scheduling).
type conv struct {
	window
	weights
	ch int // output channels
	// cols holds a training pass's unrolled inputs, for its backward;
	// unrolled each evaluation pass's, per worker. Only im2col writes
	// them, so the entries it skips (padding) stay zero.
	cols     []float32
	unrolled [][]float32
	work     [][]float32 // each worker's backward scratch
}

// scratch returns k buffers of at least size values from bufs.
func scratch(bufs *[][]float32, k, size int) [][]float32 {
	for len(*bufs) < k {
		*bufs = append(*bufs, nil)
	}
	for w := range k {
		if len((*bufs)[w]) < size {
			(*bufs)[w] = make([]float32, size)
		}
	}
	return (*bufs)[:k]
}

func workers(m int) int { return max(1, min(runtime.GOMAXPROCS(0), m)) }

func (l *conv) forward(s *pass, in, out []float32) {
	ckk, pos := l.in.C*l.k*l.k, l.out.H*l.out.W
	var cols []float32
	if s.training() {
		if len(l.cols) < s.m*ckk*pos {
			l.cols = make([]float32, s.m*ckk*pos)
		}
		cols = l.cols[:s.m*ckk*pos]
	}
	w, b := l.weight(s), l.bias(s)
	work := scratch(&l.unrolled, workers(s.m), ckk*pos)
	parallel(s.m, func(k, lo, hi int) {
		col := work[k][:ckk*pos]
		for e := lo; e < hi; e++ {
			if cols != nil {
				col = cols[e*ckk*pos : (e+1)*ckk*pos]
			}
			im2col(col, in[e*l.in.Size():(e+1)*l.in.Size()], l.window)
			o := out[e*l.out.Size() : (e+1)*l.out.Size()]
			s.be.Gemm(false, false, l.ch, pos, ckk, 1, host(w), ckk, host(col), pos, 0, host(o), pos)
			for c := range l.ch {
				for j := range pos {
					o[c*pos+j] += b[c]
				}
			}
		}
	})
}

func (l *conv) backward(s *pass, _, _, dout, din []float32) {
	ckk, pos := l.in.C*l.k*l.k, l.out.H*l.out.W
	w := l.weight(s)
	k := workers(s.m)
	acc := 0 // per worker: its own weight and bias gradients, unless per example
	if !s.per {
		acc = l.wn + l.bn
	}
	work := scratch(&l.work, k, ckk*pos+acc)
	for i := range k {
		clear(work[i][ckk*pos : ckk*pos+acc])
	}
	parallel(s.m, func(k, lo, hi int) {
		dcol := work[k][:ckk*pos]
		var dw, db []float32
		if !s.per {
			dw, db = work[k][ckk*pos:ckk*pos+l.wn], work[k][ckk*pos+l.wn:ckk*pos+acc]
		}
		for e := lo; e < hi; e++ {
			if s.per {
				dw, db = l.grads(s, e)
			}
			col := l.cols[e*ckk*pos : (e+1)*ckk*pos]
			d := dout[e*l.out.Size() : (e+1)*l.out.Size()]
			s.be.Gemm(false, true, l.ch, ckk, pos, 1, host(d), pos, host(col), pos, 1, host(dw), ckk)
			for c := range l.ch {
				sum := float32(0)
				for _, v := range d[c*pos : (c+1)*pos] {
					sum += v
				}
				db[c] += sum
			}
			if din != nil {
				s.be.Gemm(true, false, ckk, pos, l.ch, 1, host(w), ckk, host(d), pos, 0, host(dcol), pos)
				col2im(din[e*l.in.Size():(e+1)*l.in.Size()], dcol, l.window)
			}
		}
	})
	if s.per {
		return
	}
	gw, gb := l.grads(s, 0)
	for i := range k {
		for j, v := range work[i][ckk*pos : ckk*pos+l.wn] {
			gw[j] += v
		}
		for j, v := range work[i][ckk*pos+l.wn : ckk*pos+acc] {
			gb[j] += v
		}
	}
}
