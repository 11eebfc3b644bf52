package cli

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/gossipd/gossipd/dataset"
)

// ConfigUsage turns a package's configuration error (one wrapping
// sentinel, such as simulation.ErrConfig) into a usage error without the
// sentinel's words: the user ran a command and named flags, not a
// package.
func ConfigUsage(err, sentinel error) error {
	return fmt.Errorf("%w: %s", ErrUsage, WithoutSentinel(err, sentinel))
}

// WithoutSentinel is err's text without sentinel's words in front.
func WithoutSentinel(err, sentinel error) string {
	return strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
}

// DatasetUsage turns the loader's refusal of an option the source has no
// use for into a usage error naming the flag; other errors pass as they
// are.
func DatasetUsage(err error) error {
	switch {
	case errors.Is(err, dataset.ErrOwnTestSplit):
		return fmt.Errorf("%w: --test-fraction: %v", ErrUsage, err)
	case errors.Is(err, dataset.ErrNotCSV):
		return fmt.Errorf("%w: --label-column: %v", ErrUsage, err)
	}
	return err
}

// SetMemoryLimit applies --memory-limit (a size such as 192MiB; "" leaves
// the runtime's own: $GOMEMLIMIT or none): a soft limit of the Go
// runtime, near which the collector runs more often instead of letting
// the heap double.
func SetMemoryLimit(s string) error {
	if s == "" {
		return nil
	}
	n, err := ParseBytes(s)
	if err != nil || n == 0 {
		return fmt.Errorf("%w: --memory-limit: %v", ErrUsage, cmp.Or(err, errors.New("must be positive")))
	}
	debug.SetMemoryLimit(n)
	return nil
}

// ModelHeapGCPercent is the collector's target for a process whose heap
// is mostly models it replaces at every update (a simulation): a
// collection once the heap has grown by half since the last, instead of
// Go's default doubling (GOGC=100).
const ModelHeapGCPercent = 50

// CollectSooner sets the collector's target to ModelHeapGCPercent,
// unless $GOGC sets one, and returns what puts the former target back
// once every caller has (commands run inside another program, side by
// side, such as tests). A simulator's heap is thousands of pointer-free
// vectors, so a collection finds little to mark, while every page the
// heap grows by is faulted in by the kernel: most of a large run's
// system time on a virtual machine.
func CollectSooner() (restore func()) {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return func() {}
	}
	return sooner.hold(func() int { return debug.SetGCPercent(ModelHeapGCPercent) }, func(old int) { debug.SetGCPercent(old) })
}

// NoHeapProfile stops the heap profile's sampling (runtime.MemProfileRate)
// and returns what starts it again once every caller has, for a command
// that offers no heap profile (simulate): at Go's default of one sample
// per 512 KiB allocated, nearly every model vector of 400 KB was
// sampled, its stack walked: 8 % of a GPU run's host time. The runtime
// asks for the rate to be set once, early; changed later, only a heap
// profile taken meanwhile is off, and the process offers none. A change
// made by another caller while it runs is undone by the restore.
func NoHeapProfile() (restore func()) {
	return quiet.hold(func() int {
		old := runtime.MemProfileRate
		runtime.MemProfileRate = 0
		return old
	}, func(old int) { runtime.MemProfileRate = old })
}

// sooner and quiet hold CollectSooner's and NoHeapProfile's settings.
var sooner, quiet held

// held is a process-wide setting that commands running side by side
// (inside another program, such as tests) change together: the first
// caller's set changes it and keeps what it was, and the last caller's
// restore puts that back.
type held struct {
	mu    sync.Mutex
	users int
	old   int
}

// hold counts a caller in, calling set (which returns the former
// setting) for the first, and returns its restore, which calls put with
// that setting after the last; a second call of a restore does nothing.
func (h *held) hold(set func() int, put func(int)) (restore func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.users == 0 {
		h.old = set()
	}
	h.users++
	return sync.OnceFunc(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.users--; h.users == 0 {
			put(h.old)
		}
	})
}
