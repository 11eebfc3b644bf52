package gossip

import (
	"fmt"
	"slices"
	"time"

	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
)

// TrainOp says what a training request asks for.
type TrainOp uint8

const (
	// OpUpdate: run local SGD from Params for Steps minibatches (0: one pass
	// over the local data) and return the new parameters.
	OpUpdate TrainOp = iota + 1
	// OpGradient: return the mean gradient of one minibatch at Params.
	OpGradient
	// OpFactors: return the sufficient factors of the weight layers listed
	// in FactorLayers and the dense gradient of every other tensor, for one
	// minibatch at Params.
	OpFactors
)

// TrainRequest asks the shell to run training on the node's local data.
type TrainRequest struct {
	// ID matches the result to the request.
	ID uint64
	Op TrainOp
	// Params is the starting point; the request owns this copy, unless
	// MixWith or MixRule is set (then it is the core's model, read only),
	// or the op only reads it (OpGradient and OpFactors may share it with
	// messages, which nobody writes).
	Params []float32
	// MixWith, when set, moves the starting point to Params + MixWeight·
	// (MixWith − Params) (merge.Interpolate): random walk's age-weighted
	// merge, left to whoever runs the request (Resolve, or a trainer
	// that merges into its model's own parameters), so that it runs where
	// training runs, beside a simulator's event loop or on its device,
	// instead of on the core's goroutine. Params and MixWith are then
	// shared with the core and a message, and only read.
	MixWith   []float32
	MixWeight float32
	// MixRule, when set, makes the starting point its combination of
	// MixInputs with weights MixWeights, MixInputs[0] being Params, the
	// node's own model (MixRule.Aggregate(dst, MixInputs, MixWeights,
	// 0)): random walk's robust merge of the model received and the
	// cached ones, left to whoever runs the request as MixWith is, the
	// inputs passed by merge.Check and only read. MixWith is then nil.
	MixRule    merge.Aggregator
	MixInputs  [][]float32
	MixWeights []float64
	// Steps of local SGD for OpUpdate; 0 means one pass over the local data.
	Steps int
	// Age is the number of examples the starting model has seen (random
	// walk); step sizes that decay with age (Pegasos) use it.
	Age float64
	// FactorLayers names the weight tensors to return as factors (OpFactors).
	FactorLayers []string
}

// TrainResult is the shell's answer to a TrainRequest.
type TrainResult struct {
	ID uint64
	// Params are the new parameters (OpUpdate).
	Params []float32
	// Grad is the gradient (OpGradient) or, for OpFactors, the dense part:
	// a full-length gradient whose factor-sent weights may be left zero.
	Grad []float32
	// Factors are the sufficient factors (OpFactors).
	Factors []model.Factors
	// Examples is how many examples the training used.
	Examples int
	// Loss is the mean training loss.
	Loss float64
	// Measured says that the trainer measured SumSquares where it
	// trained: Σ x², in float64, of the vector the request's op returns
	// (Params for OpUpdate, Grad for the others), NaN or +Inf when that
	// vector holds a non-finite value. The core then checks the vector by
	// it instead of reading it again on its own goroutine (a simulator's
	// batch measures its results on the device, compute.Rows), and hands
	// it on with the model to receivers in the same process, which check
	// the model's norm by it (Message).
	Measured   bool
	SumSquares float64
}

// measuredSum returns the sum the trainer measured on v, if it did.
func (r *TrainResult) measuredSum(v []float32) (float64, bool) {
	if !r.Measured {
		return 0, false
	}
	out := r.Params
	if out == nil {
		out = r.Grad
	}
	return sumOf(out, r.SumSquares).get(v)
}

// Resolve gives r a starting point of its own: the mix MixWith or
// MixRule asks for, in a new vector that becomes Params. A request
// without either is left as it is. Whoever runs a request resolves it
// first, or merges the same values where it trains
// (trainer.Trainer.start) and gives the request a vector of its own for
// the result.
func (r *TrainRequest) Resolve() error {
	if !r.Mixes() {
		return nil
	}
	return r.ResolveInto(make([]float32, len(r.Params)))
}

// Mixes reports whether the starting point is a mix (MixWith or
// MixRule) that Resolve computes.
func (r *TrainRequest) Mixes() bool { return r.MixWith != nil || r.MixRule != nil }

// CheckMix returns an error unless every vector the request's mix reads
// (Params, MixWith, MixInputs) holds n values: never so of a core's.
func (r *TrainRequest) CheckMix(n int) error {
	if !r.Mixes() {
		return nil
	}
	if len(r.Params) != n || r.MixWith != nil && len(r.MixWith) != n {
		return fmt.Errorf("gossip: a merge of %d and %d values, the model has %d", len(r.Params), len(r.MixWith), n)
	}
	for _, x := range r.MixInputs {
		if len(x) != n {
			return fmt.Errorf("gossip: a robust merge of a vector of %d values, the model has %d", len(x), n)
		}
	}
	return nil
}

// ResolveInto is Resolve writing the mix to out, a vector of Params'
// length that becomes Params. Inputs of other lengths (CheckMix) are an
// error, the request left as it was.
func (r *TrainRequest) ResolveInto(out []float32) error {
	if err := r.CheckMix(len(out)); err != nil {
		return err
	}
	if r.MixRule != nil {
		if err := r.MixRule.Aggregate(out, r.MixInputs, r.MixWeights, 0); err != nil {
			return fmt.Errorf("gossip: a robust merge: %w", err)
		}
	} else {
		merge.Interpolate(out, r.Params, r.MixWith, r.MixWeight)
	}
	r.Params, r.MixWith, r.MixWeight = out, nil, 0
	r.MixRule, r.MixInputs, r.MixWeights = nil, nil, nil
	return nil
}

// Skip is the result of a request answered without training (a paused
// peer): the starting parameters for OpUpdate, a zero gradient for
// OpGradient and OpFactors, no examples. The protocol carries on as if
// the step had been taken with a learning rate of zero: it still
// averages, forwards and pushes.
func (r *TrainRequest) Skip() *TrainResult {
	_ = r.Resolve() // a mix it cannot make (never a core's): from Params, copied below
	s := &TrainResult{ID: r.ID}
	if r.Op == OpUpdate {
		s.Params = slices.Clone(r.Params)
	} else {
		s.Grad = make([]float32, len(r.Params))
	}
	return s
}

// Commit tells the shell that the node has a new model: persist it or
// export it. The parameters are read with Core.Params.
type Commit struct {
	Age     float64
	Round   uint64
	Updates uint64
}

// Accounts are push-sum's weight and running sums (pushsum.go). A shell
// makes them durable before it sends the messages of the Ready that
// carries them, and restores them with Config.Accounts: a node that
// crashes then never counts a sent share twice, nor loses one it got,
// whatever its last checkpoint of the model.
type Accounts struct {
	// Seq numbers the accounts; a later record has a larger one.
	Seq    uint64
	Weight float64
	Links  []Link
}

// TraceEvent records something a shell may count or log.
type TraceEvent struct {
	Time time.Duration
	// Event is e.g. "drop", "merge", "round", "stale", "missing".
	Event string
	Peer  PeerID
	// Reason explains the event in words.
	Reason string
	// Code classifies a drop in one snake_case word, for metrics: an
	// invalid message's InvalidError.Code (shape, non_finite, norm, …) or
	// one of the Drop* codes. Empty for other events.
	Code  string
	Value float64
}

// Codes of drops that are not invalid messages.
const (
	// DropNotNeighbor: a message from a peer outside this node's
	// neighbours (dpsgd) or the job's peers (sfb).
	DropNotNeighbor = "not_neighbor"
	// DropBadTraining: training returned parameters or a gradient of the
	// wrong length or with non-finite values.
	DropBadTraining = "bad_training"
	// DropTrainResult: a training result that matches no outstanding
	// request.
	DropTrainResult = "train_result"
	// DropAggregation: an aggregator or a factor update failed.
	DropAggregation = "aggregation"
	// DropUnsolicited: a state reply this node did not ask for.
	DropUnsolicited = "unsolicited"
	// DropRateLimited: a state request repeated within Δ.
	DropRateLimited = "state_rate"
	// DropSecure: a secure-aggregation message that does not fit its
	// round (privacy/secagg.ErrMessage: from a non-member, out of phase,
	// repeated, malformed, shares that do not open or rebuild).
	DropSecure = "secure"
	// DropUnmasked: parameters sent in the clear to a node that runs
	// secure aggregation.
	DropUnmasked = "unmasked"
)

// Ready is what the core wants the shell to do.
type Ready struct {
	Messages []Message
	// Train, when set, is a training request to run; the core issues at most
	// one at a time and waits for its TrainDone.
	Train  *TrainRequest
	Commit *Commit
	// Accounts, when set, must be durable before Messages are sent.
	Accounts *Accounts
	Trace    []TraceEvent
}

// Empty reports whether there is nothing to do.
func (r *Ready) Empty() bool {
	return len(r.Messages) == 0 && r.Train == nil && r.Commit == nil && r.Accounts == nil && len(r.Trace) == 0
}

// train queues a training request on a copy of params; the caller checks
// !n.training first.
func (n *Core) train(op TrainOp, params []float32, steps int, layers []string) *TrainRequest {
	return n.trainOwned(op, slices.Clone(params), steps, layers)
}

// trainShared is train, for an op that only reads Params (OpGradient,
// OpFactors), of a vector that nothing writes (a message's parameters):
// the request shares it without a copy.
func (n *Core) trainShared(op TrainOp, params []float32) *TrainRequest {
	if op == OpUpdate {
		panic("gossip: an update's request owns its parameters")
	}
	return n.trainOwned(op, params, 0, nil)
}

// trainOwned is train for a vector nothing else refers to: the request
// takes it without a copy.
func (n *Core) trainOwned(op TrainOp, params []float32, steps int, layers []string) *TrainRequest {
	n.trainID++
	n.training = true
	n.rd.Train = &TrainRequest{ID: n.trainID, Op: op, Params: params, Steps: steps, FactorLayers: layers, Age: n.age}
	return n.rd.Train
}
