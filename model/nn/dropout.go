package nn

import "github.com/gossipd/gossipd/model/compute"

// dropout zeroes each value with probability p while training, scaling
// the others by 1/(1 − p); evaluation passes values through. The masks
// are drawn on the host (from the pass's generator, so a seed gives the
// same masks on every backend) and copied to the backend.
type dropout struct {
	io
	p     float64
	host  []float32      // the last training pass's factors
	mask  compute.Tensor // the same on the backend
	drawn bool           // whether the last pass drew a mask
}

func (l *dropout) forward(s *pass, in, out compute.Tensor) {
	l.drawn = s.rng != nil
	if !l.drawn {
		s.be.Copy(out, in)
		return
	}
	n := in.Len()
	if len(l.host) < n {
		l.host = make([]float32, n)
	}
	keep := float32(1 / (1 - l.p))
	for j := range l.host[:n] {
		l.host[j] = keep
		if s.rng.Float64() < l.p {
			l.host[j] = 0
		}
	}
	mask := buffer(s.be, &l.mask, n)
	s.be.Copy(mask, compute.Host(l.host[:n]))
	s.ly.Mul(out, in, mask)
}

func (l *dropout) backward(s *pass, _, _, dout, din compute.Tensor) {
	if din.Len() == 0 {
		return
	}
	if !l.drawn {
		s.be.Copy(din, dout)
		return
	}
	s.ly.Mul(din, dout, l.mask.Slice(0, dout.Len()))
}

func (l *dropout) free(be compute.Backend) { release(be, &l.mask) }

// HasDropout reports whether the network has a dropout layer.
func (n *Net) HasDropout() bool {
	for _, l := range n.layers {
		if _, ok := l.(*dropout); ok {
			return true
		}
	}
	return false
}
