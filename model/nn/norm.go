package nn

import "math"

// norm is layer normalisation (one group: the whole example, a weight
// and bias per value) or group normalisation (groups of C/G channels,
// a weight and bias per channel).
type norm struct {
	io
	weights
	groups int
	// size is the values per group, hw how many share a weight (1 for
	// layer norm, H·W for group norm).
	size, hw int
	stats    []float32 // each (example, group)'s mean and 1/σ
}

func (l *norm) forward(s *pass, in, out []float32) {
	if len(l.stats) < 2*s.m*l.groups {
		l.stats = make([]float32, 2*s.m*l.groups)
	}
	normForward(in, out, l.weight(s), l.bias(s), l.stats, s.m, l.groups, l.size, l.hw)
}

func (l *norm) backward(s *pass, in, _, dout, din []float32) {
	normBackward(in, dout, din, l.weight(s), l.stats, func(e int) ([]float32, []float32) { return l.grads(s, e) }, s.m, l.groups, l.size, l.hw)
}

// normForward normalises each of m examples' g groups of size values
// (layer norm: one group of the whole example; group norm: C/G channels
// of hw positions each), then scales by weight and shifts by bias (per
// value for layer norm, per channel for group norm: hw values share
// one). stats gets each group's mean and 1/σ.
func normForward(in, out, weight, bias, stats []float32, m, g, size, hw int) {
	const eps = 1e-5
	for e := range m {
		for q := range g {
			off := (e*g + q) * size
			x := in[off : off+size]
			mean, sq := 0.0, 0.0
			for _, v := range x {
				mean += float64(v)
			}
			mean /= float64(size)
			for _, v := range x {
				d := float64(v) - mean
				sq += d * d
			}
			rstd := 1 / math.Sqrt(sq/float64(size)+eps)
			stats[2*(e*g+q)], stats[2*(e*g+q)+1] = float32(mean), float32(rstd)
			o := out[off : off+size]
			for j, v := range x {
				ch := (q*size + j) / hw
				o[j] = float32((float64(v)-mean)*rstd)*weight[ch] + bias[ch]
			}
		}
	}
}

// normBackward adds the weight's and bias's gradients and, with din,
// sets the input's.
func normBackward(in, dout, din, weight, stats []float32, grads func(e int) (dw, db []float32), m, g, size, hw int) {
	for e := range m {
		dw, db := grads(e)
		for q := range g {
			off := (e*g + q) * size
			mean, rstd := float64(stats[2*(e*g+q)]), float64(stats[2*(e*g+q)+1])
			x, d := in[off:off+size], dout[off:off+size]
			sg, sgx := 0.0, 0.0
			for j, v := range x {
				ch := (q*size + j) / hw
				xh := (float64(v) - mean) * rstd
				dw[ch] += float32(float64(d[j]) * xh)
				db[ch] += d[j]
				gj := float64(d[j]) * float64(weight[ch])
				sg += gj
				sgx += gj * xh
			}
			if din == nil {
				continue
			}
			sg /= float64(size)
			sgx /= float64(size)
			dx := din[off : off+size]
			for j, v := range x {
				ch := (q*size + j) / hw
				xh := (float64(v) - mean) * rstd
				dx[j] = float32(rstd * (float64(d[j])*float64(weight[ch]) - sg - xh*sgx))
			}
		}
	}
}
