// Package simulation drives the gossip protocol cores on virtual time: a
// discrete-event simulator with a network model (latency, bandwidth, drops,
// churn, partitions) over real datasets partitioned among thousands of peers
// that really train. It also runs the baselines (centralized SGD, FedAvg,
// ring AllReduce) and records metrics. Same config and seed: the same
// numbers, byte for byte.
package simulation

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model/device"
)

// Baseline protocols, run by the simulator itself rather than by cores.
const (
	Centralized = "centralized"
	FedAvg      = "fedavg"
	AllReduce   = "allreduce"
)

// Protocols lists every protocol Run accepts.
var Protocols = append(slices.Clone(gossip.Protocols), FedAvg, AllReduce, Centralized)

// ErrConfig marks invalid simulation settings.
var ErrConfig = errors.New("simulation: invalid config")

// Config is a simulation scenario. Zero values take the documented defaults.
type Config struct {
	// Settings are the job's: protocol, model and its fixed parameters,
	// each peer's training and DP-SGD, as run and simulate both take them
	// (job.Settings; Scale "" or auto: minmax, Topology may name a file of
	// edges). Name and InitSeed are the daemon's: Seed draws everything
	// here.
	job.Settings
	// Data is where the examples come from (default digits, iid).
	job.Data
	// Peers is the number of simulated peers (default 100).
	Peers int
	// Hidden are the MLP widths, parsed from Settings.Hidden.
	Hidden []int
	// Rounds of virtual time Δ to simulate (default 100).
	Rounds int
	// Jitter of periodic actions as a fraction of Δ (default 0.1).
	Jitter float64
	// EdgeList, when set, is the graph: the edges of the file Topology
	// names.
	EdgeList []byte
	// Latency: "0" (default), a duration ("50ms"), "uniform:MIN:MAX" or
	// "lognormal:MEDIAN:SIGMA".
	Latency string
	// Bandwidth per link in bytes per second (0: unlimited).
	Bandwidth float64
	// Compute is each peer's compute speed, which makes training take
	// virtual time (compute.go): "0" or "" (default: updates take no
	// time), RATE in FLOP/s ("20G"), "uniform:LO:HI" or
	// "lognormal:MEDIAN:SIGMA". ComputeTrace, when set, gives the speeds
	// instead (ParseComputeTrace).
	Compute      string
	ComputeTrace []float64
	// Device is where the peers train: auto (default: a GPU where one is
	// usable, else the CPU), cpu or cuda[:N] (model/device). On a GPU the
	// peers' updates train in batches (PeerBatch); the baselines train on
	// the CPU (cuda is refused for them). summary.json says which device
	// ran and why.
	Device string
	// PeerBatch is how many peers' local updates or gradients train in
	// one batched call (model.Stack: the models stacked, strided-batched
	// GEMMs): 1 trains each request alone (on the CPU, on every core);
	// N > 1 gathers the requests asked for until N wait or a result is
	// needed, and trains them at once. 0 (default) is DefaultGPUPeerBatch
	// on a GPU, 1 on the CPU. DP-SGD's lots train alone.
	PeerBatch int
	// DeviceProfile times each of the GPU's calls one at a time
	// (compute.Profiler): summary.json's device_time then lists where the
	// device's time went, by call, and the run is slower for it, since
	// the host no longer queues work while the device computes. Only with
	// Device cuda[:N].
	DeviceProfile bool
	// Drop is the probability that a message is lost.
	Drop float64
	// Churn is the long-run fraction of time a peer is offline (0: none);
	// sessions are exponential with mean ChurnSession online.
	Churn        float64
	ChurnSession time.Duration
	// ChurnTrace lists online intervals: a peer that appears in it is online
	// only during its intervals; others are always online. It replaces
	// Churn. ParseChurnTrace reads the file format.
	ChurnTrace []Interval
	// Netsplits are scheduled partitions of the network.
	Netsplits []Netsplit
	// Turnover is the fraction of the membership replaced during the run
	// (0: a static roster): that many members depart, one at a time,
	// spread over rounds 20%–70% of the run, and as many new peers join,
	// each with the data shard of the member it replaces (so that a run
	// differs from a static one in its membership only), taking a live
	// member's state (gossip.Config.Join). The topology protocols then build their graph
	// over the live members (gossip.Core.SetMembers), as the daemon does.
	Turnover float64
	// Departure is how members go: "leave" (default: a goodbye, a grace
	// period, and push-sum's handoff of its weight beyond one unit) or
	// "die" (silently; the others drop it after MemberTimeout).
	Departure string
	// MemberTimeout is how long a dead member stays in the others' view
	// (default 3Δ).
	MemberTimeout time.Duration
	// Seed drives everything random.
	Seed uint64
	// Sampling is random walk's peer sampling (gossip.Samplings); with
	// HyParView, ActiveView and PassiveView size its views (0: the
	// core's defaults, gossip.DefaultActiveView and DefaultPassiveView).
	Sampling                string
	ActiveView, PassiveView int
	Tokens                  gossip.TokenConfig
	Fanout                  int
	// Byzantine is the fraction of peers that attack (0: none), with
	// Attack one of Attacks.
	Byzantine float64
	Attack    string
	// Voting keeps the last 10 received models at each random-walk peer and
	// reports the accuracy of their majority vote (with the peer's own model)
	// at the end.
	Voting bool
	// FedAvgFraction is the fraction C of clients per FedAvg round
	// (default 0.1, at least one).
	FedAvgFraction float64
	// Codec sends every message through the real wire codec and treats
	// its buffers as the daemon does: a decoded message borrows its
	// vectors from the received bytes, and once the core says it has not
	// kept them (gossip.Core.Kept) they are overwritten with NaNs, as a
	// recycled receive buffer would be. A core that kept memory without
	// saying so shows up as NaN models.
	Codec bool
	// EvalEvery rounds a metrics row is recorded (default 1).
	EvalEvery int
	// EvalPeers is how many peers are evaluated per row (default 20),
	// EvalExamples on how many test examples (default 1000).
	EvalPeers    int
	EvalExamples int
	// FinalEvalPeers is how many peers are evaluated on the full test set at
	// the end for final_accuracy (default 100; Peers or more: all).
	FinalEvalPeers int
}

// Interval is a span of virtual time during which Peer is online.
type Interval struct {
	Peer       int
	Start, End time.Duration
}

// maxTraceSeconds is the latest time a churn trace may name: about 292
// years, the span of a time.Duration.
const maxTraceSeconds = float64(math.MaxInt64/int64(time.Second)) - 1

// ParseChurnTrace reads online intervals, one per line: "PEER START END" with
// PEER a 0-based peer index and START, END in virtual seconds ('#' starts a
// comment).
func ParseChurnTrace(data []byte, name string) ([]Interval, error) {
	var out []Interval
	for ln, line := range strings.Split(string(data), "\n") {
		if k := strings.IndexByte(line, '#'); k >= 0 {
			line = line[:k]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: %s: line %d: want \"PEER START END\"", ErrConfig, name, ln+1)
		}
		p, err1 := strconv.Atoi(f[0])
		a, err2 := strconv.ParseFloat(f[1], 64)
		b, err3 := strconv.ParseFloat(f[2], 64)
		// END ≤ maxTraceSeconds keeps the nanoseconds inside a
		// time.Duration (and refuses NaN, which compares false).
		if err1 != nil || err2 != nil || err3 != nil || p < 0 || !(a >= 0) || !(b >= a) || !(b <= maxTraceSeconds) {
			return nil, fmt.Errorf("%w: %s: line %d: %.60q is not a peer index and 0 ≤ START ≤ END ≤ %.0f seconds", ErrConfig, name, ln+1, line, maxTraceSeconds)
		}
		out = append(out, Interval{Peer: p, Start: time.Duration(a * float64(time.Second)), End: time.Duration(b * float64(time.Second))})
	}
	if len(out) == 0 {
		// Every peer would be online all the time: the trace would be
		// silently ignored.
		return nil, fmt.Errorf("%w: %s: no intervals (want lines \"PEER START END\")", ErrConfig, name)
	}
	return out, nil
}

// Netsplit cuts the network into Groups groups (peer i in group i mod
// Groups) from round From to round To.
type Netsplit struct {
	From, To, Groups int
}

// Validate checks the config and fills defaults.
func (c *Config) Validate() error {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	dev, err := device.Parse(c.Device)
	if err != nil {
		return fmt.Errorf("%w: --device: %v", ErrConfig, err)
	}
	if c.DeviceProfile && dev.Kind != "cuda" {
		return fmt.Errorf("%w: --device-profile times a GPU's calls: give --device cuda or cuda:N, not %s", ErrConfig, dev)
	}
	def(&c.Peers, 100)
	def(&c.Rounds, 100)
	def(&c.LocalEpochs, 1)
	def(&c.Batch, 32)
	def(&c.EvalEvery, 1)
	def(&c.EvalPeers, 20)
	def(&c.EvalExamples, 1000)
	def(&c.FinalEvalPeers, 100)
	if c.Protocol == "" {
		c.Protocol = gossip.RandomWalk
	}
	if !slices.Contains(Protocols, c.Protocol) {
		return fmt.Errorf("%w: protocol %q, want %s", ErrConfig, c.Protocol, strings.Join(Protocols, "|"))
	}
	if c.Model == "" {
		c.Model = "softmax"
	}
	if c.Dataset == "" {
		c.Dataset = "digits"
	}
	if c.Scale == "" || c.Scale == job.ScaleAuto {
		c.Scale = job.DefaultSimScale
	}
	if err := dataset.CheckScaling(c.Scale); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if c.Variant != "" && !slices.Contains(gossip.Variants, c.Variant) {
		return fmt.Errorf("%w: variant %q, want %s", ErrConfig, c.Variant, strings.Join(gossip.Variants, "|"))
	}
	if c.Sampling != "" && !slices.Contains(gossip.Samplings, c.Sampling) {
		return fmt.Errorf("%w: sampling %q, want %s", ErrConfig, c.Sampling, strings.Join(gossip.Samplings, "|"))
	}
	if (c.ActiveView != 0 || c.PassiveView != 0) && c.Sampling != gossip.SamplingHyParView {
		return fmt.Errorf("%w: view sizes are HyParView's: give them with sampling hyparview", ErrConfig)
	}
	if c.ActiveView < 0 || c.PassiveView < 0 {
		return fmt.Errorf("%w: HyParView views of %d active and %d passive peers", ErrConfig, c.ActiveView, c.PassiveView)
	}
	if c.Partition == "" {
		c.Partition = job.DefaultPartition
	}
	if c.Delta == 0 {
		c.Delta = gossip.DefaultDelta
	}
	if c.Jitter == 0 {
		c.Jitter = gossip.DefaultJitter
	}
	if c.LR == 0 {
		c.LR = gossip.DefaultLR
	}
	if c.Topology == "" {
		c.Topology = gossip.DefaultTopology(c.Protocol)
	}
	if c.Latency == "" {
		c.Latency = "0"
	}
	if c.ChurnSession == 0 {
		c.ChurnSession = 10 * c.Delta
	}
	if c.FedAvgFraction == 0 {
		c.FedAvgFraction = 0.1
	}
	if c.Departure == "" {
		c.Departure = DepartLeave
	}
	if c.MemberTimeout == 0 {
		c.MemberTimeout = 3 * c.Delta
	}
	switch {
	case c.Peers < 1 || (c.Peers < 2 && c.Protocol != Centralized):
		return fmt.Errorf("%w: %d peers", ErrConfig, c.Peers)
	case c.Protocol == gossip.SFB && c.Peers > gossip.SFBMaxPeers:
		return fmt.Errorf("%w: sfb sends every update to every peer, so it runs jobs of at most %d peers, not %d; use dpsgd, or randomwalk, with --sampling hyparview", ErrConfig, gossip.SFBMaxPeers, c.Peers)
	case c.PeerBatch < 0:
		return fmt.Errorf("%w: --peer-batch %d: want 1 (each update alone), N > 1, or 0 (automatic)", ErrConfig, c.PeerBatch)
	case c.Rounds < 0 || c.LocalEpochs < 0 || c.LocalSteps < 0 || c.Batch < 0 || c.EvalEvery < 0 || c.EvalPeers < 0 || c.EvalExamples < 0 || c.FinalEvalPeers < 0:
		return fmt.Errorf("%w: negative count", ErrConfig)
	case c.Delta < 0 || !(c.LR > 0):
		return fmt.Errorf("%w: delta %v, lr %v", ErrConfig, c.Delta, c.LR)
	case c.Drop < 0 || c.Drop >= 1:
		return fmt.Errorf("%w: drop probability %v not in [0,1)", ErrConfig, c.Drop)
	case c.Churn < 0 || c.Churn >= 1:
		return fmt.Errorf("%w: churn %v not in [0,1)", ErrConfig, c.Churn)
	case c.Bandwidth < 0 || c.ChurnSession < 0:
		return fmt.Errorf("%w: negative bandwidth or churn session", ErrConfig)
	case c.FedAvgFraction <= 0 || c.FedAvgFraction > 1:
		return fmt.Errorf("%w: fedavg fraction %v not in (0,1]", ErrConfig, c.FedAvgFraction)
	}
	for _, iv := range c.ChurnTrace {
		if iv.Peer < 0 || iv.Peer >= c.Peers || iv.End < iv.Start || iv.Start < 0 {
			return fmt.Errorf("%w: churn trace interval %+v for %d peers", ErrConfig, iv, c.Peers)
		}
	}
	if err := c.validateAttack(); err != nil {
		return err
	}
	if _, err := merge.ParseAggregator(c.Aggregator); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if err := c.DP.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if c.DP.Enabled() && !slices.Contains(gossip.Protocols, c.Protocol) {
		return fmt.Errorf("%w: DP-SGD runs in the gossip protocols, not the %s baseline", ErrConfig, c.Protocol)
	}
	if c.SecureAggregation {
		comp, err := gossip.ParseCompression(c.Compression)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
		agg, _ := merge.ParseAggregator(c.Aggregator) // checked above
		sh := gossip.SecureShape{Protocol: c.Protocol, Sampling: c.Sampling, Aggregator: agg.Name(), Fraction: c.SecureThreshold, Compressed: comp.Enabled()}
		if why := sh.Refusal(); why != "" {
			return fmt.Errorf("%w: --secure-aggregation with --protocol %s: %s", ErrConfig, c.Protocol, why)
		}
	}
	if !c.SecureAggregation && c.SecureThreshold != 0 {
		return fmt.Errorf("%w: --secure-threshold without --secure-aggregation", ErrConfig)
	}
	switch {
	case c.DPDistributed < 0 || c.DPDistributed == 1 || c.DPColluders < 0:
		return fmt.Errorf("%w: --dp-distributed %d, --dp-colluders %d: want at least 2 shares (1 is local DP) and colluders ≥ 0", ErrConfig, c.DPDistributed, c.DPColluders)
	case c.DPColluders > 0 && c.DPDistributed == 0:
		return fmt.Errorf("%w: --dp-colluders without --dp-distributed", ErrConfig)
	case c.DPDistributed > 0 && (!c.SecureAggregation || !c.DP.Enabled()):
		return fmt.Errorf("%w: --dp-distributed needs --secure-aggregation and DP-SGD (--dp-clip, --dp-noise): without masking each model, with its share of the noise only, is seen alone", ErrConfig)
	}
	if c.DP.Enabled() && c.Protocol == gossip.SFB {
		c.SFBMode = "dense" // DP noise is full rank: factors cannot carry it
	}
	if len(c.ChurnTrace) > 0 && c.Churn > 0 {
		return fmt.Errorf("%w: churn and a churn trace are exclusive", ErrConfig)
	}
	if err := c.validateTurnover(); err != nil {
		return err
	}
	if err := c.validateTopology(); err != nil {
		return err
	}
	for _, s := range c.Netsplits {
		if s.Groups < 2 || s.From < 0 || s.To < s.From {
			return fmt.Errorf("%w: netsplit %+v", ErrConfig, s)
		}
	}
	if _, err := gossip.ParseCompression(c.Compression); err != nil {
		return err
	}
	if _, err := parseCompute(c.Compute, c.ComputeTrace, c.Seed); err != nil {
		return err
	}
	if _, err := parseLatency(c.Latency); err != nil {
		return err
	}
	return nil
}

// maxLatency bounds the delays a --latency spec gives and caps a drawn
// one (a lognormal tail): a message later than this is as good as lost,
// and its time stays a Duration.
const maxLatency = 24 * time.Hour

// latency draws a one-way delay.
type latency func(rng *rand.Rand) time.Duration

func parseLatency(spec string) (latency, error) {
	bad := func() (latency, error) {
		return nil, fmt.Errorf("%w: --latency %q, want 0, DURATION, uniform:MIN:MAX or lognormal:MEDIAN:SIGMA (delays up to %v)", ErrConfig, spec, maxLatency)
	}
	parts := strings.Split(spec, ":")
	switch parts[0] {
	case "0", "":
		return func(*rand.Rand) time.Duration { return 0 }, nil
	case "uniform":
		if len(parts) != 3 {
			return bad()
		}
		lo, err1 := time.ParseDuration(parts[1])
		hi, err2 := time.ParseDuration(parts[2])
		if err1 != nil || err2 != nil || lo < 0 || hi < lo || hi > maxLatency {
			return bad()
		}
		return func(r *rand.Rand) time.Duration { return lo + time.Duration(r.Float64()*float64(hi-lo)) }, nil
	case "lognormal":
		if len(parts) != 3 {
			return bad()
		}
		med, err1 := time.ParseDuration(parts[1])
		sigma, err2 := strconv.ParseFloat(parts[2], 64)
		// NaN and ±Inf would draw delays that are no durations at all.
		if err1 != nil || err2 != nil || med <= 0 || med > maxLatency || !(sigma >= 0) || math.IsInf(sigma, 0) {
			return bad()
		}
		return func(r *rand.Rand) time.Duration {
			// A wide σ's tail overflows a Duration: cap it.
			d := float64(med) * math.Exp(sigma*r.NormFloat64())
			return time.Duration(min(d, float64(maxLatency)))
		}, nil
	}
	d, err := time.ParseDuration(spec)
	if err != nil || d < 0 || d > maxLatency || len(parts) != 1 {
		return bad()
	}
	return func(*rand.Rand) time.Duration { return d }, nil
}
