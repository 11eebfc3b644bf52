package gossip

import (
	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/model"
)

// PeerID identifies a peer. The daemon uses libp2p peer IDs, the simulator
// short names; the core only compares and sorts them.
type PeerID = string

// Broadcast, as a Message's To, asks the shell to deliver the message to
// every peer of the job at once (see Config.Broadcast).
const Broadcast PeerID = "*"

// Kind is a message type.
type Kind uint8

// Message kinds.
const (
	// KindModel carries a whole model and its age (random-walk gossip).
	KindModel Kind = iota + 1
	// KindParams carries a D-PSGD round's parameters.
	KindParams
	// KindAvgRequest and KindAvgReply are AD-PSGD's pairwise averaging.
	KindAvgRequest
	KindAvgReply
	// KindPushSum carries a push-sum share (x, w).
	KindPushSum
	// KindFactors carries an SFB update: sufficient factors of some layers and
	// the dense remainder.
	KindFactors
	// KindViewPush and KindViewReply exchange peer-sampling views.
	KindViewPush
	KindViewReply
	// KindStateRequest asks a member for its state (a peer joining a
	// running job); KindStateReply answers with the model (push-sum: its
	// de-biased estimate), its age and its round or clock.
	KindStateRequest
	KindStateReply
	// HyParView membership (hyparview.go): join, forward join, neighbour
	// request and reply, disconnect, shuffle and its reply, ping.
	KindHVJoin
	KindHVForwardJoin
	KindHVNeighbor
	KindHVNeighborReply
	KindHVDisconnect
	KindHVShuffle
	KindHVShuffleReply
	KindHVPing
	// Secure aggregation (securewire.go, privacy/secagg): a member's
	// advert to a receiver, the receiver's roster, a member's sealed
	// shares, the receiver's relay of them, a masked contribution, the
	// receiver's request for shares and a member's reveal.
	KindSecAdvert
	KindSecRoster
	KindSecDealt
	KindSecRelay
	KindSecMasked
	KindSecRequest
	KindSecReveal
)

var kindNames = map[Kind]string{
	KindModel: "model", KindParams: "params", KindAvgRequest: "avg-request", KindAvgReply: "avg-reply",
	KindPushSum: "push-sum", KindFactors: "factors", KindViewPush: "view-push", KindViewReply: "view-reply",
	KindStateRequest: "state-request", KindStateReply: "state-reply",
	KindHVJoin: "hv-join", KindHVForwardJoin: "hv-forward-join", KindHVNeighbor: "hv-neighbor",
	KindHVNeighborReply: "hv-neighbor-reply", KindHVDisconnect: "hv-disconnect", KindHVShuffle: "hv-shuffle",
	KindHVShuffleReply: "hv-shuffle-reply", KindHVPing: "hv-ping",
	KindSecAdvert: "sec-advert", KindSecRoster: "sec-roster", KindSecDealt: "sec-dealt", KindSecRelay: "sec-relay",
	KindSecMasked: "sec-masked", KindSecRequest: "sec-request", KindSecReveal: "sec-reveal",
}

// Membership reports whether messages of kind k maintain peer-sampling
// views (Cyclon's or HyParView's) rather than carry learning.
func (k Kind) Membership() bool {
	return k == KindViewPush || k == KindViewReply || (k >= KindHVJoin && k <= KindHVPing)
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return "unknown"
}

// CarriesModel reports whether messages of kind k carry another peer's
// model, parameters or update: what a peer learns from (not views, state
// requests or other control).
func (k Kind) CarriesModel() bool {
	switch k {
	case KindModel, KindParams, KindAvgRequest, KindAvgReply, KindPushSum, KindFactors, KindStateReply, KindSecMasked:
		return true
	}
	return false
}

// Descriptor is an entry of a peer-sampling view: a peer and the age of the
// entry, in view periods since the peer itself issued it (Cyclon style).
// Ages, unlike timestamps, need no clocks that agree across nodes.
type Descriptor struct {
	ID  PeerID
	Age int64
}

// Message is what cores exchange. Which fields are set depends on Kind.
type Message struct {
	Kind Kind
	From PeerID
	To   PeerID
	// Round is the D-PSGD round or the SFB clock.
	Round uint64
	// Age is the number of examples a model has seen (random walk).
	Age float64
	// Weight is the push-sum weight. In D-PSGD's parameters over a live
	// topology it is the sender's degree (0: not advertised), for
	// Metropolis–Hastings weights that both ends of an edge agree on.
	Weight float64
	// Sent is push-sum's running sum: all the weight the sender has ever
	// pushed to the receiver, this share included (Round then numbers the
	// link's shares). A receiver that missed shares, or got more than the
	// sender now accounts for, corrects its weight by the difference.
	Sent float64
	// Params is a parameter vector (model, D-PSGD, AD-PSGD, push-sum share)
	// or, for KindFactors, the dense part of the update in layout order
	// (every tensor not sent as factors). It may be the sender's own
	// model, shared, which the sender then never writes in place (random
	// walk replaces its model after each update): a receiver, the network
	// and everything in between only read it.
	Params []float32
	// Packed, with a job's value compression (Config.Quantize), carries
	// Params compressed: the sender sets it instead of Params, and Step
	// puts the decompressed vector back in Params.
	Packed *compress.Payload
	// Indices, when set, lists (ascending) the coordinates a randomly
	// subsampled model carries in Params.
	Indices []uint32
	// Partition is the partition a partitioned model's Params hold
	// (coordinates Partition, Partition+P, …).
	Partition uint32
	// Factors holds per-layer sufficient factors (KindFactors).
	Factors []model.Factors
	// View is a peer-sampling view.
	View []Descriptor
	// Secure is a secure-aggregation message's payload (KindSec*).
	Secure *SecureAgg

	// keyframe marks, in a job with sparse compression, a dense public
	// copy rather than a compressed step (set by Core.unpack).
	keyframe bool
	// sum is Σ x² of Params as the sender's trainer measured it, for a
	// receiver in the same process (a message that crossed a network was
	// decoded into new memory, and one whose Params were replaced
	// carries a sum of other memory: neither matches).
	sum knownSum
}

// SetParams replaces the message's vector by v, whose Σ x²
// (merge.SumSquares) ss gives when called, without reading v where v is
// a vector a Mixer still makes (its SumLater): a simulated attacker's
// vector. Where ss is nil the receiver measures v.
func (m *Message) SetParams(v []float32, ss func() float64) {
	m.Params, m.sum = v, knownSum{}
	if ss != nil && len(v) > 0 {
		m.sum = knownSum{of: &v[0], n: len(v), later: ss}
	}
}

// knownSum is Σ x² of one vector, known without reading it: the vector is
// named by its first element and length, so that a sum stays with the
// memory it was measured on (vectors shared in messages are never
// written in place: Message.Params).
type knownSum struct {
	of    *float32
	n     int
	ss    float64
	later func() float64 // where set, gives ss (a Mixer's SumLater)
}

// sumOf returns the known sum of v, measured as ss.
func sumOf(v []float32, ss float64) knownSum {
	if len(v) == 0 {
		return knownSum{}
	}
	return knownSum{of: &v[0], n: len(v), ss: ss}
}

// initSum returns the known sum of v if v is the shared initial vector
// and the config knows its sum (Config.InitSum).
func (c *Config) initSum(v []float32) (knownSum, bool) {
	if c.InitSum == nil || !c.ShareInit || len(v) == 0 || len(v) != len(c.Init) || &v[0] != &c.Init[0] {
		return knownSum{}, false
	}
	return knownSum{of: &v[0], n: len(v), later: c.InitSum}, true
}

// get returns the sum if it was measured on v.
func (k knownSum) get(v []float32) (float64, bool) {
	if k.of == nil || len(v) != k.n || &v[0] != k.of {
		return 0, false
	}
	if k.later != nil {
		return k.later(), true
	}
	return k.ss, true
}
