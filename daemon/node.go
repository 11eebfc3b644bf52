package daemon

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/peer"
	"github.com/gossipd/gossipd/peer/trainer"
	"github.com/gossipd/gossipd/privacy"
)

// Node is a running daemon.
type Node struct {
	cfg  Config
	job  JobID
	peer driver // the peer, its requests carried out by the world
	// trainer is the peer's; onCPU is set once training has left a
	// failed device for the CPU (device.go).
	trainer *trainer.Trainer
	onCPU   bool
	log     *slog.Logger
	met     *metrics
	start   time.Time

	mu     sync.Mutex // guards status
	status Status

	msgsIn, msgsOut, bytesIn, bytesOut atomic.Uint64
	// memIn, memOut count the bytes of the core's membership messages
	// (Cyclon's, HyParView's) received and sent.
	memIn, memOut   atomic.Uint64
	traffic         traffic  // per peer
	pace            *pacer   // nil: unpaced
	hist            history  // /history
	rejected        sync.Map // reason → *atomic.Uint64
	faults          sync.Map // reason → *atomic.Uint64
	resumed         *Checkpoint
	incarnation     uint64        // new at every start
	spec            []byte        // the canonical spec announced
	creator         gossip.PeerID // who signed it
	creatorSig      []byte
	live            atomic.Pointer[[]gossip.PeerID] // live members but self, for broadcasts without a broadcaster
	lastCkptUpdates uint64                          // core goroutine
	dpSteps         int                             // DP steps last shown in the status (-1: none yet)
	aloneSince      time.Time                       // when the peers last went to zero (core goroutine)
	aloneWarned     bool
	roster          roster // the connected peers, sorted by job (membership.go; core goroutine)
	// anns, annsAt: under partial views, the announcements last read
	// and when (membership.go: read every AnnounceInterval).
	anns            []transport.Announcement
	annsAt          time.Time
	sendRoster      atomic.Pointer[roster] // the latest roster, for the sender workers (never mutated once stored)
	withheld        atomic.Uint64          // messages not sent: their addressee is not a member of the job
	accountsUnsaved int                    // push-sum's account saves failed in a row (core goroutine)
	accountsWarned  time.Time
	// partial: the job's members keep partial views (HyParView): a member
	// counts without a connection, and every message that cannot be
	// delivered is reported to the core, which replaces the neighbour.
	partial bool
	kept    []gossip.PeerID // the active view last handed to the transport (core goroutine)
	// sfbTooBig: the job (sfb) grew beyond gossip.SFBMaxPeers, said once.
	sfbTooBig bool

	// Channels from the core goroutine to the workers (workers.go) and
	// the checkpoint writer (checkpoint.go), and back.
	trainCh chan *gossip.TrainRequest
	doneCh  chan *gossip.TrainResult
	sendCh  chan outgoing
	evalCh  chan []float32
	ckptCh  chan *Checkpoint
	// undeliveredCh brings push-sum shares that could not be sent back
	// to the core, and, under partial views, the headers (addressee and
	// kind) of any message that could not be sent.
	undeliveredCh chan *gossip.Message
	// Job control (control.go): pause requests, the leave signal, and
	// runDone, closed when Run returns.
	pauseCh   chan pauseReq
	leaveCh   chan struct{}
	leaveOnce sync.Once
	runDone   chan struct{}

	// published is a copy of the parameters as of the last update, for
	// the API (the core itself belongs to the Run goroutine).
	published  atomic.Pointer[[]float32]
	predictors sync.Pool // *model.Model for /predict
}

// New prepares a daemon: it validates the config, restores the latest
// checkpoint of the job from the store, and builds its peer (core,
// trainer and privacy accounting).
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	self := cfg.Transport.ID()
	if !cfg.Local.IsMember(self) {
		return nil, fmt.Errorf("daemon: this node (%s) is not among the %d peers of its own members allowlist", self, len(cfg.Local.Members))
	}
	_, broadcast := cfg.Transport.(transport.Broadcaster)
	n := &Node{cfg: cfg, job: JobID(cfg.Job.ID()), partial: cfg.Job.Sampling == gossip.SamplingHyParView, log: cfg.Logger, met: newMetrics(), dpSteps: -1, incarnation: newIncarnation(),
		trainCh: make(chan *gossip.TrainRequest, 1), doneCh: make(chan *gossip.TrainResult, 1),
		sendCh: make(chan outgoing, 256), evalCh: make(chan []float32, 1), ckptCh: make(chan *Checkpoint, 1), undeliveredCh: make(chan *gossip.Message, 256),
		pauseCh: make(chan pauseReq), leaveCh: make(chan struct{}), runDone: make(chan struct{})}
	if c, ok := cfg.Transport.(transport.ConnLister); ok {
		n.met.watchConns(c)
	}
	n.met.watchMembership(n.membershipBytes)
	n.pace = newPacer(cfg.SendRate)
	if err := n.signSpec(); err != nil {
		return nil, err
	}
	m, err := model.New(cfg.Job.Model, model.WithSeed(cfg.Job.InitSeed), model.WithBackend(cfg.Backend))
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.InitParams != nil:
		if h := model.ParamsHash(cfg.InitParams); h != cfg.Job.InitHash {
			return nil, fmt.Errorf("daemon: the initial weights hash to %.12s, the job's to %.12s", h, cfg.Job.InitHash)
		}
		if err := m.SetParams(cfg.InitParams); err != nil {
			return nil, err
		}
	case cfg.Job.InitHash != "" && !cfg.Join:
		return nil, fmt.Errorf("daemon: job %s starts from given weights (hash %.12s): give them (--init-from) or join it", n.job, cfg.Job.InitHash)
	}
	// Cores draw randomness from the OS per run: the daemon's peer choices
	// need no reproducibility, and nodes must not move in lockstep.
	seed := rand.Uint64()
	// dpsgd, adpsgd, pushsum and sfb build their graph over the live
	// members (membership.go), the same for every member that sees the
	// same roster.
	gc := gossip.Config{
		ID: self, Init: m.CopyParams(), Rand: rand.New(rand.NewPCG(seed, seed>>1)), Jitter: gossip.DefaultJitter,
		Topology: cfg.Job.LiveTopology(), TopologySeed: cfg.Job.TopologySeed(),
		Broadcast: broadcast, MaxNorm: cfg.MaxNorm, Incarnation: n.incarnation,
		Sampling: cfg.Job.CoreSampling(), Tokens: cfg.Job.CoreTokens(),
	}
	if cfg.Job.SecureAggregation {
		// Each round's keys and masks are secrets: drawn from the OS,
		// bound to the job, and sent only over the transport, which
		// authenticates every peer by its libp2p identity.
		gc.Secure = gossip.SecureConfig{Enabled: true, Job: n.job.String(), Fraction: cfg.Job.SecureThreshold, Rand: crand.Reader,
			MinThreshold: cfg.Job.MinThreshold()}
		if s, ok := cfg.Transport.(transport.Signer); ok {
			// Members sign the keys they advertise with their identity
			// keys, so that a receiver cannot swap its own in.
			gc.Secure.Sign = s.Sign
			gc.Secure.Verify = s.Verify
		}
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
	if cfg.Store != nil && gossip.PushesSums(cfg.Job.Protocol) {
		// Push-sum's accounts are newer than any checkpoint: its weight
		// and running sums as of its last event.
		if gc.Accounts, err = cfg.Store.Accounts(n.job); err != nil {
			return nil, err
		}
		if gc.Accounts != nil {
			n.log.Info("push-sum accounts restored", "weight", gc.Accounts.Weight, "links", len(gc.Accounts.Links))
		}
	}
	// A joining peer pulls the newest model and protocol state from a live
	// member; one with a checkpoint of the job resumes from it instead.
	gc.Join = cfg.Join && gc.Resume == nil
	idx := make([]int, cfg.Train.N)
	for i := range idx {
		idx[i] = i
	}
	setup := peer.Setup{Protocol: cfg.Job.Protocol, Model: cfg.Job.Model, Delta: time.Duration(cfg.Job.DeltaMillis) * time.Millisecond, RoundTimeout: cfg.Job.RoundTimeout(),
		Variant: cfg.Job.Variant, Compression: cfg.Job.Compression, SFBMode: cfg.Job.SFBMode, Staleness: cfg.Job.Staleness,
		FactorBatch: cfg.Job.FactorBatch, // every member must choose its factor layers alike
		LR:          cfg.Local.LR, Batch: cfg.Local.Batch, LocalEpochs: cfg.Local.LocalEpochs, Aggregator: cfg.Aggregator,
		Data:      &trainer.Data{X: cfg.Train.X, Y: cfg.Train.Y, D: cfg.Train.D, Idx: idx},
		Workspace: trainer.NewWorkspace(m), TrainRand: rand.New(rand.NewPCG(seed, 3))}
	if cfg.Job.Outer != nil {
		setup.Outer = *cfg.Job.Outer
	}
	if cfg.DP.Enabled() {
		setup.DP, setup.DPSource = cfg.DP, privacy.NewCryptoSource()
		setup.DP.Shares = cfg.Job.DPShares
	}
	// The peer encodes what it sends; the checksum trailer is left out
	// over a transport that authenticates every byte (libp2p), not over
	// memnet.
	pc := peer.Config{Job: n.job, Members: cfg.Local.memberIDs(), Encoding: peer.EncodeChecksummed}
	if cfg.Transport.Authenticates() {
		pc.Encoding = peer.EncodeAuthenticated
	}
	if cfg.Job.SecureAggregation {
		pc.Trace = n.traced
	}
	p, tr, err := peer.Build(gc, setup, pc, func(q float64) (*privacy.Budget, peer.Ledger, error) {
		return n.openLedger(q)
	})
	if err != nil {
		return nil, err
	}
	n.peer, n.trainer = driver{p, (*world)(n)}, tr
	n.status = Status{PeerID: self, Addrs: cfg.Addrs, JobID: n.job.String(), Protocol: cfg.Job.Protocol, Device: cfg.device, Rejected: map[string]uint64{}}
	if cfg.Job.SecureAggregation {
		n.status.Secure = &gossip.SecureCounts{}
	}
	if n.resumed != nil {
		n.status.ResumedFrom = n.resumed.Seq
		n.status.Checkpoint = n.resumed.Seq
		n.status.CheckpointAge = n.resumed.State.Age
		n.met.ckptTime.Set(float64(n.resumed.Time.UnixNano()) / 1e9)
	}
	if n.peer.Budget() != nil {
		n.status.DPDelta, n.status.DPBudget = cfg.DP.Delta, cfg.DP.Epsilon
		n.met.dpBudget.Set(cfg.DP.Epsilon)
	}
	n.refreshStatus()
	n.publish()
	n.predictors.New = func() any {
		m, _ := model.New(cfg.Job.Model, model.WithBackend(compute.NewCPU(compute.WithThreads(1))))
		return m
	}
	return n, nil
}

// publish makes the current parameters visible to the API.
func (n *Node) publish() {
	p := slices.Clone(n.peer.Core().Params())
	n.published.Store(&p)
}

// Params returns a copy of the parameters as of the last update.
func (n *Node) Params() []float32 { return slices.Clone(*n.published.Load()) }

// JobID returns the job's ID.
func (n *Node) JobID() JobID { return n.job }

// Run drives the daemon until ctx is done or Leave is called, then says
// goodbye and writes a final checkpoint. Its goroutine is the core's:
// every call into the peer driver is made here, in turn with the clock,
// arriving frames, training results and job control. Run is called once.
func (n *Node) Run(ctx context.Context) error {
	defer close(n.runDone)
	n.mu.Lock()
	n.start = n.cfg.Now()
	n.mu.Unlock()
	var wg, ckpt sync.WaitGroup
	// Senders outlive ctx a little: what the node sends as it leaves (a
	// push-sum handoff) goes out before they stop.
	sendCtx, stopSending := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSending()
	defer func() {
		close(n.trainCh)
		close(n.sendCh)
		close(n.evalCh)
		drain := time.AfterFunc(n.cfg.SendTimeout, stopSending)
		wg.Wait()
		drain.Stop()
		close(n.ckptCh) // after the final checkpoint was handed over
		ckpt.Wait()
	}()
	wg.Go(n.trainLoop)
	for i := 0; i < n.cfg.Senders; i++ {
		wg.Go(func() { n.sendLoop(sendCtx) })
	}
	wg.Go(n.evalLoop)
	if n.cfg.Store != nil {
		ckpt.Go(n.writeCheckpoints)
	}
	if b, ok := n.cfg.Transport.(transport.Broadcaster); ok {
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
	members := time.NewTicker(n.cfg.MembershipInterval)
	defer members.Stop()
	lastEval := time.Time{}
	n.log.Info("daemon running", "peer", n.peer.ID(), "job", n.job.Short(), "protocol", n.cfg.Job.Protocol)
	now := func() time.Duration { return n.cfg.Now().Sub(n.start) }
	n.refreshMembers() // the core's peers: the job's live members (membership.go)
	for {
		select {
		case <-ctx.Done():
			n.leave()
			n.checkpoint("shutdown")
			return nil
		case <-n.leaveCh:
			n.log.Info("leaving the job, as asked through the API")
			n.leave()
			n.checkpoint("left the job")
			return nil
		case r := <-n.pauseCh:
			n.applyPause(r)
		case <-wake.C:
			n.peer.Tick(now())
		case in, ok := <-n.cfg.Transport.Inbound():
			if !ok {
				n.checkpoint("transport closed")
				return errors.New("daemon: transport closed")
			}
			n.handle(in)
		case r := <-n.doneCh:
			n.peer.TrainDone(r)
		case m := <-n.undeliveredCh:
			n.peer.Undelivered(m)
		case <-slow.C:
			n.peer.SetPeers(n.roster.ids()) // refills random walk's view, when it has room
			n.watchAlone()
			n.sample()
		case <-members.C:
			n.refreshMembers()
		}
		n.refreshStatus()
		d := time.Second
		if w := n.peer.Core().NextWake(); w != gossip.Never {
			d = min(max(w-now(), time.Millisecond), time.Second)
		}
		wake.Reset(d)
		if t := n.cfg.Now(); t.Sub(lastEval) >= n.cfg.EvalInterval {
			lastEval = t
			select {
			case n.evalCh <- slices.Clone(n.peer.Core().Params()):
			default: // still evaluating the last one
			}
		}
	}
}

// handle counts an inbound frame and hands it to the peer driver, which
// decodes and checks it; the payload goes back to the transport unless
// the core kept it.
func (n *Node) handle(in transport.Inbound) {
	if in.Fault != "" {
		n.fault(in.Fault, in.From, in.Err)
		return
	}
	if in.Reject != "" {
		n.reject(in.Reject, in.From, in.Err)
		return
	}
	n.bytesIn.Add(uint64(len(in.Payload)))
	n.met.bytesIn.Add(float64(len(in.Payload)))
	if gossip.Kind(in.Kind).Membership() {
		n.memIn.Add(uint64(len(in.Payload)))
	}
	stepped, kept := n.peer.Receive(peer.Envelope{From: in.From, Job: in.Job, Kind: gossip.Kind(in.Kind), Payload: in.Payload, Authenticated: in.Authenticated})
	if stepped {
		n.msgsIn.Add(1)
		n.met.msgsIn.Inc()
		n.traffic.in(in.From, len(in.Payload), n.cfg.Now())
	}
	if !kept {
		in.Done()
	}
}
