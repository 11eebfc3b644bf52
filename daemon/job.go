package daemon

import (
	"fmt"
	"slices"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
)

// Local is what each peer of a job chooses for itself: peers of one job
// may differ in all of it.
type Local struct {
	// LR is the step size (default gossip.DefaultLR).
	LR float64
	// Batch is the minibatch size (default gossip.DefaultBatch).
	Batch int
	// LocalEpochs is the passes over the local data per random-walk update
	// (default 1).
	LocalEpochs int
	// Members, when set, is an allowlist: only these peers are admitted to
	// the job by this peer (sorted by Validate).
	Members []string
}

// Validate checks the local settings and fills defaults.
func (l *Local) Validate() error {
	if l.LR == 0 {
		l.LR = gossip.DefaultLR
	}
	if l.Batch == 0 {
		l.Batch = gossip.DefaultBatch
	}
	if l.LocalEpochs == 0 {
		l.LocalEpochs = 1
	}
	if l.LR < 0 || l.Batch < 0 || l.LocalEpochs < 0 {
		return fmt.Errorf("daemon: negative step size, batch or epoch count")
	}
	slices.Sort(l.Members)
	if k := len(l.Members); len(slices.Compact(l.Members)) != k {
		return fmt.Errorf("daemon: the members allowlist names a peer twice")
	}
	return nil
}

// IsMember reports whether p may take part: every peer without an
// allowlist.
func (l Local) IsMember(p gossip.PeerID) bool {
	if len(l.Members) == 0 {
		return true
	}
	_, ok := slices.BinarySearch(l.Members, string(p))
	return ok
}

// memberIDs is the allowlist as the peer takes it (sorted; nil: all).
func (l Local) memberIDs() []gossip.PeerID {
	var out []gossip.PeerID
	for _, m := range l.Members {
		out = append(out, gossip.PeerID(m))
	}
	return out
}

// JobID identifies a training job: the SHA-256 of its canonical spec.
type JobID = transport.JobID
