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
	script := "#!/bin/sh\nhead -1 \"$1\" | grep -q 'The PyTorch reference' || { echo \"not the reference: $1\" >&2; exit 1; }\necho \"$2 batch $4: 1000 samples/s, test acc 0.5\"\n"
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
	if code, _, errs := run(t, "bench", "--against", "tensorflow"); code != 2 || !strings.Contains(errs, "--against") {
		t.Fatalf("--against tensorflow: exit %d, %q", code, errs)
	}
}
