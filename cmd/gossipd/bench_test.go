package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchAgainstTorch: --against torch runs the PyTorch reference built
// into the binary (here a stand-in interpreter checks that the script it
// is given is that reference, and answers as it would) at each batch
// size, and prints the ratios; --torch names another script; --against
// with anything else is refused.
func TestBenchAgainstTorch(t *testing.T) {
	dir := t.TempDir()
	py := filepath.Join(dir, "python")
	// It answers only for the built-in reference: the script's first line
	// is that reference's docstring.
	// It trains $GOSSIPD_TORCH_SEEDS seeds, at 1000, 1010, … samples/s.
	script := "#!/bin/sh\nhead -1 \"$1\" | grep -q 'The PyTorch reference' || { echo \"not the reference: $1\" >&2; exit 1; }\n" +
		"i=0; while [ $i -lt ${GOSSIPD_TORCH_SEEDS:-0} ]; do echo \"$2 batch $4 seed $i: $((1000 + 10 * i)) samples/s, test acc 0.$((5 + i))\"; i=$((i + 1)); done\n"
	if err := os.WriteFile(py, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, "bench", "--what", "train", "--dataset", "digits", "--device", "cpu", "--batch", "32,64", "--against", "torch", "--python", py)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := 0
	for _, l := range strings.Split(out, "\n") {
		if (strings.HasPrefix(l, "softmax") || strings.HasPrefix(l, "mlp")) && strings.Contains(l, " 1000 ") && strings.Contains(l, "0.5000") && strings.HasSuffix(l, "×") {
			lines++
		}
	}
	if lines != 4 {
		t.Fatalf("want 4 lines with the reference's figures and a ratio (2 models × 2 batch sizes):\n%s", out)
	}
	other := filepath.Join(dir, "other.py")
	if err := os.WriteFile(other, []byte("not it\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := run(t, "bench", "--what", "train", "--dataset", "digits", "--device", "cpu", "--torch", other, "--python", py); code == 0 || !strings.Contains(errs, "other.py") {
		t.Fatalf("--torch other.py: exit %d, %q; want the stand-in to refuse it by name", code, errs)
	}
	// PyTorch's CUDA graphs: the built-in reference on a GPU only.
	if code, _, errs := run(t, "bench", "--what", "train", "--dataset", "digits", "--device", "cpu", "--against", "torch-graphs", "--python", py); code != 2 || !strings.Contains(errs, "CUDA graphs need a GPU, and training runs on cpu") {
		t.Fatalf("--against torch-graphs on the CPU: exit %d, %q", code, errs)
	}
	if code, _, errs := run(t, "bench", "--what", "train", "--dataset", "digits", "--against", "torch-graphs", "--torch", other, "--python", py); code != 2 || !strings.Contains(errs, "--torch names another script") {
		t.Fatalf("--against torch-graphs --torch: exit %d, %q", code, errs)
	}
	if code, _, errs := run(t, "bench", "--against", "tensorflow"); code != 2 || !strings.Contains(errs, "--against") {
		t.Fatalf("--against tensorflow: exit %d, %q", code, errs)
	}
	if code, _, errs := run(t, "bench", "--what", "train", "--seeds", "0"); code != 2 || !strings.Contains(errs, "--seeds 0") {
		t.Fatalf("--seeds 0: exit %d, %q", code, errs)
	}

	// Three seeds: the reference's median speed and mean accuracy, and
	// each side's spread.
	code, out, errs = run(t, "bench", "--what", "train", "--dataset", "digits", "--device", "cpu", "--batch", "32", "--against", "torch", "--python", py, "--seeds", "3")
	if code != 0 {
		t.Fatalf("--seeds 3: exit %d: %s", code, errs)
	}
	rows, spreads := 0, 0
	for _, l := range strings.Split(out, "\n") {
		if (strings.HasPrefix(l, "softmax") || strings.HasPrefix(l, "mlp")) && strings.Contains(l, " 1010 ") && strings.Contains(l, "0.6000") {
			rows++
		}
		if strings.Contains(l, "accuracy: gossipd ") && strings.Contains(l, "3 seeds); pytorch 0.6000 ± 0.1000 (0.5000 to 0.7000, 3 seeds)") {
			spreads++
		}
	}
	if rows != 2 || spreads != 2 || !strings.Contains(out, "median speed and mean accuracy of 3 seeds") {
		t.Fatalf("--seeds 3: want 2 rows with the reference's median (1010) and mean (0.6000), and 2 lines with each side's spread:\n%s", out)
	}
}
