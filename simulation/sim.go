package simulation

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/device"
	"github.com/gossipd/gossipd/peer"
	"github.com/gossipd/gossipd/peer/trainer"
)

// simPeer is one simulated peer: the shared driver and what the
// simulator adds to it.
type simPeer struct {
	*peer.Peer
	w      *world // carries out what the peer asks (world.go)
	tr     *trainer.Trainer
	online bool
	wakeAt time.Duration // the pending tick's time; -1 if none
	// modelsIn counts the messages carrying a model (gossip.Kind.
	// CarriesModel) that the peer's core took in.
	modelsIn uint64
}

// sim is the state of one run.
type sim struct {
	cfg Config
	// strictHandOver: no result is handed over before it is computed
	// (promise.go), as when a run that did so broke a promise.
	strictHandOver bool
	rng            *rand.Rand // the network's randomness
	q              queue
	now            time.Duration
	peers          []*simPeer
	lat            latency
	speed          computeSpeeds // nil: training takes no virtual time
	pool           *trainPool    // runs updates on every core (compute.go, overlap.go)
	mixer          *lazyMixer    // defers the cores' mixes (mixer.go), or nil
	// gpu is the device the peers train on (nil: the CPU), peerBatch
	// Config.PeerBatch resolved for it, batch the batcher of their
	// updates (nil: each alone; batch.go).
	gpu       compute.Backend
	peerBatch int
	batch     *batcher
	// Done events of quiet updates set aside, by peer (overlap.go), their
	// number, and the peer whose set-aside result is being taken.
	deferred  []*event
	deferredN int
	// asideOrder lists set-aside events, oldest first (some handed over).
	asideOrder []*event
	setAsides  int // over the run
	besides    int // events a set-aside result waited beside (stepsBeside)
	late       gossip.PeerID
	train      *dataset.Dataset
	test       *dataset.Dataset
	spec       model.Spec
	eval       *evaluator
	stats      Stats
	onRound    func(Row)
	roundDone  func(int)   // Option OnRound; nil: none
	stopAfter  int         // > 0: end after this many rounds, unevaluated (auto.go)
	pending    *pendingRow // the last row, being measured (record)
	adv        *adversary  // nil without attackers
	// lateBytes give the bytes of the top-k steps' indices sent and not
	// yet counted (settleBytes).
	lateBytes []func(wait bool) (int, bool)
	// sizedLate counts the deliveries whose size was taken after their
	// sending (evSized), waitedSize those of them that waited for it.
	sizedLate, waitedSize int
	roster                *roster // nil with a static roster (turnover.go)
	// What peers are built from (cores.go).
	init     []float32
	initSum  func() float64 // Σ init², measured once
	ws       *trainer.Workspace
	graph    *gossip.Graph
	flippedY []int32
	// err is the first error of a world callback; it ends the run.
	err error
}

// Stats counts traffic and events over a run.
type Stats struct {
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	// BytesUncompressed is what the messages would have taken with plain
	// float32 vectors (--compression fp16 or int8 makes Bytes smaller).
	BytesUncompressed uint64 `json:"bytes_uncompressed"`
	// MembershipMessages and MembershipBytes are the part of Messages and
	// Bytes that maintained peer-sampling views (gossip.Kind.Membership).
	MembershipMessages uint64 `json:"membership_messages"`
	MembershipBytes    uint64 `json:"membership_bytes"`
	Dropped            uint64 `json:"dropped"`
	// Rejected counts messages the cores dropped, by reason.
	Rejected map[string]uint64 `json:"rejected,omitempty"`
	// Updates counts model updates over all peers.
	Updates uint64 `json:"updates"`
	// Halted counts peers that stopped with their privacy budget spent.
	Halted uint64 `json:"dp_halted_peers,omitempty"`
	// Secure counts the peers' secure-aggregation rounds, over all peers
	// (--secure-aggregation).
	Secure *gossip.SecureCounts `json:"secure,omitempty"`
}

// Run simulates cfg. onRow, if not nil, receives each metrics row as it is
// recorded (for progress display and streaming to CSV). It returns the
// summary; every row is also in Result.Rows. opts add observers
// (progress.go); none changes a number.
func Run(ctx context.Context, cfg Config, onRow func(Row), opts ...Option) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	gpu, choice, err := openDevice(&cfg)
	if err != nil {
		return nil, err
	}
	if cfg.DeviceProfile {
		p, ok := gpu.(compute.Profiler)
		if !ok {
			return nil, fmt.Errorf("%w: --device-profile: %s cannot time its calls", ErrConfig, choice.Backend)
		}
		p.Profile()
	}
	var trial *AutoTrial
	if choice.Requested == "auto" && gpu != nil {
		if gpu, choice, trial, err = chooseAuto(ctx, cfg, gpu, choice); err != nil {
			return nil, err
		}
	}
	res, err := run(ctx, cfg, gpu, choice, onRow, opts...)
	if res != nil {
		res.AutoTrial = trial
	}
	return res, err
}

// run simulates cfg on gpu (nil: the CPU), which choice describes: once,
// or, where a result handed over before it was computed broke its
// promise (promise.go), again, each handed over once computed, the rows
// filed before not filed twice.
func run(ctx context.Context, cfg Config, gpu compute.Backend, choice device.Choice, onRow func(Row), opts ...Option) (*Result, error) {
	filed := 0
	count := func(r Row) {
		filed++
		if onRow != nil {
			onRow(r)
		}
	}
	res, err := runOnce(ctx, cfg, gpu, choice, count, opts...)
	if !misspeculated(err) {
		return res, err
	}
	why := err.Error()
	again := func(r Row) {
		if filed > 0 {
			filed-- // filed by the first run, the same
			return
		}
		if onRow != nil {
			onRow(r)
		}
	}
	res, err = runOnce(ctx, cfg, gpu, choice, again, append(opts, func(s *sim) { s.strictHandOver = true })...)
	if res != nil {
		res.Device.Note = strings.TrimPrefix(res.Device.Note+"; simulated twice: "+strings.TrimPrefix(why, "simulation: ")+", so the run was simulated again, each update handed over once computed", "; ")
	}
	return res, err
}

// runOnce is run's one simulation.
func runOnce(ctx context.Context, cfg Config, gpu compute.Backend, choice device.Choice, onRow func(Row), opts ...Option) (*Result, error) {
	train, test, _, err := dataset.Load(cfg.Dataset, dataset.LoadOptions{OpenOptions: dataset.OpenOptions{Seed: cfg.Seed,
		CSV: dataset.CSVOptions{LabelColumn: cfg.LabelColumn}, TestFraction: cfg.TestFraction}, Scale: cfg.Scale})
	if err != nil {
		return nil, err
	}
	shape, err := cfg.Data.ShapeOf(train)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	spec := model.SpecFor(cfg.Model, cfg.Hidden, train.D, train.Classes, shape)
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	batch, err := peerBatch(&cfg, gpu, spec)
	if err != nil {
		return nil, err
	}
	s := &sim{cfg: cfg, gpu: gpu, peerBatch: batch, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6e6574)), train: train, test: test, spec: spec, onRound: onRow,
		stats: Stats{Rejected: map[string]uint64{}}}
	for _, o := range opts {
		o(s)
	}
	s.lat, _ = parseLatency(cfg.Latency)
	s.speed, _ = parseCompute(cfg.Compute, cfg.ComputeTrace, cfg.Seed)
	var eligible []int
	if cfg.Byzantine > 0 {
		s.adv = newAdversary(cfg)
		eligible = s.adv.honest
	}
	s.eval, err = newEvaluator(spec, test, cfg, eligible, gpu)
	if err != nil {
		return nil, err
	}
	defer func() {
		s.settle() // a trial of --device auto may end with a row being measured
		s.eval.close()
	}()
	res := &Result{Config: cfg, Device: choice}
	if s.peerBatch > 1 {
		res.PeerBatch = s.peerBatch
	}
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
	if mc, ok := gpu.(compute.MemoryCounter); ok {
		_, res.DevicePeakBytes = mc.DeviceMemory()
	}
	s.settleBytes(true)
	res.Stats = s.stats
	return res, nil
}

// partition returns each peer's example indices.
func (s *sim) partition() ([][]int, error) { return s.partitionInto(s.cfg.Peers) }

// partitionInto splits the training data into n shards.
func (s *sim) partitionInto(n int) ([][]int, error) {
	p, err := dataset.ParsePartitioner(s.cfg.Partition)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return p.Partition(s.train, n, s.cfg.Seed)
}

// models returns every peer's current model, its values on the host
// only once fetched (onHost).
func (s *sim) models() [][]float32 {
	if s.mixer != nil {
		for _, p := range s.peers {
			p.Core().ParamsLater() // push-sum's estimates, mixed with the rest
		}
		s.mixer.resolvePending() // side by side, before the peers' models are read one by one
		s.mixer.bulk = true      // copied back by onHost, all at once
		defer func() { s.mixer.bulk = false }()
	}
	out := make([][]float32, len(s.peers))
	for i, p := range s.peers {
		out[i] = p.Core().Params()
	}
	return out
}

// onHost copies to the host the models xs[i] for i in peers (nil: all)
// that the batches left on the device.
func (s *sim) onHost(xs [][]float32, peers []int) {
	if s.batch == nil {
		return
	}
	vs := xs
	if peers != nil {
		vs = make([][]float32, len(peers))
		for k, i := range peers {
			vs[k] = xs[i]
		}
	}
	if err := s.batch.fetch(vs); err != nil && s.err == nil {
		s.err = err
	}
	s.batchFailed()
}

// consensus is the consensus distance of xs (every peer's model, or the
// live members'), measured on the device where the batches keep the
// models (the models measured stay there), else on the host after
// copying them back.
func (s *sim) consensus(xs [][]float32) float64 {
	if s.batch != nil && s.batch.onDevice() {
		if d, ok := s.batch.consensus(xs); ok {
			return d
		}
		if s.batch.failure != nil {
			return math.NaN() // the run ends with the device's failure
		}
	}
	s.onHost(xs, nil)
	return merge.ConsensusDistanceN(xs, len(s.eval.workers))
}

// record takes the metrics row at the end of a round. The accuracy and
// loss of the evaluated peers are measured while the simulation goes on,
// on copies of their models (evaluator.start), and the row is filed when
// the next one is taken or the run ends (fileRow): the same numbers, but
// the event loop does not wait for the test set to be walked.
func (s *sim) record(res *Result, round int) {
	s.fileRow(res)
	xs := s.models()
	peers := s.eval.roundPeers
	if s.roster != nil {
		peers = s.roster.evalPeers(s.cfg.EvalPeers, s.cfg.Seed, round)
	}
	s.settleBytes(true)
	row := Row{Round: round, Time: s.now.Seconds(), Messages: s.stats.Messages, Bytes: s.stats.Bytes}
	s.onHost(xs, peers)
	m := s.eval.start(xs, peers, s.eval.sub)
	if s.roster != nil {
		row.Consensus = s.consensus(s.liveParams(xs))
		row.Online = len(s.roster.live)
	} else {
		row.Consensus = s.consensus(xs)
		for _, p := range s.peers {
			if p.online {
				row.Online++
			}
		}
	}
	s.pending = &pendingRow{row: row, m: m}
}

// settle waits for the row being measured, if any, and makes its
// device failure the run's, without filing it: a trial of --device auto
// ends so (its rows are not the run's).
func (s *sim) settle() {
	if p := s.pending; p != nil {
		s.pending = nil
		if _, err := p.m.wait(); err != nil && s.err == nil {
			s.err = err
		}
	}
}

// pendingRow is a metrics row whose accuracy is still being measured.
type pendingRow struct {
	row Row
	m   *measurement
}

// fileRow waits for the pending row's measurement and files the row.
func (s *sim) fileRow(res *Result) {
	p := s.pending
	if p == nil {
		return
	}
	s.pending = nil
	acc, err := p.m.wait()
	if err != nil {
		if s.err == nil {
			s.err = err // the run ends with it, this row unfiled
		}
		return
	}
	if s.err != nil {
		return // the run ends with its error: a row taken since is not filed (a broken promise's, promise.go)
	}
	p.row.setAccuracy(acc)
	res.Rows = append(res.Rows, p.row)
	if s.onRound != nil {
		s.onRound(p.row)
	}
}

// cacheSize turns the cores' model cache on only when voting is evaluated
// or a robust aggregator needs it (0: the core's default size, grown to
// what the rule needs): cached models are too much memory for 10,000
// peers otherwise.
func cacheSize(voting bool, aggregator string) int {
	if voting || (aggregator != "" && aggregator != "mean") {
		return 0
	}
	return -1
}

func (s *sim) final(res *Result) {
	s.fileRow(res)
	xs := s.models()
	finalPeers := s.eval.finalPeers
	if s.roster != nil {
		finalPeers = s.roster.evalPeers(s.cfg.FinalEvalPeers, s.cfg.Seed, -1)
		res.LiveMembers, res.JoinedPeers = len(s.roster.live), s.roster.joined
		if gossip.PushesSums(s.cfg.Protocol) {
			for _, i := range s.roster.live {
				res.PushSumWeightSum += s.peers[i].Core().PushSumWeight()
			}
			if s.cfg.Departure == DepartDie {
				for i, p := range s.peers {
					if !slices.Contains(s.roster.live, i) {
						res.PushSumWeightDead += p.Core().PushSumWeight()
					}
				}
			}
		}
	}
	s.onHost(xs, finalPeers) // the other models are not read
	r, err := s.eval.row(xs, finalPeers, s.test)
	if err != nil && s.err == nil {
		s.err = err
	}
	res.FinalAccuracy, res.FinalMinAccuracy, res.FinalMaxAccuracy, res.FinalLoss = r.MeanAcc, r.MinAcc, r.MaxAcc, r.MeanLoss
	res.EvaluatedPeers = len(finalPeers)
	res.FinalAccuracySpread = spreadOf(r.accs)
	res.Reach = s.reach(s.reachPeers())
	if math.IsNaN(res.FinalLoss) {
		res.FinalLoss = math.Inf(1)
	}
	if s.cfg.DP.Enabled() {
		res.DPEpsilon = make([]float64, len(s.peers))
		for i, p := range s.peers {
			res.DPEpsilon[i] = p.Budget().Spent()
			res.DPEpsilonMax = max(res.DPEpsilonMax, res.DPEpsilon[i])
		}
		res.DPDelta = s.cfg.DP.Delta
	}
	if s.cfg.Voting && s.cfg.Protocol == gossip.RandomWalk {
		var sum float64
		for _, i := range finalPeers {
			n := s.peers[i].Core()
			sum += s.eval.voteAccuracy(append(n.Cache(), n.Params()), s.test)
		}
		res.FinalVotingAccuracy = sum / float64(len(finalPeers))
	}
}

// reachPeers are the peers whose reach is reported: the live members
// with turnover, else the peers online at the end (every peer without
// churn).
func (s *sim) reachPeers() []int {
	if s.roster != nil {
		return slices.Clone(s.roster.live)
	}
	out := make([]int, 0, len(s.peers))
	for i, p := range s.peers {
		if p.online {
			out = append(out, i)
		}
	}
	return out
}

// liveParams is the live members' models.
func (s *sim) liveParams(xs [][]float32) [][]float32 {
	out := make([][]float32, len(s.roster.live))
	for k, i := range s.roster.live {
		out[k] = xs[i]
	}
	return out
}
