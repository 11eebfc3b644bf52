package merge

import (
	"runtime"

	"github.com/gossipd/gossipd/model/compute"
)

// A long vector (a model of 100,000 parameters and more, merged on a
// simulator's event loop, where every other peer waits) is split among
// goroutines in ranges of values. Each value's arithmetic is the same
// whatever the split, so the result is the same bits on any number of
// cores.
const (
	parallelFrom = 1 << 16 // values: shorter vectors stay on the caller's goroutine
	rangeValues  = 1 << 14 // values a goroutine takes at least (64 KiB)
)

// inRanges calls f on ranges [lo, hi) that cover [0, n) once, side by
// side for a long vector, and returns when all have returned.
func inRanges(n int, f func(lo, hi int)) {
	k := 1
	if n >= parallelFrom {
		k = min(runtime.GOMAXPROCS(0), n/rangeValues)
	}
	if k <= 1 {
		f(0, n)
		return
	}
	compute.ForEach(k, k, func(w int) { f(w*n/k, (w+1)*n/k) })
}
