package nn

// dropout zeroes each value with probability p while training, scaling
// the others by 1/(1 − p); evaluation passes values through.
type dropout struct {
	io
	p    float64
	mask []float32 // the last pass's factors
}

func (l *dropout) forward(s *pass, in, out []float32) {
	if len(l.mask) < len(in) {
		l.mask = make([]float32, len(in))
	}
	mask := l.mask[:len(in)]
	keep := float32(1 / (1 - l.p))
	for j, v := range in {
		mask[j] = 1
		if s.rng != nil {
			mask[j] = keep
			if s.rng.Float64() < l.p {
				mask[j] = 0
			}
		}
		out[j] = v * mask[j]
	}
}

func (l *dropout) backward(_ *pass, _, _, dout, din []float32) {
	if din == nil {
		return
	}
	for j, k := range l.mask[:len(dout)] {
		din[j] = dout[j] * k
	}
}

// HasDropout reports whether the network has a dropout layer.
func (n *Net) HasDropout() bool {
	for _, l := range n.layers {
		if _, ok := l.(*dropout); ok {
			return true
		}
	}
	return false
}
