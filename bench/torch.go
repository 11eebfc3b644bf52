package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
)

var torchLine = regexp.MustCompile(`(\d+) samples/s, test acc ([0-9.]+)`)

// SeedsEnv is the variable through which the built-in reference is told
// how many seeds to train, one after the other in one process (0, 1, …),
// each printing its line; another script may ignore it and print one.
const SeedsEnv = "GOSSIPD_TORCH_SEEDS"

// GraphsEnv set to 1 tells the built-in reference to capture each full
// minibatch's step (forward, backward, SGD step) once as a CUDA graph and
// replay it (torch.cuda.graph; CUDA only): PyTorch without its launch
// overhead, as gossipd replays its own steps.
const GraphsEnv = "GOSSIPD_TORCH_GRAPHS"

// TorchRun is one PyTorch reference run: the model (softmax or mlp), its
// CPU threads, the minibatch size, the device (cpu, or cuda:N for the
// built-in reference) and the seeds to train (0 or 1: one).
type TorchRun struct {
	Model   string
	Threads int
	Batch   int
	Device  string
	Seeds   int
	// Graphs asks the built-in reference for its CUDA-graph steps.
	Graphs bool
}

// Result is one epoch's training speed and test accuracy.
type Result struct {
	SamplesPerSecond, Accuracy float64
}

// RunTorch runs a PyTorch reference script (TorchReference, written to a
// file, or shared/reference/torch_baseline.py on the CPU) with python
// for one epoch of r, and returns each seed's samples/s and test
// accuracy: the yardstick `gossipd bench` reports ratios to, measured in
// the same run.
func RunTorch(ctx context.Context, stderr io.Writer, python, script string, r TorchRun) ([]Result, error) {
	args := []string{script, r.Model, "1", strconv.Itoa(r.Batch), strconv.Itoa(r.Threads)}
	if r.Device != "" && r.Device != "cpu" {
		args = append(args, r.Device)
	}
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = append(os.Environ(), SeedsEnv+"="+strconv.Itoa(max(r.Seeds, 1)))
	if r.Graphs {
		cmd.Env = append(cmd.Env, GraphsEnv+"=1")
	}
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("bench: PyTorch reference %s %s: %w", script, r.Model, err)
	}
	var res []Result
	for _, m := range torchLine.FindAllSubmatch(out, -1) {
		sps, _ := strconv.ParseFloat(string(m[1]), 64)
		acc, _ := strconv.ParseFloat(string(m[2]), 64)
		res = append(res, Result{sps, acc})
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("bench: could not read samples/s from the PyTorch reference's output %q", out)
	}
	return res, nil
}
