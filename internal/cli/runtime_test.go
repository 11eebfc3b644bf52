package cli

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

// TestCollectSooner: without $GOGC the collector's target becomes
// ModelHeapGCPercent until restored; with it, the runtime's reading of
// it stays.
func TestCollectSooner(t *testing.T) {
	old := debug.SetGCPercent(77) // as the runtime read GOGC=77 at start
	defer debug.SetGCPercent(old)
	t.Setenv("GOGC", "77") // restored after the test, as it was
	CollectSooner()()
	if got := debug.SetGCPercent(77); got != 77 {
		t.Errorf("with GOGC=77 the target became %d", got)
	}
	os.Unsetenv("GOGC")
	first, second := CollectSooner(), CollectSooner() // two commands side by side
	if got := debug.SetGCPercent(ModelHeapGCPercent); got != ModelHeapGCPercent {
		t.Errorf("without GOGC the target is %d, want %d", got, ModelHeapGCPercent)
	}
	first()
	first() // once only
	if got := debug.SetGCPercent(ModelHeapGCPercent); got != ModelHeapGCPercent {
		t.Errorf("with one command still running the target is %d, want %d", got, ModelHeapGCPercent)
	}
	second()
	if got := debug.SetGCPercent(77); got != 77 {
		t.Errorf("restored, the target is %d, want 77", got)
	}
}

// TestNoHeapProfile: the heap profile's sampling stops until every caller
// has restored, and then is what it was.
func TestNoHeapProfile(t *testing.T) {
	old := runtime.MemProfileRate
	first, second := NoHeapProfile(), NoHeapProfile()
	if runtime.MemProfileRate != 0 {
		t.Fatalf("sampling every %d bytes, want none", runtime.MemProfileRate)
	}
	first()
	first() // once only
	if runtime.MemProfileRate != 0 {
		t.Fatalf("with one command still running, sampling every %d bytes", runtime.MemProfileRate)
	}
	second()
	if runtime.MemProfileRate != old {
		t.Fatalf("restored, sampling every %d bytes, want %d", runtime.MemProfileRate, old)
	}
}
