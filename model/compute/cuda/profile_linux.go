//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"reflect"
	"runtime"
	"strings"
	"time"

	"github.com/gossipd/gossipd/model/compute"
)

// profile times the backend's calls one at a time (compute.Profiler):
// each waits for the work queued before it, and is waited for, so that
// its time is its own.
type profile struct {
	times compute.CallTimes
	pcs   [32]uintptr
}

var _ compute.Profiler = (*Backend)(nil)

// Profile implements compute.Profiler.
func (b *Backend) Profile() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.prof == nil {
		b.prof = &profile{}
	}
}

// Profiled implements compute.Profiler: nil before Profile.
func (b *Backend) Profiled() []compute.CallTime {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.prof == nil {
		return nil
	}
	return b.prof.times.List()
}

// timed is enter's while profiling: it waits for the device, and returns
// the release that waits for the call's work before it counts the call
// and releases the backend. The waits' failures are left to the calls'
// own checks (a failed kernel fails the next call that checks).
func (b *Backend) timed(release func()) func() {
	name := b.prof.caller()
	b.a.syncCtx()
	t0 := time.Now()
	return func() {
		host := time.Since(t0)
		b.a.syncCtx()
		b.prof.times.Add(name, time.Since(t0), host)
		release()
	}
}

// pkgPrefix is the prefix of this package's functions' names.
var pkgPrefix = strings.TrimSuffix(runtime.FuncForPC(reflect.ValueOf(Open).Pointer()).Name(), "Open")

// caller names the call being entered: the outermost method of this
// package on the stack ("CombineRows" for the Backend's, "stepGraph.Run"
// for another type's), which is what the backend's user called.
func (p *profile) caller() string {
	n := runtime.Callers(3, p.pcs[:])
	frames := runtime.CallersFrames(p.pcs[:n])
	name := "unknown"
	for {
		f, more := frames.Next()
		if m, ok := strings.CutPrefix(f.Function, pkgPrefix); ok && strings.HasPrefix(m, "(*") {
			name = strings.Replace(strings.TrimPrefix(m, "(*Backend)."), "(*", "", 1)
			name = strings.Replace(name, ").", ".", 1)
		}
		if !more {
			return name
		}
	}
}
