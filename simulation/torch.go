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

// TorchReference runs the PyTorch reference script (shared/reference) for
// one epoch of model kind (softmax or mlp) at batch 32 with threads
// threads, and returns its samples/s and test accuracy: the yardstick
// `gossipd bench` reports ratios to, measured in the same run.
func TorchReference(ctx context.Context, stderr io.Writer, python, script, kind string, threads int) (sps, acc float64, err error) {
	cmd := exec.CommandContext(ctx, python, script, kind, "1", "32", strconv.Itoa(threads))
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("simulation: PyTorch reference %s %s: %w", script, kind, err)
	}
	m := torchLine.FindSubmatch(out)
	if m == nil {
		return 0, 0, fmt.Errorf("simulation: could not read samples/s from the PyTorch reference's output %q", out)
	}
	sps, _ = strconv.ParseFloat(string(m[1]), 64)
	acc, _ = strconv.ParseFloat(string(m[2]), 64)
	return sps, acc, nil
}
