package trainer

import "github.com/gossipd/gossipd/model/compute"

// boundData holds the data matrices a workspace trained on, each loaded
// into its backend's memory once and kept until free (the CPU's are the
// matrices themselves).
type boundData map[boundKey]compute.Tensor

// boundKey names a data matrix by its first value and length.
type boundKey struct {
	p *float32
	n int
}

func keyOf(x []float32) boundKey { return boundKey{&x[0], len(x)} }

// on returns x in be's memory, loading it the first time.
func (b *boundData) on(be compute.Backend, x []float32) compute.Tensor {
	if len(x) == 0 {
		return compute.Host(x)
	}
	k := keyOf(x)
	t, ok := (*b)[k]
	if !ok {
		if *b == nil {
			*b = boundData{}
		}
		t = be.Load(x)
		(*b)[k] = t
	}
	return t
}

// free gives the loaded matrices back to be.
func (b boundData) free(be compute.Backend) {
	for _, t := range b { // the order reaches nothing
		if !t.OnHost() {
			be.Free(t)
		}
	}
	clear(b)
}
