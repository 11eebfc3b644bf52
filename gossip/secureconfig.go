package gossip

import (
	"fmt"
	"io"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/privacy/secagg"
)

// SecureConfig turns on secure aggregation for D-PSGD: each node learns
// the weighted sum of its neighbours' parameters, never one of them
// (privacy/secagg). A round at a node is four exchanges with its
// neighbours, each closed when every expected message is in or at a
// quarter of RoundTimeout. A round traces "secure-sum" (the value: how
// many neighbours' models it summed) and "secure-recovered" when members
// dropped out after dealing (the value: how many); a round with fewer
// survivors than the threshold averages nothing (the node takes its own
// step) and is traced as "secure-skipped".
type SecureConfig struct {
	// Enabled turns it on.
	Enabled bool
	// Job binds every key to the job (the daemon's job ID).
	Job string
	// Fraction is the threshold as a fraction of a receiver's roster, in
	// (½, 1]. Default secagg.DefaultFraction (⅔).
	Fraction float64
	// Ring is the fixed-point encoding (secagg.Ring's defaults: scale
	// 2²⁰, each weighted value clipped to ±64).
	Ring secagg.Ring
	// Rand draws the node's secrets: crypto/rand in the daemon, a seeded
	// source in the simulator and tests. Required.
	Rand io.Reader
	// Sign and Verify, where set (together), authenticate each member's
	// keys by its identity: a member signs its adverts (Sign: with its
	// identity key), and before dealing checks every other member's
	// signature of the keys the receiver relays (Verify: by the signer's
	// ID), so that a receiver cannot put its own keys in another
	// member's place to read the shares sealed for it. The daemon signs
	// with its libp2p key; the simulator has no identities.
	Sign   func(msg []byte) ([]byte, error)
	Verify func(signer PeerID, msg, sig []byte) error
	// MinThreshold, where set, is the least threshold of a round this
	// node contributes to: with distributed DP, the honest contributions
	// whose noise must add up in every sum, plus the colluders tolerated.
	// A sender abstains from a round whose roster has a lower one.
	MinThreshold int
}

// validate checks the secure settings against the rest of the config.
func (s *SecureConfig) validate(c *Config) error {
	if !s.Enabled {
		return nil
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: secure aggregation: "+format, append([]any{ErrConfig}, a...)...)
	}
	agg := ""
	if c.Aggregator != nil {
		agg = c.Aggregator.Name()
	}
	sh := SecureShape{Protocol: c.Protocol, Sampling: c.Sampling, Aggregator: agg, Fraction: s.Fraction,
		Compressed: c.Quantize.Kind != compress.None || c.Sparse.Kind != compress.None}
	if why := sh.Refusal(); why != "" {
		return bad("%s", why)
	}
	switch {
	case s.Rand == nil:
		return bad("no source of randomness")
	case c.Topology == "" && len(c.Neighbors) < 2:
		return bad("%d neighbours: a receiver with fewer than 2 would see one neighbour's model alone", len(c.Neighbors))
	case (s.Sign == nil) != (s.Verify == nil):
		return bad("a signer without a verifier, or the other way round")
	case s.MinThreshold < 0:
		return bad("least threshold %d", s.MinThreshold)
	case c.Topology == "" && secagg.Threshold(len(c.Neighbors), s.Fraction) < s.MinThreshold:
		return bad("distributed DP needs rounds of threshold %d (its noise shares and the colluders tolerated), and %d neighbours give %d",
			s.MinThreshold, len(c.Neighbors), secagg.Threshold(len(c.Neighbors), s.Fraction))
	}
	s.Ring = s.Ring.WithDefaults()
	// Over a live topology the degree is known per round only: a roster
	// larger than the ring can sum skips its round (advance).
	if err := s.Ring.Validate(len(c.Neighbors)); err != nil {
		return bad("%v", err)
	}
	return nil
}

// SecureShape is what decides whether a job can mask its exchanges:
// the job's settings that secure aggregation rules out, which the
// daemon's job spec and the simulator check before any node starts.
type SecureShape struct {
	Protocol, Sampling string
	// Aggregator is the merge rule's name ("" or merge.WeightedMean's:
	// the mean).
	Aggregator string
	// Fraction is the threshold fraction (0: the default).
	Fraction   float64
	Compressed bool
}

// Refusal says why a job of this shape cannot mask its exchanges, or ""
// when it can.
func (sh SecureShape) Refusal() string {
	if why := SecureRefusal(sh.Protocol); why != "" {
		return why
	}
	switch {
	case sh.Fraction != 0 && !(sh.Fraction > 0.5 && sh.Fraction <= 1):
		return fmt.Sprintf("threshold fraction %v, want more than ½ and at most 1", sh.Fraction)
	case sh.Compressed:
		return "compression: the masked sum is taken over integers modulo 2³², which compressed vectors are not"
	case sh.Aggregator != "" && sh.Aggregator != (merge.WeightedMean{}).Name():
		return "aggregator " + sh.Aggregator + ": a robust rule must see each neighbour's model, which masking hides"
	case sh.Sampling == SamplingHyParView:
		return "--sampling hyparview: the neighbours are the active view, which changes too often for rounds of four exchanges"
	}
	return ""
}

// SecureCounts counts secure-aggregation events from a node's traces
// (or a whole simulation's): its rounds as a receiver whose
// neighbours' masked sum it decoded, those it skipped (too few
// neighbours took part before the deadline: it kept its own model), the
// neighbours that dealt and then sent no contribution, whose masks the
// rounds removed with the survivors' shares, the neighbours' rounds it
// abstained from (distributed DP), and messages with parameters in the
// clear the core withheld (none, unless gossipd has a bug).
type SecureCounts struct {
	Summed    uint64 `json:"summed"`
	Skipped   uint64 `json:"skipped"`
	Recovered uint64 `json:"dropouts_recovered"`
	Abstained uint64 `json:"abstained,omitempty"`
	// Late counts secure messages of a round or exchange already closed
	// (or one the node has no part in): set aside, not refused, as
	// honest ones arrive late too.
	Late          uint64 `json:"late"`
	ClearWithheld uint64 `json:"clear_withheld"`
}

// Count adds e and reports whether it is one of the events counted.
func (c *SecureCounts) Count(e TraceEvent) bool {
	switch e.Event {
	case "secure-sum":
		c.Summed++
	case "secure-skipped":
		c.Skipped++
	case "secure-recovered":
		c.Recovered += uint64(e.Value)
	case "secure-abstained":
		c.Abstained++
	case "secure-late":
		c.Late++
	case "withheld":
		c.ClearWithheld++
	default:
		return false
	}
	return true
}

// SecureRefusal says why protocol takes no secure aggregation, or ""
// for D-PSGD, which does.
func SecureRefusal(protocol string) string {
	switch protocol {
	case DPSGD:
		return ""
	case RandomWalk:
		return "random walk moves one whole model from peer to peer, so there is no sum to hide it in"
	case PushSum, GoSGD:
		return protocol + " sends each share to one peer at a time; masking needs several senders to one receiver in the same round (a synchronous variant over a fixed graph would)"
	case ADPSGD:
		return "AD-PSGD averages pairwise, and a pair's average reveals the other's model; it would need groups of three or more averaging together"
	case SFB:
		return "SFB broadcasts every update to every peer; it would need a secure broadcast sum"
	}
	return fmt.Sprintf("protocol %q runs D-PSGD rounds only", protocol)
}
