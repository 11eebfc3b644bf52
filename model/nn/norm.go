package nn

import "math"

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
func normBackward(in, dout, din, weight, dw, db, stats []float32, m, g, size, hw int) {
	for e := range m {
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
