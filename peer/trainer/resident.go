package trainer

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model/compute"
)

// residentBytes bounds the device memory a batch workspace keeps models
// in between batches (resident) on a device that does not say its size:
// 10,000 models of an MLP 784-128-10 are 4 GB. On a device that does
// (compute.MemorySizer), the bound is a quarter of it: 35 GiB of an H200,
// room for a million softmax models (31 GB).
const residentBytes int64 = 8 << 30

// residentBound is how many bytes of be's memory the arena may take.
func residentBound(be compute.Backend) int64 {
	if s, ok := be.(compute.MemorySizer); ok && s.TotalMemory() > 0 {
		return s.TotalMemory() / 4
	}
	return residentBytes
}

// resident keeps models on a device between batches: every model a batch
// trained, and every model a request started from, stays in a slot of an
// arena on the device for as long as the host vector it equals lives, so
// that a later request starting from it (a random walk's model, which its
// messages share, and a received model to merge) is read there instead
// of being copied in again, and merges there (compute.Rows). A host
// vector is named by a weak pointer to its first value: a slot is freed
// once its vector is garbage, and a new vector at the same address is
// another key. The host vectors hold the same values as their slots: a
// vector is found again only where it is shared, and shared vectors are
// never written in place (gossip.Message.Params): a random walk's
// request's Params with MixWith, and MixWith (its model and the model it
// received), a robust merge's MixInputs, a gradient request's Params
// (load), Mix's terms. A request's
// own vector, which a result overwrites, is forgotten first, and an
// update's under DP-SGD never kept.
type resident struct {
	be    compute.Backend
	size  int            // values a model
	arena compute.Tensor // slots models of size values
	slots int
	max   int // the most slots the arena may grow to

	mu sync.Mutex // guards byVec and free: cleanups run on goroutines of their own
	// byVec holds the slots by their host vectors' addresses; an entry
	// is v's only while its weak pointer still gives v (entry): a vector
	// found dead there has left its address to a new one, which the
	// lookup then does not find, and its cleanup may not have run yet.
	// Looking up by the address makes no weak pointer (weak.Make would
	// add one to a vector found nowhere, for as long as it lives).
	byVec map[uintptr]slotEntry
	free  []int32

	// Hits counts the vectors found on the device, Uploads those
	// copied in, Full those that found the arena full.
	hits, uploads, full uint64
	// Left counts the trained models left here alone (LeaveOnDevice),
	// grads the gradients (LeaveGradients), Mixed the Mix results,
	// Fetched those copied to the host since (guarded by mu).
	left, grads, mixed, fetched uint64
	// Merged counts the robust merges computed here (loadResident).
	merged uint64
	// Measured counts the consensus distances measured here (Consensus),
	// moments the moments taken here (Moments).
	measured, moments uint64
	// collecting: a collection asked for when the arena was full
	// (collect) has not ended yet.
	collecting atomic.Bool
}

type slotEntry struct {
	key     weak.Pointer[float32]
	slot    int32
	cleanup runtime.Cleanup
	stale   bool    // the host vector is not written yet (LeaveOnDevice, Mix)
	ss      float64 // Σ x², where measured (hasSS: a Mix result)
	hasSS   bool
}

type slotKey struct {
	addr uintptr
	key  weak.Pointer[float32]
	slot int32
}

// addrOf is the address byVec knows v by.
func addrOf(v []float32) uintptr { return uintptr(unsafe.Pointer(&v[0])) }

// entry returns v's entry (guarded by mu).
func (r *resident) entry(v []float32) (slotEntry, bool) {
	e, ok := r.byVec[addrOf(v)]
	if !ok || e.key.Value() != &v[0] {
		return slotEntry{}, false
	}
	return e, true
}

// put records e as v's entry (guarded by mu). An entry of a dead vector
// at v's address gives its slot back now, its cleanup stopped (one
// already queued finds the entry another's: release); one of v itself
// in another slot too.
func (r *resident) put(v []float32, e slotEntry) {
	a := addrOf(v)
	if old, ok := r.byVec[a]; ok && old.slot != e.slot {
		old.cleanup.Stop()
		r.free = append(r.free, old.slot)
	}
	r.byVec[a] = e
}

// newResident returns an empty arena for models of size values on be.
func newResident(be compute.Backend, size int) *resident {
	return &resident{be: be, size: size, max: int(max(1, min(residentBound(be)/int64(4*size), 1<<30))), byVec: map[uintptr]slotEntry{}}
}

// onDevice reports whether be keeps its tensors apart from the host's
// memory: only then is keeping models there worth it.
func onDevice(be compute.Backend) bool {
	t := be.Alloc(1)
	defer be.Free(t)
	return !t.OnHost()
}

// find returns the slot holding v.
func (r *resident) find(v []float32) (int32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entry(v)
	return e.slot, ok
}

// slot returns the slot holding v, copying v in when none does; false
// when the arena is full.
func (r *resident) slot(v []float32) (int32, bool) {
	if s, ok := r.find(v); ok {
		r.hits++
		return s, true
	}
	s, ok := r.alloc()
	if !ok {
		r.full++
		return 0, false
	}
	r.be.Copy(r.row(s), compute.Host(v))
	r.uploads++
	r.keep(v, s, false)
	return s, true
}

// row is slot s of the arena.
func (r *resident) row(s int32) compute.Tensor {
	return r.arena.Slice(int(s)*r.size, (int(s)+1)*r.size)
}

// alloc takes a free slot, growing the arena (doubling, up to max) when
// there is none.
func (r *resident) alloc() (int32, bool) {
	r.mu.Lock()
	if n := len(r.free); n > 0 {
		s := r.free[n-1]
		r.free = r.free[:n-1]
		r.mu.Unlock()
		return s, true
	}
	r.mu.Unlock()
	if r.slots >= r.max {
		r.collect()
		return 0, false
	}
	grown := min(r.max, max(64, 2*r.slots))
	arena := r.be.Alloc(grown * r.size)
	if r.slots > 0 {
		r.be.Copy(arena.Slice(0, r.slots*r.size), r.arena)
		r.be.Free(r.arena)
	}
	r.mu.Lock()
	for s := grown - 1; s > r.slots; s-- {
		r.free = append(r.free, int32(s))
	}
	r.mu.Unlock()
	s := int32(r.slots)
	r.arena, r.slots = arena, grown
	return s, true
}

// collect asks for a collection when the arena is full, one at a time,
// on a goroutine of its own: a slot is freed only once the collector
// finds its host vector garbage, which a run that allocates little on
// the host may not do for long, while a full arena sends every model
// that finds no slot to the host. The request that found it full is
// served on the host all the same.
func (r *resident) collect() {
	if r.collecting.CompareAndSwap(false, true) {
		go func() {
			runtime.GC()
			r.collecting.Store(false)
		}()
	}
}

// keep records that slot s holds v's values, until v is garbage; stale:
// v itself does not hold them yet (LeaveOnDevice).
func (r *resident) keep(v []float32, s int32, stale bool) {
	key := weak.Make(&v[0])
	c := runtime.AddCleanup(&v[0], r.release, slotKey{addrOf(v), key, s})
	r.mu.Lock()
	r.put(v, slotEntry{key: key, slot: s, cleanup: c, stale: stale})
	r.mu.Unlock()
}

// keepSum is keep of a Mix result, left here (stale) with its Σ x².
func (r *resident) keepSum(v []float32, s int32, ss float64) {
	key := weak.Make(&v[0])
	c := runtime.AddCleanup(&v[0], r.release, slotKey{addrOf(v), key, s})
	r.mu.Lock()
	r.put(v, slotEntry{key: key, slot: s, cleanup: c, stale: true, ss: ss, hasSS: true})
	r.mu.Unlock()
}

// knownSum returns the Σ x² a Mix measured of v, if v is its result.
func (r *resident) knownSum(v []float32) (float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entry(v)
	return e.ss, ok && e.hasSS
}

// release frees the slot of a vector become garbage.
func (r *resident) release(k slotKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byVec[k.addr]; ok && e.key == k.key && e.slot == k.slot {
		delete(r.byVec, k.addr)
		r.free = append(r.free, k.slot)
	}
}

// forget frees v's slot, if it has one, before v is written.
func (r *resident) forget(v []float32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entry(v); ok {
		e.cleanup.Stop()
		delete(r.byVec, addrOf(v))
		r.free = append(r.free, e.slot)
	}
}

// close frees the arena.
func (r *resident) close() {
	if r.slots > 0 {
		r.be.Free(r.arena)
		r.slots = 0
	}
}

// loadResident sets the stack's models 0 to len(jobs)−1 to the jobs'
// starting points from the models kept on the device, merging there
// (compute.Rows) those whose request asks for a mix; a vector the arena
// has no room for is merged on the host and copied in. Each request's
// Params becomes the host vector its result goes to: a new one for a
// mix, whose Params are shared; its own, forgotten by the arena, else.
func (w *BatchWorkspace) loadResident(jobs []*batchJob) {
	r, be := w.res, w.stack.Backend()
	dst := w.stack.ParamRows(len(jobs))
	w.mixRows, w.mixA, w.mixB, w.mixW = w.mixRows[:0], w.mixA[:0], w.mixB[:0], w.mixW[:0]
	w.cpRows, w.cpSrc = w.cpRows[:0], w.cpSrc[:0]
	// The requests' own vectors are forgotten once the kernels that read
	// their slots are queued: a slot freed before would be taken, and
	// written, by the next vector copied in.
	w.forget = w.forget[:0]
	var robust mixCalls
	var robustRows, temps []int32
	// The vectors whose slots the calls read, held until the calls are
	// queued: a slot is freed once its vector is garbage, and the
	// requests' references go below.
	var read [][]float32
	for i, j := range jobs {
		req := j.req
		read = append(append(read, req.Params, req.MixWith), req.MixInputs...)
		if req.MixRule != nil {
			if d, ok := w.robustMerge(&robust, req); ok {
				robustRows, temps = append(robustRows, int32(i)), append(temps, d)
				req.Params, req.MixRule, req.MixInputs, req.MixWeights = nil, nil, nil, nil // a new vector, below
				w.params = append(w.params, nil)
				continue
			}
		}
		a, okA := r.slot(req.Params)
		b, okB := a, true
		if req.MixWith != nil {
			b, okB = r.slot(req.MixWith)
		}
		switch {
		case !okA || !okB || req.MixRule != nil:
			r.fetch(req.Params) // merged on the host
			r.fetch(req.MixWith)
			for _, x := range req.MixInputs {
				r.fetch(x)
			}
			resolveInto(req, j.into)
			w.forget = append(w.forget, req.Params)
			be.Copy(dst.Slice(i*r.size, (i+1)*r.size), compute.Host(req.Params))
		case req.MixWith != nil:
			w.mixRows, w.mixA, w.mixB, w.mixW = append(w.mixRows, int32(i)), append(w.mixA, a), append(w.mixB, b), append(w.mixW, req.MixWeight)
			req.Params, req.MixWith, req.MixWeight = nil, nil, 0 // a new vector, below
		default:
			w.cpRows, w.cpSrc = append(w.cpRows, int32(i)), append(w.cpSrc, a)
			w.forget = append(w.forget, req.Params)
		}
		w.params = append(w.params, req.Params)
	}
	// The mixes' new host vectors, not cleared: a result is stored to
	// its vector in full, or left on the device until fetched in full.
	for _, i := range append(w.mixRows, robustRows...) {
		v := jobs[i].into // named by the caller (RunBatchInto), or new
		if v == nil {
			v = compute.Unzeroed(r.size)
		}
		jobs[i].req.Params = v
		w.params[i] = v
	}
	if len(robustRows) > 0 {
		// The robust merges into slots of their own, then copied in as
		// the other starting points are; the slots are free once the
		// copy is queued.
		robust.run(be, r.arena, r.size)
		w.cpRows, w.cpSrc = append(w.cpRows, robustRows...), append(w.cpSrc, temps...)
	}
	be.InterpolateRows(dst, r.arena, r.size, w.mixRows, w.mixA, w.mixB, w.mixW)
	w.copySlots(dst, r.arena, w.cpRows, w.cpSrc)
	runtime.KeepAlive(read)
	for _, v := range w.forget {
		r.forget(v)
	}
	if len(temps) > 0 {
		r.mu.Lock()
		r.free = append(r.free, temps...)
		r.merged += uint64(len(temps))
		r.mu.Unlock()
	}
}

// robustMerge places req's robust merge (TrainRequest.MixRule) in c, its
// result a slot of its own, which it returns, its inputs read where the
// arena holds them (copied in where it does not): false, with nothing
// placed, where the rule has no kernel for them or the arena no room.
func (w *BatchWorkspace) robustMerge(c *mixCalls, req *gossip.TrainRequest) (int32, bool) {
	r := w.res
	it := MixItem{Xs: req.MixInputs, Agg: req.MixRule, Ws: req.MixWeights}
	if !c.placed(it) || len(req.MixInputs) == 0 || &req.MixInputs[0][0] != &req.Params[0] {
		return 0, false
	}
	slots, ok := r.slotsOf(req.MixInputs)
	if !ok {
		return 0, false
	}
	d, ok := r.alloc()
	if !ok {
		r.full++
		return 0, false
	}
	c.add(it, d, slots, -1)
	return d, true
}

// slotsOf returns the slots holding vs, copying in those none holds
// (slot); false where the arena has no room for one.
func (r *resident) slotsOf(vs [][]float32) ([]int32, bool) {
	slots := make([]int32, 0, len(vs)+1)
	for _, v := range vs {
		s, ok := r.slot(v)
		if !ok {
			return nil, false
		}
		slots = append(slots, s)
	}
	return slots, true
}

// keepResults copies the stack's trained models 0 to k−1 to slots of
// their own, named by the host vectors they are stored to (w.params). It
// reports whether they are left there alone (LeaveOnDevice, and room
// for all): their host vectors are then not written.
func (w *BatchWorkspace) keepResults(k int) bool {
	r := w.res
	stale := w.lazy && r.room(k)
	w.cpRows, w.cpSrc = w.cpRows[:0], w.cpSrc[:0]
	for i := range k {
		s, ok := r.alloc() // fails only where room said no: stale is false then
		if !ok {
			r.full++
			continue
		}
		r.keep(w.params[i], s, stale)
		w.cpRows, w.cpSrc = append(w.cpRows, s), append(w.cpSrc, int32(i))
	}
	w.copySlots(r.arena, w.stack.ParamRows(k), w.cpRows, w.cpSrc)
	if stale {
		r.mu.Lock()
		r.left += uint64(k)
		r.mu.Unlock()
	}
	return stale
}

// copySlots copies row src[i] of from to row dst[i] of to (models of the
// arena's size) in one call: a CombineRows of one term of weight 1 each.
func (w *BatchWorkspace) copySlots(to, from compute.Tensor, dst, src []int32) {
	n := len(dst)
	for len(w.iota) <= n {
		w.iota = append(w.iota, int32(len(w.iota)))
	}
	for len(w.ones) < n {
		w.ones = append(w.ones, 1)
	}
	w.stack.Backend().CombineRows(to, from, w.res.size, dst, w.iota[:n+1], src, w.ones[:n])
}
