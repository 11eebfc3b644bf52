package node

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/node/transport"
)

// JobSpec is what the daemons of one training job must agree on; it hashes
// to the job's ID, and a daemon merges only models of its own job.
type JobSpec struct {
	// Name is a free-form label.
	Name string `json:"name"`
	// Model is the architecture, including the dataset schema (features and
	// classes).
	Model model.Spec `json:"model"`
	// Scale is the feature scaling rule (dataset.FitScaler kinds).
	Scale string `json:"scale"`
	// Protocol and its hyper-parameters.
	Protocol    string  `json:"protocol"`
	DeltaMillis int64   `json:"delta_ms"`
	LR          float64 `json:"lr"`
	Batch       int     `json:"batch"`
	LocalEpochs int     `json:"local_epochs"`
	Variant     string  `json:"variant,omitempty"`
	Compression string  `json:"compression,omitempty"`
	// Topology is the graph of dpsgd, adpsgd and pushsum over Members
	// (gossip.ParseTopology; default ring, exponential for pushsum).
	Topology string `json:"topology,omitempty"`
	// Members lists the job's peer IDs, sorted. dpsgd, adpsgd, pushsum and
	// sfb need it: a node's place in the topology is its index here, so
	// every member derives the same graph. With random walk it is optional
	// and, when set, admits only these peers.
	Members []string `json:"members,omitempty"`
	// Staleness is SFB's SSP bound (0: BSP).
	Staleness int `json:"staleness,omitempty"`
	// SFBMode is what SFB sends per layer: auto (default), factors or dense
	// (required with DP-SGD, whose noise factors cannot carry).
	SFBMode string `json:"sfb_mode,omitempty"`
	// InitSeed seeds the initial model every daemon starts from.
	InitSeed uint64 `json:"init_seed"`
}

// Validate checks the spec and fills defaults.
func (j *JobSpec) Validate() error {
	if err := j.Model.Validate(); err != nil {
		return err
	}
	if j.Protocol == "" {
		j.Protocol = gossip.RandomWalk
	}
	if !slices.Contains(gossip.Protocols, j.Protocol) {
		return fmt.Errorf("node: job protocol %q, want one of %v", j.Protocol, gossip.Protocols)
	}
	if j.Scale == "" {
		j.Scale = "global"
	}
	if j.DeltaMillis == 0 {
		j.DeltaMillis = gossip.DefaultDelta.Milliseconds()
	}
	if j.LR == 0 {
		j.LR = gossip.DefaultLR
	}
	if j.Batch == 0 {
		j.Batch = gossip.DefaultBatch
	}
	if j.LocalEpochs == 0 {
		j.LocalEpochs = 1
	}
	if j.DeltaMillis < 0 || j.LR < 0 || j.Batch < 0 || j.LocalEpochs < 0 {
		return fmt.Errorf("node: job has a negative period, rate, batch or epoch count")
	}
	if _, _, err := gossip.ParseCompression(j.Compression); err != nil {
		return err
	}
	if !slices.Contains([]string{"", "auto", "factors", "dense"}, j.SFBMode) {
		return fmt.Errorf("node: job sfb mode %q, want auto|factors|dense", j.SFBMode)
	}
	if j.Staleness < 0 {
		return fmt.Errorf("node: job staleness %d is negative", j.Staleness)
	}
	slices.Sort(j.Members)
	if k := len(j.Members); len(slices.Compact(j.Members)) != k {
		return fmt.Errorf("node: job members list a peer twice")
	}
	if j.Protocol == gossip.RandomWalk {
		if j.Topology != "" {
			return fmt.Errorf("node: random walk samples its peers; a topology (%q) is for dpsgd, adpsgd and pushsum", j.Topology)
		}
		return nil
	}
	if len(j.Members) < 2 {
		return fmt.Errorf("node: protocol %s needs the job's members (at least 2 peer IDs), got %d", j.Protocol, len(j.Members))
	}
	if gossip.NeedsTopology(j.Protocol) {
		if j.Topology == "" {
			j.Topology = gossip.DefaultTopology(j.Protocol)
		}
		if _, err := j.graph(); err != nil {
			return err
		}
	} else if j.Topology != "" {
		return fmt.Errorf("node: protocol %s talks to every member; a topology (%q) is for dpsgd, adpsgd and pushsum", j.Protocol, j.Topology)
	}
	return nil
}

// graph builds the job's topology over its members; random graphs are
// seeded by the job, so every member builds the same one.
func (j JobSpec) graph() (*gossip.Graph, error) {
	if !gossip.NeedsTopology(j.Protocol) {
		return nil, nil
	}
	id := j.ID()
	return gossip.ParseTopology(j.Topology, len(j.Members), rand.New(rand.NewPCG(binary.LittleEndian.Uint64(id[:8]), 0x746f70)))
}

// IsMember reports whether p may take part in the job: every peer when the
// job lists no members.
func (j JobSpec) IsMember(p gossip.PeerID) bool {
	if len(j.Members) == 0 {
		return true
	}
	_, ok := slices.BinarySearch(j.Members, string(p))
	return ok
}

// Neighbors returns self's neighbours and self-weight in the job's
// topology (gossip.Assign over the sorted members).
func (j JobSpec) Neighbors(self gossip.PeerID) ([]gossip.Neighbor, float64, error) {
	if j.Protocol == gossip.RandomWalk {
		return nil, 0, nil
	}
	i, ok := slices.BinarySearch(j.Members, string(self))
	if !ok {
		return nil, 0, fmt.Errorf("node: this node (%s) is not among the job's %d members", self, len(j.Members))
	}
	g, err := j.graph()
	if err != nil {
		return nil, 0, err
	}
	nb, w := gossip.Assign(j.Protocol, g, len(j.Members), i, func(k int) gossip.PeerID { return gossip.PeerID(j.Members[k]) })
	return nb, w, nil
}

// ID is the SHA-256 of the spec's JSON encoding (fields in declaration
// order, so equal specs give equal IDs).
func (j JobSpec) ID() JobID {
	b, err := json.Marshal(j)
	if err != nil {
		panic(err) // plain data cannot fail to marshal
	}
	return sha256.Sum256(b)
}

// JobID identifies a training job: the SHA-256 of its canonical spec.
type JobID = transport.JobID
