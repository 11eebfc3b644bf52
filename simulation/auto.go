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
// then on the CPU, estimates each whole run from them, and runs on the
// faster. The CPU wins ties: its runs give the same numbers on every
// machine.

// AutoMinRounds is the shortest run --device auto times on both devices:
// a shorter one stays on the CPU, where timing the two would cost more
// than the GPU could save.
const AutoMinRounds = 20

// AutoTrial is what --device auto measured: the rounds it simulated on
// each device and the whole run it estimates from them, setup included.
type AutoTrial struct {
	// Rounds is how many rounds each device simulated: a twentieth of the
	// run, at least 2.
	Rounds int `json:"rounds"`
	// GPU and CPU are the estimates of the whole run, in seconds: the
	// time to the first round (peers built, data loaded) and Config.Rounds
	// times the mean round of the trial.
	GPUSeconds float64 `json:"gpu_seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// GPUError is why the GPU's trial failed, if it did (the run is then
	// on the CPU).
	GPUError string `json:"gpu_error,omitempty"`
}

// autoClock is the clock the trials are timed by (tests set it).
var autoClock = time.Now

// chooseAuto decides where an --device auto run simulates, given the GPU
// that opened: it times the run's first rounds on each (estimate) and
// returns the faster, with the choice's note saying why and the trial's
// figures.
func chooseAuto(ctx context.Context, cfg Config, gpu compute.Backend, gpuChoice device.Choice) (compute.Backend, device.Choice, *AutoTrial, error) {
	_, cpuChoice, err := cpuDevice(cfg.Device, "")
	if err != nil {
		return nil, cpuChoice, nil, err
	}
	if cfg.Rounds < AutoMinRounds {
		cpuChoice.Note = fmt.Sprintf("auto simulates on the CPU: %s opened, but a run of %d rounds is too short to time on both (at least %d); --device %s runs on it", gpuChoice.Device, cfg.Rounds, AutoMinRounds, gpuChoice.Device)
		return nil, cpuChoice, nil, nil
	}
	trial := &AutoTrial{Rounds: max(2, cfg.Rounds/20)}
	g, gerr := estimate(ctx, cfg, trial.Rounds, gpu, gpuChoice)
	if ctx.Err() != nil {
		return nil, cpuChoice, nil, ctx.Err()
	}
	c, err := estimate(ctx, cfg, trial.Rounds, nil, cpuChoice)
	if err != nil {
		return nil, cpuChoice, nil, err
	}
	trial.CPUSeconds = c.Seconds()
	if gerr != nil {
		trial.GPUError = gerr.Error()
		cpuChoice.Note = fmt.Sprintf("auto simulates on the CPU: %d rounds on %s failed: %v", trial.Rounds, gpuChoice.Device, gerr)
		return nil, cpuChoice, trial, nil
	}
	trial.GPUSeconds = g.Seconds()
	why := fmt.Sprintf("%d rounds on each estimate the run at %.3g s on %s (%s) and %.3g s on the CPU (%s)", trial.Rounds, trial.GPUSeconds, gpuChoice.Device, gpuChoice.Backend, trial.CPUSeconds, cpuChoice.Backend)
	if g < c {
		gpuChoice.Note = "auto simulates on the GPU: " + why
		return gpu, gpuChoice, trial, nil
	}
	cpuChoice.Note = "auto simulates on the CPU: " + why + "; a run on the CPU also gives the same numbers on every machine"
	return nil, cpuChoice, trial, nil
}

// estimate simulates cfg's first rounds on be (nil: the CPU) and returns
// the whole run it predicts: the time to the first round, plus
// cfg.Rounds times the trial's mean round. The trial records one metrics
// row and evaluates one peer at the end: evaluation is not what is timed.
func estimate(ctx context.Context, cfg Config, rounds int, be compute.Backend, ch device.Choice) (time.Duration, error) {
	t := cfg
	t.Rounds, t.EvalEvery, t.EvalPeers, t.EvalExamples, t.FinalEvalPeers = rounds, rounds, 1, 1, 1
	var first, last time.Time
	start := autoClock()
	_, err := run(ctx, t, be, ch, nil, OnRound(func(r int) {
		switch r {
		case 0:
			first = autoClock()
		case rounds:
			last = autoClock()
		}
	}))
	if err != nil {
		return 0, err
	}
	if first.IsZero() || last.IsZero() {
		return 0, errors.New("the trial ended before its rounds did")
	}
	perRound := last.Sub(first) / time.Duration(rounds)
	return first.Sub(start) + perRound*time.Duration(cfg.Rounds), nil
}
