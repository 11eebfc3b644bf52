package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/device"
	"github.com/gossipd/gossipd/simulation"
)

// simulateBounds are the values simulate's numeric flags take, beside
// the training flags it shares with run (trainingBounds).
var simulateBounds = withTrainingBounds(cli.Bounds{
	"peers": "[1,inf)", "rounds": "[1,inf)", "eval-every": "[1,inf)", "eval-peers": "[1,inf)", "eval-examples": "[1,inf)",
	"final-eval-peers": "[0,inf)", "jitter": "[0,1)", "bandwidth": "[0,inf)", "drop": "[0,1)",
	"churn": "[0,1)", "churn-session": "(0,inf)", "turnover": "[0,1]", "member-timeout": "(0,inf)",
	"byzantine": "(0,0.5)", "fanout": "[0,inf)", "fedavg-fraction": "(0,1]", "peer-batch": "[0,inf)", "seed": "[0,inf)",
	"progress": "[0,inf)",
})

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("simulate", "simulate [flags]\n\nRuns many peers of a protocol in one process on virtual time and writes\nmetrics.csv, summary.json and accuracy plots (PNG) to --out.", stderr)
	var c simulation.Config
	var hidden, netsplits, tokens, out, topo string
	var jsonOut, quiet bool
	var cpuProfile, churnTrace, computeTrace string
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile to this file")
	memoryLimit := fs.String("memory-limit", "", "soft memory limit of the Go runtime (e.g. 4GiB; empty: $GOMEMLIMIT or none): the collector works harder near it instead of letting the heap double")
	fs.String("scenario", "", "YAML scenario file whose keys are these flags' names (flags given on the command line win)")
	fs.IntVar(&c.Peers, "peers", 100, "number of peers")
	fs.StringVar(&c.Protocol, "protocol", gossip.RandomWalk, "protocol: "+strings.Join(simulation.Protocols, "|"))
	fs.StringVar(&c.Model, "model", "softmax", "model: "+strings.Join(model.Kinds, "|"))
	fs.StringVar(&hidden, "hidden", "128", "MLP hidden layer widths (mlp only)")
	fs.StringVar(&c.Dataset, "dataset", "digits", "dataset: digits, fashion-mnist or a path")
	fs.StringVar(&c.Scale, "scale", "minmax", "feature scaling: minmax|global|standard|none")
	fs.StringVar(&c.Partition, "partition", "iid", "data partition: iid|dirichlet:α|shards:k|quantity:α|sample:k (k examples per peer drawn with replacement: any number of peers)")
	fs.IntVar(&c.Rounds, "rounds", 100, "rounds to simulate (a round is one Δ of virtual time)")
	fs.DurationVar(&c.Delta, "delta", time.Second, "virtual length Δ of a round")
	fs.Float64Var(&c.Jitter, "jitter", 0.1, "jitter of periodic actions, as a fraction of Δ (0: none)")
	fs.IntVar(&c.LocalEpochs, "local-epochs", 1, "local epochs per random-walk update or FedAvg client")
	fs.IntVar(&c.Batch, "batch", 32, "minibatch size")
	fs.Float64Var(&c.LR, "lr", 0.1, "learning rate")
	fs.StringVar(&topo, "topology", "", "dpsgd/adpsgd/pushsum topology: ring|torus|regular:K|exponential|complete, or a file of edges \"i j\" (default ring; exponential for pushsum)")
	fs.StringVar(&c.Latency, "latency", "0", "latency: 0, DURATION, uniform:MIN:MAX or lognormal:MEDIAN:SIGMA")
	fs.Float64Var(&c.Bandwidth, "bandwidth", 0, "per-link bandwidth in bytes/s (0: unlimited)")
	fs.StringVar(&c.Device, "device", "auto", "where the peers train: "+device.Values+" (auto: the CPU, which simulated faster than a GPU in every run measured and gives the same numbers on every machine; cuda: batched on the GPU, gossip protocols only; summary.json says which and why)")
	fs.IntVar(&c.PeerBatch, "peer-batch", 0, "peers' local updates and gradients trained in one batched call (stacked models): 1 each alone, N > 1 up to N at once, 0 automatic ("+fmt.Sprint(simulation.DefaultGPUPeerBatch)+" on a GPU, 1 on the CPU)")
	fs.StringVar(&c.Compute, "compute", "0", "peers' compute speeds in FLOP/s, making training take virtual time (6·params·examples FLOPs per update): 0 (instant), RATE (20G), uniform:LO:HI or lognormal:MEDIAN:SIGMA")
	fs.StringVar(&computeTrace, "compute-trace", "", "file of compute speeds in FLOP/s, one per line (peer i gets line i, wrapping)")
	fs.Float64Var(&c.Drop, "drop", 0, "probability that a message is lost")
	fs.Float64Var(&c.Churn, "churn", 0, "fraction of time peers are offline (exponential sessions)")
	fs.DurationVar(&c.ChurnSession, "churn-session", 0, "mean online session (default 10·Δ)")
	fs.Float64Var(&c.Turnover, "turnover", 0, "fraction of the members replaced during the run (members depart, new peers join with a member's state)")
	fs.StringVar(&c.Departure, "departure", simulation.DepartLeave, "with --turnover, how members go: leave (goodbye, handoff)|die (dropped after --member-timeout)")
	fs.DurationVar(&c.MemberTimeout, "member-timeout", 0, "with --turnover --departure die: how long a dead member stays in the others' view (default 3·Δ)")
	fs.StringVar(&churnTrace, "churn-trace", "", "file of online intervals \"PEER START END\" (seconds); listed peers are online only then")
	fs.StringVar(&netsplits, "netsplit", "", "partitions of the network: FROM-TO:GROUPS[,…] in rounds, e.g. 20-40:2")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of everything random")
	fs.StringVar(&c.Variant, "variant", "mu", "random-walk variant: mu|rw|um")
	fs.StringVar(&c.Sampling, "sampling", "newscast", "random-walk peer sampling: newscast|oracle")
	fs.StringVar(&c.Compression, "compression", "none", "compression of what peers send: "+gossip.CompressionValues+" (fp16 and int8 for every gossip protocol; topk and randk for dpsgd, adpsgd and pushsum (CHOCO, an optional consensus step γ) and sfb (error feedback); subsample and partition for randomwalk)")
	fs.IntVar(&c.LocalSteps, "local-steps", 0, "local SGD steps H between exchanges, with an outer optimizer (sfb: DiLoCo) (0: one gradient step a round)")
	fs.StringVar(&c.Outer, "outer", "", "with --local-steps: outer optimizer nesterov (default)|average")
	fs.Float64Var(&c.OuterLR, "outer-lr", 0, "with --local-steps and --outer nesterov: outer learning rate (default 0.7)")
	fs.Float64Var(&c.OuterMomentum, "outer-momentum", 0, "with --local-steps and --outer nesterov: outer momentum (default 0.9)")
	fs.StringVar(&tokens, "tokens", "", "randomized token-account flow control A:B (random walk; default: purely proactive, one send per Δ)")
	fs.IntVar(&c.Staleness, "staleness", 0, "SFB staleness bound s (0: BSP)")
	fs.IntVar(&c.Fanout, "fanout", 0, "SFB: peers per broadcast (0: all); pushsum: out-neighbours per step (0: one, cycling)")
	fs.StringVar(&c.SFBMode, "sfb-mode", "auto", "SFB per-layer exchange: auto|factors|dense")
	fs.Float64Var(&c.Byzantine, "byzantine", 0, "fraction of peers that attack (with --attack)")
	fs.StringVar(&c.Attack, "attack", "", "Byzantine attack: "+strings.Join(simulation.Attacks, "|"))
	fs.StringVar(&c.Aggregator, "aggregator", "mean", "how models combine (dpsgd: with the neighbours'; randomwalk (mu) and pushsum: robust rules over a cache of received models): "+strings.Join(merge.Aggregators, "|"))
	fs.Float64Var(&c.DP.Epsilon, "dp-epsilon", 0, "DP-SGD privacy budget ε per peer: a peer stops once its next step would exceed it (0: no limit, ε still reported)")
	fs.Float64Var(&c.DP.Delta, "dp-delta", 1e-5, "DP-SGD δ")
	fs.Float64Var(&c.DP.Clip, "dp-clip", 0, "DP-SGD per-example clipping norm C (turns DP-SGD on, with --dp-noise)")
	fs.Float64Var(&c.DP.Noise, "dp-noise", 0, "DP-SGD noise multiplier σ (noise std σ·C)")
	fs.BoolVar(&c.Voting, "voting", false, "random walk: also report the accuracy of voting over the last 10 received models")
	fs.Float64Var(&c.FedAvgFraction, "fedavg-fraction", 0.1, "FedAvg client fraction C per round")
	fs.BoolVar(&c.Codec, "codec", false, "send every message through the real wire codec")
	fs.IntVar(&c.EvalEvery, "eval-every", 1, "record a metrics row every N rounds")
	fs.IntVar(&c.EvalPeers, "eval-peers", 20, "peers evaluated per metrics row")
	fs.IntVar(&c.EvalExamples, "eval-examples", 1000, "test examples per metrics row")
	fs.IntVar(&c.FinalEvalPeers, "final-eval-peers", 100, "peers evaluated on the full test set at the end (0: all)")
	fs.StringVar(&out, "out", "out/sim", "directory for metrics.csv and summary.json")
	fs.BoolVar(&jsonOut, "json", false, "print summary.json to stdout")
	fs.BoolVar(&quiet, "quiet", false, "no progress on stderr (as --progress 0)")
	progressEvery := fs.Duration("progress", simulation.DefaultProgressEvery, "progress on stderr (0: none): where stderr is not a terminal (a log, a file, a pipe), a line with the round, the latest evaluated accuracy and an ETA at most this often; on a terminal a bar redrawn in place")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := cli.ApplySettings(fs, "scenario", ""); err != nil {
		return err // a usage error naming the file
	}
	if err := cli.CheckNumbers(fs, simulateBounds); err != nil {
		return err
	}
	if quiet && cli.FlagSet(fs, "progress") {
		return fmt.Errorf("%w: --progress with --quiet: --quiet turns progress off; give one of them", errUsage)
	}
	var set []string
	fs.Visit(func(f *flag.Flag) { set = append(set, f.Name) })
	var err error
	if c.Model == model.MLP {
		if c.Hidden, err = model.ParseHidden(hidden); err != nil {
			return fmt.Errorf("%w: --hidden: %v", errUsage, err)
		}
	}
	if churnTrace != "" {
		if c.ChurnTrace, err = simulation.ReadChurnTrace(churnTrace); err != nil {
			return fmt.Errorf("%w: --churn-trace: %s", errUsage, strings.TrimPrefix(err.Error(), simulation.ErrConfig.Error()+": "))
		}
	}
	if computeTrace != "" {
		if c.ComputeTrace, err = simulation.ReadComputeTrace(computeTrace); err != nil {
			return fmt.Errorf("%w: --compute-trace: %v", errUsage, err)
		}
	}
	if c.Netsplits, err = simulation.ParseNetsplits(netsplits); err != nil {
		return fmt.Errorf("%w: --netsplit: %v", errUsage, err)
	}
	if c.Tokens, err = gossip.ParseTokens(tokens); err != nil {
		return fmt.Errorf("%w: --tokens: %v", errUsage, err)
	}
	if topo != "" {
		if err := c.SetTopology(topo); err != nil {
			return fmt.Errorf("%w: --topology: %v", errUsage, err)
		}
	}
	if err := setMemoryLimit(*memoryLimit); err != nil {
		return err
	}
	allPeers := cli.FlagSet(fs, "final-eval-peers") && c.FinalEvalPeers == 0
	if err := c.Validate(); err != nil {
		return configUsage(err, simulation.ErrConfig)
	}
	if allPeers {
		c.FinalEvalPeers = c.Peers
	}
	if err := c.CheckOptions(set); err != nil {
		return configUsage(err, simulation.ErrConfig)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	show := !quiet && *progressEvery > 0
	bar := cli.NewProgressBar(stderr, show) // drawn on a terminal only
	var lines io.Writer                     // elsewhere, plain lines
	if show && !cli.IsTerminal(stderr) {
		lines = stderr
	}
	prog := simulation.NewProgress(lines, simulation.ProgressConfig{Rounds: c.Rounds, Delta: c.Delta, Every: *progressEvery})
	start := time.Now()
	onRow := func(r simulation.Row) {
		prog.Row(r)
		if r.Round == c.Rounds { // the last row, filed after the last round
			bar.Update("simulate", r.Round, c.Rounds, barStatus(prog))
		}
	}
	res, err := simulation.Run(ctx, c, onRow, simulation.OnRound(func(r int) {
		prog.Round(r)
		if r > 0 {
			bar.Update("simulate", r, c.Rounds, barStatus(prog))
		}
	}))
	bar.Finish()
	if err == nil {
		prog.Finish()
	}
	if errors.Is(err, simulation.ErrConfig) {
		return configUsage(err, simulation.ErrConfig)
	}
	if err != nil {
		return err
	}
	wall := time.Since(start).Seconds()
	sum := simulation.Summary{Protocol: c.Protocol, Peers: c.Peers, Rounds: c.Rounds, Model: c.Model, Dataset: c.Dataset,
		Partition: c.Partition, Seed: c.Seed, WallSecs: wall, PeakRSS: peakRSS(),
		NodeRoundsPerSecond: float64(c.Peers*c.Rounds) / wall, Result: res}
	if err := simulation.WriteOutputs(out, &sum); err != nil {
		return err
	}
	if jsonOut {
		return json.NewEncoder(stdout).Encode(sum)
	}
	fmt.Fprintf(stdout, "%s, %d peers, %d rounds of %s on %s (%s)\n", c.Protocol, c.Peers, c.Rounds, c.Model, c.Dataset, c.Partition)
	fmt.Fprintf(stdout, "final accuracy %.4f (min %.4f, max %.4f over %d peers)\n", res.FinalAccuracy, res.FinalMinAccuracy, res.FinalMaxAccuracy, res.EvaluatedPeers)
	if res.FinalVotingAccuracy > 0 {
		fmt.Fprintf(stdout, "voting accuracy %.4f (majority of the last 10 received models and the peer's own)\n", res.FinalVotingAccuracy)
	}
	if res.DPEpsilon != nil {
		fmt.Fprintf(stdout, "DP-SGD: ε ≤ %.4g per peer at δ = %g (clip %g, noise %g); %d peer(s) halted on their budget\n",
			res.DPEpsilonMax, res.DPDelta, c.DP.Clip, c.DP.Noise, res.Halted)
	}
	fmt.Fprintf(stdout, "messages %d, bytes %d, dropped %d, updates %d\n", res.Messages, res.Bytes, res.Dropped, res.Updates)
	onDevice := ""
	if res.DevicePeakBytes > 0 {
		onDevice = fmt.Sprintf(" (device memory peak %d MiB)", res.DevicePeakBytes>>20)
	}
	fmt.Fprintf(stdout, "wall %.2f s, %.0f node-rounds/s, peak RSS %d MiB, on %s%s\n", wall, sum.NodeRoundsPerSecond, sum.PeakRSS>>20, res.Device.Backend, onDevice)
	fmt.Fprintf(stdout, "wrote metrics.csv, summary.json, accuracy_vs_time.png and accuracy_vs_bytes.png in %s\n", out)
	return nil
}

// barStatus is the terminal bar's text after the percentage: the latest
// evaluated accuracy, messages so far and the ETA.
func barStatus(p *simulation.Progress) string {
	s := "acc -"
	if r, ok := p.Latest(); ok {
		s = fmt.Sprintf("acc %.4f msgs %d", r.MeanAcc, r.Messages)
	}
	if d, ok := p.ETA(); ok {
		s += " eta " + d.Round(time.Second).String()
	}
	return s
}

// peakRSS is the process's peak resident set size in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return int64(ru.Maxrss) * 1024 // Linux reports KiB
}
