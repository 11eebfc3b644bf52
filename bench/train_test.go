package bench

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestRuns: the median speed (odd and even counts), the mean accuracy
// and the spread a row reports.
func TestRuns(t *testing.T) {
	r := runs{{300, 0.5}, {100, 0.7}, {200, 0.6}}
	if r.speed() != 200 || r.accuracy() < 0.6-1e-12 || r.accuracy() > 0.6+1e-12 {
		t.Fatalf("speed %v, accuracy %v; want 200 and 0.6", r.speed(), r.accuracy())
	}
	if got, want := r.spread(), "0.6000 ± 0.1000 (0.5000 to 0.7000, 3 seeds)"; got != want {
		t.Fatalf("spread %q, want %q", got, want)
	}
	r = append(r, Result{1000, 0.6})
	if r.speed() != 250 {
		t.Fatalf("median of 4: %v, want 250", r.speed())
	}
	if got, want := (runs{{5, 0.8}}).spread(), "0.8000 ± 0.0000 (0.8000 to 0.8000, 1 seeds)"; got != want {
		t.Fatalf("spread %q, want %q", got, want)
	}
}

// TestRunTorchGraphs: TorchRun.Graphs reaches the reference as
// $GOSSIPD_TORCH_GRAPHS=1, and only then (a stand-in interpreter reports
// the variable in its speed).
func TestRunTorchGraphs(t *testing.T) {
	dir := t.TempDir()
	py := filepath.Join(dir, "python")
	script := "#!/bin/sh\necho \"$2 seed 0: $((1000 + ${" + GraphsEnv + ":-0})) samples/s, test acc 0.5\"\n"
	if err := os.WriteFile(py, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(GraphsEnv, "") // as if unset: the stand-in reads 0
	for _, graphs := range []bool{false, true} {
		res, err := RunTorch(context.Background(), io.Discard, py, "ref.py", TorchRun{Model: "mlp", Batch: 32, Device: "cuda:0", Graphs: graphs})
		if err != nil {
			t.Fatal(err)
		}
		want := 1000.0
		if graphs {
			want = 1001
		}
		if len(res) != 1 || res[0].SamplesPerSecond != want {
			t.Errorf("Graphs %v: %+v, want %v samples/s", graphs, res, want)
		}
	}
}
