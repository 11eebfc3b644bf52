package simulation

import (
	"maps"
	"math"

	"github.com/gossipd/gossipd/gossip"
)

// Batches gathered side by side. A request that starts from a result
// still promised (promise.go), directly or through a pending mix, must
// train in a later batch than that result's. Sending the batch being
// gathered as soon as such a request comes (as the batcher did) bounds
// a random walk's batches by the birthday bound: among 10,000 peers, a
// model goes to a peer whose own model is still promised after about a
// hundred updates, and 200,000 updates trained in 2,232 batches of 90 on
// average, each a few dozen kernel launches.
//
// So the batcher gathers several batches at once (batcher.open): a
// request joins the first whose number is above every batch its inputs
// are promised in (level). One that starts from results computed, or
// from batches already sent, joins the first; one that starts from the
// first's results, the second; and so on. The first is sent when more
// than a batch's worth of requests (size) is held, or it is full, when
// the simulation needs a result of it (await, call), or when a request
// would need a batch beyond the last maxOpenBatches, so that the device
// keeps working beside the event loop and the promised vectors held stay
// bounded (as many as one batch held before).
//
// Which requests train together, and in which order the batches run,
// still depends on the events alone, and on the CPU backend a request's
// result does not depend on the others in its batch, so the numbers are
// those of the batches sent one at a time.

// maxOpenBatches is how many batches the batcher gathers at once (a
// variable for tests; 1 sends a batch as soon as a request needs a later
// one).
var maxOpenBatches = 16

// place returns the index in open of the batch req joins (open may have
// to grow to it), sending the first batches where req would need one
// beyond maxOpenBatches. No batch gathered is full here: more than a
// batch's worth held sends the first, and a batch is gathered only
// above others that are not empty.
func (b *batcher) place(req *gossip.TrainRequest) int {
	i := 0
	if b.admits != nil {
		i = b.level(req)
	}
	for i >= maxOpenBatches {
		b.send()
		i--
	}
	return i
}

// level is the index in open of the first batch req may join: after
// every batch its inputs are promised in, directly or through a pending
// mix that waits for one (lazyMix.after).
func (b *batcher) level(req *gossip.TrainRequest) int {
	k := max(b.promisedIn(req.Params), b.promisedIn(req.MixWith))
	for _, x := range req.MixInputs { // a robust merge's
		k = max(k, b.promisedIn(x))
	}
	if b.grads {
		if p := b.mixer.find(req.Params); p != nil {
			k = max(k, p.after)
		}
	}
	if k <= b.batches {
		return 0 // computed, or in a batch sent: the batches run in order
	}
	return int(k - b.batches)
}

// flush starts every batch being gathered, in order.
func (b *batcher) flush() { b.flushTo(math.MaxUint64) }

// flushTo starts the batches being gathered up to number seq, in order.
func (b *batcher) flushTo(seq uint64) {
	for len(b.open) > 0 && b.batches < seq {
		b.send()
	}
}

// send starts the first batch being gathered (the next number), or
// drops it if it is empty.
func (b *batcher) send() {
	items := b.open[0]
	b.open[0] = nil
	b.open = b.open[1:]
	if len(b.open) == 0 {
		b.open = nil // let the array go
	}
	b.batches++
	b.gathered -= len(items)
	if len(items) == 0 {
		return // its number unused: nothing is promised in it
	}
	ran := b.ran.Load()
	maps.DeleteFunc(b.outputs, func(_ *float32, k uint64) bool { return k <= ran })
	done := make(chan struct{}) // one for the batch: its jobs end together
	for _, it := range items {
		it.job.queued, it.job.done = false, done
	}
	b.updates += uint64(len(items))
	if b.mixes() {
		b.mixer.cover() // this batch mixes first
	}
	b.work <- batchWork{items: items, seq: b.batches}
}
