package compute

import "math"

// expf is e^x in float32 arithmetic, within 2 ulp of the rounded exact
// value on [−87, 88] (TestExpf), 0 below it and +Inf above. Softmax calls
// it for every logit of every example; the float64 math.Exp it replaces
// cost a third of evaluation.
//
// It writes x = k·ln2 + r with |r| ≤ ln2/2 (ln2 split in two parts, as
// Cephes' expf does, so that r is exact) and e^r as a degree-6 polynomial
// (Cephes' coefficients), then scales by 2^k through the exponent bits.
func expf(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	if x < -87.33654 {
		return 0
	}
	if x > 88.72283 {
		return float32(math.Inf(1))
	}
	k := float32(math.Floor(float64(x*log2e + 0.5)))
	r := x - k*ln2hi
	r -= k * ln2lo
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	p = p*r*r + r + 1
	// 2^k for k in [−126, 128): with x ≥ −87.34, k ≥ −126; k = 128 only
	// at the very top, handled by splitting the scale in two.
	ki := int32(k)
	if ki > 127 {
		return p * 2 * math.Float32frombits(uint32(ki-1+127)<<23)
	}
	return p * math.Float32frombits(uint32(ki+127)<<23)
}

// expKernel sets x[i] = e^x[i] for every i, as expf does (the vector
// versions in exp_amd64.s fuse its multiply-adds, so they agree with it
// within an ulp).
type expKernel func(x []float32)

// expGo is the portable exp kernel.
func expGo(x []float32) {
	for i, v := range x {
		x[i] = expf(v)
	}
}
