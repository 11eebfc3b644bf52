package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/peer/trainer"
	"github.com/gossipd/gossipd/privacy"
)

// Config configures a daemon. Zero values take the documented defaults.
type Config struct {
	// Job is the training job. Required.
	Job JobSpec
	// Train is the node's local training data; Test its held-out split.
	// Both are already scaled. Required.
	Train, Test *dataset.Dataset
	// Transport carries frames. Required.
	Transport Transport
	// Addrs are shown in /status (the transport's listen addresses).
	Addrs []string
	// Scaler maps raw features to the model's inputs (it was fitted on the
	// training data); /predict applies it and /model exports it. Nil: none.
	Scaler *dataset.Scaler
	// Store persists checkpoints; nil runs without persistence.
	Store *Store
	// CheckpointEvery is the number of model updates between checkpoints
	// (default 10). A checkpoint is also written on shutdown.
	CheckpointEvery int
	// DP trains with DP-SGD within a privacy budget (zero: off). Noise
	// comes from a crypto-keyed source; steps are charged to the store's
	// ledger before they are taken.
	DP privacy.Config
	// Aggregator combines neighbours' parameters in dpsgd (default the
	// weighted mean; robust rules from merge.ParseAggregator).
	Aggregator merge.Aggregator
	// MaxNorm bounds the L2 norm of received parameter vectors
	// (gossip.Config.MaxNorm; default 1000·√n, negative: none).
	MaxNorm float64
	// AnnounceInterval is how often a daemon whose transport is a
	// Broadcaster announces its job (default 10s).
	AnnounceInterval time.Duration
	// Backend computes training (default compute.NewCPU()).
	Backend compute.Backend
	// EvalInterval is how often the model is evaluated on Test (default 2s).
	EvalInterval time.Duration
	// Senders is how many messages may be in flight at once (default 8).
	Senders int
	// SendTimeout bounds one send (default 10s).
	SendTimeout time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Node is a running daemon.
type Node struct {
	cfg     Config
	job     JobID
	core    *gossip.Node
	trainer *trainer.Trainer
	log     *slog.Logger
	met     *metrics
	start   time.Time

	mu     sync.Mutex // guards status
	status Status

	msgsIn, msgsOut, bytesIn, bytesOut atomic.Uint64
	rejected                           sync.Map // reason → *atomic.Uint64
	resumed                            *Checkpoint
	budget                             *privacy.Budget // DP-SGD; nil without DP (core goroutine)
	neighbors                          []gossip.PeerID // from the job's topology
	lastCkptUpdates                    uint64
	// published is a copy of the parameters as of the last update, for
	// the API (the core itself belongs to the Run goroutine).
	published  atomic.Pointer[[]float32]
	predictors sync.Pool // *model.Model for /predict
}

// Status is what /status reports.
type Status struct {
	PeerID        gossip.PeerID     `json:"peer_id"`
	Addrs         []string          `json:"addrs"`
	JobID         string            `json:"job_id"`
	Protocol      string            `json:"protocol"`
	Peers         int               `json:"peers"`
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
	UptimeSeconds float64           `json:"uptime_seconds"`
	Checkpoint    uint64            `json:"checkpoint_seq"`
	CheckpointAge float64           `json:"checkpoint_age"`
	ResumedFrom   uint64            `json:"resumed_from_seq"`
	// DP-SGD (zero without it): ε spent at DPDelta, the budget, steps
	// charged, and whether the node halted with its budget spent.
	DPEpsilon float64 `json:"dp_epsilon,omitempty"`
	DPDelta   float64 `json:"dp_delta,omitempty"`
	DPBudget  float64 `json:"dp_epsilon_budget,omitempty"`
	DPSteps   uint64  `json:"dp_steps,omitempty"`
	DPHalted  bool    `json:"dp_halted,omitempty"`
}

// New prepares a daemon: it validates the config, restores the latest
// checkpoint of the job from the store, and builds the core and trainer.
func New(cfg Config) (*Node, error) {
	if cfg.Transport == nil || cfg.Train == nil || cfg.Test == nil {
		return nil, errors.New("node: config needs a transport and train and test data")
	}
	if err := cfg.Job.Validate(); err != nil {
		return nil, err
	}
	if cfg.Train.D != cfg.Job.Model.Inputs || cfg.Test.D != cfg.Job.Model.Inputs {
		return nil, fmt.Errorf("node: data has %d features, the job's model %d inputs", cfg.Train.D, cfg.Job.Model.Inputs)
	}
	if cfg.CheckpointEvery == 0 {
		cfg.CheckpointEvery = 10
	}
	if cfg.Backend == nil {
		cfg.Backend = compute.NewCPU()
	}
	if cfg.EvalInterval == 0 {
		cfg.EvalInterval = 2 * time.Second
	}
	if cfg.Senders == 0 {
		cfg.Senders = 8
	}
	if cfg.SendTimeout == 0 {
		cfg.SendTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AnnounceInterval == 0 {
		cfg.AnnounceInterval = 10 * time.Second
	}
	// dpsgd, adpsgd, pushsum and sfb take their neighbours from the job's
	// member list and topology, the same for every member.
	neighbors, selfWeight, err := cfg.Job.Neighbors(cfg.Transport.ID())
	if err != nil {
		return nil, err
	}
	_, broadcast := cfg.Transport.(Broadcaster)
	if err := cfg.DP.Validate(); err != nil {
		return nil, err
	}
	if cfg.DP.Enabled() && cfg.Job.Protocol == gossip.SFB && cfg.Job.SFBMode != "dense" {
		return nil, errors.New("node: DP-SGD noise is full rank: an SFB job with DP needs sfb mode dense (--sfb-mode dense on every member)")
	}
	if cfg.DP.Enabled() && cfg.Store == nil {
		return nil, errors.New("node: DP-SGD needs a store for its privacy ledger")
	}
	n := &Node{cfg: cfg, job: cfg.Job.ID(), log: cfg.Logger, met: newMetrics()}
	m, err := model.New(cfg.Job.Model, model.WithSeed(cfg.Job.InitSeed), model.WithBackend(cfg.Backend))
	if err != nil {
		return nil, err
	}
	init := append([]float32(nil), m.Params()...)
	// Cores draw randomness from the OS per run: the daemon's peer choices
	// need no reproducibility, and nodes must not move in lockstep.
	seed := rand.Uint64()
	gc := gossip.Config{
		ID: cfg.Transport.ID(), Protocol: cfg.Job.Protocol, Spec: cfg.Job.Model, Init: init,
		Rand: rand.New(rand.NewPCG(seed, seed>>1)), Delta: time.Duration(cfg.Job.DeltaMillis) * time.Millisecond,
		Jitter: 0.1, LR: cfg.Job.LR, Variant: cfg.Job.Variant, CacheSize: 10, Batch: cfg.Job.Batch,
		Neighbors: neighbors, SelfWeight: selfWeight, Staleness: cfg.Job.Staleness, Broadcast: broadcast, SFBMode: cfg.Job.SFBMode,
		Aggregator: cfg.Aggregator, MaxNorm: cfg.MaxNorm,
	}
	gc.Subsample, gc.Partitions, _ = gossip.ParseCompression(cfg.Job.Compression)
	if cfg.Job.LocalEpochs > 1 {
		gc.LocalSteps = cfg.Job.LocalEpochs * ((cfg.Train.N + cfg.Job.Batch - 1) / cfg.Job.Batch)
	}
	if cfg.Store != nil {
		c, err := cfg.Store.Latest(n.job)
		if err != nil {
			return nil, err
		}
		if c != nil {
			gc.Resume, gc.Init = &c.State, nil
			n.resumed = c
			n.lastCkptUpdates = c.State.Updates
			n.log.Info("resuming from checkpoint", "seq", c.Seq, "age", c.State.Age, "updates", c.State.Updates, "saved", c.Time)
		}
	}
	if n.core, err = gossip.New(gc); err != nil {
		return nil, err
	}
	for _, nb := range neighbors {
		n.neighbors = append(n.neighbors, nb.ID)
	}
	idx := make([]int, cfg.Train.N)
	for i := range idx {
		idx[i] = i
	}
	tc := trainer.Config{Batch: cfg.Job.Batch, LR: cfg.Job.LR}
	if cfg.DP.Enabled() {
		tc.DP, tc.DPSource = cfg.DP, privacy.NewCryptoSource()
	}
	n.trainer, err = trainer.New(trainer.NewWorkspace(m), &trainer.Data{X: cfg.Train.X, Y: cfg.Train.Y, D: cfg.Train.D, Idx: idx},
		rand.New(rand.NewPCG(seed, 3)), tc)
	if err != nil {
		return nil, err
	}
	if cfg.DP.Enabled() {
		// The ledger is authoritative; a checkpoint may record more if
		// the ledger was lost: take the larger.
		spent, err := cfg.Store.DPSteps(n.job)
		if err != nil {
			return nil, err
		}
		if n.resumed != nil {
			spent = max(spent, n.resumed.DPSteps)
		}
		if n.budget, err = privacy.NewBudget(cfg.DP, n.trainer.SamplingRate(), int(spent)); err != nil {
			return nil, err
		}
		n.log.Info("DP-SGD on", "clip", cfg.DP.Clip, "noise", cfg.DP.Noise, "sampling_rate", n.trainer.SamplingRate(),
			"spent_steps", spent, "spent_epsilon", n.budget.Spent(), "budget", cfg.DP.Epsilon, "delta", cfg.DP.Delta)
	}
	n.status = Status{PeerID: cfg.Transport.ID(), Addrs: cfg.Addrs, JobID: n.job.String(), Protocol: cfg.Job.Protocol, Rejected: map[string]uint64{}}
	if n.resumed != nil {
		n.status.ResumedFrom = n.resumed.Seq
		n.status.Checkpoint = n.resumed.Seq
		n.status.CheckpointAge = n.resumed.State.Age
	}
	n.refreshStatus()
	if n.budget != nil {
		n.status.DPDelta, n.status.DPBudget = cfg.DP.Delta, cfg.DP.Epsilon
		n.refreshDP()
	}
	n.publish()
	n.predictors.New = func() any {
		m, _ := model.New(cfg.Job.Model, model.WithBackend(compute.NewCPU(compute.WithThreads(1))))
		return m
	}
	return n, nil
}

// publish makes the current parameters visible to the API.
func (n *Node) publish() {
	p := append([]float32(nil), n.core.Params()...)
	n.published.Store(&p)
}

// Params returns a copy of the parameters as of the last update.
func (n *Node) Params() []float32 { return append([]float32(nil), *n.published.Load()...) }

// JobID returns the job's ID.
func (n *Node) JobID() JobID { return n.job }

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
	s.MessagesIn, s.MessagesOut = n.msgsIn.Load(), n.msgsOut.Load()
	s.BytesIn, s.BytesOut = n.bytesIn.Load(), n.bytesOut.Load()
	if !n.start.IsZero() { // under n.mu, which Run holds to set it
		s.UptimeSeconds = n.cfg.Now().Sub(n.start).Seconds()
	}
	return s
}

// refreshStatus copies the core's counters into the status (core goroutine).
func (n *Node) refreshStatus() {
	n.mu.Lock()
	n.status.ModelAge, n.status.Updates, n.status.Round = n.core.Age(), n.core.Updates(), n.core.Round()
	n.mu.Unlock()
	n.met.age.Set(n.core.Age())
	n.met.round.Set(float64(n.core.Round()))
}

// Reject counts and logs an inbound message dropped for reason (a
// snake_case word) before it reached the node: transports report what they
// refuse — malformed frames, forged gossipsub messages — here, so that
// every reject shows in /status and /metrics.
func (n *Node) Reject(reason string, from gossip.PeerID, err error) { n.reject(reason, from, err) }

func (n *Node) reject(reason string, from gossip.PeerID, err error) {
	v, _ := n.rejected.LoadOrStore(reason, new(atomic.Uint64))
	if v.(*atomic.Uint64).Add(1) <= 3 { // log the first few of each reason
		n.log.Warn("rejected a message", "reason", reason, "peer", from, "err", err)
	}
	n.met.rejected.WithLabelValues(reason).Inc()
}

// Announcements lists the job announcements heard from other peers (none
// when the transport is not a Broadcaster).
func (n *Node) Announcements() []Announcement {
	if b, ok := n.cfg.Transport.(Broadcaster); ok {
		return b.Announcements()
	}
	return []Announcement{}
}

// announce tells the network about this node's job, now and every
// AnnounceInterval, until ctx ends.
func (n *Node) announce(ctx context.Context, b Broadcaster) {
	t := time.NewTicker(n.cfg.AnnounceInterval)
	defer t.Stop()
	for {
		s := n.Status()
		a := Announcement{JobID: s.JobID, Name: n.cfg.Job.Name, Protocol: s.Protocol, Model: n.cfg.Job.Model.String(),
			Members: len(n.cfg.Job.Members), Updates: s.Updates, Round: s.Round, Time: n.cfg.Now().Unix()}
		if err := b.Announce(ctx, a); err != nil && ctx.Err() == nil {
			n.log.Debug("announce failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// members filters peers to the job's members.
func (n *Node) members(peers []gossip.PeerID) []gossip.PeerID {
	return slices.DeleteFunc(peers, func(p gossip.PeerID) bool { return !n.cfg.Job.IsMember(p) })
}

type outgoing struct {
	to gossip.PeerID // gossip.Broadcast: every member
	f  Frame
}

// Run drives the daemon until ctx is done, then writes a final checkpoint.
func (n *Node) Run(ctx context.Context) error {
	n.mu.Lock()
	n.start = n.cfg.Now()
	n.mu.Unlock()
	var wg sync.WaitGroup
	trainCh := make(chan *gossip.TrainRequest, 1)
	doneCh := make(chan *gossip.TrainResult, 1)
	sendCh := make(chan outgoing, 256)
	evalCh := make(chan []float32, 1)
	defer func() {
		close(trainCh)
		close(sendCh)
		close(evalCh)
		wg.Wait()
	}()
	wg.Go(func() { n.trainLoop(trainCh, doneCh) })
	for i := 0; i < n.cfg.Senders; i++ {
		wg.Go(func() { n.sendLoop(ctx, sendCh) })
	}
	wg.Go(func() { n.evalLoop(evalCh) })
	if b, ok := n.cfg.Transport.(Broadcaster); ok {
		if err := b.Join(n.job); err != nil {
			return err
		}
		actx, cancel := context.WithCancel(ctx)
		defer cancel() // runs before the deferred wg.Wait
		wg.Go(func() { n.announce(actx, b) })
	}

	// The core says when it next needs a Tick (NextWake); the timer sleeps
	// until then rather than polling.
	wake := time.NewTimer(0)
	defer wake.Stop()
	slow := time.NewTicker(time.Second)
	defer slow.Stop()
	lastEval := time.Time{}
	n.log.Info("daemon running", "peer", n.cfg.Transport.ID(), "job", n.job.Short(), "protocol", n.cfg.Job.Protocol)
	now := func() time.Duration { return n.cfg.Now().Sub(n.start) }
	rearm := func() {
		d := time.Second
		if w := n.core.NextWake(); w != gossip.Never {
			d = min(max(w-now(), time.Millisecond), time.Second)
		}
		wake.Reset(d)
	}
	n.core.SetPeers(n.members(n.cfg.Transport.Peers()))
	for {
		select {
		case <-ctx.Done():
			n.checkpoint("shutdown")
			return nil
		case <-wake.C:
			n.core.Tick(now())
		case in, ok := <-n.cfg.Transport.Inbound():
			if !ok {
				n.checkpoint("transport closed")
				return errors.New("node: transport closed")
			}
			n.handle(in)
		case r := <-doneCh:
			n.core.TrainDone(r)
		case <-slow.C:
			peers := n.members(n.cfg.Transport.Peers())
			n.core.SetPeers(peers)
			n.met.peers.Set(float64(len(peers)))
			n.mu.Lock()
			n.status.Peers = len(peers)
			n.mu.Unlock()
		}
		n.drain(trainCh, sendCh)
		rearm()
		if t := n.cfg.Now(); t.Sub(lastEval) >= n.cfg.EvalInterval {
			lastEval = t
			select {
			case evalCh <- append([]float32(nil), n.core.Params()...):
			default: // still evaluating the last one
			}
		}
	}
}

// handle checks an inbound frame and hands its message to the core.
func (n *Node) handle(in Inbound) {
	kept := false
	defer func() {
		if !kept {
			in.Done() // the transport may reuse the payload
		}
	}()
	n.bytesIn.Add(uint64(len(in.Payload)))
	n.met.bytesIn.Add(float64(len(in.Payload)))
	if in.Job != n.job {
		n.reject("wrong_job", in.From, fmt.Errorf("job %s, this node runs %s", in.Job.Short(), n.job.Short()))
		return
	}
	if !n.cfg.Job.IsMember(in.From) {
		n.reject("not_member", in.From, errors.New("the sender is not among the job's members"))
		return
	}
	// The payload is ours alone: the decoded model may share its memory.
	// An authenticating transport (an AEAD) has checked every byte already.
	m, err := gossip.Decode(in.Payload, gossip.DecodeLimits{Borrow: true, SkipChecksum: in.Authenticated})
	if err != nil {
		n.reject("undecodable", in.From, err)
		return
	}
	if m.From != in.From {
		n.reject("spoofed_sender", in.From, fmt.Errorf("message claims to be from %s", m.From))
		return
	}
	if m.Kind != in.Kind {
		n.reject("kind_mismatch", in.From, fmt.Errorf("frame says %s, message %s", in.Kind, m.Kind))
		return
	}
	m.To = n.cfg.Transport.ID()
	n.msgsIn.Add(1)
	n.met.msgsIn.Inc()
	n.core.Step(m)
	kept = n.core.Kept()
}

// drain carries out what the core asked for.
func (n *Node) drain(trainCh chan<- *gossip.TrainRequest, sendCh chan<- outgoing) {
	for n.core.HasReady() {
		rd := n.core.Ready()
		n.core.Advance()
		for i := range rd.Messages {
			m := &rd.Messages[i]
			// The transport encodes the message as it writes it: the
			// model is not copied again (the core gave it its own copy).
			select {
			case sendCh <- outgoing{to: m.To, f: Frame{Job: n.job, Kind: m.Kind, Msg: m}}:
			default:
				n.met.sendErrors.Inc()
				n.log.Debug("send queue full: dropped a message", "to", m.To)
			}
		}
		for _, t := range rd.Trace {
			if t.Event == "drop" {
				reason := "invalid"
				if t.Code != "" {
					reason = t.Code // shape, non_finite, norm, …
				}
				n.reject(reason, t.Peer, errors.New(t.Reason))
			}
		}
		if rd.Train != nil && n.budget != nil && !n.chargeDP(rd.Train) {
			continue // halted: the request is never run
		}
		if rd.Train != nil {
			trainCh <- rd.Train // the core has at most one request out
		}
		if rd.Commit != nil {
			n.publish()
			n.met.updates.Inc()
			if rd.Commit.Updates-n.lastCkptUpdates >= uint64(n.cfg.CheckpointEvery) {
				n.checkpoint("periodic")
			}
		}
	}
	n.refreshStatus()
}

// chargeDP charges a training request's steps to the privacy budget,
// durably, before it runs. When the budget does not allow them (or the
// ledger cannot be written) the node halts: it trains and shares no more.
func (n *Node) chargeDP(req *gossip.TrainRequest) bool {
	k := n.trainer.Steps(req)
	if !n.budget.Allows(k) {
		n.core.Halt()
		n.log.Warn("privacy budget spent: no more training or sharing", "epsilon", n.budget.Spent(), "budget", n.cfg.DP.Epsilon, "steps", n.budget.Steps())
		n.mu.Lock()
		n.status.DPHalted = true
		n.mu.Unlock()
		return false
	}
	if err := n.cfg.Store.ReserveDP(n.job, uint64(n.budget.Steps()+k)); err != nil {
		n.core.Halt()
		n.log.Error("cannot record privacy spending: halting", "err", err)
		n.mu.Lock()
		n.status.DPHalted = true
		n.mu.Unlock()
		return false
	}
	n.budget.Spend(k)
	n.refreshDP()
	return true
}

// refreshDP publishes the privacy spending in /status and /metrics.
func (n *Node) refreshDP() {
	eps := n.budget.Spent()
	n.mu.Lock()
	n.status.DPEpsilon, n.status.DPSteps = eps, uint64(n.budget.Steps())
	n.mu.Unlock()
	n.met.dpEpsilon.Set(eps)
	n.met.dpSteps.Set(float64(n.budget.Steps()))
}

func (n *Node) checkpoint(why string) {
	if n.cfg.Store == nil {
		return
	}
	c := &Checkpoint{Time: n.cfg.Now(), Job: n.job, Spec: n.cfg.Job, State: n.core.Snapshot(), Meta: n.modelMetadata(n.core.Age())}
	if n.budget != nil {
		c.DPSteps, c.DPEpsilon = uint64(n.budget.Steps()), n.budget.Spent()
	}
	if err := n.cfg.Store.Save(c); err != nil {
		n.log.Error("checkpoint failed", "err", err)
		return
	}
	n.lastCkptUpdates = c.State.Updates
	n.met.ckpts.Inc()
	n.mu.Lock()
	n.status.Checkpoint, n.status.CheckpointAge = c.Seq, c.State.Age
	n.mu.Unlock()
	n.log.Debug("checkpoint", "seq", c.Seq, "why", why, "age", c.State.Age)
}

func (n *Node) trainLoop(in <-chan *gossip.TrainRequest, out chan<- *gossip.TrainResult) {
	for req := range in {
		r, err := n.trainer.Run(req)
		if err != nil {
			n.log.Error("training failed", "err", err)
			r = &gossip.TrainResult{ID: req.ID}
		}
		out <- r
	}
}

func (n *Node) sendLoop(ctx context.Context, in <-chan outgoing) {
	for o := range in {
		if o.to != gossip.Broadcast {
			n.send(ctx, o.to, o.f)
			continue
		}
		// One publish reaches every member; without a broadcaster, or for a
		// frame too large to publish, send to each neighbour.
		if b, ok := n.cfg.Transport.(Broadcaster); ok {
			sctx, cancel := context.WithTimeout(ctx, n.cfg.SendTimeout)
			err := b.Publish(sctx, o.f)
			cancel()
			if err == nil {
				n.met.published.Inc()
				n.sent(o.f)
				continue
			}
			n.log.Debug("publish failed: sending to each neighbour", "err", err)
		}
		for _, nb := range n.neighbors {
			n.send(ctx, nb, o.f)
		}
	}
}

// send delivers one frame, counting it.
func (n *Node) send(ctx context.Context, to gossip.PeerID, f Frame) {
	sctx, cancel := context.WithTimeout(ctx, n.cfg.SendTimeout)
	err := n.cfg.Transport.Send(sctx, to, f)
	cancel()
	if err != nil {
		n.met.sendErrors.Inc()
		n.log.Debug("send failed", "to", to, "err", err)
		return
	}
	n.sent(f)
}

func (n *Node) sent(f Frame) {
	n.msgsOut.Add(1)
	n.bytesOut.Add(uint64(f.Len()))
	n.met.msgsOut.Inc()
	n.met.bytesOut.Add(float64(f.Len()))
}

func (n *Node) evalLoop(in <-chan []float32) {
	m, err := model.New(n.cfg.Job.Model, model.WithBackend(compute.NewCPU(compute.WithThreads(1))))
	if err != nil {
		return
	}
	for p := range in {
		if err := m.SetParams(p); err != nil {
			continue
		}
		met := m.Evaluate(n.cfg.Test.X, n.cfg.Test.Y, n.cfg.Test.N)
		n.mu.Lock()
		n.status.Accuracy, n.status.Loss = met.Accuracy, met.Loss
		n.mu.Unlock()
		n.met.accuracy.Set(met.Accuracy)
		n.met.loss.Set(met.Loss)
	}
}
