package trainer

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/backendtest"
	"github.com/gossipd/gossipd/privacy"
)

// TestTrainerOnDevice: a node's requests (local updates, with and without
// DP-SGD; gradients; sufficient factors) on the emulated device give the
// CPU backend's results bit for bit, and the model's parameters come to
// the host once per request, where they leave it.
func TestTrainerOnDevice(t *testing.T) {
	base, _ := setup(t, 50)
	data := base.data
	spec := model.Spec{Kind: model.MLP, Inputs: 4, Hidden: []int{8}, Classes: 3}
	for _, dp := range []privacy.Config{{}, {Clip: 0.5, Noise: 1}} {
		run := func(be compute.Backend) []*gossip.TrainResult {
			m, err := model.New(spec, model.WithSeed(1), model.WithBackend(be))
			if err != nil {
				t.Fatal(err)
			}
			tr, err := New(NewWorkspace(m), data, rand.New(rand.NewPCG(5, 5)), Config{Batch: 8, LR: 0.1, DP: dp, DPSource: privacy.NewSeededSourceForSimulation(3)})
			if err != nil {
				t.Fatal(err)
			}
			params := m.CopyParams()
			var out []*gossip.TrainResult
			for i, op := range []gossip.TrainOp{gossip.OpUpdate, gossip.OpGradient, gossip.OpUpdate, gossip.OpFactors} {
				req := &gossip.TrainRequest{ID: uint64(i), Op: op, Params: slices.Clone(params), Steps: 3}
				if op == gossip.OpFactors {
					if dp.Enabled() {
						continue
					}
					req.FactorLayers = []string{"fc1.weight"}
				}
				res, err := tr.Run(req)
				if err != nil {
					t.Fatal(err)
				}
				if res.Params != nil {
					params = res.Params
				}
				out = append(out, res)
			}
			return out
		}
		dev := backendtest.NewDevice()
		got, want := run(dev), run(compute.NewCPU())
		for i := range want {
			g, w := got[i], want[i]
			if !slices.Equal(g.Params, w.Params) || !slices.Equal(g.Grad, w.Grad) || g.Loss != w.Loss || g.Examples != w.Examples {
				t.Errorf("DP %+v: request %d on the device differs from the CPU's", dp, i)
			}
			for j := range w.Factors {
				if !slices.Equal(g.Factors[j].U, w.Factors[j].U) || !slices.Equal(g.Factors[j].V, w.Factors[j].V) {
					t.Errorf("DP %+v: request %d: factors %d differ", dp, i, j)
				}
			}
		}
		if len(got) == 0 || dev.Stats().HostOut == 0 {
			t.Errorf("DP %+v: nothing ran on the device", dp)
		}
	}
}

// TestTrainerDataBoundOnce: local updates load the node's data to the
// device once; after that a request sends only its parameters in and
// takes them out, and the minibatches are gathered on the device. An
// update of four steps waits for the device twice: to read its summed
// loss and to take its parameters out, not at each step.
func TestTrainerDataBoundOnce(t *testing.T) {
	base, _ := setup(t, 50)
	dev := backendtest.NewDevice()
	m, err := model.New(model.Spec{Kind: model.MLP, Inputs: 4, Hidden: []int{8}, Classes: 3}, model.WithBackend(dev))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(NewWorkspace(m), base.data, rand.New(rand.NewPCG(5, 5)), Config{Batch: 8, LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	P, X := m.NumParams(), len(base.data.X)
	params := m.CopyParams()
	start := dev.Stats()
	for i := range 3 {
		res, err := tr.Run(&gossip.TrainRequest{ID: uint64(i), Op: gossip.OpUpdate, Params: params, Steps: 4})
		if err != nil {
			t.Fatal(err)
		}
		params = res.Params
		st := dev.Stats()
		if waits := st.Waits - start.Waits; waits != 2*(i+1) {
			t.Fatalf("after %d updates of 4 steps: %d waits for the device, want %d (the loss and the parameters, each time)", i+1, waits, 2*(i+1))
		}
		if in, out, want := st.HostIn-start.HostIn, st.HostOut-start.HostOut, X+(i+1)*P; in != want || out != (i+1)*P {
			t.Fatalf("after %d updates: %d values in, %d out; want %d in (the data once, the parameters each time) and %d out", i+1, in, out, want, (i+1)*P)
		}
	}
	// A gradient request gathers its minibatch on the device too: in go
	// the parameters and the host buffer the gradient is written to,
	// and no data.
	for i := range 3 {
		before := dev.Stats()
		if _, err := tr.Run(&gossip.TrainRequest{ID: uint64(10 + i), Op: gossip.OpGradient, Params: params}); err != nil {
			t.Fatal(err)
		}
		if in := dev.Stats().HostIn - before.HostIn; in != 2*P {
			t.Fatalf("gradient request %d: %d values in, want %d (the parameters and the gradient's host buffer)", i, in, 2*P)
		}
	}
}
