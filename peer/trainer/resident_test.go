package trainer

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// TestResidentBatches: on a device, batches keep the models they train
// and start from (resident.go) and give the CPU's bits. Three rounds of a
// random walk's requests: each trainer's next request starts from its
// last result mixed with its neighbour's (TrainRequest.MixWith), or
// merged with four others by a robust rule (MixRule: Krum, median and
// clipped gossip in turn), or from a copy of it; from the second round on every vector is found on the
// device (but a request's own copy), the host vectors named stay
// untouched, and every slot of the arena is free or holds a vector. With
// an arena too small, requests merge on the host, to the same bits.
func TestResidentBatches(t *testing.T) {
	dev := backendtest.NewDevice()
	want, _, _ := residentRounds(t, dev, false, 0, false)
	got, stats, _ := residentRounds(t, dev, true, 0, false)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("model %d on the device differs from the CPU's", i)
		}
	}
	// An arena of 3 slots: most vectors find it full, and merge on the
	// host instead, to the same bits.
	small, smallStats, _ := residentRounds(t, dev, true, 3, false)
	for i := range want {
		if !slices.Equal(small[i], want[i]) {
			t.Errorf("model %d with a full arena differs from the CPU's", i)
		}
	}
	if smallStats.Full == 0 {
		t.Errorf("an arena of 3 slots: %+v, never full", smallStats)
	}
	// Round 0 copies in its five requests' vectors; round 1 finds the
	// three mixes' six vectors and the robust merge's five on the device,
	// merges there, and copies in the one copy (a vector of its own, new
	// to the device).
	if stats.Uploads != 6 || stats.Hits != 11 || stats.Full != 0 || stats.Merged != 1 {
		t.Errorf("after two rounds: %+v, want 6 uploads, 11 hits, 1 robust merge", stats)
	}
}

// TestLeaveOnDevice: batches that leave their models on the device
// (LeaveOnDevice, their host vectors poisoned with NaN) give the CPU's
// bits once fetched, with an arena of any size: a model merged on the
// host for want of room is fetched first (a NaN would show otherwise).
// The counts say how many were left and fetched.
func TestLeaveOnDevice(t *testing.T) {
	dev := backendtest.NewDevice()
	want, _, _ := residentRounds(t, dev, false, 0, false)
	for _, slots := range []int{0, 3, 7, 12} {
		got, stats, left := residentRounds(t, dev, true, slots, true)
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("arena of %d slots: model %d left on the device differs from the CPU's", slots, i)
			}
		}
		if (slots == 0 && left == 0) || stats.Left < uint64(left) || (left > 0 && stats.Fetched == 0) || (slots == 3 && stats.Full == 0) {
			t.Errorf("arena of %d slots: %d results left on the device at the end, counts %+v", slots, left, stats)
		}
	}
	if live := dev.Stats().Live; live > 0 {
		t.Errorf("%d device buffers live after the workspaces closed", live)
	}
}

// residentRounds runs four rounds of a random walk's requests (an MLP's)
// in batches of 8 (on dev, or on the CPU), in an arena of maxSlots (0: the default)
// that leaves the models on the device (lazy, poisoned) or not. It
// returns the last round's models (fetched), the resident counts after
// two rounds and how many of the last results were left on the device.
func residentRounds(t *testing.T, dev *backendtest.Device, onDev bool, maxSlots int, lazy bool) ([][]float32, ResidentStats, int) {
	return residentRoundsInto(t, dev, onDev, maxSlots, lazy, false)
}

// residentRoundsInto is residentRounds naming, with into, the vector each
// merging update is written to beforehand (RunBatchInto), filled with NaN
// so that a read of it before the batch wrote it shows.
func residentRoundsInto(t *testing.T, dev *backendtest.Device, onDev bool, maxSlots int, lazy, into bool) ([][]float32, ResidentStats, int) {
	t.Helper()
	spec := model.Spec{Kind: model.MLP, Inputs: 12, Hidden: []int{8}, Classes: 4}
	m, err := model.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	trainers, reqs := batchFleet(t, spec, m)
	opts := []model.Option{}
	if onDev {
		opts = append(opts, model.WithBackend(dev))
	}
	st, err := model.NewStack(spec, 8, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ws := NewBatchWorkspace(st)
	defer ws.Close()
	if maxSlots > 0 {
		ws.res.max = maxSlots
	}
	if _, ok := ws.Resident(); ok != onDev {
		t.Fatalf("on the device %v: keeps models %v", onDev, ok)
	}
	if lazy && !ws.LeaveOnDevice(true) {
		t.Fatal("no device to leave the models on")
	}
	type snapshot struct{ v, was []float32 }
	var shared []snapshot // every vector a request named, as it was
	var stats ResidentStats
	for round := range 4 {
		var named [][]float32 // the vectors the updates go to (into)
		if into {
			named = make([][]float32, len(reqs))
			for i, req := range reqs {
				if req.Mixes() {
					named[i] = make([]float32, len(req.Params))
					poisonStale([][]float32{named[i]})
				}
			}
		}
		out, err := RunBatchInto(ws, trainers, reqs, named)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range named {
			if v != nil && &out[i].Params[0] != &v[0] {
				t.Fatalf("round %d: update %d not written to the vector named for it", round, i)
			}
		}
		for _, r := range out {
			if !lazy { // else once fetched, below
				checkMeasured(t, "resident", r)
			}
		}
		if round == 1 {
			stats, _ = ws.Resident()
		}
		if round == 3 {
			left := 0
			var models [][]float32
			for _, r := range out {
				if slices.ContainsFunc(r.Params, func(v float32) bool { return v != v }) {
					left++
				}
				models = append(models, r.Params)
			}
			ws.Fetch(models...)
			for _, r := range out {
				checkMeasured(t, "resident", r)
			}
			for _, n := range shared {
				if !slices.Equal(n.v, n.was) {
					t.Errorf("on the device %v: a vector a request named was written in place", onDev)
				}
			}
			if r := ws.res; r != nil {
				r.mu.Lock()
				if held := len(r.free) + len(r.byVec); held != r.slots {
					t.Errorf("%d slots, %d of them free or holding a vector: %d lost", r.slots, held, r.slots-held)
				}
				r.mu.Unlock()
			}
			if lazy {
				stats, _ = ws.Resident()
			}
			return models, stats, left
		}
		reqs = reqs[:0]
		for i, r := range out {
			req := &gossip.TrainRequest{ID: uint64(100*round + i), Op: gossip.OpUpdate, Params: r.Params, Steps: 1 + i%2}
			if i%3 == 1 && i%2 == 1 { // a random walk's robust merge
				rules := []merge.Aggregator{merge.Krum{F: 1}, merge.ClippedWindow{Pulls: 1}, merge.Median{}, merge.ClippedWindow{Tau: 0.5, Pulls: 1}}
				req.MixRule = rules[(round+i)%len(rules)]
				for k := range 5 {
					req.MixInputs = append(req.MixInputs, out[(i+k)%len(out)].Params)
				}
				req.MixWeights = []float64{0.75, 0.25, 0, 0, 0}
			} else if i%3 != 2 {
				other := out[(i+1)%len(out)].Params
				req.MixWith, req.MixWeight = other, 0.25*float32(1+i%3)
				if !lazy { // a vector left on the device is NaN on the host until fetched
					shared = append(shared, snapshot{r.Params, slices.Clone(r.Params)}, snapshot{other, slices.Clone(other)})
				}
			} else {
				ws.Fetch(r.Params)                  // read on the host:
				req.Params = slices.Clone(r.Params) // its own copy, as n.train makes
			}
			reqs = append(reqs, req)
		}
		runtime.GC() // older vectors are garbage: their slots come back
	}
	panic("unreachable")
}

// TestRunBatchInto: merging updates written to vectors named beforehand
// (RunBatchInto) give the CPU's bits, on the device with an arena of any
// size (a full one merges on the host, into the named vector too) and
// left there or not; a vector named for an update that does not merge
// is refused.
func TestRunBatchInto(t *testing.T) {
	dev := backendtest.NewDevice()
	want, _, _ := residentRounds(t, dev, false, 0, false)
	for _, slots := range []int{0, 3} {
		for _, lazy := range []bool{false, true} {
			got, _, _ := residentRoundsInto(t, dev, true, slots, lazy, true)
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("arena of %d slots, left on the device %v: model %d differs from the CPU's", slots, lazy, i)
				}
			}
		}
	}
	spec := model.Spec{Kind: model.MLP, Inputs: 12, Hidden: []int{8}, Classes: 4}
	m, err := model.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	workspace := func() *BatchWorkspace { // closed at the test's end
		st, err := model.NewStack(spec, 8, model.WithBackend(dev))
		if err != nil {
			t.Fatal(err)
		}
		ws := NewBatchWorkspace(st)
		t.Cleanup(ws.Close)
		return ws
	}
	// Gradients written to vectors named for them, left on the device or
	// not: the values of gradients computed alone.
	grads := func(into bool, leave bool) []*gossip.TrainResult {
		trainers, reqs := batchFleet(t, spec, m)
		ws := workspace()
		if leave {
			ws.LeaveGradients(true, 2)
		}
		named := make([][]float32, len(reqs))
		for i, req := range reqs {
			req.Op = gossip.OpGradient
			if into {
				named[i] = make([]float32, m.NumParams())
			}
		}
		out, err := RunBatchInto(ws, trainers, reqs, named)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range named {
			if v != nil && &out[i].Grad[0] != &v[0] {
				t.Fatalf("gradient %d not written to the vector named for it", i)
			}
			ws.Fetch(out[i].Grad)
		}
		return out
	}
	want2 := grads(false, false)
	for _, leave := range []bool{false, true} {
		for i, r := range grads(true, leave) {
			if !slices.Equal(r.Grad, want2[i].Grad) || r.SumSquares != want2[i].SumSquares {
				t.Errorf("left on the device %v: gradient %d written where named differs", leave, i)
			}
		}
	}
	trainers, reqs := batchFleet(t, spec, m)
	named := make([][]float32, len(reqs))
	named[0] = make([]float32, m.NumParams())
	if _, err := RunBatchInto(workspace(), trainers, reqs, named); err == nil || !strings.Contains(err.Error(), "only a merging update") {
		t.Fatalf("a vector named for an update that does not merge: %v", err)
	}
}

// sizedDevice is the emulated device claiming a size.
type sizedDevice struct {
	*backendtest.Device
	size int64
}

func (d sizedDevice) TotalMemory() int64 { return d.size }

// TestResidentBound: the arena takes at most a quarter of a device that
// says its size, small or large, and at most residentBytes of one that
// does not; a model
// that finds it full is merged on the host, with the same result.
func TestResidentBound(t *testing.T) {
	const size = 1000
	if got, want := newResident(sizedDevice{backendtest.NewDevice(), 1 << 20}, size).max, (1<<20)/4/(4*size); got != want {
		t.Errorf("on a device of 1 MiB: %d slots, want %d", got, want)
	}
	if got, want := newResident(sizedDevice{backendtest.NewDevice(), 140 << 30}, size).max, int((140<<30)/4/(4*size)); got != want || int64(want)*4*size <= residentBytes {
		t.Errorf("on a device of 140 GiB: %d slots, want %d (more than residentBytes)", got, want)
	}
	if got, want := newResident(backendtest.NewDevice(), size).max, int(residentBytes/(4*size)); got != want {
		t.Errorf("on a device of unknown size: %d slots, want %d", got, want)
	}
	r := newResident(backendtest.NewDevice(), size)
	r.max = 2
	v := [][]float32{make([]float32, size), make([]float32, size), make([]float32, size)}
	for i, x := range v {
		if _, ok := r.slot(x); ok != (i < 2) {
			t.Errorf("vector %d of an arena of 2: slot %v", i, ok)
		}
	}
	if r.uploads != 2 || r.full != 1 {
		t.Errorf("uploads %d, full %d; want 2 and 1", r.uploads, r.full)
	}
	r.close()
	runtime.KeepAlive(v)
}

// TestResidentBlock: vectors cut from one allocation
// (compute.UnzeroedRows, as LeaveGradients' blocks) are keys of their own:
// each finds its own slot, forgetting one frees its slot alone, and the
// others' slots come back once the whole allocation is garbage.
func TestResidentBlock(t *testing.T) {
	r := newResident(backendtest.NewDevice(), 4)
	defer r.close()
	free := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.free)
	}
	rows := compute.UnzeroedRows(3, 4)
	slots := make([]int32, 3)
	for i, v := range rows {
		s, ok := r.alloc()
		if !ok {
			t.Fatal("no room in the arena")
		}
		r.keep(v, s, true)
		slots[i] = s
	}
	for i, v := range rows {
		if s, ok := r.find(v); !ok || s != slots[i] {
			t.Fatalf("vector %d of the block: slot %d, %v; want %d", i, s, ok, slots[i])
		}
	}
	before := free()
	r.forget(rows[1])
	if _, ok := r.find(rows[1]); ok || free() != before+1 {
		t.Fatalf("forgotten vector still found, or %d free slots, want %d", free(), before+1)
	}
	for _, i := range []int{0, 2} {
		if s, ok := r.find(rows[i]); !ok || s != slots[i] {
			t.Fatalf("vector %d lost its slot when vector 1 was forgotten", i)
		}
	}
	runtime.KeepAlive(rows)
	rows = nil
	for deadline := time.Now().Add(10 * time.Second); free() != before+3; {
		if time.Now().After(deadline) {
			t.Fatalf("%d free slots after the block became garbage, want %d", free(), before+3)
		}
		runtime.GC()
		runtime.Gosched()
	}
}

// TestResidentCollects: an arena full of slots whose host vectors are
// garbage asks for a collection, so that their slots come back without
// waiting for the host to allocate enough to collect by itself.
func TestResidentCollects(t *testing.T) {
	const size = 1000
	r := newResident(backendtest.NewDevice(), size)
	defer r.close()
	r.max = 2
	func() {
		for range 2 {
			if _, ok := r.slot(make([]float32, size)); !ok {
				t.Fatal("no room in an arena of 2")
			}
		}
	}() // both vectors garbage from here
	v := make([]float32, size)
	if _, ok := r.slot(v); ok {
		t.Fatal("an arena of 2 took a third vector")
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, ok := r.slot(v); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the arena stayed full of garbage for 30 s (%d tries)", r.full)
		}
	}
	runtime.KeepAlive(v)
}

// TestResidentAddressReuse: the arena knows its vectors by their
// addresses, each entry only while its weak pointer still gives its
// vector. An entry left at an address by a vector that died (its
// cleanup not run yet, stood in for here by another vector's) is not
// found for the new vector there; keeping the new one gives the old
// slot back once, and the old cleanup, run later, frees nothing more.
func TestResidentAddressReuse(t *testing.T) {
	const size = 8
	r := newResident(backendtest.NewDevice(), size)
	defer r.close()
	gone, v := make([]float32, size), make([]float32, size)
	old, ok := r.slot(gone)
	if !ok {
		t.Fatal("no slot")
	}
	r.mu.Lock()
	e := r.byVec[addrOf(gone)]
	delete(r.byVec, addrOf(gone))
	r.byVec[addrOf(v)] = e // as if gone had lived at v's address
	free := len(r.free)
	r.mu.Unlock()
	if s, ok := r.find(v); ok {
		t.Fatalf("v found in slot %d, the entry of another vector", s)
	}
	s, ok := r.alloc()
	if !ok || s == old {
		t.Fatalf("slot %d (%v) for v, the old one %d", s, ok, old)
	}
	r.keep(v, s, false)
	if got, ok := r.find(v); !ok || got != s {
		t.Fatalf("v in slot %d (%v), want %d", got, ok, s)
	}
	r.release(slotKey{addrOf(v), e.key, old}) // the old cleanup, queued before it could be stopped
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.free); n != free {
		t.Fatalf("%d free slots, want %d: the old slot given back once, v's kept", n, free)
	}
	if !slices.Contains(r.free, old) {
		t.Fatalf("the old slot %d not given back: free %v", old, r.free)
	}
	if _, ok := r.entry(v); !ok {
		t.Fatal("v's entry gone after the old cleanup ran")
	}
	runtime.KeepAlive(gone)
}
