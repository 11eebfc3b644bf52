// Package peer is one learning peer: a protocol core (gossip.Core) with
// its local training (DP-SGD and the privacy accounting that goes with
// it), the decoding and validation of everything that arrives, and the
// carrying out of everything the core asks for (its Ready).
//
// The daemon (daemon/) and the simulator (simulation/) both drive peers
// through this package, and neither calls the core's Ready itself. Every
// call that gives the peer an event (Tick, Receive, TrainDone, …) returns
// what its world is to do, in order ([]Do): the peer never calls up into
// its world. Each world decides only what is its own: how messages
// travel, where and when training runs, what a new model means (a
// checkpoint, a metrics row), and the clock that feeds Tick. Both worlds
// therefore apply the same checks, count rejects by the same codes and
// charge privacy budgets the same way.
//
// A Peer is not safe for concurrent use: one goroutine (the daemon's core
// loop, the simulator's event loop) calls its methods. Run alone may be
// called from a training worker while that goroutine goes on.
package peer

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/peer/trainer"
	"github.com/gossipd/gossipd/privacy"
)

// Do is one thing a peer asks of its world, which carries them out in
// the order given, before it next calls the peer. Exactly one field is
// set, but for Wire, which comes with Send.
type Do struct {
	// Send: carry the message to its To (gossip.Broadcast: to every peer
	// of the job). The world owns it from here on.
	Send *gossip.Message
	// Wire is Send's encoding when the peer encodes (Config.Encoding):
	// the bytes the world hands its transport, then Releases.
	Wire *Wire
	// Train: run the request, now or on a worker (Peer.Run), and hand its
	// result back through Peer.TrainDone. The privacy budget has already
	// been charged for it.
	Train *gossip.TrainRequest
	// Commit: a new model (Peer.Core().Params()).
	Commit *gossip.Commit
	// SaveAccounts: make push-sum's accounts durable (the daemon's store)
	// before the messages that follow leave. A world without a store
	// ignores them.
	SaveAccounts *gossip.Accounts
	// Reject: a message or training result was dropped.
	Reject *Reject
	// Halt: the peer stopped for good: its privacy budget is spent
	// (errors.Is(Halt, ErrBudgetSpent)) or its ledger failed.
	Halt error
}

// Reject is a dropped message or result: Reason is a snake_case code
// (wrong_job, undecodable, shape, norm, …).
type Reject struct {
	Reason string
	From   gossip.PeerID
	Err    error
}

// Ledger durably records the privacy spending of a peer before the steps
// are taken (the daemon's store); a crash then never forgets spending.
type Ledger interface {
	// Reserve records that the steps taken under the peer's budget,
	// including those about to be taken, spend run (privacy.Budget.Run);
	// the ledger adds it to what the data had spent before.
	Reserve(run privacy.Spending) error
}

// Config configures a Peer.
type Config struct {
	// Core configures the protocol core. Required.
	Core gossip.Config
	// Trainer runs training requests on the local data. Required.
	Trainer *trainer.Trainer
	// Budget accounts DP-SGD spending; nil without DP-SGD.
	Budget *privacy.Budget
	// Ledger records DP-SGD spending before each step; nil: none (the
	// simulator).
	Ledger Ledger
	// Job is the job whose frames this peer accepts (zero: the simulator's
	// single job); others are refused as wrong_job.
	Job [32]byte
	// Members, when set, are the only peers that may take part (sorted);
	// others are refused as not_member. Empty: every peer.
	Members []gossip.PeerID
	// MaxBytes bounds an encoded message (default: gossip's, 256 MiB).
	MaxBytes int
	// Trace, when set, hears every trace event of the core.
	Trace func(gossip.TraceEvent)
	// Encoding: whether each message sent comes with its encoding
	// (Do.Wire), and which; default EncodeNone.
	Encoding Encoding
}

// ErrBudgetSpent means the next training step would exceed the privacy
// budget.
var ErrBudgetSpent = errors.New("peer: privacy budget spent")

// ErrNotRecorded is what a Ledger's Reserve wraps when it cannot record
// the spending for now (a full disk) but may later: the peer then does not
// take the steps (they would go unaccounted), skips the training request,
// and tries again at the next one. Any other ledger error halts the peer.
var ErrNotRecorded = errors.New("peer: privacy spending not recorded")

// Peer is one learning peer.
type Peer struct {
	cfg    Config
	core   *gossip.Core
	out    []Do // what the world is to do, in order (take)
	paused bool
}

// New builds the core and the peer around it.
func New(cfg Config) (*Peer, error) {
	if cfg.Trainer == nil {
		return nil, errors.New("peer: config needs a trainer")
	}
	if !slices.IsSorted(cfg.Members) {
		return nil, errors.New("peer: the members are not sorted")
	}
	core, err := gossip.New(cfg.Core)
	if err != nil {
		return nil, err
	}
	return &Peer{cfg: cfg, core: core}, nil
}

// take hands over what the world is to do, in order.
func (p *Peer) take() []Do {
	out := p.out
	p.out = nil
	return out
}

// reject asks the world to count a dropped message.
func (p *Peer) reject(reason string, from gossip.PeerID, err error) {
	p.out = append(p.out, Do{Reject: &Reject{Reason: reason, From: from, Err: err}})
}

// ID returns the peer's ID.
func (p *Peer) ID() gossip.PeerID { return p.core.ID() }

// Core returns the protocol core, for reading its model and counters.
// Calling its event methods directly would bypass the driver.
func (p *Peer) Core() *gossip.Core { return p.core }

// Budget returns the privacy budget (nil without DP-SGD).
func (p *Peer) Budget() *privacy.Budget { return p.cfg.Budget }

// Tick advances the core's clock and carries out what it asks for.
func (p *Peer) Tick(now time.Duration) []Do {
	p.core.Tick(now)
	p.flush()
	return p.take()
}

// SetPeers tells the core which peers the world knows.
func (p *Peer) SetPeers(peers []gossip.PeerID) []Do {
	p.core.SetPeers(peers)
	p.flush()
	return p.take()
}

// SetMembers tells the core the live members of its job.
func (p *Peer) SetMembers(ms []gossip.Member) []Do {
	p.core.SetMembers(ms)
	p.flush()
	return p.take()
}

// Undelivered tells the core that one of its messages could not be
// delivered (gossip.Core.Undelivered).
func (p *Peer) Undelivered(m *gossip.Message) []Do {
	p.core.Undelivered(m)
	p.flush()
	return p.take()
}

// SetPaused pauses or resumes local training. A paused peer answers the
// core's training requests itself with TrainRequest.Skip: it touches no
// local data, spends no privacy budget and no CPU on gradients, yet stays
// in the job, averaging, forwarding and pushing, so that its neighbours'
// rounds and push-sum's mass are not disturbed.
func (p *Peer) SetPaused(paused bool) { p.paused = paused }

// Paused reports whether local training is paused.
func (p *Peer) Paused() bool { return p.paused }

// Leave starts the peer's departure from its job (gossip.Core.Leave).
func (p *Peer) Leave() []Do {
	p.core.Leave()
	p.flush()
	return p.take()
}

// Depart ends it: push-sum hands off its weight beyond one unit; the
// peer then halts (gossip.Core.Depart).
func (p *Peer) Depart() []Do {
	p.core.Depart()
	p.flush()
	return p.take()
}

// TrainDone hands the core the result of its training request.
func (p *Peer) TrainDone(r *gossip.TrainResult) []Do {
	p.core.TrainDone(r)
	p.flush()
	return p.take()
}

// Run carries out a training request on the local data. It uses only the
// trainer, so a world may call it on a worker goroutine while the peer's
// own goroutine goes on; the core has at most one request out at a time.
func (p *Peer) Run(req *gossip.TrainRequest) (*gossip.TrainResult, error) {
	return p.cfg.Trainer.Run(req)
}

// flush carries out everything the core asks for, in one order for every
// world: messages, traces, the commit, then training (charged to the
// privacy budget first; a peer that cannot pay halts, after its commit).
func (p *Peer) flush() {
	for p.core.HasReady() {
		rd := p.core.Ready()
		p.core.Advance()
		if rd.Accounts != nil {
			// Push-sum's accounts must be durable before its shares leave.
			p.out = append(p.out, Do{SaveAccounts: rd.Accounts})
		}
		for i := range rd.Messages {
			p.send(&rd.Messages[i])
		}
		for _, t := range rd.Trace {
			if t.Event == "drop" {
				code := t.Code
				if code == "" {
					code = "invalid"
				}
				p.reject(code, t.Peer, errors.New(t.Reason))
			}
			if p.cfg.Trace != nil {
				p.cfg.Trace(t)
			}
		}
		if rd.Commit != nil {
			p.out = append(p.out, Do{Commit: rd.Commit})
		}
		if rd.Train == nil {
			continue
		}
		if p.paused {
			p.core.TrainDone(rd.Train.Skip()) // its Ready is handled by this loop
			continue
		}
		if err := p.charge(rd.Train); errors.Is(err, ErrNotRecorded) {
			// Not taken: ε would be under-counted. The world has heard
			// why from its ledger; training resumes once it records.
			p.core.TrainDone(rd.Train.Skip())
			continue
		} else if err != nil {
			p.core.Halt()
			p.out = append(p.out, Do{Halt: err})
			continue
		}
		p.out = append(p.out, Do{Train: rd.Train})
	}
}

// send hands the world a message, encoded when it carries bytes. A
// message that cannot be encoded is dropped (Reject "unencodable"); a
// push-sum share goes back to the core, so that no weight is lost.
func (p *Peer) send(m *gossip.Message) {
	if p.cfg.Encoding == EncodeNone {
		p.out = append(p.out, Do{Send: m})
		return
	}
	w, err := EncodeWire(m, p.cfg.Encoding)
	if err != nil {
		p.reject("unencodable", m.To, fmt.Errorf("peer: encoding a %s message: %w", m.Kind, err))
		if m.Kind == gossip.KindPushSum {
			p.core.Undelivered(m)
		}
		return
	}
	p.out = append(p.out, Do{Send: m, Wire: w})
}

// charge charges a training request's steps to the privacy budget,
// durably when there is a ledger, before it runs.
func (p *Peer) charge(req *gossip.TrainRequest) error {
	b := p.cfg.Budget
	if b == nil {
		return nil
	}
	k := p.cfg.Trainer.Steps(req)
	if !b.Allows(k) {
		return fmt.Errorf("%w: ε = %.4g after %d steps; %d more would exceed the budget", ErrBudgetSpent, b.Spent(), b.Steps(), k)
	}
	if p.cfg.Ledger != nil {
		if err := p.cfg.Ledger.Reserve(b.Run(k)); err != nil {
			return fmt.Errorf("peer: recording privacy spending: %w", err)
		}
	}
	b.Spend(k)
	return nil
}

// LocalSteps is the number of local SGD steps of an update of epochs
// passes over examples examples in minibatches of batch: 0 (the core's
// default, one pass) for a single epoch.
func LocalSteps(epochs, examples, batch int) int {
	if epochs <= 1 || batch <= 0 {
		return 0
	}
	return epochs * ((examples + batch - 1) / batch)
}
