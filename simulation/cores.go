package simulation

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/peer"
	"github.com/gossipd/gossipd/peer/trainer"
	"github.com/gossipd/gossipd/privacy"
)

// runCores simulates the peers of a core protocol: each is a peer.Peer
// (the driver the daemon uses too) in a world of virtual time.
func (s *sim) runCores(ctx context.Context, res *Result) (err error) {
	cfg := s.cfg
	parts, err := s.partition()
	if err != nil {
		return err
	}
	opts := []model.Option{model.WithSeed(cfg.Seed)}
	if s.gpu != nil {
		opts = append(opts, model.WithBackend(s.gpu))
	}
	m, err := model.New(s.spec, opts...)
	if err != nil {
		return err
	}
	defer m.Close()
	if s.init, err = s.initial(m); err != nil {
		return err
	}
	s.initSum = sync.OnceValue(func() float64 { return merge.SumSquares(s.init) }) // once for all the peers that share it
	if testInitCheck {
		defer s.checkInit(slices.Clone(s.init), &err)
	}
	s.ws = trainer.NewWorkspace(m)
	defer s.ws.Close()
	if n := s.peerBatch; n > 1 {
		be := s.gpu
		if be == nil {
			be = compute.NewCPU()
		}
		if s.batch, err = newBatcher(s.spec, be, s.gpu, n); err != nil {
			return err
		}
		defer s.batch.close()
	}
	if s.gpu == nil && (s.speed != nil || s.overlapUpdates()) {
		if s.pool, err = newTrainPool(s.spec, runtime.GOMAXPROCS(0)); err != nil {
			return err
		}
		defer s.pool.close()
	}
	if gossip.NeedsTopology(cfg.Protocol) && cfg.Turnover == 0 {
		if cfg.EdgeList != nil {
			s.graph, err = gossip.EdgeList(cfg.EdgeList, cfg.Peers)
		} else {
			s.graph, err = gossip.ParseTopology(cfg.Topology, cfg.Peers, rand.New(rand.NewPCG(cfg.Seed, 0x746f70)))
		}
		if err != nil {
			return err
		}
	}
	if s.adv != nil && cfg.Attack == "gaussian" {
		s.adv.noise = newNoiseMaker(len(s.init), cfg.Seed^0x6761757373)
		defer s.adv.noise.close()
	}
	if s.adv != nil && cfg.Attack == "labelflip" {
		s.flippedY = make([]int32, len(s.train.Y))
		for i, y := range s.train.Y {
			s.flippedY[i] = int32(s.train.Classes-1) - y
		}
	}
	reservePeerNames(cfg.Peers)
	all := make([]gossip.PeerID, cfg.Peers)
	for i := range all {
		all[i] = peerName(i)
	}
	if cfg.Turnover > 0 {
		s.roster = &roster{} // the topology follows the live members
	}
	if s.defersMixes() {
		on, block := false, 1
		if s.batch != nil {
			_, on = s.batch.ws.Resident()
		}
		if on {
			block = s.vectorBlock()
		}
		s.mixer = newLazyMixer(len(s.init), block, on)
		defer s.mixer.close()
		if s.batch != nil {
			s.batch.mixer = s.mixer
			if on {
				s.mixer.dev = s.batch // mixes on the device
			}
		}
	}
	if err := s.buildPeers(parts); err != nil {
		return err
	}
	if s.batch != nil && s.leaveOnDevice() {
		s.batch.leaveOnDevice()
	}
	if gc := s.peers[0].Core().Config(); s.mixer != nil && s.mixer.dev != nil && gc.HandsMixes() {
		// The gradients go nowhere but to the mixes, on the device.
		s.batch.ws.LeaveGradients(testPoison, s.vectorBlock())
	}
	s.promiseResults()
	if gossip.SamplesPeers(cfg.Protocol) || cfg.Sampling == gossip.SamplingHyParView {
		for i, contacts := range s.bootstraps(all) {
			s.peers[i].SetPeers(contacts)
		}
	}
	if cfg.Turnover > 0 {
		s.startRoster(parts)
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
	s.endRound(0)
	for r := 1; r <= cfg.Rounds; r++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.stopAfter > 0 && r > s.stopAfter {
			s.settleBytes(true)
			s.settle()
			return s.err // a trial of --device auto: no final evaluation
		}
		if err := s.runUntil(time.Duration(r) * cfg.Delta); err != nil {
			return err
		}
		s.settleBytes(false)
		if r%cfg.EvalEvery == 0 || r == cfg.Rounds {
			s.record(res, r)
		}
		s.endRound(r)
	}
	s.final(res) // the evaluated peers' models are on the host from here (sim.onHost)
	if s.err != nil {
		return s.err
	}
	s.settleBytes(true) // while the device runs
	if s.batch != nil {
		s.batch.close() // the batches started are done: their counts are final
		res.Batches, res.BatchedUpdates = s.batch.batches, s.batch.updates
		res.DeviceTime = s.deviceTime()
		if s.batch.residentOn {
			res.Resident = &s.batch.resident
		}
	}
	s.profiled(res)
	if afterRun != nil {
		afterRun(s)
	}
	return nil
}

// buildPeers builds the peers side by side: each from its index alone
// (its seeds, its shard, its neighbours), so the peers are the same on
// any number of cores. Peers that never write their model in place share
// the initial model (gossip.Config.ShareInit); the others copy it (for a
// million softmax peers 31 GB, and most of the time a start takes).
func (s *sim) buildPeers(parts [][]int) error {
	if s.cfg.SecureAggregation && s.stats.Secure == nil {
		s.stats.Secure = &gossip.SecureCounts{} // newPeer's traces count here
	}
	s.peers = make([]*simPeer, s.cfg.Peers)
	errs := make([]error, len(s.peers))
	compute.ForEach(len(s.peers), min(runtime.GOMAXPROCS(0), len(s.peers)/16), func(i int) {
		s.peers[i], errs[i] = s.newPeer(i, parts[i], false)
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// afterRun, set by tests, sees the finished simulation of the gossip
// protocols.
var afterRun func(*sim)

// testInitCheck, set by the tests, fails a run after which the initial
// model the peers share (gossip.Config.ShareInit) is not what it was.
var testInitCheck bool

// checkInit sets *err when s.init is not want any more.
func (s *sim) checkInit(want []float32, err *error) {
	for k, v := range s.init {
		if v != want[k] {
			if *err == nil {
				*err = fmt.Errorf("simulation: the peers' shared initial model was written: [%d] = %v, was %v", k, v, want[k])
			}
			return
		}
	}
}

// newPeer builds peer i on its data shard: a driver around a core, with
// its trainer and privacy budget; a joiner takes a live member's state.
func (s *sim) newPeer(i int, part []int, join bool) (*simPeer, error) {
	cfg := s.cfg
	id := peerName(i)
	data := &trainer.Data{X: s.train.X, Y: s.train.Y, D: s.train.D, Idx: part}
	if s.adv != nil && s.adv.byz[i] && cfg.Attack == "labelflip" {
		data.Y = s.flippedY
	}
	gc := gossip.Config{
		ID: id, Init: s.init, ShareInit: true, InitSum: s.initSum, NoAccounts: true, Rand: rand.New(rand.NewPCG(cfg.Seed, uint64(i)<<8|1)), Jitter: cfg.Jitter,
		CacheSize: cacheSize(cfg.Voting, cfg.Aggregator), Tokens: cfg.Tokens, Fanout: cfg.Fanout, Sampling: cfg.Sampling, ActiveView: cfg.ActiveView, PassiveView: cfg.PassiveView,
		Join: join, Topology: s.liveTopology(), TopologySeed: cfg.Seed,
	}
	if cfg.Sampling == gossip.SamplingHyParView && !gossip.SamplesPeers(cfg.Protocol) {
		gc.Topology = "" // its neighbours are its active view
	} else if gc.Topology == "" {
		gc.Neighbors, gc.SelfWeight = gossip.Assign(cfg.Protocol, s.graph, cfg.Peers, i, peerName)
	}
	if cfg.SecureAggregation {
		// The simulator's secrets come from the seed (the daemon's from
		// crypto/rand), so that a run is reproducible.
		var key [32]byte
		binary.LittleEndian.PutUint64(key[:], cfg.Seed)
		binary.LittleEndian.PutUint64(key[8:], uint64(i))
		key[16] = 's'
		gc.Secure = gossip.SecureConfig{Enabled: true, Job: "simulation", Fraction: cfg.SecureThreshold, Rand: rand.NewChaCha8(key)}
		gc.Secure.MinThreshold = job.MinThreshold(cfg.DPDistributed, cfg.DPColluders)
	}
	if s.mixer != nil {
		gc.Mixer = s.mixer
	}
	agg, _ := merge.ParseAggregator(cfg.Aggregator) // validated
	setup := peer.Setup{Protocol: cfg.Protocol, Model: s.spec, Delta: cfg.Delta, RoundTimeout: cfg.RoundTimeout,
		Variant: cfg.Variant, Compression: cfg.Compression, SFBMode: cfg.SFBMode, Staleness: cfg.Staleness,
		LR: cfg.LR, Batch: cfg.Batch, LocalEpochs: cfg.LocalEpochs, Aggregator: agg,
		Data: data, Workspace: s.ws, TrainRand: rand.New(rand.NewPCG(cfg.Seed, uint64(i)<<8|2))}
	if cfg.LocalSteps > 0 {
		setup.Outer = gossip.OuterConfig{Steps: cfg.LocalSteps, Method: cfg.Outer, LR: cfg.OuterLR, Momentum: cfg.OuterMomentum}
	}
	if cfg.DP.Enabled() {
		setup.DP, setup.DPSource = cfg.DP, privacy.NewSeededSourceForSimulation(cfg.Seed<<20^uint64(i))
		setup.DP.Shares = cfg.DPDistributed
	}
	var pc peer.Config
	if cfg.SecureAggregation {
		if s.stats.Secure == nil {
			s.stats.Secure = &gossip.SecureCounts{}
		}
		pc.Trace = func(e gossip.TraceEvent) { s.stats.Secure.Count(e) }
	}
	drv, tr, err := peer.Build(gc, setup, pc, nil)
	if err != nil {
		return nil, fmt.Errorf("peer %d: %w", i, err)
	}
	return &simPeer{Peer: drv, w: &world{s: s, i: i}, tr: tr, online: true, wakeAt: -1}, nil
}

// bootstraps gives each random-walk peer its initial contacts: every
// peer in oracle mode; for Newscast, a few random ones, and each peer is
// also a contact of those it knows, as a daemon's first connections are
// known at both ends. (One-sided contacts left a peer in no view with
// probability e⁻⁵, and some such peers never received a model.)
func (s *sim) bootstraps(all []gossip.PeerID) [][]gossip.PeerID {
	out := make([][]gossip.PeerID, len(all))
	if s.cfg.Sampling == gossip.SamplingOracle {
		for i := range out {
			out[i] = all
		}
		return out
	}
	k := min(5, len(all)-1)
	for i := range out {
		for n := 0; n < k; {
			j := s.rng.IntN(len(all))
			if j != i && !slices.Contains(out[i], all[j]) {
				out[i] = append(out[i], all[j])
				n++
			}
		}
	}
	for i := range out {
		for _, p := range out[i][:k] {
			j, _ := s.index(p)
			if !slices.Contains(out[j], all[i]) {
				out[j] = append(out[j], all[i])
			}
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
	w := max(p.Core().NextWake(), s.now)
	if w == gossip.Never {
		return
	}
	if p.wakeAt >= 0 && p.wakeAt <= w {
		return
	}
	p.wakeAt = w
	s.q.push(&event{at: w, kind: evTick, peer: i})
}

// runUntil runs the events up to virtual time t.
func (s *sim) runUntil(t time.Duration) error {
	for {
		if err := s.runEvents(t); err != nil {
			return err
		}
		if s.deferredN == 0 {
			break
		}
		// The round ends: every peer has its model before it is read.
		if err := s.takeAll(); err != nil {
			return err
		}
	}
	s.now = t
	return nil
}

// runEvents runs the events up to virtual time t, setting quiet peers'
// done events aside (overlap.go).
func (s *sim) runEvents(t time.Duration) error {
	for e := s.q.peek(); e != nil && e.at <= t; e = s.q.peek() {
		if s.deferredN > 0 {
			took, err := s.takeSetAside(e)
			if err != nil {
				return err
			}
			if took {
				continue // the queue may hold earlier events now
			}
		}
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
			p.Tick(s.now)
		case evDeliver:
			s.deliver(p, e)
		case evTrainDone:
			if e.job != nil && s.overlapUpdates() && p.Core().QuietTrainDone() {
				if err := s.setAside(e); err != nil {
					return err
				}
				continue
			}
			if e.job != nil {
				if e.result = e.job.promise; e.result == nil {
					s.await(e.job)
					if e.job.err != nil {
						return fmt.Errorf("peer %s: %w", p.ID(), e.job.err)
					}
					e.result = e.job.res
				}
			}
			p.TrainDone(e.result)
		case evChurn:
			p.online = !p.online
			s.q.push(&event{at: s.session(p.online), kind: evChurn, peer: e.peer})
			if p.online {
				p.Tick(s.now)
			}
		case evUp:
			if !p.online {
				p.online = true
				p.Tick(s.now)
			}
		case evDown:
			p.online = false
		case evTurnover:
			if err := s.turnover(); err != nil {
				return err
			}
			continue
		case evDepart:
			p.Depart() // hands off what it must, then goes
			p.online = false
		case evDrop:
			s.setMembers() // the dead member timed out
		case evSized:
			s.sized(e) // delivered in its place, as the next event or later
			if s.batch != nil {
				s.batchFailed()
			}
			if s.err != nil {
				return s.err
			}
			continue
		}
		if s.batch != nil {
			s.batchFailed()
		}
		if s.err != nil {
			return s.err
		}
		if p.online {
			s.schedule(e.peer)
		}
	}
	return nil
}

// initial is every peer's starting model: --init-from's weights, else
// m's (drawn from the seed).
func (s *sim) initial(m *model.Model) ([]float32, error) {
	if s.cfg.InitFrom == "" {
		return m.CopyParams(), nil
	}
	p, err := model.InitFromFile(s.cfg.InitFrom, s.spec)
	if err != nil {
		return nil, fmt.Errorf("%w: --init-from: %v", ErrConfig, err)
	}
	return p, nil
}
