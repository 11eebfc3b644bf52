package simulation

import (
	"errors"
	"fmt"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model/compute"
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
// still promised in the batch being gathered starts a new batch first,
// so a batch reads only models computed before it.
//
// If every real sum passes, the run is the one that waited for each
// result: the same events, messages and numbers. If one does not (a model
// that diverged to NaN or past the norm bound), the checks that passed it
// would have refused it, so the run ends (errMisspeculated) and is
// simulated again, handing each result over once computed (run). The
// rows filed before were checked first, and are not filed twice.

// errMisspeculated is the error of a run whose promised result failed
// the check its hand-over passed.
type errMisspeculated struct {
	peer string
	ss   float64
}

func (e *errMisspeculated) Error() string {
	return fmt.Sprintf("simulation: peer %s's update, handed over before it was computed, has a model of Σx² %v, which the checks it passed refuse", e.peer, e.ss)
}

// misspeculated reports whether err is a run's errMisspeculated.
func misspeculated(err error) bool {
	var e *errMisspeculated
	return errors.As(err, &e)
}

// promiseResults has the batcher promise the results of updates it
// leaves on the device, unless the run hands each over once computed.
func (s *sim) promiseResults() {
	if !s.batch.lazy || s.strictHandOver {
		return
	}
	gc, n := s.peers[0].Core().Config(), len(s.init)
	s.batch.admits = func(ss float64) bool { return gc.Admits(ss, n) }
}

// promises reports whether the batcher promises req's result.
func (b *batcher) promises(req *gossip.TrainRequest) bool {
	return b.admits != nil && req.Op == gossip.OpUpdate && len(req.Params) > 0
}

// promise makes j, the job of req, a promise, and returns the vector the
// update will be written to if it merges (nil: its own Params). A request
// that starts from a result still promised in the batch being gathered
// sends that batch first.
func (b *batcher) promise(j *trainJob, tr *trainer.Trainer, req *gossip.TrainRequest, peer string) []float32 {
	if b.gathering(req.Params) || b.gathering(req.MixWith) {
		b.flush()
	}
	out, into := req.Params, []float32(nil)
	if req.MixWith != nil {
		into = compute.Unzeroed(len(req.Params)) // written in full by the batch
		out = into
	}
	if testPoison {
		poison(into) // a read before the batch wrote it shows
	}
	// Σx² 0 passes the core's checks; the batch checks the real one.
	j.promise = &gossip.TrainResult{ID: req.ID, Params: out, Examples: tr.Work(req), Measured: true}
	j.peer = peer
	b.promised++
	if b.outputs == nil {
		b.outputs = map[*float32]struct{}{}
	}
	b.outputs[&out[0]] = struct{}{}
	return into
}

// gathering reports whether v is a result promised in the batch being
// gathered.
func (b *batcher) gathering(v []float32) bool {
	if len(v) == 0 || len(b.outputs) == 0 {
		return false
	}
	_, ok := b.outputs[&v[0]]
	return ok
}

// keep checks the promised results of a batch that ran (on the batches'
// goroutine): each written where it was promised, its Σx² admitted. The
// first that is not, or the batch's failure, is the run's (missed).
func (b *batcher) keep(items []batchItem, res []*gossip.TrainResult, err error) {
	for i, it := range items {
		p := it.job.promise
		switch {
		case p == nil:
		case err != nil:
			b.miss(err)
			return
		case len(res[i].Params) != len(p.Params) || &res[i].Params[0] != &p.Params[0]:
			b.miss(fmt.Errorf("simulation: peer %s's update was written to another vector than the one handed over", it.job.peer))
			return
		case !b.admits(res[i].SumSquares):
			b.miss(&errMisspeculated{peer: it.job.peer, ss: res[i].SumSquares})
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
