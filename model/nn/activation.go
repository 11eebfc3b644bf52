package nn

import "math"

// activation applies a function to each value: ReLU, tanh or GELU.
type activation struct {
	io
	kind string
}

func (l *activation) forward(_ *pass, in, out []float32) {
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

func (l *activation) backward(_ *pass, in, out, dout, din []float32) {
	if din == nil {
		return
	}
	switch l.kind {
	case ReLU:
		for j, v := range out {
			din[j] = 0
			if v > 0 {
				din[j] = dout[j]
			}
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
