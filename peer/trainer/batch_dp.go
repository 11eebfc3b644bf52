package trainer

import (
	"fmt"
	"runtime"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/privacy"
)

// dp carries out a group of DP-SGD requests (one op, clip, data matrix
// and batch size, longest first) in the stack, as each trainer's Run
// would: at every step each request draws its lot from its own source
// (drawLot), the lots' clipped gradient sums come from one call for each
// chunk of Batch rows (model.Stack.ClippedGradRows, a short lot's share
// padded with rows that count for nothing), and each request adds its
// noise from its source, after its lot and before its next, as Run does.
// Updates then step along the noisy gradients (Stack.StepGrads) and end
// in their requests' Params; gradients become their results' Grad.
func (w *BatchWorkspace) dp(jobs []*batchJob, out []*gossip.TrainResult) error {
	st := w.stack
	w.params = w.params[:0]
	for _, j := range jobs {
		w.params = append(w.params, j.req.Params)
	}
	load := w.load // gradients read their starting points where they are
	if jobs[0].req.Op == gossip.OpUpdate {
		load = st.Load // an update writes its own vector: never kept on the device
	}
	if err := load(w.params); err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	x := w.bound.on(st.Backend(), jobs[0].t.data.X)
	bs, P, clip := jobs[0].bs, st.NumParams(), jobs[0].clip
	update := jobs[0].req.Op == gossip.OpUpdate
	for len(w.chunk) < len(jobs) {
		w.chunk = append(w.chunk, make([]float32, P))
		w.noisy = append(w.noisy, make([]float32, P))
	}
	grads := w.noisy[:len(jobs)]
	if !update { // a gradient's result keeps its vector
		grads = make([][]float32, len(jobs))
		for i := range grads {
			grads[i] = make([]float32, P)
		}
	}
	for s := 0; s < jobs[0].steps; s++ {
		k := 0
		for k < len(jobs) && jobs[k].steps > s {
			k++
		}
		eachJob(k, func(i int) {
			j := jobs[i]
			j.lot, j.lotY = j.t.drawLot(j.lot[:0], j.lotY[:0])
			clear(grads[i])
		})
		most := 0
		for _, j := range jobs[:k] {
			most = max(most, len(j.lot))
			j.examples += len(j.lot)
		}
		for lo := 0; lo < most; lo += bs {
			w.rows, w.labels, w.counts = w.rows[:0], w.labels[:0], w.counts[:0]
			for _, j := range jobs[:k] {
				c := min(max(len(j.lot)-lo, 0), bs)
				w.rows, w.labels = append(w.rows, j.lot[lo:lo+c]...), append(w.labels, j.lotY[lo:lo+c]...)
				pad := j.t.data.Idx[0]
				for range bs - c {
					w.rows, w.labels = append(w.rows, pad), append(w.labels, j.t.data.Y[pad])
				}
				w.counts = append(w.counts, c)
			}
			st.ClippedGradRows(x, w.rows, w.labels, bs, w.counts, clip, w.chunk[:k])
			eachJob(k, func(i int) {
				for p, v := range w.chunk[i][:P] {
					grads[i][p] += v
				}
			})
		}
		eachJob(k, func(i int) {
			j := jobs[i]
			privacy.AddNoise(grads[i], clip, j.t.cfg.DP.AddedNoise(), float64(bs), j.t.cfg.DPSource)
		})
		if update {
			w.lr = w.lr[:0]
			for _, j := range jobs[:k] {
				w.lr = append(w.lr, j.lr[s])
			}
			st.StepGrads(grads[:k], w.lr)
		}
	}
	if update {
		st.Store(w.params)
		for _, j := range jobs {
			out[j.i] = &gossip.TrainResult{ID: j.req.ID, Params: j.req.Params, Examples: j.examples}
		}
		eachJob(len(jobs), func(i int) { measure(out[jobs[i].i], jobs[i].req.Params) })
		return nil
	}
	st.AddRegGrads(grads)
	for i, j := range jobs {
		out[j.i] = &gossip.TrainResult{ID: j.req.ID, Grad: grads[i], Examples: j.examples}
	}
	eachJob(len(jobs), func(i int) { measure(out[jobs[i].i], grads[i]) })
	return nil
}

// eachJob runs f(0) to f(k−1), split among the processors: the host's
// part of a DP-SGD step (drawing the lots, adding the noise: a normal
// draw per parameter per request) would otherwise leave a device
// waiting. Each f(i) touches request i alone, with its own source, so
// the result does not depend on the split.
func eachJob(k int, f func(i int)) {
	compute.ForEach(k, min(runtime.GOMAXPROCS(0), k/16), f)
}
