package gossip

import (
	"fmt"
	"math"
	"slices"

	"github.com/gossipd/gossipd/merge"
)

// MaxViewEntries bounds the view a message may carry.
const MaxViewEntries = 1024

// maxDegree bounds an advertised degree.
const maxDegree = 1 << 20

// validate checks a message against this node's job before anything is
// merged: sender, kind, shapes, finite values.
func (n *Core) validate(m *Message) error {
	if m.From == "" {
		return invalid("sender", "no sender")
	}
	if m.From == n.cfg.ID {
		return invalid("sender", "message from self")
	}
	switch m.Kind {
	case KindViewPush, KindViewReply:
		if !n.viewOn() {
			return invalid("kind", "%s message for a node that runs no Cyclon view", m.Kind)
		}
		if len(m.View) > MaxViewEntries {
			return invalid("view", "view of %d entries", len(m.View))
		}
		return checkViewIDs(m.View)
	case KindStateRequest:
		if len(m.Params) > 0 || len(m.Factors) > 0 || len(m.View) > 0 || len(m.Indices) > 0 {
			return invalid("shape", "a state request carries nothing")
		}
		return nil
	case KindHVJoin, KindHVForwardJoin, KindHVNeighbor, KindHVNeighborReply, KindHVDisconnect, KindHVShuffle, KindHVShuffleReply, KindHVPing:
		return n.validateHV(m)
	}
	if !slices.Contains(n.def.kinds, m.Kind) && m.Kind != KindStateReply {
		return invalid("kind", "%s message for a %s node", m.Kind, n.cfg.Protocol)
	}
	if m.Kind.Secure() {
		switch {
		case !n.cfg.Secure.Enabled:
			return invalid("kind", "%s message for a node without secure aggregation", m.Kind)
		case m.Secure == nil || len(m.Params) > 0 || len(m.Indices) > 0 || len(m.Factors) > 0 || m.Packed != nil:
			return invalid("shape", "a %s message carries its secure payload only", m.Kind)
		case !(m.Weight >= 0 && m.Weight <= maxDegree && m.Weight == math.Trunc(m.Weight)):
			return invalid("weight", "advertised degree %v", m.Weight)
		}
		return nil
	}
	if math.IsNaN(m.Age) || math.IsInf(m.Age, 0) || m.Age < 0 {
		return invalid("age", "age %v", m.Age)
	}
	// A push-sum share has a positive weight, but for a departing
	// member's handoff of its shortfall below one unit (pushsum.go).
	// A sync carries a running sum and no share: weight 0, no parameters.
	if m.Kind == KindPushSum && !(m.Weight >= -1 && !math.IsInf(m.Weight, 0) && !math.IsNaN(m.Sent) && !math.IsInf(m.Sent, 0) && m.Round > 0) {
		return invalid("weight", "push-sum weight %v, running sum %v, share %d", m.Weight, m.Sent, m.Round)
	}
	if m.Kind == KindPushSum && m.Weight == 0 {
		if len(m.Params) > 0 || len(m.Indices) > 0 || len(m.Factors) > 0 {
			return invalid("weight", "a push-sum share of weight 0 (a sync carries no parameters)")
		}
		return nil
	}
	if m.Kind == KindParams && !(m.Weight >= 0 && m.Weight <= maxDegree && m.Weight == math.Trunc(m.Weight)) {
		return invalid("weight", "advertised degree %v", m.Weight)
	}
	want := n.layout.Size
	if m.Kind == KindModel {
		var err error
		if want, err = n.validateCompressed(m); err != nil {
			return err
		}
	} else if len(m.Indices) > 0 || m.Partition != 0 {
		return invalid("shape", "%s message with indices or a partition", m.Kind)
	}
	if m.Kind == KindFactors {
		var err error
		if want, err = n.validateFactors(m); err != nil {
			return err
		}
	}
	if len(m.Params) != want {
		return invalid("shape", "%d parameters, want %d", len(m.Params), want)
	}
	if ss, ok := m.sum.get(m.Params); ok {
		return n.checkSum("parameters", m.Params, ss)
	}
	return n.checkValues("parameters", m.Params)
}

// checkValues checks that a received vector is finite and within the
// norm bound.
func (n *Core) checkValues(what string, v []float32) error {
	if len(v) == 0 {
		return nil
	}
	return n.checkSum(what, v, merge.SumSquares(v))
}

// checkSum is checkValues for a vector v whose Σ x² is ss. It does not
// read v: a sum of float32 squares in float64 is finite exactly when
// every value is, so ss alone says (and v may be a simulator's model
// that only its device holds yet).
func (n *Core) checkSum(what string, v []float32, ss float64) error {
	if math.IsNaN(ss) || math.IsInf(ss, 0) {
		return invalid("non_finite", "non-finite %s", what)
	}
	if n.cfg.MaxNorm < 0 {
		return nil
	}
	bound := n.cfg.normBound(len(v))
	if norm := math.Sqrt(ss); !(norm <= bound) {
		return invalid("norm", "%s of L2 norm %.4g exceed the bound %.4g", what, norm, bound)
	}
	return nil
}

// normBound is the bound on the L2 norm of a received vector of n values
// (Config.MaxNorm ≥ 0).
func (c *Config) normBound(n int) float64 {
	if c.MaxNorm == 0 {
		return DefaultMaxRMS * math.Sqrt(float64(n))
	}
	return c.MaxNorm
}

// Admits reports whether a vector of n values whose Σ x² is ss passes
// every check a node of this config puts a trained or received vector's
// sum to: finite (a trained one, badVector), and within the norm bound
// (a received one, checkSum). A simulator that hands a trained model
// over before its values exist, with a sum that passes, checks the
// real sum by it once they do.
func (c *Config) Admits(ss float64, n int) bool {
	return AdmitsTrained(ss) && (c.MaxNorm < 0 || math.Sqrt(ss) <= c.normBound(n))
}

// AdmitsTrained reports whether a trained vector whose Σ x² is ss passes
// the check a node puts a training result to (badVector): finite. A
// gradient, which only its own node reads, is checked by this alone.
func AdmitsTrained(ss float64) bool { return !math.IsNaN(ss) && !math.IsInf(ss, 0) }

// DefaultMaxRMS is the default norm bound on received vectors, as a root
// mean square per value: a vector of n values may have an L2 norm of at
// most 1000·√n. Trained models are orders of magnitude smaller; a flipped
// exponent bit or a scaled attack is not.
const DefaultMaxRMS = 1000

// InvalidError is why a message was refused: Code is a short snake_case
// class (sender, kind, age, weight, view, shape, non_finite, norm) for
// metrics, Msg the details. It wraps ErrInvalid.
type InvalidError struct {
	Code, Msg string
}

func (e *InvalidError) Error() string { return ErrInvalid.Error() + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

func invalid(code, format string, args ...any) error {
	return &InvalidError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// validateFactors checks the factors of an SFB message and returns the
// length its dense part must have.
func (n *Core) validateFactors(m *Message) (int, error) {
	dense := n.layout.Size
	seen := map[string]bool{}
	for _, f := range m.Factors {
		t, ok := n.layout.Lookup(f.Weight)
		if !ok || len(t.Shape) != 2 || seen[f.Weight] {
			return 0, invalid("shape", "factors for %q", f.Weight)
		}
		seen[f.Weight] = true
		if f.J != t.Shape[0] || f.D != t.Shape[1] || f.K <= 0 || f.K > maxFactorRank ||
			len(f.U) != f.K*f.J || len(f.V) != f.K*f.D {
			return 0, invalid("shape", "factors of %s with K=%d J=%d D=%d, |U|=%d |V|=%d", f.Weight, f.K, f.J, f.D, len(f.U), len(f.V))
		}
		if err := n.checkValues("factor U of "+f.Weight, f.U); err != nil {
			return 0, err
		}
		if err := n.checkValues("factor V of "+f.Weight, f.V); err != nil {
			return 0, err
		}
		dense -= t.Size()
	}
	return dense, nil
}

// validateCompressed checks a model message against this job's compression
// and returns how many values it must carry.
func (n *Core) validateCompressed(m *Message) (int, error) {
	size := n.layout.Size
	switch {
	case n.cfg.Subsample > 0:
		if len(m.Indices) == 0 {
			return 0, invalid("shape", "a job with subsampling received a model without indices")
		}
		for j, i := range m.Indices {
			if int(i) >= size || (j > 0 && i <= m.Indices[j-1]) {
				return 0, invalid("shape", "index %d at position %d is out of range or not ascending", i, j)
			}
		}
		return len(m.Indices), nil
	case n.cfg.Partitions > 0:
		P := n.cfg.Partitions
		if len(m.Indices) > 0 || int(m.Partition) >= P {
			return 0, invalid("shape", "partition %d of %d", m.Partition, P)
		}
		return partitionSize(size, int(m.Partition), P), nil
	}
	if len(m.Indices) > 0 || m.Partition != 0 {
		return 0, invalid("shape", "compressed model for a job without compression")
	}
	return size, nil
}

// partitionSize is the number of coordinates k < size with k mod P = p.
func partitionSize(size, p, P int) int { return (size - p + P - 1) / P }

// maxFactorRank bounds the minibatch size K of received factors.
const maxFactorRank = 1 << 16

// checkViewIDs refuses a view entry with an empty peer ID or the
// broadcast address (which would make a member send to every peer).
func checkViewIDs(view []Descriptor) error {
	for _, d := range view {
		if d.ID == "" {
			return invalid("view", "empty peer ID in view")
		}
		if d.ID == Broadcast {
			return invalid("view", "the broadcast address %q in a view", Broadcast)
		}
	}
	return nil
}

// validateHV checks a HyParView message: only a node that runs HyParView
// takes one; it carries no vectors, and a view only where its kind has
// one (a forward join: the joiner and the walk's length; a shuffle: its
// origin and length first; a disconnect: at most the peer to link to
// instead; a neighbour request: the asker's neighbours), with no empty
// IDs and not the broadcast address.
func (n *Core) validateHV(m *Message) error {
	if !n.hvOn() {
		return invalid("kind", "%s message for a node that does not run HyParView", m.Kind)
	}
	if len(m.Params) > 0 || len(m.Factors) > 0 || len(m.Indices) > 0 || m.Packed != nil {
		return invalid("shape", "a %s message carries no vectors", m.Kind)
	}
	if len(m.View) > MaxViewEntries {
		return invalid("view", "view of %d entries", len(m.View))
	}
	if err := checkViewIDs(m.View); err != nil {
		return err
	}
	switch m.Kind {
	case KindHVForwardJoin, KindHVShuffle:
		if len(m.View) == 0 || (m.Kind == KindHVForwardJoin && len(m.View) != 1) {
			return invalid("view", "%s with %d view entries", m.Kind, len(m.View))
		}
		if ttl := m.View[0].Age; ttl < 0 || ttl > hvActiveWalk {
			return invalid("view", "%s walk length %d, want 0…%d", m.Kind, ttl, hvActiveWalk)
		}
	case KindHVShuffleReply, KindHVNeighbor: // a neighbour request below half: the asker's neighbours
	case KindHVDisconnect:
		if len(m.View) > 1 {
			return invalid("view", "a %s message names %d peers to link to instead, want at most 1", m.Kind, len(m.View))
		}
	default:
		if len(m.View) > 0 {
			return invalid("view", "a %s message carries no view", m.Kind)
		}
	}
	return nil
}
