package trainer

import (
	"github.com/gossipd/gossipd/merge"
)

// Consensus returns the consensus distance of vs, merge.ConsensusDistanceN
// bit for bit, measured on the workspace's device (compute.Rows's
// MeanRows and DistanceRows over the arena): a vector the arena holds is
// read there, whether or not its host copy is current (LeaveOnDevice,
// Mix), and the others are copied into free slots for the call (one
// each, however many peers share it), a stack's capacity at a time. So
// a simulator measures its peers' models every round without copying
// them to the host. It reports false, having
// measured nothing, where the workspace has no device or the arena no
// room for the vectors it lacks. It must not run beside RunBatch.
func (w *BatchWorkspace) Consensus(vs [][]float32) (float64, bool) {
	r := w.res
	if r == nil {
		return 0, false
	}
	if len(vs) == 0 {
		return 0, true
	}
	rows, release, ok := w.slotsOf(vs)
	if !ok {
		return 0, false
	}
	defer release()
	be := w.stack.Backend()
	mean := be.Alloc(r.size)
	be.MeanRows(mean, r.arena, r.size, rows)
	c := (r.size + merge.ConsensusChunk - 1) / merge.ConsensusChunk
	d := make([]float64, len(vs)*c)
	be.DistanceRows(d, r.arena, r.size, rows, mean, merge.ConsensusChunk)
	be.Free(mean) // not on a failure: a failed device's free fails too
	r.mu.Lock()
	r.measured++
	r.mu.Unlock()
	return merge.ConsensusOfChunks(d, len(vs), c), true
}

// Moments returns the per-coordinate means (out[:n]) and standard
// deviations (out[n:]) of vs, compute.Moments bit for bit, computed on
// the workspace's device (compute.Rows' MomentsRows over the arena),
// the vectors it lacks copied into free slots for the call as Consensus
// does. It reports false, having computed nothing, where the workspace
// has no device, vs is empty or the arena has no room. It must not run
// beside RunBatch.
func (w *BatchWorkspace) Moments(vs [][]float32) ([]float64, bool) {
	r := w.res
	if r == nil || len(vs) == 0 {
		return nil, false
	}
	rows, release, ok := w.slotsOf(vs)
	if !ok {
		return nil, false
	}
	defer release()
	out := make([]float64, 2*r.size)
	w.stack.Backend().MomentsRows(out, r.arena, r.size, rows)
	r.mu.Lock()
	r.moments++
	r.mu.Unlock()
	return out, true
}

// slotsOf returns the arena slot of each of vs: the one that holds it,
// or, for the others, a free slot each (one however many entries share
// a vector) into which it is copied, a stack's capacity at a time;
// release gives those slots back, unnamed. It reports false, having
// taken nothing, where the arena lacks the room.
func (w *BatchWorkspace) slotsOf(vs [][]float32) (rows []int32, release func(), ok bool) {
	r := w.res
	rows = make([]int32, len(vs)) // a slot, or −1−k for missing[k] until it has one
	var missing [][]float32       // the vectors to copy in, each once
	at := map[*float32]int{}      // their places in missing
	for i, v := range vs {
		if s, ok := r.find(v); ok {
			rows[i] = s
			continue
		}
		k, ok := at[&v[0]]
		if !ok { // peers that share a vector (the initial model) share its slot
			k = len(missing)
			at[&v[0]] = k
			missing = append(missing, v)
		}
		rows[i] = int32(-1 - k)
	}
	if !r.room(len(missing)) {
		return nil, nil, false
	}
	temp := make([]int32, 0, len(missing))
	release = func() {
		r.mu.Lock()
		r.free = append(r.free, temp...)
		r.mu.Unlock()
	}
	defer func() { // a device that fails while the slots fill panics
		if !ok {
			release()
		}
	}()
	for range missing {
		s, _ := r.alloc() // room said yes
		temp = append(temp, s)
	}
	for i, s := range rows {
		if s < 0 {
			rows[i] = temp[-1-s]
		}
	}
	// Copied in through the stack, its capacity at a time: one copy to
	// the device each, then a row copy into the slots.
	var group [][]float32
	w.cpRows, w.cpSrc = w.cpRows[:0], w.cpSrc[:0]
	flush := func() {
		if len(group) == 0 {
			return
		}
		if err := w.stack.Load(group); err != nil {
			panic(err) // every vector is a model of the stack's spec
		}
		w.copySlots(r.arena, w.stack.ParamRows(len(group)), w.cpRows, w.cpSrc)
		group, w.cpRows, w.cpSrc = group[:0], w.cpRows[:0], w.cpSrc[:0]
	}
	for k, v := range missing {
		w.cpRows, w.cpSrc = append(w.cpRows, temp[k]), append(w.cpSrc, int32(len(group)))
		group = append(group, v)
		if len(group) == w.stack.Cap() {
			flush()
		}
	}
	flush()
	return rows, release, true
}
