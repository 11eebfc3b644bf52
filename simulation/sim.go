package simulation

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/peer/trainer"
	"github.com/gossipd/gossipd/privacy"
)

// peer is one simulated node.
type peer struct {
	id      gossip.PeerID
	node    *gossip.Node
	trainer *trainer.Trainer
	data    *trainer.Data
	online  bool
	wakeAt  time.Duration   // the pending tick's time; -1 if none
	budget  *privacy.Budget // DP-SGD accounting; nil without DP
}

// sim is the state of one run.
type sim struct {
	cfg     Config
	rng     *rand.Rand // the network's randomness
	q       queue
	now     time.Duration
	peers   []*peer
	byID    map[gossip.PeerID]int
	lat     latency
	train   *dataset.Dataset
	test    *dataset.Dataset
	spec    model.Spec
	eval    *evaluator
	stats   Stats
	onRound func(Row)
	adv     *adversary // nil without attackers
}

// Stats counts traffic and events over a run.
type Stats struct {
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	Dropped  uint64 `json:"dropped"`
	// Rejected counts messages the cores dropped, by reason.
	Rejected map[string]uint64 `json:"rejected,omitempty"`
	// Updates counts model updates over all peers.
	Updates uint64 `json:"updates"`
	// Halted counts peers that stopped with their privacy budget spent.
	Halted uint64 `json:"dp_halted_peers,omitempty"`
}

// Run simulates cfg. onRow, if not nil, receives each metrics row as it is
// recorded (for progress display and streaming to CSV). It returns the
// summary; every row is also in Result.Rows.
func Run(ctx context.Context, cfg Config, onRow func(Row)) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	train, test, err := dataset.Open(cfg.Dataset, dataset.OpenOptions{Seed: cfg.Seed})
	if err != nil {
		return nil, err
	}
	scaler, err := dataset.FitScaler(cfg.Scale, train)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	scaler.Transform(train)
	scaler.Transform(test)
	spec := model.Spec{Kind: cfg.Model, Inputs: train.D, Hidden: cfg.Hidden, Classes: train.Classes}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	s := &sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6e6574)), train: train, test: test, spec: spec, onRound: onRow,
		byID: map[gossip.PeerID]int{}, stats: Stats{Rejected: map[string]uint64{}}}
	s.lat, _ = parseLatency(cfg.Latency)
	var eligible []int
	if cfg.Byzantine > 0 {
		s.adv = newAdversary(cfg)
		eligible = s.adv.honest
	}
	s.eval, err = newEvaluator(spec, test, cfg, eligible)
	if err != nil {
		return nil, err
	}
	res := &Result{Config: cfg}
	if s.adv != nil {
		res.ByzantinePeers = s.adv.count()
	}
	switch cfg.Protocol {
	case Centralized, FedAvg, AllReduce:
		err = s.runBaseline(ctx, res)
	default:
		err = s.runCores(ctx, res)
	}
	if err != nil {
		return nil, err
	}
	res.Stats = s.stats
	return res, nil
}

// partition returns each peer's example indices.
func (s *sim) partition() ([][]int, error) {
	p, err := dataset.ParsePartitioner(s.cfg.Partition)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return p.Partition(s.train, s.cfg.Peers, s.cfg.Seed)
}

func peerName(i int) gossip.PeerID { return gossip.PeerID(fmt.Sprintf("p%05d", i)) }

func (s *sim) runCores(ctx context.Context, res *Result) error {
	cfg := s.cfg
	parts, err := s.partition()
	if err != nil {
		return err
	}
	m, err := model.New(s.spec, model.WithSeed(cfg.Seed))
	if err != nil {
		return err
	}
	init := slices.Clone(m.Params())
	ws := trainer.NewWorkspace(m)
	var graph *gossip.Graph
	if gossip.NeedsTopology(cfg.Protocol) {
		if cfg.EdgeList != nil {
			graph, err = gossip.EdgeList(cfg.EdgeList, cfg.Peers)
		} else {
			graph, err = gossip.ParseTopology(cfg.Topology, cfg.Peers, rand.New(rand.NewPCG(cfg.Seed, 0x746f70)))
		}
		if err != nil {
			return err
		}
	}
	var flippedY []int32 // label-flip attackers train on classes−1−y
	if s.adv != nil && cfg.Attack == "labelflip" {
		flippedY = make([]int32, len(s.train.Y))
		for i, y := range s.train.Y {
			flippedY[i] = int32(s.train.Classes-1) - y
		}
	}
	all := make([]gossip.PeerID, cfg.Peers)
	for i := range all {
		all[i] = peerName(i)
	}
	steps := 0
	subsample, partitions, _ := gossip.ParseCompression(cfg.Compression)
	s.peers = make([]*peer, cfg.Peers)
	for i := range s.peers {
		id := all[i]
		data := &trainer.Data{X: s.train.X, Y: s.train.Y, D: s.train.D, Idx: parts[i]}
		if s.adv != nil && s.adv.byz[i] && cfg.Attack == "labelflip" {
			data.Y = flippedY
		}
		if cfg.LocalEpochs > 1 {
			steps = cfg.LocalEpochs * ((len(parts[i]) + cfg.Batch - 1) / cfg.Batch)
		}
		gc := gossip.Config{
			ID: id, Protocol: cfg.Protocol, Spec: s.spec, Init: init,
			Rand:  rand.New(rand.NewPCG(cfg.Seed, uint64(i)<<8|1)),
			Delta: cfg.Delta, Jitter: cfg.Jitter, LR: cfg.LR, LocalSteps: steps,
			Variant: cfg.Variant, CacheSize: cacheSize(cfg.Voting, cfg.Aggregator), Tokens: cfg.Tokens, Staleness: cfg.Staleness,
			Fanout: cfg.Fanout, Sampling: cfg.Sampling, Batch: cfg.Batch, SFBMode: cfg.SFBMode,
			Subsample: subsample, Partitions: partitions,
		}
		gc.Aggregator, _ = merge.ParseAggregator(cfg.Aggregator) // validated
		gc.Neighbors, gc.SelfWeight = gossip.Assign(cfg.Protocol, graph, cfg.Peers, i, func(j int) gossip.PeerID { return all[j] })
		node, err := gossip.New(gc)
		if err != nil {
			return err
		}
		tc := trainer.Config{Batch: cfg.Batch, LR: cfg.LR}
		if cfg.DP.Enabled() {
			tc.DP, tc.DPSource = cfg.DP, privacy.NewSeededSourceForSimulation(cfg.Seed<<20^uint64(i))
		}
		tr, err := trainer.New(ws, data, rand.New(rand.NewPCG(cfg.Seed, uint64(i)<<8|2)), tc)
		if err != nil {
			return fmt.Errorf("peer %d: %w", i, err)
		}
		var budget *privacy.Budget
		if cfg.DP.Enabled() {
			if budget, err = privacy.NewBudget(cfg.DP, tr.SamplingRate(), 0); err != nil {
				return fmt.Errorf("peer %d: %w", i, err)
			}
		}
		p := &peer{id: id, node: node, trainer: tr, data: data, online: true, wakeAt: -1, budget: budget}
		s.peers[i] = p
		s.byID[id] = i
		if cfg.Protocol == gossip.RandomWalk {
			node.SetPeers(s.bootstrap(i, all))
		}
	}
	// Churn: each peer starts online with probability 1−Churn and flips
	// after exponential sessions.
	if cfg.Churn > 0 {
		for i, p := range s.peers {
			p.online = s.rng.Float64() >= cfg.Churn
			s.q.push(&event{at: s.session(p.online), kind: evChurn, peer: i})
		}
	}
	if len(cfg.ChurnTrace) > 0 {
		listed := make([]bool, cfg.Peers)
		for _, iv := range cfg.ChurnTrace {
			listed[iv.Peer] = true
		}
		for i, p := range s.peers {
			p.online = !listed[i]
		}
		for _, iv := range cfg.ChurnTrace {
			s.q.push(&event{at: iv.Start, kind: evUp, peer: iv.Peer})
			s.q.push(&event{at: iv.End, kind: evDown, peer: iv.Peer})
		}
	}
	for i, p := range s.peers {
		if p.online {
			s.schedule(i)
		}
	}
	for r := 1; r <= cfg.Rounds; r++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.runUntil(time.Duration(r) * cfg.Delta); err != nil {
			return err
		}
		if r%cfg.EvalEvery == 0 || r == cfg.Rounds {
			s.record(res, r)
		}
	}
	s.final(res)
	return nil
}

// bootstrap gives a random-walk peer its initial contacts: every peer in
// oracle mode, a few random ones for Newscast.
func (s *sim) bootstrap(i int, all []gossip.PeerID) []gossip.PeerID {
	if s.cfg.Sampling == "oracle" {
		return all
	}
	k := min(5, len(all)-1)
	out := make([]gossip.PeerID, 0, k)
	for len(out) < k {
		j := s.rng.IntN(len(all))
		if j != i && !slices.Contains(out, all[j]) {
			out = append(out, all[j])
		}
	}
	return out
}

// session draws the length of an online (or offline) session.
func (s *sim) session(online bool) time.Duration {
	mean := float64(s.cfg.ChurnSession)
	if !online {
		mean = mean * s.cfg.Churn / (1 - s.cfg.Churn)
	}
	return s.now + time.Duration(s.rng.ExpFloat64()*mean)
}

// schedule makes sure peer i has a tick queued for its next wake time.
func (s *sim) schedule(i int) {
	p := s.peers[i]
	w := max(p.node.NextWake(), s.now)
	if w == gossip.Never {
		return
	}
	if p.wakeAt >= 0 && p.wakeAt <= w {
		return
	}
	p.wakeAt = w
	s.q.push(&event{at: w, kind: evTick, peer: i})
}

func (s *sim) runUntil(t time.Duration) error {
	for e := s.q.peek(); e != nil && e.at <= t; e = s.q.peek() {
		s.q.pop()
		s.now = e.at
		p := s.peers[e.peer]
		switch e.kind {
		case evTick:
			if e.at != p.wakeAt {
				continue // superseded
			}
			p.wakeAt = -1
			if !p.online {
				continue
			}
			p.node.Tick(s.now)
		case evDeliver:
			if !p.online || s.split(s.byID[e.msg.From], e.peer) {
				s.stats.Dropped++
				continue
			}
			p.node.Step(e.msg)
			if e.buf != nil && !p.node.Kept() {
				for i := range e.buf {
					e.buf[i] = 0xFF // a NaN in every float
				}
			}
		case evTrainDone:
			p.node.TrainDone(e.result)
		case evChurn:
			p.online = !p.online
			s.q.push(&event{at: s.session(p.online), kind: evChurn, peer: e.peer})
			if p.online {
				p.node.Tick(s.now)
			}
		case evUp:
			if !p.online {
				p.online = true
				p.node.Tick(s.now)
			}
		case evDown:
			p.online = false
		}
		if err := s.drain(e.peer); err != nil {
			return err
		}
		if p.online {
			s.schedule(e.peer)
		}
	}
	s.now = t
	return nil
}

// split reports whether a netsplit separates peers a and b now.
func (s *sim) split(a, b int) bool {
	r := int(s.now / s.cfg.Delta)
	for _, ns := range s.cfg.Netsplits {
		if r >= ns.From && r < ns.To && a%ns.Groups != b%ns.Groups {
			return true
		}
	}
	return false
}

// drain carries out what peer i's core asked for.
func (s *sim) drain(i int) error {
	p := s.peers[i]
	for p.node.HasReady() {
		rd := p.node.Ready()
		p.node.Advance()
		for k := range rd.Messages {
			if err := s.send(i, &rd.Messages[k]); err != nil {
				return err
			}
		}
		for _, t := range rd.Trace {
			if t.Event == "drop" {
				s.stats.Rejected[t.Reason]++
			}
		}
		if rd.Commit != nil {
			s.stats.Updates++
		}
		if rd.Train != nil && p.budget != nil {
			// The budget is charged before training; a peer whose next
			// request would overspend halts instead.
			if k := p.trainer.Steps(rd.Train); p.budget.Allows(k) {
				p.budget.Spend(k)
			} else {
				p.node.Halt()
				s.stats.Halted++
				continue
			}
		}
		if rd.Train != nil {
			r, err := p.trainer.Run(rd.Train)
			if err != nil {
				return fmt.Errorf("peer %s: %w", p.id, err)
			}
			s.q.push(&event{at: s.now, kind: evTrainDone, peer: i, result: r})
		}
	}
	return nil
}

// send accounts a message and schedules its delivery.
func (s *sim) send(from int, m *gossip.Message) error {
	if s.adv != nil {
		s.adv.tamper(s, from, m)
	}
	to, ok := s.byID[m.To]
	if !ok {
		return fmt.Errorf("peer %s sent to unknown peer %q", m.From, m.To)
	}
	size := gossip.EncodedSize(m)
	var buf []byte
	if s.cfg.Codec {
		// Place the encoding so that the parameters are aligned and the
		// decoded message borrows them, as the daemon's usually does.
		var dec *gossip.Message
		for pad := 0; pad < 4; pad++ {
			b, err := gossip.AppendEncode(make([]byte, pad, pad+size), m)
			if err != nil {
				return err
			}
			if b = b[pad:]; len(b) != size {
				return fmt.Errorf("codec: encoded %d bytes, EncodedSize says %d", len(b), size)
			}
			if dec, err = gossip.Decode(b, gossip.DecodeLimits{Borrow: true}); err != nil {
				return err
			}
			buf = b
			if gossip.Borrows(dec, b) || len(dec.Params) == 0 {
				break
			}
		}
		dec.To = m.To
		m = dec
	}
	s.stats.Messages++
	s.stats.Bytes += uint64(size)
	if s.cfg.Drop > 0 && s.rng.Float64() < s.cfg.Drop {
		s.stats.Dropped++
		return nil
	}
	delay := s.lat(s.rng)
	if s.cfg.Bandwidth > 0 {
		delay += time.Duration(float64(size) / s.cfg.Bandwidth * float64(time.Second))
	}
	s.q.push(&event{at: s.now + delay, kind: evDeliver, peer: to, msg: m, buf: buf})
	return nil
}

// params returns every peer's current model.
func (s *sim) params() [][]float32 {
	out := make([][]float32, len(s.peers))
	for i, p := range s.peers {
		out[i] = p.node.Params()
	}
	return out
}

func (s *sim) record(res *Result, round int) {
	xs := s.params()
	row := s.eval.row(xs, s.eval.roundPeers, s.eval.sub)
	row.Round = round
	row.Time = s.now.Seconds()
	row.Messages, row.Bytes = s.stats.Messages, s.stats.Bytes
	row.Consensus = merge.ConsensusDistance(xs)
	for _, p := range s.peers {
		if p.online {
			row.Online++
		}
	}
	res.Rows = append(res.Rows, row)
	if s.onRound != nil {
		s.onRound(row)
	}
}

// cacheSize turns the cores' model cache on only when voting is evaluated
// (ten models) or a robust aggregator needs it (0: the core's default):
// cached models are too much memory for 10,000 peers otherwise.
func cacheSize(voting bool, aggregator string) int {
	switch {
	case voting:
		return 10
	case aggregator != "" && aggregator != "mean":
		return 0
	}
	return -1
}

func (s *sim) final(res *Result) {
	xs := s.params()
	r := s.eval.row(xs, s.eval.finalPeers, s.test)
	res.FinalAccuracy, res.FinalMinAccuracy, res.FinalMaxAccuracy, res.FinalLoss = r.MeanAcc, r.MinAcc, r.MaxAcc, r.MeanLoss
	res.EvaluatedPeers = len(s.eval.finalPeers)
	if math.IsNaN(res.FinalLoss) {
		res.FinalLoss = math.Inf(1)
	}
	if s.cfg.DP.Enabled() {
		res.DPEpsilon = make([]float64, len(s.peers))
		for i, p := range s.peers {
			res.DPEpsilon[i] = p.budget.Spent()
			res.DPEpsilonMax = max(res.DPEpsilonMax, res.DPEpsilon[i])
		}
		res.DPDelta = s.cfg.DP.Delta
	}
	if s.cfg.Voting && s.cfg.Protocol == gossip.RandomWalk {
		var sum float64
		for _, i := range s.eval.finalPeers {
			n := s.peers[i].node
			sum += s.eval.voteAccuracy(append(n.Cache(), n.Params()), s.test)
		}
		res.FinalVotingAccuracy = sum / float64(len(s.eval.finalPeers))
	}
}
