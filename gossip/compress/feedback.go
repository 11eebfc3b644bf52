package compress

import "math/rand/v2"

// Feedback is error feedback for one destination (a neighbour, or a random
// walk's next hop): what compression left out of earlier vectors, added to
// the next one before it is compressed. Its residual is state to
// checkpoint (Residual, SetResidual).
type Feedback struct {
	residual []float32
	buf      []float32
}

// Compress compresses x plus the residual into p and keeps, as the new
// residual, what p leaves out. For spec.Kind == None the residual stays
// zero.
func (f *Feedback) Compress(p *Payload, x []float32, spec Spec, rng *rand.Rand) {
	if len(f.residual) != len(x) {
		f.residual = make([]float32, len(x))
	}
	f.buf = append(f.buf[:0], x...)
	for i, e := range f.residual {
		f.buf[i] += e
	}
	Compress(p, f.buf, spec, rng)
	// residual = (x + residual) − sent
	Decompress(f.residual, p)
	for i, v := range f.buf {
		f.residual[i] = v - f.residual[i]
	}
}

// Residual returns the residual (nil before the first Compress); the slice
// is the live state.
func (f *Feedback) Residual() []float32 { return f.residual }

// SetResidual restores a checkpointed residual.
func (f *Feedback) SetResidual(r []float32) { f.residual = append(f.residual[:0], r...) }
