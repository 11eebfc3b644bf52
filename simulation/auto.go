package simulation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/device"
)

// --device auto with a GPU at hand times the run on both: a simulation's
// speed on a GPU depends on far more than the GPU (how much of the run is
// training, how much is the event loop and the host's merging and
// checking, how many cores the CPU run has), so instead of guessing from
// the model's size, auto simulates the run's first rounds on the GPU and
// then on the CPU (the run as configured, stopped early and not
// evaluated at the end), estimates each whole run from them, and runs on
// the faster. The CPU wins ties: its runs give the same numbers on every
// machine.

// AutoMinRounds is the shortest run --device auto times on both devices:
// a shorter one stays on the CPU, where timing the two would cost more
// than the GPU could save; it does not open the GPU either.
const AutoMinRounds = 20

// autoMaxRounds bounds the rounds a trial times.
const autoMaxRounds = 10

// AutoTrial is what --device auto measured: the rounds it timed on each
// device and the whole run it estimates from them.
type AutoTrial struct {
	// Rounds is how many rounds each device was timed over: a twentieth
	// of the run, at least 2 and at most 10, after a first round that
	// counts as setup (its first batches copy the data and the first
	// models to the device).
	Rounds int `json:"rounds"`
	// GPUSeconds and CPUSeconds estimate the whole run on each device:
	// the time to the end of the first round (peers built, data loaded,
	// first batches), and each further round at the timed rounds' mean.
	// GPUSeconds is absent where the GPU failed its trial, and
	// CPUSeconds then too (the CPU was not timed).
	GPUSeconds float64 `json:"gpu_seconds,omitempty"`
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// GPUError is why the GPU's trial failed, if it did (the run is then
	// on the CPU).
	GPUError string `json:"gpu_error,omitempty"`
	// Seconds is the wall time the trials took, which the run's
	// wall_seconds includes.
	Seconds float64 `json:"seconds"`
}

// autoClock is the clock the trials are timed by (tests set it).
var autoClock = time.Now

// chooseAuto decides where an --device auto run of at least
// AutoMinRounds simulates, given the GPU that opened: it times the run's
// first rounds on each (estimate) and returns the faster, with the
// choice's note saying why and the trial's figures.
func chooseAuto(ctx context.Context, cfg Config, gpu compute.Backend, gpuChoice device.Choice) (compute.Backend, device.Choice, *AutoTrial, error) {
	_, cpuChoice, err := cpuDevice(gpuChoice.Requested, "")
	if err != nil {
		return nil, cpuChoice, nil, err
	}
	trial := &AutoTrial{Rounds: min(autoMaxRounds, max(2, cfg.Rounds/20))}
	g, gwall, gerr := estimate(ctx, cfg, trial.Rounds, gpu, gpuChoice)
	trial.Seconds = gwall.Seconds()
	if ctx.Err() != nil {
		return nil, cpuChoice, nil, ctx.Err()
	}
	if gerr != nil {
		trial.GPUError = gerr.Error()
		cpuChoice.Note = fmt.Sprintf("auto simulates on the CPU: the first rounds on %s failed: %v", gpuChoice.Device, gerr)
		return nil, cpuChoice, trial, nil
	}
	c, cwall, err := estimate(ctx, cfg, trial.Rounds, nil, cpuChoice)
	if err != nil {
		return nil, cpuChoice, nil, err
	}
	trial.GPUSeconds, trial.CPUSeconds, trial.Seconds = g.Seconds(), c.Seconds(), (gwall + cwall).Seconds()
	why := fmt.Sprintf("%d rounds timed on each estimate the run at %.1f s on %s (%s) and %.1f s on the CPU (%s)", trial.Rounds, trial.GPUSeconds, gpuChoice.Device, gpuChoice.Backend, trial.CPUSeconds, cpuChoice.Backend)
	if g < c {
		gpuChoice.Note = "auto simulates on the GPU: " + why
		return gpu, gpuChoice, trial, nil
	}
	cpuChoice.Note = "auto simulates on the CPU: " + why + "; a run on the CPU also gives the same numbers on every machine"
	return nil, cpuChoice, trial, nil
}

// estimate simulates cfg's first 1 + rounds rounds on be (nil: the CPU)
// and returns the whole run it predicts, the time to the end of the
// first round plus each further round at the mean of the others, and the
// wall time the trial took.
func estimate(ctx context.Context, cfg Config, rounds int, be compute.Backend, ch device.Choice) (est, wall time.Duration, err error) {
	var first, last time.Time
	start := autoClock()
	stop := func(s *sim) { s.stopAfter = 1 + rounds }
	_, err = run(ctx, cfg, be, ch, nil, stop, OnRound(func(r int) {
		switch r {
		case 1:
			first = autoClock()
		case 1 + rounds:
			last = autoClock()
		}
	}))
	if err != nil {
		return 0, 0, err
	}
	if first.IsZero() || last.IsZero() {
		return 0, 0, errors.New("the trial ended before its rounds did")
	}
	perRound := last.Sub(first) / time.Duration(rounds)
	return first.Sub(start) + perRound*time.Duration(cfg.Rounds-1), last.Sub(start), nil
}
