package simulation

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/device"
)

// Flags are `gossipd simulate`'s settings as flags and scenario files
// give them: the job's (job.Settings, shared with `gossipd run`), the
// data's, the simulated network's and the output's. Config resolves
// them.
type Flags struct {
	Job  job.Settings
	Data job.Data
	c    Config

	netsplits, topology, churnTrace, computeTrace string

	Out, CPUProfile, MemoryLimit string
	JSON, Quiet                  bool
	Progress                     time.Duration

	// Deprecated lists the old spellings the flags were given, each with
	// what to write instead; Execute prints them on stderr.
	Deprecated []string
}

// Bounds are the values simulate's numeric flags take.
var Bounds = cli.WithBounds(job.Bounds, cli.Bounds{
	"peers": "[1,inf)", "rounds": "[1,inf)", "active-view": "[1,1024]", "passive-view": "[1,1024]", "eval-every": "[1,inf)", "eval-peers": "[1,inf)", "eval-examples": "[1,inf)",
	"final-eval-peers": "[0,inf)", "jitter": "[0,1)", "bandwidth": "[0,inf)", "drop": "[0,1)",
	"churn": "[0,1)", "churn-session": "(0,inf)", "turnover": "[0,1]", "member-timeout": "(0,inf)",
	"byzantine": "(0,0.5)", "fanout": "[0,inf)", "fedavg-fraction": "(0,1]", "peer-batch": "[0,inf)", "seed": "[0,inf)",
	"progress": "[0,inf)",
})

// Register declares simulate's flags on fs, in groups.
func (f *Flags) Register(fs *flag.FlagSet) {
	c := &f.c
	cli.Group(fs, "Scenario file", func() {
		fs.String("scenario", "", "YAML scenario file whose keys are these flags' names (flags given win)")
	})
	cli.Group(fs, "Job", func() {
		f.Job.RegisterJob(fs, job.Simulator)
		fs.IntVar(&c.ActiveView, "active-view", gossip.DefaultActiveView, "hyparview: peers each peer gossips with (its active view)")
		fs.IntVar(&c.PassiveView, "passive-view", gossip.DefaultPassiveView, "hyparview: peers each peer knows to replace them (its passive view)")
		fs.IntVar(&c.Fanout, "fanout", 0, "sfb: peers per broadcast (0: all); pushsum: out-neighbours per step (0: one)")
		fs.BoolVar(&c.Voting, "voting", false, "random walk: also report voting over the last 10 received models")
		fs.Float64Var(&c.FedAvgFraction, "fedavg-fraction", 0.1, "FedAvg client fraction C per round")
	})
	cli.Group(fs, "Training (each peer's own)", func() { f.Job.RegisterTraining(fs) })
	cli.Group(fs, "Privacy (DP-SGD)", func() { f.Job.RegisterPrivacy(fs) })
	cli.Group(fs, "Data", func() { f.Data.Register(fs) })
	cli.Group(fs, "Simulation", func() {
		fs.IntVar(&c.Peers, "peers", 100, "number of peers")
		fs.IntVar(&c.Rounds, "rounds", 100, "rounds to simulate (a round is one Δ of virtual time)")
		fs.Uint64Var(&c.Seed, "seed", 1, "seed of everything random")
		fs.Float64Var(&c.Jitter, "jitter", 0.1, "jitter of periodic actions, as a fraction of Δ (0: none)")
		fs.StringVar(&c.Latency, "latency", "0", "latency: 0, DURATION, uniform:MIN:MAX or lognormal:MEDIAN:SIGMA")
		cli.RateVar(fs, &c.Bandwidth, "bandwidth", 0, "per-link bandwidth `RATE` (e.g. 1MiB/s; 0: unlimited)")
		fs.Float64Var(&c.Drop, "drop", 0, "probability that a message is lost")
		fs.Float64Var(&c.Churn, "churn", 0, "fraction of time peers are offline (exponential sessions)")
		fs.DurationVar(&c.ChurnSession, "churn-session", 0, "mean online session (default 10·Δ)")
		fs.StringVar(&f.churnTrace, "churn-trace", "", "file of online intervals \"PEER START END\" (seconds)")
		fs.Float64Var(&c.Turnover, "turnover", 0, "fraction of the members replaced during the run")
		fs.StringVar(&c.Departure, "departure", DepartLeave, "with --turnover, how members go: leave|die")
		fs.DurationVar(&c.MemberTimeout, "member-timeout", 0, "with --departure die: how long a dead member stays in views (default 3·Δ)")
		fs.StringVar(&f.netsplits, "netsplit", "", "partitions of the network: FROM-TO:GROUPS[,…] in rounds, e.g. 20-40:2")
		fs.Float64Var(&c.Byzantine, "byzantine", 0, "fraction of peers that attack (with --attack)")
		fs.StringVar(&c.Attack, "attack", "", "Byzantine attack: "+strings.Join(Attacks, "|"))
		fs.StringVar(&c.Compute, "compute", "0", "peers' speeds in FLOP/s: 0 (instant), RATE (20G), uniform:LO:HI, lognormal:MEDIAN:SIGMA")
		fs.StringVar(&f.computeTrace, "compute-trace", "", "file of compute speeds in FLOP/s, one per line (peer i: line i)")
		fs.BoolVar(&c.Codec, "codec", false, "send every message through the real wire codec")
	})
	cli.Group(fs, "Evaluation and output", func() {
		fs.IntVar(&c.EvalEvery, "eval-every", 1, "record a metrics row every N rounds")
		fs.IntVar(&c.EvalPeers, "eval-peers", 20, "peers evaluated per metrics row")
		fs.IntVar(&c.EvalExamples, "eval-examples", 1000, "test examples per metrics row")
		fs.IntVar(&c.FinalEvalPeers, "final-eval-peers", 100, "peers evaluated on the full test set at the end (0: all)")
		fs.StringVar(&f.Out, "out", "out/sim", "directory for metrics.csv, summary.json and plots")
		fs.BoolVar(&f.JSON, "json", false, "print summary.json to stdout")
		fs.BoolVar(&f.Quiet, "quiet", false, "no progress on stderr (as --progress 0)")
		fs.DurationVar(&f.Progress, "progress", DefaultProgressEvery,
			"progress on stderr at most this often (0: none); a bar on a terminal, else lines")
	})
	cli.Group(fs, "Process", func() {
		fs.StringVar(&c.Device, "device", "auto", "where training runs: "+device.Values+" (auto: where a GPU gossipd can use opens, the faster of it and the CPU on the run's first rounds; else the CPU)")
		fs.IntVar(&c.PeerBatch, "peer-batch", 0, "peers trained in one batched call: 1 each alone, N up to N, 0 automatic")
		fs.BoolVar(&c.DeviceProfile, "device-profile", false, "time each of the GPU's calls apart, into summary.json's device_time.calls (slower; --device cuda only)")
		fs.StringVar(&f.MemoryLimit, "memory-limit", "", "soft memory limit of the Go runtime, e.g. 192MiB (\"\" given: $GOMEMLIMIT or none)")
		fs.StringVar(&f.CPUProfile, "cpuprofile", "", "write a CPU profile to this file")
	})
}

// Config resolves the flags of fs (parsed, the scenario applied) into a
// validated Config. Errors wrap cli.ErrUsage and name the flag.
func (f *Flags) Config(fs *flag.FlagSet) (Config, error) {
	usage := func(name string, err error) (Config, error) {
		if name == "" {
			return Config{}, cli.ConfigUsage(err, ErrConfig)
		}
		return Config{}, fmt.Errorf("%w: --%s: %s", cli.ErrUsage, name, cli.WithoutSentinel(err, ErrConfig))
	}
	if err := cli.CheckNumbers(fs, Bounds); err != nil {
		return Config{}, err
	}
	if f.Quiet && cli.FlagSet(fs, "progress") {
		return usage("", fmt.Errorf("--progress with --quiet: --quiet turns progress off; give one of them"))
	}
	c := f.c
	j := f.Job
	c.Settings, c.Data = j, f.Data
	c.Scale = job.ScaleFor(j.Scale, job.Simulator)
	if j.LocalSteps == 0 { // the outer optimizer's defaults apply to local steps only
		c.Outer, c.OuterLR, c.OuterMomentum = "", 0, 0
	}
	if !cli.FlagSet(fs, "test-fraction") {
		c.TestFraction = 0 // the loader's default, and no error for a source with a test split
	}
	c.Sampling = j.Sampling
	if c.Sampling != gossip.SamplingHyParView {
		for _, name := range []string{"active-view", "passive-view"} {
			if cli.FlagSet(fs, name) {
				return usage(name, fmt.Errorf("--%s sizes a HyParView view: give it with --sampling hyparview", name))
			}
		}
		c.ActiveView, c.PassiveView = 0, 0
	}
	if c.Sampling == gossip.SamplingNewscast {
		c.Sampling = gossip.SamplingCyclon
		f.Deprecated = append(f.Deprecated, "--sampling newscast is an old name: it runs cyclon; write --sampling cyclon")
	}
	var err error
	if c.Model == model.MLP {
		if c.Hidden, err = model.ParseHidden(j.Hidden); err != nil {
			return usage("hidden", err)
		}
	}
	if f.churnTrace != "" {
		if c.ChurnTrace, err = ReadChurnTrace(f.churnTrace); err != nil {
			return usage("churn-trace", err)
		}
	}
	if f.computeTrace != "" {
		if c.ComputeTrace, err = ReadComputeTrace(f.computeTrace); err != nil {
			return usage("compute-trace", err)
		}
	}
	if c.Netsplits, err = ParseNetsplits(f.netsplits); err != nil {
		return usage("netsplit", err)
	}
	if c.Tokens, err = gossip.ParseTokens(j.Tokens); err != nil {
		return usage("tokens", err)
	}
	if j.Topology != "" {
		if err := c.SetTopology(j.Topology); err != nil {
			return usage("topology", err)
		}
	}
	if err := cli.SetMemoryLimit(f.MemoryLimit); err != nil {
		return Config{}, err
	}
	allPeers := cli.FlagSet(fs, "final-eval-peers") && c.FinalEvalPeers == 0
	if err := c.Validate(); err != nil {
		return usage("", err)
	}
	if allPeers {
		c.FinalEvalPeers = c.Peers
	}
	var set []string
	fs.Visit(func(fl *flag.Flag) { set = append(set, fl.Name) })
	if err := c.CheckOptions(set); err != nil {
		return usage("", err)
	}
	return c, nil
}
