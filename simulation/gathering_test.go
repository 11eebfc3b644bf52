package simulation

import (
	"context"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// TestGatheringPlaces: a request joins the first batch being gathered
// after every batch its inputs are promised in (its Params, its
// MixWith, or a pending mix's inputs); one that would need a batch
// beyond maxOpenBatches sends the first; no more than a batch's worth of
// requests is held.
func TestGatheringPlaces(t *testing.T) {
	defer func(k int) { maxOpenBatches = k }(maxOpenBatches)
	maxOpenBatches = 3
	b := &batcher{size: 4, work: make(chan batchWork, 16), admits: func(float64) bool { return true }, outputs: map[*float32]uint64{}}
	vec := func(batch uint64) []float32 { // a result promised in batch, or computed (0)
		v := make([]float32, 2)
		if batch > 0 {
			b.outputs[&v[0]] = batch
		}
		return v
	}
	sent := func() []uint64 {
		var seqs []uint64
		for {
			select {
			case wk := <-b.work:
				seqs = append(seqs, wk.seq)
				for _, it := range wk.items {
					if it.job.seq != wk.seq || it.job.queued || it.job.done == nil {
						t.Fatalf("batch %d holds a job of batch %d (queued %v)", wk.seq, it.job.seq, it.job.queued)
					}
				}
			default:
				return seqs
			}
		}
	}
	// A gradient without grads (an update with): not promised, placed all
	// the same.
	op := gossip.OpGradient
	add := func(params, mixWith []float32, want uint64) {
		t.Helper()
		j := b.add(nil, &gossip.TrainRequest{Op: op, Params: params, MixWith: mixWith}, "p")
		if j.seq != want {
			t.Fatalf("request placed in batch %d, want %d", j.seq, want)
		}
	}
	add(vec(0), nil, 1)        // computed: the first
	add(vec(1), nil, 2)        // from batch 1's result: the second
	add(vec(0), vec(2), 3)     // merging batch 2's: the third
	if s := sent(); s != nil { // three requests held, three batches open
		t.Fatalf("batches %v sent, want none yet", s)
	}
	add(vec(3), nil, 4) // batch 4 is beyond 3 open: batch 1 goes first
	if s := sent(); len(s) != 1 || s[0] != 1 || b.batches != 1 || len(b.open) != 3 {
		t.Fatalf("sent %v (%d batches, %d open), want batch 1 alone", s, b.batches, len(b.open))
	}
	add(vec(1), nil, 2) // batch 1 is sent: it may join the first open
	add(vec(0), nil, 2)
	if s := sent(); len(s) != 1 || s[0] != 2 || b.gathered != 2 {
		t.Fatalf("sent %v with %d held, want batch 2 (5 requests held, more than a batch's 4)", s, b.gathered)
	}
	j := b.add(nil, &gossip.TrainRequest{Op: gossip.OpGradient, Params: vec(0)}, "p")
	b.flushTo(j.seq)
	if s := sent(); len(s) != 1 || s[0] != 3 || j.queued || len(b.open) != 1 {
		t.Fatalf("flushTo(%d) sent %v, %d left open", j.seq, s, len(b.open))
	}
	b.flush()
	if s := sent(); len(s) != 1 || s[0] != 4 || b.open != nil || b.gathered != 0 || b.updates != 7 {
		t.Fatalf("flush sent %v, %d open, %d held, %d trained", s, len(b.open), b.gathered, b.updates)
	}

	// A request that starts from a pending mix of a result promised in
	// batch 6 joins batch 7 (gradients promised: grads).
	m := newLazyMixer(2, 1, false)
	defer m.close()
	b.mixer, m.dev, b.grads, op = m, b, true, gossip.OpUpdate
	add(vec(0), nil, 5)
	add(vec(5), nil, 6)
	x := m.Vector(2)
	m.Mix(x, [][]float32{vec(0), vec(6)}, []float32{0.5, 0.5}, nil, 0)
	if p := m.find(x); p == nil || p.after != 6 {
		t.Fatalf("the mix of batch 6's result waits for batch %v", p)
	}
	add(x, nil, 7)
	b.flush()
	if s := sent(); len(s) != 3 || s[2] != 7 {
		t.Fatalf("flush sent %v, want batches 5, 6 and 7", s)
	}
}

// TestGatheringSideBySide: peers on the emulated device train to the
// CPU's numbers whether one batch is gathered at a time or sixteen (the
// vectors the device has not written yet poisoned, so that a read too
// early shows), and a random walk's, push-sum's and GoSGD's in far fewer
// batches with sixteen.
func TestGatheringSideBySide(t *testing.T) {
	defer func(k int) { maxOpenBatches, testDevice, testPoison = k, nil, false }(maxOpenBatches)
	for _, protocol := range []string{gossip.RandomWalk, gossip.PushSum, gossip.GoSGD, gossip.ADPSGD, gossip.DPSGD} {
		c := Config{Settings: job.Settings{Protocol: protocol, Model: "mlp"}, Hidden: []int{8}, Peers: 200, Rounds: 4, EvalEvery: 4, Seed: 3, EvalPeers: 4, EvalExamples: 200,
			FinalEvalPeers: 8, PeerBatch: 1000, Device: "cpu"}
		want, _ := csvOf(t, c)
		c.Device = "cuda"
		var batches [2]uint64
		for i, k := range []int{1, 16} {
			maxOpenBatches, testDevice, testPoison = k, backendtest.NewDevice(), true
			res, err := Run(context.Background(), c, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.DeviceTime == nil || res.DeviceTime.Promised == 0 || res.Device.Note != "" {
				t.Fatalf("%s: no result promised (%+v, %q): the batches' order is not what is tested", protocol, res.DeviceTime, res.Device.Note)
			}
			if got := csvString(t, res.Rows); got != want {
				t.Fatalf("%s, %d batches gathered at a time:\n%s\non the CPU:\n%s", protocol, k, got, want)
			}
			batches[i] = res.Batches
		}
		t.Logf("%s: %d batches one at a time, %d sixteen at a time", protocol, batches[0], batches[1])
		if (protocol == gossip.RandomWalk || protocol == gossip.PushSum || protocol == gossip.GoSGD) && 2*batches[1] > batches[0] {
			t.Fatalf("%s: %d batches gathering sixteen at a time, %d one at a time: want under half", protocol, batches[1], batches[0])
		}
	}
}
