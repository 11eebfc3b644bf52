package simulation

import (
	"fmt"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
)

// evalGroup is how many models the device's evaluation measures in one
// pass over a test set: a Stack of them, with a workspace of evalChunk
// rows each (128 MLPs 784-128-10: 150 MB).
const evalGroup = 128

// onDevice measures models on the simulation's device, evalGroup at a
// time (model.Stack.TallyRows: side by side, a layered network's one
// after the other): the models are copied in,
// and every test set's examples once, so a metrics row needs the
// evaluated models on the host (sim.onHost) but no pass of the host's
// cores over the test set. On the CPU's arithmetic (the emulated
// device) its figures are the host evaluator's, bit for bit; on a GPU
// they agree to rounding (a GEMM's sums in another order, the
// softmax's in float64), and are the same from run to run.
type onDevice struct {
	be   compute.Backend
	st   *model.Stack
	data map[*dataset.Dataset]compute.Tensor
	// failed: the device failed; its memory is not freed (a failed
	// device's frees fail too, and would hide the failure).
	failed bool
}

// newOnDevice returns the device's evaluator for spec on be.
func newOnDevice(spec model.Spec, be compute.Backend) (*onDevice, error) {
	st, err := model.NewStack(spec, evalGroup, model.WithBackend(be))
	if err != nil {
		return nil, err
	}
	return &onDevice{be: be, st: st, data: map[*dataset.Dataset]compute.Tensor{}}, nil
}

// tally measures xs[i] for i in peers on ds as evaluator.tally does
// (chunks of evalChunk examples, each model's added in order), or fails
// with the device's error.
func (o *onDevice) tally(xs [][]float32, peers []int, ds *dataset.Dataset) (out []model.Tally, err error) {
	defer func() { o.failed = o.failed || err != nil }()
	defer deviceFailure(o.be, fmt.Sprintf("evaluating %d models", len(peers)), &err)
	x, ok := o.data[ds]
	if !ok {
		x = o.be.Load(ds.X[:ds.N*ds.D])
		o.data[ds] = x
	}
	out = make([]model.Tally, len(peers))
	loss, correct := make([]float64, evalGroup), make([]int, evalGroup)
	vs := make([][]float32, 0, evalGroup)
	for lo := 0; lo < len(peers); lo += evalGroup {
		hi := min(len(peers), lo+evalGroup)
		vs = vs[:0]
		for _, i := range peers[lo:hi] {
			vs = append(vs, xs[min(i, len(xs)-1)])
		}
		if err := o.st.Load(vs); err != nil {
			panic(err) // every vector is a model of the stack's spec
		}
		k := len(vs)
		clear(loss)
		clear(correct)
		for c := 0; c < ds.N; c += evalChunk {
			n := min(evalChunk, ds.N-c)
			o.st.TallyRows(x.Slice(c*ds.D, (c+n)*ds.D), ds.Y[c:c+n], n, loss[:k], correct[:k])
		}
		for j := range k {
			out[lo+j] = model.Tally{N: ds.N, Correct: correct[j], Loss: loss[j]}
		}
	}
	return out, nil
}

// close frees the stack and the test sets on the device.
func (o *onDevice) close() {
	if o.failed {
		return
	}
	o.st.Close()
	for _, x := range o.data {
		if !x.OnHost() {
			o.be.Free(x)
		}
	}
	o.data = nil
}
