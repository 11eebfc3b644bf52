package trainer

import (
	"math"
)

// LeaveOnDevice makes the workspace leave the models it trains on its
// device: a batch whose results all find a slot in the arena (resident)
// copies none of them back, and their host vectors hold stale values
// until Fetch copies them. A random walk's model goes from batch to batch
// through the arena (its next merge reads it there), so most are never
// needed on the host. The caller must Fetch every vector a batch returned
// before it reads it, and before it hands one to anything that does
// (trainer.Run, TrainRequest.Resolve or Skip); RunBatch fetches what it
// must merge on the host itself. With poison, the stale vectors are
// filled with NaN, so that a read that forgot to Fetch shows (tests). It
// reports whether the workspace has a device to leave them on.
func (w *BatchWorkspace) LeaveOnDevice(poison bool) bool {
	if w.res == nil {
		return false
	}
	w.lazy, w.poison = true, poison
	return true
}

// Fetch copies to the host those of vs that the workspace left on its
// device, a stack's capacity at a time; the others (and empty ones) are
// left alone. It must not run beside RunBatch.
func (w *BatchWorkspace) Fetch(vs ...[]float32) {
	r := w.res
	if r == nil {
		return
	}
	w.cpRows, w.cpSrc = w.cpRows[:0], w.cpSrc[:0]
	var dst [][]float32
	flush := func() {
		if len(dst) == 0 {
			return
		}
		w.copySlots(w.stack.ParamRows(len(dst)), r.arena, w.cpRows, w.cpSrc)
		w.stack.Store(dst)
		w.cpRows, w.cpSrc, dst = w.cpRows[:0], w.cpSrc[:0], dst[:0]
	}
	for _, v := range vs {
		s, ok := r.settle(v)
		if !ok {
			continue
		}
		w.cpRows, w.cpSrc = append(w.cpRows, int32(len(dst))), append(w.cpSrc, s)
		dst = append(dst, v)
		if len(dst) == w.stack.Cap() {
			flush()
		}
	}
	flush()
}

// fetch is Fetch of one vector, in the middle of a batch: it copies the
// slot straight to v.
func (r *resident) fetch(v []float32) {
	if s, ok := r.settle(v); ok {
		r.be.Store(v, r.row(s))
	}
}

// settle marks v, if the arena holds it only there, as on the host too,
// and returns its slot to copy it from.
func (r *resident) settle(v []float32) (int32, bool) {
	if len(v) == 0 {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entry(v)
	if !ok || !e.stale {
		return 0, false
	}
	e.stale = false
	r.byVec[addrOf(v)] = e
	r.fetched++
	return e.slot, true
}

// room reports whether k more vectors find slots.
func (r *resident) room(k int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.free)+(r.max-r.slots) >= k
}

// poisonStale fills the host vectors of a batch left on the device with
// NaN (LeaveOnDevice's poison).
func poisonStale(vs [][]float32) {
	nan := float32(math.NaN())
	for _, v := range vs {
		for i := range v {
			v[i] = nan
		}
	}
}
