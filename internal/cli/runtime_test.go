package cli

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestCollectSooner: without $GOGC the collector's target becomes
// ModelHeapGCPercent; with it, the runtime's reading of it stays.
func TestCollectSooner(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	t.Setenv("GOGC", "77") // restored after the test, as it was
	debug.SetGCPercent(77) // as the runtime read it at start
	CollectSooner()
	if got := debug.SetGCPercent(77); got != 77 {
		t.Errorf("with GOGC=77 the target became %d", got)
	}
	os.Unsetenv("GOGC")
	CollectSooner()
	if got := debug.SetGCPercent(100); got != ModelHeapGCPercent {
		t.Errorf("without GOGC the target is %d, want %d", got, ModelHeapGCPercent)
	}
}
