package gossip

import (
	"fmt"
	"slices"
	"time"

	"github.com/gossipd/gossipd/model"
)

// Protocol names.
const (
	RandomWalk = "randomwalk"
	DPSGD      = "dpsgd"
	ADPSGD     = "adpsgd"
	PushSum    = "pushsum"
	GoSGD      = "gosgd"
	SFB        = "sfb"
)

// PushesSums reports whether protocol keeps push-sum's weights and
// running sums (pushsum and gosgd): a node's model is its de-biased
// estimate, and its accounts must be durable before it sends.
func PushesSums(protocol string) bool { return protocol == PushSum || protocol == GoSGD }

// Protocols lists the protocols the core implements, in registry order.
var Protocols = []string{RandomWalk, DPSGD, ADPSGD, PushSum, GoSGD, SFB}

// protocol is one learning protocol behind the Core. Each implements it in
// a file of its own and is registered in registry; the Core never asks
// which protocol it runs.
type protocol interface {
	start(n *Core)
	// wake is when the protocol next needs a Tick (Never: only on events).
	wake(n *Core) time.Duration
	tick(n *Core)
	step(n *Core, m *Message)
	trainDone(n *Core, r *TrainResult)
	// quietTrainDone reports whether trainDone, called now, would send
	// no message (Core.QuietTrainDone).
	quietTrainDone(n *Core) bool
	// trainDoneApart reports whether trainDone, called now, reads and
	// writes nothing a Cyclon shuffle does (Core.StepsBeside).
	trainDoneApart(n *Core) bool
	// params is the node's model (push-sum: its de-biased estimate).
	params(n *Core) []float32
	// cache is the received models kept for voting (nil: none).
	cache() [][]float32
	// weight is the push-sum weight (1 for other protocols).
	weight() float64
	// snapshot adds the protocol's own state to s; restore reads it back
	// from a saved state whose common fields are already restored.
	snapshot(s *State)
	restore(s *State) error
	// joined takes in a member's state that a joining node has just
	// copied into the node's model, age and round.
	joined(n *Core)
}

// base gives a protocol the behaviour most protocols share: the model is
// the node's parameter vector, and there is no state beyond the Core's.
type base struct{}

func (base) params(n *Core) []float32  { return n.params }
func (base) cache() [][]float32        { return nil }
func (base) weight() float64           { return 1 }
func (base) snapshot(*State)           {}
func (base) restore(*State) error      { return nil }
func (base) joined(*Core)              {}
func (base) quietTrainDone(*Core) bool { return false }
func (base) trainDoneApart(*Core) bool { return false }

// protocolDef registers a protocol.
type protocolDef struct {
	// new builds the protocol for a validated config.
	new func(cfg *Config, layout *model.Layout) protocol
	// kinds are the message kinds it accepts (views are accepted by every
	// node).
	kinds []Kind
	// neighbors says Config.Neighbors must be set.
	neighbors bool
	// view says the node runs a Cyclon view (when Sampling is cyclon) or
	// HyParView (when it is hyparview) to pick its peers.
	view bool
	// overView says that under HyParView the node mixes with its active
	// view: its neighbours are the view's members, rewired as it changes.
	overView bool
	// robust checks a robust aggregator needing need inputs; nil: robust
	// aggregation is not available.
	robust func(c *Config, need int) error
	// replaces says that it never writes the node's model in place: each
	// update makes a new vector (Config.ShareInit).
	replaces bool
}

// registry holds every protocol; Protocols lists its keys in order.
var registry = map[string]protocolDef{
	RandomWalk: {
		new:      func(c *Config, _ *model.Layout) protocol { return newRandomWalk(c) },
		kinds:    []Kind{KindModel},
		view:     true,
		replaces: true,
		robust: func(c *Config, need int) error {
			if c.Variant != "mu" || c.Subsample > 0 || c.Partitions > 0 {
				return fmt.Errorf("%w: aggregator %s: robust random walk merges whole models (variant mu, no compression)", ErrConfig, c.Aggregator.Name())
			}
			return c.robustCache(need)
		},
	},
	DPSGD: {
		new:       func(c *Config, _ *model.Layout) protocol { return newDPSGD(c) },
		kinds:     []Kind{KindParams, KindSecAdvert, KindSecRoster, KindSecDealt, KindSecRelay, KindSecMasked, KindSecRequest, KindSecReveal},
		neighbors: true,
		overView:  true,
		replaces:  true,
		robust: func(c *Config, need int) error {
			if c.Topology == "" && len(c.Neighbors)+1 < need {
				return fmt.Errorf("%w: aggregator %s needs %d inputs; this node has %d neighbours and itself", ErrConfig, c.Aggregator.Name(), need, len(c.Neighbors))
			}
			return nil
		},
	},
	ADPSGD: {
		new:       func(c *Config, _ *model.Layout) protocol { return newADPSGD(c) },
		kinds:     []Kind{KindAvgRequest, KindAvgReply},
		neighbors: true,
		overView:  true,
	},
	PushSum: {
		new:       func(c *Config, _ *model.Layout) protocol { return newPushSum(c) },
		kinds:     []Kind{KindPushSum},
		neighbors: true,
		overView:  true,
		robust:    func(c *Config, need int) error { return c.robustCache(need) },
	},
	GoSGD: {
		new:   func(c *Config, _ *model.Layout) protocol { return newGoSGD(c) },
		kinds: []Kind{KindPushSum},
		view:  true,
	},
	SFB: {
		new:       func(c *Config, l *model.Layout) protocol { return newSFB(c, l) },
		kinds:     []Kind{KindFactors, KindParams}, // params: a state transfer to a peer that fell behind
		neighbors: true,
	},
}

// SamplesPeers reports whether protocol draws its peers from a
// peer-sampling service (randomwalk, gosgd) rather than mixing over a
// graph or with every member.
func SamplesPeers(protocol string) bool {
	d, ok := registry[protocol]
	return ok && d.view
}

// robustProtocols lists the protocols that take a robust aggregator.
func robustProtocols() []string {
	return slices.DeleteFunc(slices.Clone(Protocols), func(p string) bool { return registry[p].robust == nil })
}
