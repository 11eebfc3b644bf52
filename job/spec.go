// Package job is what the peers of one training job agree on: its
// Spec (the model, the protocol and its fixed parameters, which hash to
// the job's ID), the Settings a person gives on the command line or in a
// file to make one, with their flags in groups and their defaults stated
// once, and which options apply to which jobs (Check). The daemon (`gossipd
// run`) and the simulator (`gossipd simulate`) both take it.
package job

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
)

// Spec is what the peers of one training job must agree on for the
// math to be right: the model and its shapes, the initial model's seed,
// the feature scaling, the protocol and its fixed parameters. It hashes
// to the job's ID; a daemon merges only models of its own job, and a peer
// can join a job from the spec its announcements carry.
//
// It does not say who takes part: the members are whoever is live
// (the daemon's membership), optionally limited by an allowlist (the daemon's allowlist) or
// a consortium. Nor does it hold what each peer may choose for itself: its
// step size, batch size and local epochs (the daemon's Local, the simulator's Config).
type Spec struct {
	// Name is a label; two jobs alike in everything else are told apart
	// by it.
	Name string `json:"name"`
	// Model is the architecture, including the dataset schema (features and
	// classes).
	Model model.Spec `json:"model"`
	// Scale is the feature scaling rule (dataset.FitScaler kinds).
	Scale string `json:"scale"`
	// Protocol and its fixed parameters.
	Protocol    string `json:"protocol"`
	DeltaMillis int64  `json:"delta_ms"`
	// RoundTimeoutMillis is how long a dpsgd or sfb round waits for its
	// neighbours (0: gossip.DefaultRoundTimeout periods).
	RoundTimeoutMillis int64  `json:"round_timeout_ms,omitempty"`
	Variant            string `json:"variant,omitempty"`
	Compression        string `json:"compression,omitempty"`
	// Outer is the outer optimizer (gossip.OuterConfig): every member
	// trains the same local steps between exchanges.
	Outer *gossip.OuterConfig `json:"outer,omitempty"`
	// Topology is the graph of dpsgd, adpsgd and pushsum over the live
	// members (gossip.ParseTopology; default ring, exponential for
	// pushsum).
	Topology string `json:"topology,omitempty"`
	// Staleness is SFB's SSP bound (0: BSP).
	Staleness int `json:"staleness,omitempty"`
	// SFBMode is what SFB sends per layer: auto (default), factors or dense
	// (required with DP-SGD, whose noise factors cannot carry).
	SFBMode string `json:"sfb_mode,omitempty"`
	// FactorBatch is the minibatch size by which SFB decides which layers
	// travel as factors (merge.SFBCheaper): every member must decide alike.
	// Default gossip.DefaultBatch; sfb only.
	FactorBatch int `json:"factor_batch,omitempty"`
	// InitSeed seeds the initial model every daemon starts from.
	InitSeed uint64 `json:"init_seed"`
	// InitHash, where set, is the SHA-256 (model.ParamsHash) of the
	// initial weights every member starts from instead (--init-from).
	InitHash string `json:"init_hash,omitempty"`
	// Sampling is random walk's peer sampling: empty for Cyclon (the
	// default), or gossip.SamplingHyParView. Members must agree: each
	// refuses the other's membership messages.
	Sampling string `json:"sampling,omitempty"`
	// Tokens is random walk's token-account flow control, A:B
	// (gossip.ParseTokens; empty: one send per period).
	Tokens string `json:"tokens,omitempty"`
	// SecureAggregation masks D-PSGD's exchanges: a member learns only
	// the weighted sum of its neighbours' models (gossip.SecureConfig).
	// SecureThreshold is the fraction of a receiver's neighbours whose
	// reveals unmask its round (0: ⅔); every member holds the others'
	// rosters to it.
	SecureAggregation bool    `json:"secure_aggregation,omitempty"`
	SecureThreshold   float64 `json:"secure_threshold,omitempty"`
	// DPShares, where set, is distributed DP: each member adds 1/DPShares
	// of DP-SGD's noise variance (privacy.Config.Shares), and contributes
	// only to rounds whose threshold is at least DPShares + DPColluders,
	// so that every masked sum carries the whole noise even with
	// DPColluders of its contributors colluding with the receiver.
	DPShares    int `json:"dp_shares,omitempty"`
	DPColluders int `json:"dp_colluders,omitempty"`
}

// Validate checks the spec and fills defaults.
func (j *Spec) Validate() error {
	if err := j.Model.Validate(); err != nil {
		return err
	}
	if j.Protocol == "" {
		j.Protocol = gossip.RandomWalk
	}
	if !slices.Contains(gossip.Protocols, j.Protocol) {
		return fmt.Errorf("job: protocol %q, want one of %v", j.Protocol, gossip.Protocols)
	}
	if j.InitHash != "" {
		if b, err := hex.DecodeString(j.InitHash); err != nil || len(b) != 32 {
			return fmt.Errorf("job: init hash %q is not a SHA-256 in hex", j.InitHash)
		}
	}
	if j.Scale == "" {
		j.Scale = "global"
	}
	if j.DeltaMillis == 0 {
		j.DeltaMillis = gossip.DefaultDelta.Milliseconds()
	}
	if j.DeltaMillis < 0 {
		return fmt.Errorf("job: period %dms is negative", j.DeltaMillis)
	}
	if j.RoundTimeoutMillis < 0 {
		return fmt.Errorf("job: round timeout %dms is negative", j.RoundTimeoutMillis)
	}
	if j.RoundTimeoutMillis != 0 && j.Protocol != gossip.DPSGD && j.Protocol != gossip.SFB {
		return fmt.Errorf("job: a round timeout is dpsgd's and sfb's; this job runs %s", j.Protocol)
	}
	if _, err := gossip.ParseCompression(j.Compression); err != nil {
		return err
	}
	if j.Variant != "" && !slices.Contains(gossip.Variants, j.Variant) {
		return fmt.Errorf("job: variant %q, want %s", j.Variant, strings.Join(gossip.Variants, "|"))
	}
	if !slices.Contains([]string{"", "auto", "factors", "dense"}, j.SFBMode) {
		return fmt.Errorf("job: sfb mode %q, want auto|factors|dense", j.SFBMode)
	}
	if j.Staleness < 0 || j.FactorBatch < 0 {
		return fmt.Errorf("job: staleness %d or factor batch %d is negative", j.Staleness, j.FactorBatch)
	}
	if j.Protocol == gossip.SFB && j.FactorBatch == 0 {
		j.FactorBatch = gossip.DefaultBatch
	}
	if j.Protocol != gossip.SFB && (j.FactorBatch != 0 || j.SFBMode != "" || j.Staleness != 0) {
		return fmt.Errorf("job: sfb mode, staleness and factor batch are sfb's; this job runs %s", j.Protocol)
	}
	switch j.Sampling {
	case "", gossip.SamplingHyParView:
	case gossip.SamplingCyclon:
		j.Sampling = "" // the default is left out of the spec
	case gossip.SamplingOracle:
		return fmt.Errorf("job: sampling oracle is the simulator's: a daemon cannot sample from every peer of a job; use cyclon or hyparview")
	default:
		return fmt.Errorf("job: sampling %q, want cyclon|hyparview", j.Sampling)
	}
	if _, err := gossip.ParseTokens(j.Tokens); err != nil {
		return fmt.Errorf("job: tokens: %w", err)
	}
	if j.Tokens != "" && j.Protocol != gossip.RandomWalk {
		return fmt.Errorf("job: tokens are random walk's; this job runs %s", j.Protocol)
	}
	if err := j.validateSecure(); err != nil {
		return err
	}
	overView := j.Protocol == gossip.DPSGD || j.Protocol == gossip.ADPSGD || j.Protocol == gossip.PushSum
	if j.Sampling != "" && j.Protocol != gossip.RandomWalk && j.Protocol != gossip.GoSGD && !overView {
		return fmt.Errorf("job: sampling hyparview is for randomwalk, gosgd, dpsgd, adpsgd and pushsum; this job runs %s", j.Protocol)
	}
	if j.Sampling == gossip.SamplingHyParView && overView {
		if j.Topology != "" {
			return fmt.Errorf("job: under sampling hyparview %s mixes with each member's active view: give no topology (%q)", j.Protocol, j.Topology)
		}
	} else if gossip.NeedsTopology(j.Protocol) {
		if j.Topology == "" {
			j.Topology = gossip.DefaultTopology(j.Protocol)
		}
		if _, _, err := gossip.LiveNeighbors(j.Protocol, j.Topology, 0, []gossip.PeerID{"a", "b", "c", "d"}, "a"); err != nil {
			return err
		}
	} else if j.Topology != "" {
		return fmt.Errorf("job: protocol %s has no topology (%q is for dpsgd, adpsgd and pushsum)", j.Protocol, j.Topology)
	}
	return nil
}

// validateSecure refuses secure aggregation where the job cannot mask
// its exchanges (gossip.SecureShape).
func (j *Spec) validateSecure() error {
	switch {
	case j.DPShares < 0 || j.DPShares == 1 || j.DPColluders < 0:
		return fmt.Errorf("job: distributed DP over %d shares with %d colluders: want at least 2 shares (1 is local DP) and colluders ≥ 0", j.DPShares, j.DPColluders)
	case j.DPColluders > 0 && j.DPShares == 0:
		return fmt.Errorf("job: colluders (%d) are distributed DP's: give its shares", j.DPColluders)
	case j.DPShares > 0 && !j.SecureAggregation:
		return fmt.Errorf("job: distributed DP needs secure aggregation: without it each member's model, with its share of the noise only, is seen alone")
	}
	if !j.SecureAggregation {
		if j.SecureThreshold != 0 {
			return fmt.Errorf("job: a secure threshold (%v) without secure aggregation", j.SecureThreshold)
		}
		return nil
	}
	c, err := gossip.ParseCompression(j.Compression)
	if err != nil {
		return err
	}
	sh := gossip.SecureShape{Protocol: j.Protocol, Sampling: j.Sampling, Fraction: j.SecureThreshold,
		Compressed: c.Enabled()}
	if why := sh.Refusal(); why != "" {
		return fmt.Errorf("job: secure aggregation: %s", why)
	}
	return nil
}

// MinThreshold is the core's SecureConfig.MinThreshold: with distributed
// DP, the noise shares plus the colluders tolerated.
func (j Spec) MinThreshold() int { return MinThreshold(j.DPShares, j.DPColluders) }

// MinThreshold is the least threshold of a round that distributed DP
// over shares noise shares with colluders tolerated needs (0: no
// distributed DP, any).
func MinThreshold(shares, colluders int) int {
	if shares == 0 {
		return 0
	}
	return shares + colluders
}

// RoundTimeout is the core's Config.RoundTimeout (0: its default).
func (j Spec) RoundTimeout() time.Duration {
	return time.Duration(j.RoundTimeoutMillis) * time.Millisecond
}

// CoreTokens is the core's Config.Tokens (the spec is validated).
func (j Spec) CoreTokens() gossip.TokenConfig {
	t, _ := gossip.ParseTokens(j.Tokens)
	return t
}

// CoreSampling is the core's Config.Sampling.
func (j Spec) CoreSampling() string {
	if j.Sampling == "" {
		return gossip.SamplingCyclon
	}
	return j.Sampling
}

// LiveTopology is the core's Config.Topology: the job's graph, or, for
// SFB, which talks to every member, the complete graph.
func (j Spec) LiveTopology() string {
	switch {
	case j.Protocol == gossip.SFB:
		return "complete"
	case gossip.NeedsTopology(j.Protocol):
		return j.Topology
	}
	return ""
}

// TopologySeed draws the job's random graphs: the same for every member.
func (j Spec) TopologySeed() uint64 {
	id := j.ID()
	return binary.LittleEndian.Uint64(id[:8])
}

// Canonical is the spec's canonical encoding: JSON, fields in declaration
// order. Its SHA-256 is the job's ID.
func (j Spec) Canonical() []byte {
	b, err := json.Marshal(j)
	if err != nil {
		panic(err) // plain data cannot fail to marshal
	}
	return b
}

// ID is the SHA-256 of the spec's canonical encoding (equal specs give
// equal IDs).
func (j Spec) ID() ID { return sha256.Sum256(j.Canonical()) }

// ParseSpec reads a job spec from an announcement: it must be the
// canonical encoding of a valid spec (so that its hash, which the
// transport checked against the job ID, is the spec's ID) — a spec with
// fields this version does not know is refused, not half-read.
func ParseSpec(b []byte) (Spec, error) {
	var j Spec
	if err := json.Unmarshal(b, &j); err != nil {
		return j, fmt.Errorf("job: spec: %w", err)
	}
	if c := j.Canonical(); string(c) != string(b) {
		return j, fmt.Errorf("job: spec is not in canonical form (written by another version of gossipd?)")
	}
	v := j
	if err := v.Validate(); err != nil {
		return j, fmt.Errorf("job: spec: %w", err)
	}
	if v.ID() != j.ID() {
		return j, fmt.Errorf("job: spec lacks defaults this version fills (written by another version of gossipd?)")
	}
	return j, nil
}

// ID identifies a training job: the SHA-256 of its canonical spec.
type ID [32]byte

// String is the ID in hex.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Short is the ID's first 12 hex digits, as logs show it.
func (id ID) Short() string { return id.String()[:12] }
