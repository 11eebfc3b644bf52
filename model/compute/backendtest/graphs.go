package backendtest

import (
	"context"
	"math"
	"math/rand/v2"

	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
)

// Graphs trains every model kind (a small convolutional network too)
// with model.Train and plain SGD (two
// epochs of 20 minibatches of 4 and a short one) on be with recorded
// steps and without (TrainConfig.NoGraphs), from the same start, and
// wants the same parameters within 1e-4 of the largest and the same
// loss within 1e-4 relative, as TrainSteps wants of a backend against
// the CPU: a replay queues the kernels a step queues, on the step's own
// rows and labels, but a GEMM library may choose another algorithm when
// its calls are captured (on the emulated GPU they agree bit for bit,
// TestStepGraph). On a backend that records steps
// (compute.Graphs) it wants most full steps replayed and none set aside.
func Graphs(t T, be compute.Backend) {
	t.Helper()
	const d, classes, n, batch, epochs = 20, 4, 83, 4, 2
	rng := rand.New(rand.NewPCG(25, 26))
	x, y, specs := trainData(rng, n, d, classes)
	small := model.Spec{Kind: model.Net, Inputs: d, Classes: classes, Shape: []int{1, 4, 5},
		Layers: "conv:2:3:1:1,gelu,groupnorm:2,avgpool:2,flatten,dense:6,tanh,layernorm,dense"}
	for _, spec := range append(specs, small) {
		run := func(noGraphs bool) ([]float32, model.TrainResult, bool) {
			m, err := model.New(spec, model.WithSeed(5), model.WithBackend(be))
			if err != nil {
				t.Errorf("%v: %v", spec, err)
				return nil, model.TrainResult{}, false
			}
			defer m.Close()
			opt, err := model.NewOptimizer(model.OptimizerConfig{Name: "sgd", LR: 0.1})
			if err != nil {
				t.Errorf("%v: %v", spec, err)
				return nil, model.TrainResult{}, false
			}
			res, err := model.Train(context.Background(), m, opt, x, y, n, model.TrainConfig{Epochs: epochs, Batch: batch, Seed: 9, NoGraphs: noGraphs}, nil)
			if err != nil {
				t.Errorf("%v: %v", spec, err)
				return nil, model.TrainResult{}, false
			}
			return m.CopyParams(), res, true
		}
		got, gres, ok1 := run(false)
		want, wres, ok2 := run(true)
		if !ok1 || !ok2 {
			return
		}
		if i := Mismatch(got, want, 1e-4); i >= 0 {
			t.Errorf("%s: %v: trained with recorded steps, parameter %d = %v, without %v", be.Name(), spec, i, got[i], want[i])
		}
		if math.Abs(gres.Loss-wres.Loss) > 1e-4*math.Abs(wres.Loss) {
			t.Errorf("%s: %v: loss %v with recorded steps, %v without", be.Name(), spec, gres.Loss, wres.Loss)
		}
		if _, ok := be.(compute.Graphs); !ok {
			if gres.Graphs != nil {
				t.Errorf("%s: a backend without graphs reports %+v", be.Name(), *gres.Graphs)
			}
			continue
		}
		full := epochs * (n / batch)
		switch g := gres.Graphs; {
		case g == nil:
			t.Errorf("%s: %v: Train reports nothing of the graphs", be.Name(), spec)
		case g.Off != "" || g.Replayed < full/2:
			t.Errorf("%s: %v: %d of %d full steps replayed (%q)", be.Name(), spec, g.Replayed, full, g.Off)
		}
		if g := wres.Graphs; g == nil || g.Replayed != 0 || g.Off == "" {
			t.Errorf("%s: %v: graphs turned off, yet %+v", be.Name(), spec, g)
		}
	}
}
