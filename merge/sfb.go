package merge

import (
	"fmt"

	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
)

// ApplyFactors sets W += scale·Uᵀ·V for one layer's sufficient factors
// (Xie et al. 2016): the rank-K reconstruction of the layer's gradient,
// added without forming it separately. W is J×D row-major.
func ApplyFactors(be compute.Backend, w []float32, f *model.Factors, scale float32) error {
	if len(w) != f.J*f.D || len(f.U) != f.K*f.J || len(f.V) != f.K*f.D {
		return fmt.Errorf("%w: factors K=%d J=%d D=%d (|U|=%d |V|=%d) for a weight of %d", ErrWeights, f.K, f.J, f.D, len(f.U), len(f.V), len(w))
	}
	if f.K == 0 {
		return nil
	}
	be.Gemm(true, false, f.J, f.D, f.K, scale, compute.Host(f.U), f.J, compute.Host(f.V), f.D, 1, compute.Host(w), f.D)
	return nil
}

// SFBCheaper reports whether broadcasting a layer's factors costs less than
// its dense gradient, per the formula of Xie et al. (2016): per peer, K·(J+D)
// numbers against J·D.
func SFBCheaper(k, j, d int) bool { return k*(j+d) < j*d }
