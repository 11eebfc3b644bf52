package peer

import (
	"math/rand/v2"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/peer/trainer"
	"github.com/gossipd/gossipd/privacy"
)

// Setup is what makes one learning peer, the same for the daemon and the
// simulator: the job's protocol settings, which every peer of a job
// shares, this peer's own training, and its data. Build turns it into a
// peer; the world adds what is its own (identity, randomness, the
// initial model, the graph, a resumed state) to the core's config.
type Setup struct {
	// The job's: protocol, model and fixed parameters.
	Protocol string
	Model    model.Spec
	Delta    time.Duration
	// RoundTimeout is how long a D-PSGD or SFB round waits for its
	// neighbours (0: gossip.DefaultRoundTimeout·Delta).
	RoundTimeout                  time.Duration
	Variant, Compression, SFBMode string
	Staleness                     int
	// FactorBatch is the batch size by which SFB decides which layers
	// travel as factors: every peer of the job must decide alike (0:
	// Batch).
	FactorBatch int
	Outer       gossip.OuterConfig

	// This peer's own.
	LR                 float64
	Batch, LocalEpochs int
	Aggregator         merge.Aggregator
	// DP configures DP-SGD (off unless enabled); DPSource draws its
	// sampling and noise (crypto-backed in the daemon, seeded only in the
	// simulator).
	DP       privacy.Config
	DPSource privacy.Source

	// Its data, the training workspace and the training's randomness.
	Data      *trainer.Data
	Workspace *trainer.Workspace
	TrainRand *rand.Rand
}

// Budget opens a peer's privacy budget for DP-SGD at sampling rate q, and
// the ledger that records its spending (nil: none).
type Budget func(q float64) (*privacy.Budget, Ledger, error)

// Build makes a peer from s around core (the world's part of the core's
// config, which s's completes): its trainer on s.Data and,
// with DP-SGD, a budget from budget (nil: a fresh one, recorded nowhere).
// pc carries the driver's other settings (job, admission, limits).
func Build(core gossip.Config, s Setup, pc Config, budget Budget) (*Peer, *trainer.Trainer, error) {
	core.Protocol, core.Spec, core.Delta, core.RoundTimeout = s.Protocol, s.Model, s.Delta, s.RoundTimeout
	core.LR, core.Variant, core.Batch = s.LR, s.Variant, s.Batch
	core.LocalSteps = LocalSteps(s.LocalEpochs, len(s.Data.Idx), s.Batch)
	core.Staleness, core.SFBMode, core.Aggregator = s.Staleness, s.SFBMode, s.Aggregator
	if s.Protocol == gossip.SFB && s.FactorBatch > 0 {
		core.Batch = s.FactorBatch
	}
	comp, err := gossip.ParseCompression(s.Compression)
	if err != nil {
		return nil, nil, err
	}
	comp.Apply(&core)
	core.Outer = s.Outer
	tc := trainer.Config{Batch: s.Batch, LR: s.LR}
	if s.DP.Enabled() {
		tc.DP, tc.DPSource = s.DP, s.DPSource
	}
	tr, err := trainer.New(s.Workspace, s.Data, s.TrainRand, tc)
	if err != nil {
		return nil, nil, err
	}
	pc.Core, pc.Trainer = core, tr
	if s.DP.Enabled() {
		if budget == nil {
			budget = func(q float64) (*privacy.Budget, Ledger, error) {
				b, err := privacy.NewBudget(s.DP, q, privacy.Spending{})
				return b, nil, err
			}
		}
		if pc.Budget, pc.Ledger, err = budget(tr.SamplingRate()); err != nil {
			return nil, nil, err
		}
	}
	p, err := New(pc)
	if err != nil {
		return nil, nil, err
	}
	return p, tr, nil
}
