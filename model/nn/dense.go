package nn

// dense is a fully connected layer: out = in·Wᵀ + b, W [out, in].
type dense struct {
	io
	weights
}

func (l *dense) forward(s *pass, in, out []float32) {
	I, O := l.in.C, l.out.C
	s.be.Gemm(false, true, s.m, O, I, 1, host(in), I, host(l.weight(s)), I, 0, host(out), O)
	b := l.bias(s)
	for r := range s.m {
		row := out[r*O : (r+1)*O]
		for j := range row {
			row[j] += b[j]
		}
	}
}

func (l *dense) backward(s *pass, in, _, dout, din []float32) {
	I, O := l.in.C, l.out.C
	if s.per {
		// Example e's weight gradient is the outer product of its
		// error and its input.
		for e := range s.m {
			dw, db := l.grads(s, e)
			d := dout[e*O : (e+1)*O]
			s.be.Gemm(true, false, O, I, 1, 1, host(d), O, host(in[e*I:(e+1)*I]), I, 1, host(dw), I)
			for j, v := range d {
				db[j] += v
			}
		}
	} else {
		dw, db := l.grads(s, 0)
		s.be.Gemm(true, false, O, I, s.m, 1, host(dout), O, host(in), I, 1, host(dw), I)
		for r := range s.m {
			for j, v := range dout[r*O : (r+1)*O] {
				db[j] += v
			}
		}
	}
	if din != nil {
		s.be.Gemm(false, false, s.m, I, O, 1, host(dout), O, host(l.weight(s)), I, 0, host(din), I)
	}
}
