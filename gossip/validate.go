package gossip

import (
	"fmt"
	"math"
	"slices"

	"github.com/gossipd/gossipd/merge"
)

// MaxViewEntries bounds the view a message may carry.
const MaxViewEntries = 1024

// protocolKinds lists the message kinds each protocol accepts (views are
// accepted by every node).
var protocolKinds = map[string][]Kind{
	RandomWalk: {KindModel},
	DPSGD:      {KindParams},
	ADPSGD:     {KindAvgRequest, KindAvgReply},
	PushSum:    {KindPushSum},
	SFB:        {KindFactors, KindParams}, // params: a state transfer to a peer that fell behind
}

// validate checks a message against this node's job before anything is
// merged: sender, kind, shapes, finite values.
func (n *Node) validate(m *Message) error {
	if m.From == "" {
		return fmt.Errorf("%w: no sender", ErrInvalid)
	}
	if m.From == n.cfg.ID {
		return fmt.Errorf("%w: message from self", ErrInvalid)
	}
	switch m.Kind {
	case KindViewPush, KindViewReply:
		if len(m.View) > MaxViewEntries {
			return fmt.Errorf("%w: view of %d entries", ErrInvalid, len(m.View))
		}
		for _, d := range m.View {
			if d.ID == "" {
				return fmt.Errorf("%w: empty peer ID in view", ErrInvalid)
			}
		}
		return nil
	}
	if !slices.Contains(protocolKinds[n.cfg.Protocol], m.Kind) {
		return fmt.Errorf("%w: %s message for a %s node", ErrInvalid, m.Kind, n.cfg.Protocol)
	}
	if math.IsNaN(m.Age) || math.IsInf(m.Age, 0) || m.Age < 0 {
		return fmt.Errorf("%w: age %v", ErrInvalid, m.Age)
	}
	if m.Kind == KindPushSum && !(m.Weight > 0 && !math.IsInf(m.Weight, 0)) {
		return fmt.Errorf("%w: push-sum weight %v", ErrInvalid, m.Weight)
	}
	want := n.layout.Size
	if m.Kind == KindModel {
		var err error
		if want, err = n.validateCompressed(m); err != nil {
			return err
		}
	} else if len(m.Indices) > 0 || m.Partition != 0 {
		return fmt.Errorf("%w: %s message with indices or a partition", ErrInvalid, m.Kind)
	}
	if m.Kind == KindFactors {
		var err error
		if want, err = n.validateFactors(m); err != nil {
			return err
		}
	}
	if len(m.Params) != want {
		return fmt.Errorf("%w: %d parameters, want %d", ErrInvalid, len(m.Params), want)
	}
	if !merge.Finite(m.Params) {
		return fmt.Errorf("%w: non-finite parameters", ErrInvalid)
	}
	return nil
}

// validateFactors checks the factors of an SFB message and returns the
// length its dense part must have.
func (n *Node) validateFactors(m *Message) (int, error) {
	dense := n.layout.Size
	seen := map[string]bool{}
	for _, f := range m.Factors {
		t, ok := n.layout.Lookup(f.Weight)
		if !ok || len(t.Shape) != 2 || seen[f.Weight] {
			return 0, fmt.Errorf("%w: factors for %q", ErrInvalid, f.Weight)
		}
		seen[f.Weight] = true
		if f.J != t.Shape[0] || f.D != t.Shape[1] || f.K <= 0 || f.K > maxFactorRank ||
			len(f.U) != f.K*f.J || len(f.V) != f.K*f.D {
			return 0, fmt.Errorf("%w: factors of %s with K=%d J=%d D=%d, |U|=%d |V|=%d", ErrInvalid, f.Weight, f.K, f.J, f.D, len(f.U), len(f.V))
		}
		if !merge.Finite(f.U) || !merge.Finite(f.V) {
			return 0, fmt.Errorf("%w: non-finite factors", ErrInvalid)
		}
		dense -= t.Size()
	}
	return dense, nil
}

// validateCompressed checks a model message against this job's compression
// and returns how many values it must carry.
func (n *Node) validateCompressed(m *Message) (int, error) {
	size := n.layout.Size
	switch {
	case n.cfg.Subsample > 0:
		if len(m.Indices) == 0 {
			return 0, fmt.Errorf("%w: a job with subsampling received a model without indices", ErrInvalid)
		}
		for j, i := range m.Indices {
			if int(i) >= size || (j > 0 && i <= m.Indices[j-1]) {
				return 0, fmt.Errorf("%w: index %d at position %d is out of range or not ascending", ErrInvalid, i, j)
			}
		}
		return len(m.Indices), nil
	case n.cfg.Partitions > 0:
		P := n.cfg.Partitions
		if len(m.Indices) > 0 || int(m.Partition) >= P {
			return 0, fmt.Errorf("%w: partition %d of %d", ErrInvalid, m.Partition, P)
		}
		return partitionSize(size, int(m.Partition), P), nil
	}
	if len(m.Indices) > 0 || m.Partition != 0 {
		return 0, fmt.Errorf("%w: compressed model for a job without compression", ErrInvalid)
	}
	return size, nil
}

// partitionSize is the number of coordinates k < size with k mod P = p.
func partitionSize(size, p, P int) int { return (size - p + P - 1) / P }

// maxFactorRank bounds the minibatch size K of received factors.
const maxFactorRank = 1 << 16
