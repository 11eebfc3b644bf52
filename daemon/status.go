package daemon

import (
	"slices"
	"sync/atomic"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model/device"
)

// Status is what /status reports.
type Status struct {
	PeerID   gossip.PeerID `json:"peer_id"`
	Addrs    []string      `json:"addrs"`
	JobID    string        `json:"job_id"`
	Protocol string        `json:"protocol"`
	// Device is where training runs and why (--device).
	Device device.Choice `json:"device"`
	// Peers counts the connected peers that are live members of the
	// node's job (membership.go): the only ones it gossips with.
	Peers int `json:"peers"`
	// MemberPeers are those peers, sorted.
	MemberPeers []gossip.PeerID `json:"member_peers"`
	// OtherJobPeers counts the connected peers that run other jobs
	// (their announcements say so), and UnknownPeers those not heard
	// announcing this job (yet): connections kept apart, to which no
	// model is sent.
	OtherJobPeers int `json:"other_job_peers"`
	UnknownPeers  int `json:"unknown_peers"`
	// ActiveView is, in a job of partial views (--sampling hyparview),
	// the neighbours this member gossips with (sorted), and PassiveView
	// how many more peers it knows to replace them.
	ActiveView  []gossip.PeerID `json:"active_view,omitempty"`
	PassiveView int             `json:"passive_view,omitempty"`
	// MembershipBytes is what keeping the membership cost this node:
	// the core's view messages (Cyclon's, HyParView's) and, over libp2p,
	// announcements, pubsub's control messages, peer exchange, liveness
	// checks and routing (with sfb, gossipsub also carries the job's
	// broadcasts).
	MembershipBytes ByteCount `json:"membership_bytes"`
	// Withheld counts the messages the core addressed to a peer that is
	// not a live member of the job, which were not sent.
	Withheld uint64 `json:"withheld"`
	// Connections are the open connections to peers: how each is reached
	// (direct or relayed, over which transport) and its round-trip time.
	Connections []transport.Conn `json:"connections"`
	// Traffic is what the node exchanged with each peer (sent and
	// received messages and bytes, undeliverable sends), keyed by peer.
	Traffic map[gossip.PeerID]PeerTraffic `json:"traffic"`
	// HolePunches counts attempts to turn relayed connections into direct
	// ones, by outcome (with --hole-punching).
	HolePunches transport.HolePunches `json:"hole_punches"`
	// DeadPeersDropped counts the peers disconnected because they did not
	// answer their liveness check.
	DeadPeersDropped uint64 `json:"dead_peers_dropped"`
	// Members is the live members of the job (this node included) and
	// Neighbors how many of them it mixes with (membership.go).
	Members   int `json:"members"`
	Neighbors int `json:"neighbors"`
	// Joined says the node joined a running job and has taken its state
	// from a member.
	Joined bool `json:"joined,omitempty"`
	// Paused says local training is paused (POST /pause): the node stays
	// in the job without training on its data.
	Paused bool `json:"paused"`
	// PushSumWeight is push-sum's weight w (the model is x/w); over the
	// live members the weights sum to their number.
	PushSumWeight float64           `json:"pushsum_weight,omitempty"`
	ModelAge      float64           `json:"model_age"`
	Updates       uint64            `json:"updates"`
	Round         uint64            `json:"round"`
	Accuracy      float64           `json:"accuracy"`
	Loss          float64           `json:"loss"`
	MessagesIn    uint64            `json:"messages_in"`
	MessagesOut   uint64            `json:"messages_out"`
	BytesIn       uint64            `json:"bytes_in"`
	BytesOut      uint64            `json:"bytes_out"`
	Rejected      map[string]uint64 `json:"rejected"`
	// Faults counts network faults (streams that broke mid-frame or timed
	// out), by reason: not input rejected, nobody's fault in particular.
	Faults        map[string]uint64 `json:"faults"`
	UptimeSeconds float64           `json:"uptime_seconds"`
	Checkpoint    uint64            `json:"checkpoint_seq"`
	CheckpointAge float64           `json:"checkpoint_age"`
	// CheckpointError is why the last checkpoint could not be written;
	// empty once one is.
	CheckpointError string `json:"checkpoint_error,omitempty"`
	// LedgerError is why the privacy ledger cannot record spending (a
	// full disk): until it can, the node takes no DP-SGD step.
	LedgerError string `json:"ledger_error,omitempty"`
	ResumedFrom uint64 `json:"resumed_from_seq"`
	// DP-SGD (zero without it): ε spent at DPDelta, the budget, steps
	// charged, and whether the node halted with its budget spent.
	DPEpsilon float64 `json:"dp_epsilon,omitempty"`
	DPDelta   float64 `json:"dp_delta,omitempty"`
	DPBudget  float64 `json:"dp_epsilon_budget,omitempty"`
	DPSteps   uint64  `json:"dp_steps,omitempty"`
	DPHalted  bool    `json:"dp_halted,omitempty"`
	// Secure counts this node's rounds as a receiver with
	// --secure-aggregation (absent without it).
	Secure *gossip.SecureCounts `json:"secure,omitempty"`
}

// traced counts the core's secure-aggregation events (core goroutine):
// in /status, and the rounds and recoveries in /metrics.
func (n *Node) traced(e gossip.TraceEvent) {
	n.mu.Lock()
	counted := n.status.Secure != nil && n.status.Secure.Count(e)
	n.mu.Unlock()
	if !counted {
		return
	}
	switch e.Event {
	case "secure-sum":
		n.met.secureRounds.WithLabelValues("summed").Inc()
	case "secure-skipped":
		n.met.secureRounds.WithLabelValues("skipped").Inc()
	case "secure-recovered":
		n.met.secureRecovered.Add(e.Value)
	case "withheld":
		n.log.Error("a message with parameters in the clear withheld (a bug in gossipd: please report it)", "to", e.Peer, "what", e.Reason)
	}
}

// Status returns a copy of the current status.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.status
	s.Rejected = map[string]uint64{}
	n.rejected.Range(func(k, v any) bool {
		s.Rejected[k.(string)] = v.(*atomic.Uint64).Load()
		return true
	})
	if a, ok := n.cfg.Transport.(transport.Addresser); ok {
		s.Addrs = a.Addrs() // current, not as of the start
	}
	if s.Secure != nil {
		c := *s.Secure
		s.Secure = &c
	}
	s.MemberPeers = slices.Clone(s.MemberPeers)
	s.ActiveView = slices.Clone(s.ActiveView)
	if s.MemberPeers == nil {
		s.MemberPeers = []gossip.PeerID{}
	}
	s.Withheld = n.withheld.Load()
	s.Connections = []transport.Conn{}
	if c, ok := n.cfg.Transport.(transport.ConnLister); ok {
		s.Connections, s.HolePunches = append(s.Connections, c.Conns()...), c.HolePunches()
		s.DeadPeersDropped = c.DeadPeersDropped()
	}
	s.Faults = map[string]uint64{}
	n.faults.Range(func(k, v any) bool {
		s.Faults[k.(string)] = v.(*atomic.Uint64).Load()
		return true
	})
	s.MessagesIn, s.MessagesOut = n.msgsIn.Load(), n.msgsOut.Load()
	s.Traffic = n.traffic.snapshot(n.cfg.Now())
	s.BytesIn, s.BytesOut = n.bytesIn.Load(), n.bytesOut.Load()
	s.MembershipBytes = n.membershipBytes()
	if !n.start.IsZero() { // under n.mu, which Run holds to set it
		s.UptimeSeconds = n.cfg.Now().Sub(n.start).Seconds()
	}
	return s
}

// refreshStatus copies the core's counters and the privacy spending into
// the status (core goroutine).
func (n *Node) refreshStatus() {
	core := n.peer.Core()
	n.mu.Lock()
	n.status.ModelAge, n.status.Updates, n.status.Round = core.Age(), core.Updates(), core.Round()
	n.status.Joined = n.cfg.Join && !core.Joining()
	if gossip.PushesSums(n.cfg.Job.Protocol) {
		n.status.PushSumWeight = core.PushSumWeight()
	}
	var view []gossip.PeerID
	if n.partial {
		view = core.ViewMembers()
		n.status.ActiveView, n.status.PassiveView = view, len(core.PassiveMembers())
	}
	n.mu.Unlock()
	if n.partial && !slices.Equal(view, n.kept) {
		n.kept = view
		n.met.activeView.Set(float64(len(view)))
		if k, ok := n.cfg.Transport.(transport.Keeper); ok {
			k.Keep(view) // the connections to keep open
		}
	}
	n.met.age.Set(core.Age())
	n.met.round.Set(float64(core.Round()))
	if b := n.peer.Budget(); b != nil && b.Steps() != n.dpSteps {
		// ε is an RDP conversion over every order: only when steps were charged.
		n.dpSteps = b.Steps()
		eps := b.Spent()
		n.mu.Lock()
		n.status.DPEpsilon, n.status.DPSteps = eps, uint64(b.Steps())
		n.mu.Unlock()
		n.met.dpEpsilon.Set(eps)
		n.met.dpSteps.Set(float64(b.Steps()))
	}
}

// reject counts and logs a dropped inbound message: refused by the
// transport (malformed frames, forged gossipsub messages) or by the peer
// driver's and the core's checks. Every reject shows in /status and
// /metrics under its snake_case reason.
func (n *Node) reject(reason string, from gossip.PeerID, err error) {
	v, _ := n.rejected.LoadOrStore(reason, new(atomic.Uint64))
	if v.(*atomic.Uint64).Add(1) <= 3 { // log the first few of each reason
		n.log.Warn("rejected a message", "reason", reason, "peer", from, "err", err)
	}
	n.met.rejected.WithLabelValues(reason).Inc()
}

// fault counts a network fault (transport.Inbound.Fault): logged at debug
// level, since dead peers and resets are ordinary on real networks.
func (n *Node) fault(reason string, from gossip.PeerID, err error) {
	v, _ := n.faults.LoadOrStore(reason, new(atomic.Uint64))
	v.(*atomic.Uint64).Add(1)
	n.log.Debug("network fault", "reason", reason, "peer", from, "err", err)
	n.met.faults.WithLabelValues(reason).Inc()
}

// NotReady says why the node is not ready to serve its part of the job
// (/readyz), or "" once it is: it runs, has a model (a joining node has
// taken a member's state) and has at least one peer.
func (n *Node) NotReady() string {
	n.mu.Lock()
	started := !n.start.IsZero()
	n.mu.Unlock()
	if !started {
		return "starting"
	}
	s := n.Status()
	switch {
	case n.cfg.Join && !s.Joined:
		return "joining: waiting for a member's state"
	case s.Peers == 0:
		return "no peers"
	}
	return ""
}

// ByteCount is bytes received and sent, in all and by what carried them.
type ByteCount struct {
	In  uint64 `json:"in"`
	Out uint64 `json:"out"`
	// By splits them: "views" (the core's view messages) and the
	// transport's protocols (OverheadCounter).
	By map[string]transport.Bytes `json:"by,omitempty"`
}

// membershipBytes adds the transport's overhead (OverheadCounter) to the
// core's membership messages.
func (n *Node) membershipBytes() ByteCount {
	views := transport.Bytes{In: n.memIn.Load(), Out: n.memOut.Load()}
	b := ByteCount{In: views.In, Out: views.Out, By: map[string]transport.Bytes{"views": views}}
	if c, ok := n.cfg.Transport.(transport.OverheadCounter); ok {
		for p, x := range c.OverheadBytes() {
			b.In, b.Out = b.In+x.In, b.Out+x.Out
			b.By[p] = x
		}
	}
	return b
}
