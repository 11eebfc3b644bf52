package gossip

import (
	"fmt"
	"slices"
	"time"
)

// Joining a running job. A node configured with Join does not start from
// its initial model: it asks a live member for its state
// (KindStateRequest) and starts once the answer (KindStateReply) is in,
// with the member's model, age and round or clock:
//
//   - random walk takes the model and its age;
//   - D-PSGD and SFB take the round or clock too, so that the joiner's
//     first round is the members' current one;
//   - push-sum takes the member's de-biased estimate z as its own, with
//     weight 1: a joiner brings one unit of weight, so the weights over
//     the live members keep summing to their number;
//   - AD-PSGD takes the model.
//
// A member that does not answer within JoinTimeout is passed over for
// the next one; after MaxJoinTries the node starts from its initial model
// and says so. Messages of the protocol that arrive while the node is
// joining are left aside (traced): it has no state to merge them into.

// MaxJoinTries is how many members a joining node asks before it starts
// from its initial model.
const MaxJoinTries = 5

// joinTimeout is how long a joining node waits for one member's state.
func (n *Core) joinTimeout() time.Duration { return max(n.cfg.RoundTimeout, 2*n.cfg.Delta) }

// Joining reports whether the node is still waiting for a member's state.
func (n *Core) Joining() bool { return n.joining }

// joinTick asks the next member for its state when the last one has not
// answered in time.
func (n *Core) joinTick() {
	if n.now < n.joinAt {
		return
	}
	if n.joinTries >= MaxJoinTries {
		n.joining = false
		n.trace("join-failed", "", fmt.Sprintf("no member answered %d state requests: starting from the initial model", n.joinTries), 0)
		n.started = true
		n.proto.start(n)
		return
	}
	candidates := slices.DeleteFunc(slices.Clone(n.members), func(p PeerID) bool { return p == n.cfg.ID })
	if len(candidates) == 0 {
		candidates = n.peers
	}
	if len(candidates) == 0 {
		n.joinAt = n.now + n.cfg.Delta // nobody known yet
		return
	}
	to := candidates[n.rng.IntN(len(candidates))]
	n.joinTries++
	n.joinAsked = to
	n.joinAt = n.now + n.joinTimeout()
	n.send(Message{Kind: KindStateRequest, To: to})
}

// stepJoin handles a message while the node is joining.
func (n *Core) stepJoin(m *Message) {
	if m.Kind != KindStateReply {
		n.trace("joining", m.From, fmt.Sprintf("%s left aside while joining", m.Kind), 0)
		return
	}
	if m.From != n.joinAsked {
		n.drop(DropUnsolicited, m.From, "a state this node did not ask for")
		return
	}
	n.params = slices.Clone(n.resolved(m.Params)) // a fresh vector: the old one may be in a sent message
	n.age, n.round = m.Age, m.Round
	n.joining = false
	n.started = true
	n.proto.joined(n)
	n.trace("joined", m.From, fmt.Sprintf("took its state: age %g, round %d", m.Age, m.Round), m.Age)
	n.commit()
	n.proto.start(n)
}

// answerState replies to a state request, at most once per Δ per peer
// (a request costs a model's worth of bytes to answer).
func (n *Core) answerState(m *Message) {
	if n.joining {
		n.trace("joining", m.From, "state request while joining: nothing to give", 0)
		return
	}
	if n.cfg.Secure.Enabled {
		n.drop(DropSecure, m.From, "a state request: with secure aggregation no member sends its model in the clear (a joiner starts from the job's initial model)")
		return
	}
	if last, ok := n.stateSent[m.From]; ok && n.now < last+n.cfg.Delta {
		n.drop(DropRateLimited, m.From, "state requested again within Δ")
		return
	}
	if n.stateSent == nil {
		n.stateSent = map[PeerID]time.Duration{}
	}
	n.stateSent[m.From] = n.now
	n.send(Message{Kind: KindStateReply, To: m.From, Params: slices.Clone(n.resolved(n.proto.params(n))), Age: n.age, Round: n.round})
}
