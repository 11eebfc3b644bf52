package trainer

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// TestConsensusOnDevice: the consensus distance measured on the device
// (Consensus) of models a batch left there (their host vectors NaN until
// fetched), a vector listed twice and vectors only on the host (more
// than a stack holds, so copied in over several calls) has the bits of
// merge.ConsensusDistanceN of the fetched vectors; the slots it borrowed
// come back. With no room for the vectors it lacks, or on the CPU, it
// measures nothing.
func TestConsensusOnDevice(t *testing.T) {
	dev := backendtest.NewDevice()
	spec := model.Spec{Kind: model.MLP, Inputs: 12, Hidden: []int{8}, Classes: 4}
	m, err := model.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	trainers, reqs := batchFleet(t, spec, m)
	st, err := model.NewStack(spec, 3, model.WithBackend(dev))
	if err != nil {
		t.Fatal(err)
	}
	ws := NewBatchWorkspace(st)
	defer ws.Close()
	if !ws.LeaveOnDevice(true) {
		t.Fatal("no device to leave the models on")
	}
	var vs [][]float32
	for lo := 0; lo < len(reqs); lo += st.Cap() {
		hi := min(len(reqs), lo+st.Cap())
		out, err := RunBatch(ws, trainers[lo:hi], reqs[lo:hi])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out {
			vs = append(vs, r.Params)
		}
	}
	if !math.IsNaN(float64(vs[0][0])) {
		t.Fatal("the batches' models are on the host: nothing left on the device to measure")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 7 {
		v := make([]float32, st.NumParams())
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		vs = append(vs, v)
	}
	vs = append(vs, vs[1])
	r := ws.res
	freeBefore := func() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.free) + r.max - r.slots }
	room := freeBefore()
	got, ok := ws.Consensus(vs)
	if !ok {
		t.Fatal("no consensus measured on the device")
	}
	if n := freeBefore(); n != room {
		t.Fatalf("%d slots free before, %d after: the borrowed slots did not come back", room, n)
	}
	ws.Fetch(vs...)
	want := merge.ConsensusDistanceN(vs, 2)
	if math.Float64bits(got) != math.Float64bits(want) || want == 0 || math.IsNaN(want) {
		t.Fatalf("consensus distance on the device %v, on the host %v", got, want)
	}
	if s, _ := ws.Resident(); s.Consensus != 1 {
		t.Fatalf("counts %+v: want one consensus measured", s)
	}

	// An arena that cannot grow, one slot short for the vectors it
	// lacks: nothing measured, nothing lost.
	r.max = r.slots
	more := vs[:len(vs):len(vs)]
	for range freeBefore() + 1 - 7 {
		more = append(more, make([]float32, st.NumParams()))
	}
	if _, ok := ws.Consensus(more); ok {
		t.Fatal("measured with no room for the vectors the arena lacks")
	}
	if _, ok := ws.Consensus(more[:len(more)-1]); !ok {
		t.Fatal("not measured with room for every vector the arena lacks")
	}
	shared := make([]float32, st.NumParams()) // one slot for all who share it
	if _, ok := ws.Consensus(append(more[:len(more)-2:len(more)-2], shared, shared, shared)); !ok {
		t.Fatal("a vector listed three times took more than one slot")
	}
	if d, ok := ws.Consensus(nil); !ok || d != 0 {
		t.Fatalf("no vectors: %v, %v", d, ok)
	}

	cst, err := model.NewStack(spec, 3)
	if err != nil {
		t.Fatal(err)
	}
	cws := NewBatchWorkspace(cst)
	defer cws.Close()
	if _, ok := cws.Consensus(vs); ok {
		t.Fatal("a workspace on the CPU measured on a device")
	}
}
