package simulation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/gossipd/gossipd/internal/cli"
)

// Execute runs simulation c as `gossipd simulate` does, with the output
// settings of f: progress on stderr, metrics.csv, summary.json and plots
// in f.Out, and the summary on stdout (as JSON with f.JSON).
func Execute(ctx context.Context, c Config, f *Flags, stdout, stderr io.Writer) error {
	defer cli.CollectSooner()()
	defer cli.NoHeapProfile()()
	for _, d := range f.Deprecated {
		fmt.Fprintf(stderr, "gossipd simulate: deprecated: %s\n", d)
	}
	if err := os.MkdirAll(f.Out, 0o755); err != nil {
		return err
	}
	if f.CPUProfile != "" {
		f, err := os.Create(f.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	show := !f.Quiet && f.Progress > 0
	bar := cli.NewProgressBar(stderr, show) // drawn on a terminal only
	var lines io.Writer                     // elsewhere, plain lines
	if show && !cli.IsTerminal(stderr) {
		lines = stderr
	}
	prog := NewProgress(lines, ProgressConfig{Rounds: c.Rounds, Delta: c.Delta, Every: f.Progress})
	start := time.Now()
	onRow := func(r Row) {
		prog.Row(r)
		if r.Round == c.Rounds { // the last row, filed after the last round
			bar.Update("simulate", r.Round, c.Rounds, barStatus(prog))
		}
	}
	res, err := Run(ctx, c, onRow, OnRound(func(r int) {
		prog.Round(r)
		if r > 0 {
			bar.Update("simulate", r, c.Rounds, barStatus(prog))
		}
	}))
	bar.Finish()
	if err == nil {
		prog.Finish()
	}
	if errors.Is(err, ErrConfig) {
		return cli.ConfigUsage(err, ErrConfig)
	}
	if err != nil {
		return err
	}
	wall := time.Since(start).Seconds()
	sum := Summary{Protocol: c.Protocol, Peers: c.Peers, Rounds: c.Rounds, Model: c.Model, Dataset: c.Dataset,
		Partition: c.Partition, Seed: c.Seed, WallSecs: wall, PeakRSS: peakRSS(),
		NodeRoundsPerSecond: float64(c.Peers*c.Rounds) / wall, Result: res}
	if err := WriteOutputs(f.Out, &sum); err != nil {
		return err
	}
	if f.JSON {
		b, err := sum.JSON()
		if err != nil {
			return err
		}
		_, err = stdout.Write(append(b, '\n'))
		return err
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
	fmt.Fprintln(stdout, reachLine(res))
	onDevice := ""
	if res.DevicePeakBytes > 0 {
		onDevice = fmt.Sprintf(" (device memory peak %d MiB)", res.DevicePeakBytes>>20)
	}
	fmt.Fprintf(stdout, "wall %.2f s, %.0f node-rounds/s, peak RSS %d MiB, on %s%s\n", wall, sum.NodeRoundsPerSecond, sum.PeakRSS>>20, res.Device.Backend, onDevice)
	if res.AutoTrial != nil {
		fmt.Fprintln(stdout, res.Device.Note)
	}
	if d := res.DeviceTime; d != nil && res.Device.Device != "cpu" {
		fmt.Fprintf(stdout, "%d batches: the device busy %.2f s, the event loop waiting for it %.2f s (%d waits)\n", res.Batches, d.BusySeconds, d.WaitedSeconds, d.Waits)
	}
	if d := res.DeviceTime; d != nil && len(d.Calls) > 0 {
		fmt.Fprintln(stdout, "the device's calls, each timed apart (--device-profile), the longest:")
		for _, c := range d.Calls[:min(len(d.Calls), 8)] {
			fmt.Fprintf(stdout, "  %-28s %8.3f s in %d calls (%.3f s on the host)\n", c.Name, c.Seconds, c.Calls, c.HostSeconds)
		}
	}
	fmt.Fprintf(stdout, "wrote metrics.csv, summary.json, accuracy_vs_time.png and accuracy_vs_bytes.png in %s\n", f.Out)
	return nil
}

// reachLine says how evenly the models travelled: peers that received
// none, models per peer, and the views' in-degrees under Cyclon.
func reachLine(res *Result) string {
	r := res.Reach
	line := fmt.Sprintf("%d peer(s) never received a model; models received per peer: min %.0f, median %.0f, max %.0f",
		r.PeersNeverReceived, r.ModelsReceived.Min, r.ModelsReceived.P50, r.ModelsReceived.Max)
	if d := r.ViewInDegree; d != nil {
		line += fmt.Sprintf("; view in-degree min %.0f, median %.0f, max %.0f (%d in no view)", d.Min, d.P50, d.Max, r.PeersInNoView)
	}
	return line
}

// barStatus is the terminal bar's text after the percentage: the latest
// evaluated accuracy, messages so far and the ETA.
func barStatus(p *Progress) string {
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
