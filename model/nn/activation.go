package nn

import "math"

// activation applies a function to each value: ReLU, tanh or GELU.
type activation struct {
	io
	kind string
}

func (l *activation) forward(s *pass, in, out []float32) {
	n := l.in.Size()
	parallel(s.m, func(_, lo, hi int) { l.apply(in[lo*n:hi*n], out[lo*n:hi*n]) })
}

func (l *activation) apply(in, out []float32) {
	switch l.kind {
	case ReLU:
		for j, v := range in {
			out[j] = max(v, 0)
		}
	case Tanh:
		for j, v := range in {
			out[j] = float32(math.Tanh(float64(v)))
		}
	case GELU:
		for j, v := range in {
			out[j] = float32(0.5 * float64(v) * (1 + math.Erf(float64(v)/math.Sqrt2)))
		}
	}
}

func (l *activation) backward(s *pass, in, out, dout, din []float32) {
	if din == nil {
		return
	}
	n := l.in.Size()
	parallel(s.m, func(_, lo, hi int) {
		l.derive(in[lo*n:hi*n], out[lo*n:hi*n], dout[lo*n:hi*n], din[lo*n:hi*n])
	})
}

func (l *activation) derive(in, out, dout, din []float32) {
	switch l.kind {
	case ReLU:
		// out is max(in, 0) ≥ 0: its bits are 0 where it is zero. A mask
		// from them instead of a branch, which real data (half zeros)
		// mispredicts.
		dout = dout[:len(out)]
		din = din[:len(out)]
		for j, v := range out {
			zero := uint32(int32(math.Float32bits(v)-1) >> 31)
			din[j] = math.Float32frombits(math.Float32bits(dout[j]) &^ zero)
		}
	case Tanh:
		for j, v := range out {
			din[j] = dout[j] * (1 - v*v)
		}
	case GELU:
		for j, v := range in {
			z := float64(v)
			d := 0.5*(1+math.Erf(z/math.Sqrt2)) + z*math.Exp(-z*z/2)/math.Sqrt(2*math.Pi)
			din[j] = dout[j] * float32(d)
		}
	}
}

// flatten views C×H×W as C·H·W values: the same memory order.
type flatten struct{ io }

func (l *flatten) forward(_ *pass, in, out []float32) { copy(out, in) }

func (l *flatten) backward(_ *pass, _, _, dout, din []float32) {
	if din != nil {
		copy(din, dout)
	}
}
