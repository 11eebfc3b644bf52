package model

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/dataset"
)

// digits8 is the embedded digits data (8×8 images), scaled to [0, 1].
func digits8(t *testing.T) (train, test *dataset.Dataset) {
	t.Helper()
	tr, te, err := dataset.Open("digits", dataset.OpenOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := dataset.FitScaler("global", tr)
	sc.Transform(tr)
	sc.Transform(te)
	return tr, te
}

var smallCNN = Spec{Kind: Net, Inputs: 64, Classes: 10, Shape: []int{1, 8, 8},
	Layers: "conv:8:3:1:1,relu,maxpool:2,conv:16:3,groupnorm:4,relu,dense:32,dropout:0.1,relu,dense"}

// TestNetLearnsDigits trains a small CNN on the embedded digits with the
// model's own SGD steps and optimizer loop: it must learn them.
func TestNetLearnsDigits(t *testing.T) {
	tr, te := digits8(t)
	m, err := New(smallCNN, WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Layout().Tensors[0].Name; got != "0.weight" {
		t.Fatalf("first tensor %q, want PyTorch's 0.weight", got)
	}
	before := m.Evaluate(te.X, te.Y, te.N).Accuracy
	opt, _ := NewOptimizer(OptimizerConfig{Name: "sgd", LR: 0.1, Momentum: 0.9})
	if _, err := Train(context.Background(), m, opt, tr.X, tr.Y, tr.N, TrainConfig{Epochs: 6, Batch: 32, Seed: 1}, nil); err != nil {
		t.Fatal(err)
	}
	after := m.Evaluate(te.X, te.Y, te.N)
	if after.Accuracy < 0.8 { // 0.86 to 0.93 with each kernel set's rounding
		t.Fatalf("accuracy %.3f after 6 epochs (%.3f before), want ≥ 0.8", after.Accuracy, before)
	}
	// Plain steps on rows read in place learn too.
	m2, _ := New(smallCNN, WithSeed(2))
	rng := rand.New(rand.NewPCG(3, 4))
	rows := make([]int, 32)
	y := make([]int32, 32)
	for range 300 {
		for i := range rows {
			rows[i] = rng.IntN(tr.N)
			y[i] = tr.Y[rows[i]]
		}
		m2.SGDStepRows(tr.X, rows, y, 0.1)
	}
	if acc := m2.Evaluate(te.X, te.Y, te.N).Accuracy; acc < 0.85 {
		t.Fatalf("SGDStepRows: accuracy %.3f after 300 steps, want ≥ 0.85", acc)
	}
}

// TestNetGradientsAgree checks that the minibatch gradient is the mean
// of the per-example ones, that clipping with a large bound sums them
// and with a small one bounds each, and that the same seed gives the
// same model.
func TestNetGradientsAgree(t *testing.T) {
	tr, _ := digits8(t)
	spec := smallCNN
	spec.Layers = strings.Replace(spec.Layers, "dropout:0.1,", "", 1) // deterministic passes
	m, err := New(spec, WithSeed(7))
	if err != nil {
		t.Fatal(err)
	}
	n, P := 6, m.NumParams()
	g := make([]float32, P)
	m.Gradient(g, tr.X, tr.Y, n)
	per := make([]float32, n*P)
	m.PerExampleGradients(per, tr.X, tr.Y, n)
	sum := make([]float32, P)
	clipped := m.ClippedGradientSum(sum, tr.X, tr.Y, n, 1e9)
	if clipped != 0 {
		t.Fatalf("%d clipped at 1e9", clipped)
	}
	for i := range P {
		mean := 0.0
		for e := range n {
			mean += float64(per[e*P+i])
		}
		if d := math.Abs(mean/float64(n) - float64(g[i])); d > 1e-5 {
			t.Fatalf("param %d: gradient %g, mean of per-example %g", i, g[i], mean/float64(n))
		}
		if d := math.Abs(mean - float64(sum[i])); d > 1e-4 {
			t.Fatalf("param %d: clipped sum %g, per-example sum %g", i, sum[i], mean)
		}
	}
	if k := m.ClippedGradientSum(sum, tr.X, tr.Y, n, 1e-3); k != n {
		t.Fatalf("%d of %d clipped at 1e-3", k, n)
	}
	if norm := math.Sqrt(sumSq(sum)); norm > float64(n)*1e-3*(1+1e-4) {
		t.Fatalf("clipped sum has norm %g > n·C = %g", norm, float64(n)*1e-3)
	}
	a, _ := New(spec, WithSeed(7))
	b := a.Clone()
	a.SGDStep(tr.X, tr.Y, 16, 0.1)
	b.SGDStep(tr.X, tr.Y, 16, 0.1)
	for i, v := range a.Params() {
		if b.Params()[i] != v {
			t.Fatalf("a clone's step differs at %d", i)
		}
	}
	if a.Params()[0] == m.Params()[0] && a.Params()[1] == m.Params()[1] {
		t.Fatal("a step changed nothing")
	}
}

func sumSq(v []float32) float64 {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return s
}

// TestNetSpecErrors: a spec that cannot be built says what is wrong.
func TestNetSpecErrors(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Kind: Net, Inputs: 64, Classes: 10, Layers: "conv:8:3,relu,dense"}, "needs an image"},
		{Spec{Kind: Net, Inputs: 64, Classes: 10, Shape: []int{1, 8, 9}, Layers: "dense"}, "holds 72 values"},
		{Spec{Kind: Net, Inputs: 64, Classes: 10, Shape: []int{1, 8, 8}, Layers: "conv:8:3,bogus,dense"}, "unknown kind"},
		{Spec{Kind: Net, Inputs: 48, Classes: 10, Shape: []int{3, 4, 4}, Layers: "conv:8:3,groupnorm:3,dense"}, "do not divide"},
		{Spec{Kind: Net, Inputs: 64, Classes: 10, Layers: "dense:5"}, "last layer"},
		{Spec{Kind: Softmax, Inputs: 64, Classes: 10, Layers: "dense"}, "layered network"},
	} {
		err := c.spec.Validate()
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrSpec saying %q", c.spec, err, c.want)
		}
	}
	s := Spec{Kind: Net, Inputs: 784, Classes: 10, Shape: []int{1, 28, 28}, Layers: "lenet5"}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Layers, "conv:6:5:1:2,relu,maxpool:2") {
		t.Fatalf("lenet5 validated to %q, want its layers", s.Layers)
	}
	d := s
	d.Layers = "conv:4:3,relu,dropout:0.5,dense"
	if _, err := NewStack(d, 4); err == nil || !strings.Contains(err.Error(), "dropout") {
		t.Fatalf("NewStack of a network with dropout: %v", err)
	}
}

// TestNetFactors: a layered network's dense layers give sufficient
// factors (SFB's hybrid) whose product is the weight's gradient from the
// same pass; a weight that is not a dense layer's is a programming error.
func TestNetFactors(t *testing.T) {
	tr, _ := digits8(t)
	spec := Spec{Kind: Net, Inputs: 64, Classes: 10, Shape: []int{1, 8, 8}, Layers: "conv:4:3:1:1,relu,flatten,dense:16,relu,dense"}
	m, err := New(spec, WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	grad := make([]float32, m.NumParams())
	fs, loss := m.GradientWithFactors(grad, tr.X[:n*64], tr.Y[:n], n, []string{"3.weight", "5.weight"})
	if len(fs) != 2 || !(loss > 0) {
		t.Fatalf("%d factors, loss %v", len(fs), loss)
	}
	for _, f := range fs {
		want := m.Layout().View(grad, f.Weight)
		got := make([]float32, f.J*f.D)
		f.Reconstruct(m.Backend(), got)
		if f.K != n || len(want) != len(got) {
			t.Fatalf("%s: factors %d×(%d+%d), the weight has %d values", f.Weight, f.K, f.J, f.D, len(want))
		}
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("%s[%d]: UᵀV %v, gradient %v", f.Weight, i, got[i], want[i])
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("factors of a convolution's weight: no panic")
		}
	}()
	m.GradientWithFactors(grad, tr.X[:n*64], tr.Y[:n], n, []string{"0.weight"})
}
