package gossip

import (
	"fmt"
	"slices"
	"time"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
)

// sfb is sufficient-factor broadcasting (Xie et al. 2016): every clock each
// peer computes its minibatch update, broadcasts the rank-K factors (U, V) of
// each fully connected layer where that is cheaper than the dense gradient
// (the dense tensors and biases travel dense), and every replica applies
// every peer's update: W ← W − (γ/P)·Σ_p U_pᵀ·V_p.
//
// Consistency: BSP (Staleness 0, Fanout 0) applies a clock's updates only
// when all P have arrived, in peer-ID order, so all replicas stay equal; SSP
// (Staleness s) applies updates as they arrive and lets a node start clock c
// only once it has every peer's updates for clocks ≤ c−s−1; random partial
// broadcast (Fanout Q) sends each update to Q random peers and never waits.
// A peer silent past RoundTimeout is skipped, so a dead peer stalls no one.
type sfb struct {
	base
	cfg    *Config
	layout *model.Layout
	// be applies the factors: a rank-b update of each factored layer per
	// peer, its rows split among the cores (the same values).
	be      compute.Backend
	peers   []PeerID // other peers, sorted
	factors []string // weight tensors sent as factors
	// active: own update computing; closed: the clock is done and the next
	// one starts at next; neither: waiting for peers' updates.
	active  bool
	closed  bool
	clockAt time.Duration
	next    time.Duration
	// updates[c][peer] is peer's update for clock c, until applied.
	updates map[uint64]map[PeerID]*sfbUpdate
	// heard[c] counts updates of clock c applied or skipped (SSP).
	heard map[uint64]int
	// synced[p] is the clock at which p was last sent this replica's state.
	synced map[PeerID]uint64
	// ahead is the newest clock heard of beyond the buffering window.
	ahead uint64
	// fb keeps what compression (top-k, rand-k, or the rounding of fp16
	// and int8) left out of the dense part of this node's updates, for
	// its next ones.
	fb     *compress.Feedback
	fbSpec compress.Spec
	// outer is DiLoCo's outer step, with Config.Outer (outer.go).
	outer outer
}

type sfbUpdate struct {
	dense   []float32 // the tensors not sent as factors, in layout order
	factors []model.Factors
}

func newSFB(cfg *Config, layout *model.Layout) *sfb {
	s := &sfb{cfg: cfg, layout: layout, be: compute.NewCPU(compute.WithSplitSmall()),
		updates: map[uint64]map[PeerID]*sfbUpdate{}, heard: map[uint64]int{}, synced: map[PeerID]uint64{},
		outer: outer{cfg: &cfg.Outer}}
	s.setPeers()
	switch {
	case cfg.Sparse.Kind != compress.None:
		s.fb, s.fbSpec = new(compress.Feedback), cfg.Sparse
	case cfg.Quantize.Kind != compress.None:
		s.fb, s.fbSpec = new(compress.Feedback), cfg.Quantize
	}
	for _, t := range layout.Tensors {
		if len(t.Shape) != 2 || cfg.Outer.Enabled() {
			continue // biases, and pseudo-gradients (not low rank), travel dense
		}
		// ALGORITHMS.md compares SFB, 2·K·(J+D)·(P−1) per node, with a
		// parameter server's 2·J·D. Here the dense alternative is broadcast
		// to the same P−1 peers, so (P−1) cancels: factors when K·(J+D) < J·D.
		if cfg.SFBMode == "factors" || (cfg.SFBMode == "auto" && merge.SFBCheaper(cfg.Batch, t.Shape[0], t.Shape[1])) {
			s.factors = append(s.factors, t.Name)
		}
	}
	return s
}

// setPeers takes the peers of the config.
func (s *sfb) setPeers() {
	s.peers = s.peers[:0]
	for _, nb := range s.cfg.Neighbors {
		s.peers = append(s.peers, nb.ID)
	}
	slices.Sort(s.peers)
}

// rewire takes the new live members: updates of peers that left are
// dropped from the clocks not yet applied, and the current clock closes
// if it now has everyone's.
func (s *sfb) rewire(n *Core) {
	s.setPeers()
	for _, got := range s.updates {
		for p := range got {
			if p != n.cfg.ID && !slices.Contains(s.peers, p) {
				delete(got, p)
			}
		}
	}
	s.advance(n)
}

// bsp reports whether this is the strict BSP mode.
func (s *sfb) bsp() bool { return s.cfg.Staleness == 0 && s.cfg.Fanout == 0 }

func (s *sfb) start(n *Core) { s.begin(n) }

func (s *sfb) begin(n *Core) {
	s.active, s.closed, s.clockAt = true, false, n.now
	if s.outer.cfg.Enabled() {
		n.train(OpUpdate, n.params, s.outer.cfg.Steps, nil)
		return
	}
	n.train(OpFactors, n.params, 0, s.factors)
}

func (s *sfb) wake(n *Core) time.Duration {
	switch {
	case s.active:
		return Never
	case s.closed:
		return s.next
	}
	return s.clockAt + s.cfg.RoundTimeout
}

func (s *sfb) tick(n *Core) {
	if s.closed {
		if n.now >= s.next {
			s.begin(n)
		}
		return
	}
	s.advance(n)
}

func (s *sfb) store(c uint64, from PeerID, u *sfbUpdate) {
	if s.updates[c] == nil {
		s.updates[c] = map[PeerID]*sfbUpdate{}
	}
	s.updates[c][from] = u
}

func (s *sfb) trainDone(n *Core, r *TrainResult) {
	if s.outer.cfg.Enabled() {
		// The pseudo-gradient x − y of the H local steps (none for a bad
		// result).
		if n.badVector(r, r.Params, "parameter vector") {
			r.Params = n.params
		}
		r.Grad = slices.Clone(n.params)
		merge.Axpy(r.Grad, -1, r.Params)
	}
	if n.badVector(r, r.Grad, "gradient") {
		r.Grad, r.Factors = make([]float32, len(n.params)), nil
	}
	n.age += float64(r.Examples)
	u := &sfbUpdate{dense: s.densePart(r.Grad), factors: r.Factors}
	var packed *compress.Payload
	if s.fb != nil && len(u.dense) > 0 {
		// Error feedback: the dense part plus what earlier updates left
		// out, compressed; this node applies what the others get, so the
		// replicas stay equal.
		packed = new(compress.Payload)
		s.fb.Compress(packed, u.dense, s.fbSpec, n.rng)
		compress.Decompress(u.dense, packed)
	}
	params := u.dense
	if packed != nil {
		params = nil
	}
	c := n.round
	targets := s.peers
	if q := s.cfg.Fanout; q > 0 && q < len(s.peers) {
		targets = slices.Clone(s.peers)
		n.rng.Shuffle(len(targets), func(i, j int) { targets[i], targets[j] = targets[j], targets[i] })
		targets = targets[:q]
		slices.Sort(targets)
	}
	if s.cfg.Broadcast && len(targets) == len(s.peers) {
		n.send(Message{Kind: KindFactors, To: Broadcast, Round: c, Params: params, Packed: packed, Factors: u.factors})
	} else {
		for _, p := range targets {
			n.send(Message{Kind: KindFactors, To: p, Round: c, Params: params, Packed: packed, Factors: u.factors})
		}
	}
	if s.bsp() {
		s.store(c, n.cfg.ID, u)
	} else {
		s.apply(n, u)
		s.heard[c]++
	}
	s.active = false
	s.advance(n)
}

func (s *sfb) step(n *Core, m *Message) {
	if !slices.Contains(s.peers, m.From) {
		if s.cfg.Topology != "" {
			// Its view of the roster differs from ours for a moment.
			n.trace("not-neighbour", m.From, fmt.Sprintf("clock %d from a peer outside this view's members", m.Round), 0)
			return
		}
		n.drop(DropNotNeighbor, m.From, "factors from a peer outside the job")
		return
	}
	if m.Kind == KindParams {
		s.adopt(n, m)
		return
	}
	if m.Round+futureRounds < n.round {
		// The sender fell behind (it restarted from a checkpoint or was cut
		// off): its updates are too old to apply, and ours too new for it.
		// Send it this replica's state, at most once per futureRounds clocks.
		if last, ok := s.synced[m.From]; !ok || n.round >= last+futureRounds {
			s.synced[m.From] = n.round
			n.send(Message{Kind: KindParams, To: m.From, Round: n.round, Params: slices.Clone(n.params)})
		}
		n.trace("stale", m.From, fmt.Sprintf("clock %d at clock %d: sent our state", m.Round, n.round), 0)
		return
	}
	for _, f := range m.Factors {
		if !slices.Contains(s.factors, f.Weight) {
			n.drop("shape", m.From, "factors for a layer this job sends dense")
			return
		}
	}
	if len(m.Factors) != len(s.factors) {
		n.drop("shape", m.From, fmt.Sprintf("%d factor layers, want %d", len(m.Factors), len(s.factors)))
		return
	}
	u := &sfbUpdate{dense: m.Params, factors: m.Factors}
	n.keep() // the update waits for its clock
	if s.bsp() && m.Round > n.round+futureRounds {
		// This replica fell behind and will adopt a peer's state (adopt);
		// keep the newest clocks' updates for then.
		s.ahead = max(s.ahead, m.Round)
		if m.Round+futureRounds >= s.ahead {
			s.store(m.Round, m.From, u)
		}
		for c := range s.updates {
			if c > n.round+futureRounds && c+futureRounds < s.ahead {
				delete(s.updates, c)
			}
		}
		n.trace("ahead", m.From, fmt.Sprintf("clock %d at clock %d", m.Round, n.round), 0)
		return
	}
	switch {
	case s.bsp() && m.Round >= n.round && m.Round <= n.round+futureRounds:
		s.store(m.Round, m.From, u)
	case !s.bsp() && m.Round+uint64(s.cfg.Staleness)+futureRounds >= n.round:
		s.apply(n, u)
		s.heard[m.Round]++
	default:
		n.trace("stale", m.From, fmt.Sprintf("clock %d at clock %d", m.Round, n.round), 0)
		return
	}
	s.advance(n)
}

// advance closes the current clock when its conditions hold and starts the
// next one on the Δ schedule.
func (s *sfb) advance(n *Core) {
	if s.active || s.closed {
		return
	}
	c := n.round
	late := n.now >= s.clockAt+s.cfg.RoundTimeout
	if s.bsp() {
		got := s.updates[c]
		if _, own := got[n.cfg.ID]; !own {
			return
		}
		if len(got) < len(s.peers)+1 && !late {
			return
		}
		ids := make([]PeerID, 0, len(got))
		for id := range got {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		if s.outer.cfg.Enabled() {
			// ȳ = x − mean Δ_p, then the outer step from x.
			ybar := slices.Clone(n.params)
			for _, id := range ids {
				s.applyTo(n, ybar, got[id], -1/float32(len(ids)))
			}
			n.params = s.outer.step(n.params, ybar)
		} else {
			scale := float32(-s.cfg.LR / float64(len(ids)))
			for _, id := range ids {
				s.applyTo(n, n.params, got[id], scale)
			}
		}
		if miss := len(s.peers) + 1 - len(ids); miss > 0 {
			n.trace("missing", "", fmt.Sprintf("clock %d closed without %d peer(s)", c, miss), float64(miss))
		}
		delete(s.updates, c)
	} else if s.cfg.Fanout == 0 && c >= uint64(s.cfg.Staleness) {
		// SSP: clock c+1 needs everyone's updates for clocks ≤ c−s.
		old := c - uint64(s.cfg.Staleness)
		if s.heard[old] < len(s.peers)+1 && !late {
			return
		}
		delete(s.heard, old)
	}
	n.round++
	n.commit()
	s.closed = true
	s.next = max(n.now, s.clockAt+s.cfg.Delta)
	if n.now >= s.next {
		s.begin(n)
	}
}

// apply adds one peer's update with step −γ/P (SSP and partial broadcast,
// where updates are applied on arrival).
func (s *sfb) apply(n *Core, u *sfbUpdate) {
	s.applyTo(n, n.params, u, float32(-s.cfg.LR/float64(len(s.peers)+1)))
}

// applyTo adds scale times the update u to the parameter vector x.
func (s *sfb) applyTo(n *Core, x []float32, u *sfbUpdate, scale float32) {
	off := 0
	for _, t := range s.layout.Tensors {
		w := x[t.Offset : t.Offset+t.Size()]
		if i := slices.IndexFunc(u.factors, func(f model.Factors) bool { return f.Weight == t.Name }); i >= 0 {
			if err := merge.ApplyFactors(s.be, w, &u.factors[i], scale); err != nil {
				n.drop(DropAggregation, "", err.Error())
			}
			continue
		}
		merge.Axpy(w, scale, u.dense[off:off+t.Size()])
		off += t.Size()
	}
}

// densePart gathers the tensors not sent as factors, in layout order.
func (s *sfb) densePart(grad []float32) []float32 {
	var out []float32
	for _, t := range s.layout.Tensors {
		if !slices.Contains(s.factors, t.Name) {
			out = append(out, grad[t.Offset:t.Offset+t.Size()]...)
		}
	}
	return out
}

// adopt takes a peer's state when it is ahead: the replica jumps to the
// peer's clock with the peer's parameters (at the start of that clock, the
// same on every replica under BSP) and starts that clock.
func (s *sfb) adopt(n *Core, m *Message) {
	if m.Round <= n.round {
		n.trace("stale", m.From, fmt.Sprintf("state of clock %d at clock %d", m.Round, n.round), 0)
		return
	}
	n.trace("catch-up", m.From, fmt.Sprintf("clock %d → %d", n.round, m.Round), float64(m.Round-n.round))
	copy(n.params, m.Params)
	n.round = m.Round
	for c := range s.updates {
		if c < m.Round {
			delete(s.updates, c)
		}
	}
	clear(s.heard)
	n.commit()
	if !s.active {
		s.begin(n)
	}
	// An outstanding gradient, taken at the old parameters, is sent for
	// the new clock when it arrives: one stale gradient, as under SSP.
}

// snapshot and restore keep the error-feedback residual across restarts.
// A checkpoint's residual may hold some of what the updates sent since
// carried: after a crash that part goes out twice, once, as one stale
// gradient would.
func (s *sfb) snapshot(st *State) {
	s.outer.snapshot(st)
	if s.fb != nil && s.fb.Residual() != nil {
		st.Residual = slices.Clone(s.fb.Residual())
	}
}

func (s *sfb) restore(st *State) error {
	if err := s.outer.restore(st); err != nil {
		return err
	}
	if len(st.Residual) == 0 {
		return nil
	}
	dense := 0
	for _, t := range s.layout.Tensors {
		if !slices.Contains(s.factors, t.Name) {
			dense += t.Size()
		}
	}
	switch {
	case s.fb == nil:
		return fmt.Errorf("%w: a saved error-feedback residual, but the job sends its updates uncompressed", ErrConfig)
	case len(st.Residual) != dense || !merge.Finite(st.Residual):
		return fmt.Errorf("%w: saved error-feedback residual of %d values for an update's %d dense ones, or not finite", ErrConfig, len(st.Residual), dense)
	}
	s.fb.SetResidual(st.Residual)
	return nil
}
