package simulation

import (
	"runtime"
	"sync"

	"github.com/gossipd/gossipd/model/compute"
)

// vectorMaker makes new host vectors of one size on goroutines of their
// own, beside the event loop, which takes them (get): the results'
// vectors of mixes and promised updates (mixer.go, promise.go), written
// in full where they are computed, or on a device only when fetched.
// Making one is mostly what the runtime charges for it (its allocation,
// and marking in proportion, compute.Unzeroed), which the event loop then
// does not pay.
//
// Where the makers fall behind (a D-PSGD round asks for thousands at
// once), the loop makes a block of vectors itself, one allocation, and
// hands out the rest of it next (spare), as the makers would have.
type vectorMaker struct {
	fresh chan []float32
	stop  chan struct{}
	block int
	mu    sync.Mutex
	spare [][]float32
}

// newVectorMaker starts makers of vectors of size values, up to ready
// of them ready at a time, up to block consecutive ones sharing an
// allocation (compute.UnzeroedRows): a quarter of the cores' worth, and
// two at least where vectors come in blocks (a device's).
func newVectorMaker(size, block, ready int) *vectorMaker {
	makers := max(1, runtime.GOMAXPROCS(0)/4)
	if block > 1 {
		makers = max(2, makers)
	}
	block = max(1, min(block, ready/makers))
	v := &vectorMaker{fresh: make(chan []float32, ready), stop: make(chan struct{}), block: block}
	for range makers {
		go func() {
			for {
				for _, x := range compute.UnzeroedRows(block, size) {
					select {
					case v.fresh <- x:
					case <-v.stop:
						return
					}
				}
			}
		}()
	}
	return v
}

// get returns a vector of n values, whatever it holds: a ready one, or
// one of a block made here when none is.
func (v *vectorMaker) get(n int) []float32 {
	select {
	case x := <-v.fresh:
		if len(x) == n {
			return x
		}
	default:
	}
	if v.block <= 1 {
		return compute.Unzeroed(n)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if k := len(v.spare); k == 0 || len(v.spare[k-1]) != n {
		v.spare = compute.UnzeroedRows(v.block, n)
	}
	k := len(v.spare)
	x := v.spare[k-1]
	v.spare[k-1] = nil
	v.spare = v.spare[:k-1]
	return x
}

// close stops the makers.
func (v *vectorMaker) close() { close(v.stop) }

// readyOnDevice is how many vectors of size values a maker keeps ready
// on a device, whose host vectors are written only if fetched: 1,024, up
// to 256 MiB of them (a round of 10,000 peers takes thousands at once).
func readyOnDevice(size int) int {
	return min(1024, max(1, (256<<20)/(4*max(1, size))))
}
