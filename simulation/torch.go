package simulation

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
)

var torchLine = regexp.MustCompile(`(\d+) samples/s, test acc ([0-9.]+)`)

// TorchRun is one PyTorch reference run: the model (softmax or mlp), its
// CPU threads, the minibatch size and the device (cpu, or cuda:N for
// bench/torch_reference.py).
type TorchRun struct {
	Model   string
	Threads int
	Batch   int
	Device  string
}

// TorchReference runs a PyTorch reference script (bench/torch_reference.py,
// or shared/reference/torch_baseline.py on the CPU) for one epoch of r,
// and returns its samples/s and test accuracy: the yardstick `gossipd
// bench` reports ratios to, measured in the same run.
func TorchReference(ctx context.Context, stderr io.Writer, python, script string, r TorchRun) (sps, acc float64, err error) {
	args := []string{script, r.Model, "1", strconv.Itoa(r.Batch), strconv.Itoa(r.Threads)}
	if r.Device != "" && r.Device != "cpu" {
		args = append(args, r.Device)
	}
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("simulation: PyTorch reference %s %s: %w", script, r.Model, err)
	}
	m := torchLine.FindSubmatch(out)
	if m == nil {
		return 0, 0, fmt.Errorf("simulation: could not read samples/s from the PyTorch reference's output %q", out)
	}
	sps, _ = strconv.ParseFloat(string(m[1]), 64)
	acc, _ = strconv.ParseFloat(string(m[2]), 64)
	return sps, acc, nil
}
