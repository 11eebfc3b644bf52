package simulation

import (
	"context"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// TestExecuteRuntime: the simulate command collects at
// cli.ModelHeapGCPercent, on the CPU and on a device (the emulated one
// here), and samples no heap profile while it runs; both are as they
// were afterwards.
func TestExecuteRuntime(t *testing.T) {
	old := debug.SetGCPercent(77) // as the runtime read GOGC=77 at start
	defer debug.SetGCPercent(old)
	t.Setenv("GOGC", "77") // restored after the test, as it was
	os.Unsetenv("GOGC")
	rate := runtime.MemProfileRate
	for _, dev := range []string{"cpu", "cuda"} {
		t.Run(dev, func(t *testing.T) {
			if dev == "cuda" {
				testDevice = backendtest.NewDevice()
				defer func() { testDevice = nil }()
			}
			during, sampling := -1, -1
			afterRun = func(*sim) {
				during = debug.SetGCPercent(77)
				debug.SetGCPercent(during)
				sampling = runtime.MemProfileRate
			}
			defer func() { afterRun = nil }()
			c := Config{Settings: job.Settings{Model: "mlp"}, Hidden: []int{8}, Peers: 8, Rounds: 2, Seed: 3, EvalPeers: 2, EvalExamples: 50, Device: dev}
			if err := Execute(context.Background(), c, &Flags{Out: t.TempDir(), Quiet: true}, io.Discard, io.Discard); err != nil {
				t.Fatal(err)
			}
			if during != cli.ModelHeapGCPercent {
				t.Errorf("on %s: collected at %d %%, want %d", dev, during, cli.ModelHeapGCPercent)
			}
			if sampling != 0 {
				t.Errorf("on %s: the heap profile sampled every %d bytes, want none", dev, sampling)
			}
			if got := debug.SetGCPercent(77); got != 77 || runtime.MemProfileRate != rate {
				t.Errorf("after the run on %s: target %d %%, want 77; sampling %d, want %d", dev, got, runtime.MemProfileRate, rate)
			}
		})
	}
}
