package node

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
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
		j.DeltaMillis = 1000
	}
	if j.LR == 0 {
		j.LR = 0.1
	}
	if j.Batch == 0 {
		j.Batch = 32
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
	return nil
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

// String is the ID in hex.
func (id JobID) String() string { return hex.EncodeToString(id[:]) }

// Short is the first 12 hex digits, for logs.
func (id JobID) Short() string { return id.String()[:12] }
