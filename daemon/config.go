package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/device"
	"github.com/gossipd/gossipd/privacy"
)

// Defaults of Config, filled by Validate.
const (
	DefaultCheckpointEvery  = 10
	DefaultEvalInterval     = 2 * time.Second
	DefaultSenders          = 8
	DefaultSendTimeout      = 10 * time.Second
	DefaultAnnounceInterval = 5 * time.Second
	// DefaultMembershipInterval is how often the live members are
	// recomputed from announcements and connections.
	DefaultMembershipInterval = 250 * time.Millisecond
	// AloneIntervals is how many announcement intervals a daemon may go
	// without another member of its job before it warns (Config.AloneWarning):
	// twice the default live timeout.
	AloneIntervals = 6
	// AnnounceBudget is how many announcements the members of a job of
	// partial views send together per AnnounceInterval, whatever its
	// size: each announces every AnnounceInterval·members/AnnounceBudget
	// (never less often than AnnounceInterval), so what a member hears
	// of announcements stays flat as the job grows. A job of up to
	// AnnounceBudget members announces as a full mesh does.
	AnnounceBudget = 8
)

// Config configures a daemon. Zero values take the documented defaults;
// Validate fills them.
type Config struct {
	// Job is the training job. Required.
	Job job.Spec
	// Local holds this peer's own settings (step size, batch, epochs, an
	// allowlist of members); Validate fills its defaults.
	Local Local
	// Join says the node joins a running job: it starts from the newest
	// model and protocol state of a live member instead of the initial
	// model (unless it has a checkpoint of the job).
	Join bool
	// InitParams are the initial weights of a job with an InitHash
	// (--init-from), which they must hash to; nil: the model drawn from
	// InitSeed (a joiner of such a job takes a member's state instead).
	InitParams []float32
	// Origin is the announcement the job was joined from: the daemon
	// announces its spec with the creator's signature. Nil: the daemon
	// created the job, and signs its spec itself.
	Origin *transport.Announcement
	// Train is the node's local training data; Test its held-out split.
	// Both are already scaled (dataset.Load). Required.
	Train, Test *dataset.Dataset
	// Transport carries frames. Required.
	Transport transport.Transport
	// Addrs are shown in /status when the transport cannot tell its
	// current addresses (transport.Addresser).
	Addrs []string
	// Scaler maps raw features to the model's inputs (it was fitted on the
	// training data); /predict applies it and /model exports it. Nil: none.
	Scaler *dataset.Scaler
	// Store persists checkpoints; nil runs without persistence.
	Store *Store
	// CheckpointEvery is the number of model updates between checkpoints
	// (default DefaultCheckpointEvery, 10). A checkpoint is also written on
	// shutdown.
	CheckpointEvery int
	// DP trains with DP-SGD within a privacy budget (zero: off). Noise
	// comes from a crypto-keyed source; steps are charged to the store's
	// ledger of the training data (DataFingerprint) before they are taken,
	// and the budget caps what the data has spent under every job.
	DP privacy.Config
	// DataFingerprint identifies the training data in the privacy ledger:
	// dataset.Fingerprint of the raw examples, before scaling (Load's
	// LoadOptions.Fingerprint). Default: the fingerprint of Train as
	// given.
	DataFingerprint string
	// Aggregator combines parameters (gossip.Config.Aggregator; default
	// the weighted mean; robust rules from merge.ParseAggregator).
	Aggregator merge.Aggregator
	// MaxNorm bounds the L2 norm of received parameter vectors
	// (gossip.Config.MaxNorm; default 1000·√n, negative: none).
	MaxNorm float64
	// AnnounceInterval is how often a daemon whose transport is a
	// Broadcaster announces its job (default DefaultAnnounceInterval, 5s).
	AnnounceInterval time.Duration
	// LiveTimeout is how long a member stays live without announcing
	// (default 3·AnnounceInterval).
	LiveTimeout time.Duration
	// MembershipInterval is how often the live members are recomputed
	// (default DefaultMembershipInterval, 250ms).
	MembershipInterval time.Duration
	// AloneWarning is how long the daemon may have no other live member
	// of its job before it warns that it trains alone (default
	// AloneIntervals·AnnounceInterval: 30 s at the default interval).
	AloneWarning time.Duration
	// LeaveGrace is how long a leaving push-sum node keeps taking the
	// shares in flight to it before it hands off its weight and goes
	// (default max(1s, 3Δ)).
	LeaveGrace time.Duration
	// Backend computes training. When nil, Validate opens the one Device
	// names.
	Backend compute.Backend
	// Device is where training runs when Backend is nil: auto, cpu or
	// cuda[:N] (--device; default auto, which takes the CPU until gossipd
	// has a CUDA backend). One that cannot be had here is an error
	// wrapping device.ErrDevice.
	Device string
	// device is the choice made, for /status.
	device device.Choice
	// EvalInterval is how often the model is evaluated on Test (default
	// DefaultEvalInterval, 2s).
	EvalInterval time.Duration
	// Senders is how many messages may be in flight at once (default
	// DefaultSenders, 8).
	Senders int
	// SendTimeout bounds one send (default DefaultSendTimeout, 10s).
	SendTimeout time.Duration
	// SendRate paces what the node sends, in payload bytes per second over
	// all peers (0: unpaced), for slow or metered uplinks: a send waits
	// for its turn instead of filling the link's queue.
	SendRate float64
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Validate checks the config and fills defaults.
func (c *Config) Validate() error {
	if c.Transport == nil || c.Train == nil || c.Test == nil {
		return errors.New("daemon: config needs a transport and train and test data")
	}
	if err := c.Job.Validate(); err != nil {
		return err
	}
	if err := c.Local.Validate(); err != nil {
		return err
	}
	if c.Job.DPShares > 0 && !c.DP.Enabled() {
		return fmt.Errorf("daemon: job %s runs distributed DP: each member adds its share of DP-SGD's noise; give --dp-clip and --dp-noise", c.Job.ID().Short())
	}
	if c.Origin != nil && c.Origin.JobID != c.Job.ID().String() {
		return fmt.Errorf("daemon: joined from an announcement of job %.12s, but the job is %s", c.Origin.JobID, c.Job.ID().Short())
	}
	if c.Train.D != c.Job.Model.Inputs || c.Test.D != c.Job.Model.Inputs {
		return fmt.Errorf("daemon: data has %d features, the job's model %d inputs", c.Train.D, c.Job.Model.Inputs)
	}
	if c.CheckpointEvery == 0 {
		c.CheckpointEvery = DefaultCheckpointEvery
	}
	if c.Backend == nil {
		spec, err := device.Parse(c.Device)
		if err != nil {
			return fmt.Errorf("daemon: --device: %w", err)
		}
		if c.Backend, c.device, err = device.Open(spec); err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
	} else {
		c.device = device.Describe(c.Backend)
	}
	if c.EvalInterval == 0 {
		c.EvalInterval = DefaultEvalInterval
	}
	if c.Senders == 0 {
		c.Senders = DefaultSenders
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = DefaultSendTimeout
	}
	if c.AnnounceInterval == 0 {
		c.AnnounceInterval = DefaultAnnounceInterval
	}
	if c.LiveTimeout == 0 {
		c.LiveTimeout = 3 * c.AnnounceInterval
	}
	if c.MembershipInterval == 0 {
		c.MembershipInterval = DefaultMembershipInterval
	}
	if c.AloneWarning == 0 {
		c.AloneWarning = AloneIntervals * c.AnnounceInterval
	}
	if c.LeaveGrace == 0 {
		c.LeaveGrace = max(time.Second, 3*time.Duration(c.Job.DeltaMillis)*time.Millisecond)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.CheckpointEvery < 0 || c.EvalInterval < 0 || c.Senders < 0 || c.SendTimeout < 0 || c.SendRate < 0 || c.AnnounceInterval < 0 || c.LiveTimeout < 0 || c.MembershipInterval < 0 || c.AloneWarning < 0 || c.LeaveGrace < 0 {
		return errors.New("daemon: negative checkpoint interval, evaluation interval, senders or timeout")
	}
	if err := c.DP.Validate(); err != nil {
		return err
	}
	if c.DP.Enabled() && c.Job.Protocol == gossip.SFB && c.Job.SFBMode != "dense" {
		return errors.New("daemon: DP-SGD noise is full rank: an SFB job with DP needs sfb mode dense (--sfb-mode dense on every member)")
	}
	if c.DP.Enabled() && c.Store == nil {
		return errors.New("daemon: DP-SGD needs a store for its privacy ledger")
	}
	if c.DP.Enabled() && c.DataFingerprint == "" {
		c.DataFingerprint = dataset.Fingerprint(c.Train)
	}
	return nil
}
