package simulation

import (
	"errors"
	"fmt"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/peer/trainer"
)

// Results handed over before they are computed. A random walk's update
// on a device (leaveOnDevice) changes its peer's model, its age and its
// sum (gossip.TrainResult), and nothing the event loop reads: the model's
// values stay on the device until a batch reads them there or the
// evaluation fetches them. So the update's result is known before its
// batch runs, but for one number: the model's Σx², which the core checks
// (finite, and within the norm bound where a receiver checks the model:
// gossip.Config.Admits) and nothing else. The batcher promises each such
// update's result when it is asked for (its Params the vector the batch
// will write: the request's own, or one named for a merge,
// trainer.RunBatchInto), with a Σx² of 0, which passes; the event loop
// hands it over without waiting for the batch, and the batch checks the
// real sum once it has it. An update whose model starts from a result
// still promised joins a later batch than that result's (gathering.go),
// so a batch reads only models computed before it.
//
// If every real sum passes, the run is the one that waited for each
// result: the same events, messages and numbers. If one does not (a model
// that diverged to NaN or past the norm bound), the checks that passed it
// would have refused it, so the run ends (errMisspeculated) and is
// simulated again, handing each result over once computed (run). The
// rows filed before were checked first, and are not filed twice (on a
// GPU whose batched results differed by rounding with the batches' make-up,
// they would be the first run's; the result's rows are all the second's).
//
// The gradients of cores that hand their mixes (plain D-PSGD, push-sum,
// GoSGD, AD-PSGD: gossip.Config.HandsMixes) are promised the same way: a
// gradient goes nowhere but into its peer's mixes on the device, and the
// core checks only that it is finite. A mix may then read a gradient
// still to come: it carries the number of the last batch not yet run
// that its inputs come from, directly or through other mixes
// (lazyMix.after, lazyMixer.afterOf), and runs only after that batch,
// and a request that starts from such a mix joins a later batch.
// The sums of the mixes, which their receivers check, are given as 0
// while a mix is pending (lazyMixer.SumLater) and checked once it has
// run (flushOn). A receiver that finds the mix run checks
// the real sum, so whether a diverged run breaks a promise depends on
// timing, but its numbers do not.

// errMisspeculated is the error of a run whose promised result failed
// the check its hand-over passed.
type errMisspeculated struct {
	what string // "peer p00011's update"
	ss   float64
}

func (e *errMisspeculated) Error() string {
	return fmt.Sprintf("simulation: %s, handed over before it was computed, has Σx² %v, which the checks it passed refuse", e.what, e.ss)
}

// misspeculated reports whether err is a run's errMisspeculated.
func misspeculated(err error) bool {
	var e *errMisspeculated
	return errors.As(err, &e)
}

// promiseResults has the batcher promise the results of a random walk's
// updates it leaves on the device, or the gradients of cores that hand
// their mixes (gossip.Config.HandsMixes), which go nowhere but to mixes
// on the device (and with them the mixer the
// sums of the mixes: lazyMixer.promising), unless the run hands each
// over once computed.
func (s *sim) promiseResults() {
	if s.batch == nil || s.strictHandOver {
		return
	}
	gc, n := s.peers[0].Core().Config(), len(s.init)
	admits := func(ss float64) bool { return gc.Admits(ss, n) }
	switch {
	case s.batch.lazy:
		// A model's vector each: their lifetimes differ too much to share
		// allocations (sim.vectorBlock).
		s.batch.admits, s.batch.vectors = admits, newVectorMaker(n, 1, readyOnDevice(n))
	case s.batch.mixes() && gc.HandsMixes() && !s.cfg.DP.Enabled():
		// The gradients' vectors in blocks of their own, dropped together
		// once their round's mixes have run, not held as long as the mixes.
		s.batch.admits, s.batch.grads = admits, true
		s.batch.vectors = newVectorMaker(n, s.vectorBlock(), readyOnDevice(n))
	}
}

// promises reports whether the batcher promises req's result: an
// update's, or with grads a gradient's.
func (b *batcher) promises(req *gossip.TrainRequest) bool {
	if b.admits == nil || len(req.Params) == 0 {
		return false
	}
	if b.grads {
		return req.Op == gossip.OpGradient
	}
	return req.Op == gossip.OpUpdate
}

// promise makes j, the job of req, a promise, and returns the vector the
// update will be written to if it merges or is a gradient (nil: its own
// Params).
func (b *batcher) promise(j *trainJob, tr *trainer.Trainer, req *gossip.TrainRequest, peer string) []float32 {
	// Σx² 0 passes the core's checks; the batch checks the real one.
	j.promise = &gossip.TrainResult{ID: req.ID, Examples: tr.Work(req), Measured: true}
	j.peer = peer
	out, into := req.Params, []float32(nil)
	switch {
	case b.grads:
		into = b.vectors.get(len(req.Params)) // written in full by the batch
		out, j.promise.Grad = into, into
	case req.Mixes():
		into = b.vectors.get(len(req.Params)) // written in full by the batch
		out, j.promise.Params = into, into
	default:
		j.promise.Params = out
	}
	if testPoison {
		poison(into) // a read before the batch wrote it shows
	}
	b.promised++
	if b.outputs == nil {
		b.outputs = map[*float32]uint64{}
	}
	b.outputs[&out[0]] = j.seq
	return into
}

// promisedIn is the number of the batch v is a result promised in, if
// that batch has not run yet; else 0.
func (b *batcher) promisedIn(v []float32) uint64 {
	if len(v) == 0 || len(b.outputs) == 0 {
		return 0
	}
	if k := b.outputs[&v[0]]; k > b.ran.Load() {
		return k
	}
	return 0
}

// keep checks the promised results of a batch that ran (on the batches'
// goroutine): each written where it was promised, its Σx² admitted. The
// first that is not, or the batch's failure, is the run's (missed).
func (b *batcher) keep(items []batchItem, res []*gossip.TrainResult, err error) {
	for i, it := range items {
		p := it.job.promise
		if p == nil {
			continue
		}
		if err != nil {
			b.miss(err)
			return
		}
		got, want, what, ok := res[i].Params, p.Params, "update", b.admits(res[i].SumSquares)
		if b.grads {
			got, want, what, ok = res[i].Grad, p.Grad, "gradient", gossip.AdmitsTrained(res[i].SumSquares)
		}
		switch {
		case len(got) != len(want) || &got[0] != &want[0]:
			b.miss(fmt.Errorf("simulation: peer %s's %s was written to another vector than the one handed over", it.job.peer, what))
			return
		case !ok:
			b.miss(&errMisspeculated{what: fmt.Sprintf("peer %s's %s", it.job.peer, what), ss: res[i].SumSquares})
			return
		}
	}
}

// miss records err as the run's, if it is the first.
func (b *batcher) miss(err error) { b.missed.CompareAndSwap(nil, &err) }

// check makes a promised result's failure, found on the batches'
// goroutine, the run's (failure), on the event loop.
func (b *batcher) check() {
	if e := b.missed.Load(); e != nil && b.failure == nil {
		b.failure = *e
	}
}
