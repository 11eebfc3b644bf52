package trainer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
)

func setup(t *testing.T, n int) (*Trainer, *model.Model) {
	spec := model.Spec{Kind: model.MLP, Inputs: 4, Hidden: []int{8}, Classes: 3}
	m, err := model.New(spec, model.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	X := make([]float32, 100*4)
	Y := make([]int32, 100)
	for i := range Y {
		Y[i] = int32(i % 3)
		for j := 0; j < 4; j++ {
			X[i*4+j] = float32(rng.NormFloat64()) + float32(int(Y[i])*j)
		}
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = 2 * i
	}
	tr, err := New(NewWorkspace(m), &Data{X: X, Y: Y, D: 4, Idx: idx}, rand.New(rand.NewPCG(5, 5)), Config{Batch: 8, LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	return tr, m
}

func TestUpdatePassAndLoss(t *testing.T) {
	tr, m := setup(t, 30)
	start := slices.Clone(m.Params())
	first, err := tr.Run(&gossip.TrainRequest{ID: 1, Op: gossip.OpUpdate, Params: slices.Clone(start)})
	if err != nil {
		t.Fatal(err)
	}
	if first.ID != 1 || first.Examples != 32 { // one pass: ⌈30/8⌉ = 4 batches of 8
		t.Fatalf("one pass: id %d, %d examples", first.ID, first.Examples)
	}
	params := first.Params
	var last *gossip.TrainResult
	for k := 0; k < 30; k++ {
		if last, err = tr.Run(&gossip.TrainRequest{ID: 2, Op: gossip.OpUpdate, Params: params, Steps: 3}); err != nil {
			t.Fatal(err)
		}
		params = last.Params
	}
	if last.Examples != 24 || !(last.Loss < first.Loss) {
		t.Fatalf("3 steps: %d examples; loss %v after training vs %v at first", last.Examples, last.Loss, first.Loss)
	}
}

func TestGradientAndFactors(t *testing.T) {
	tr, m := setup(t, 16)
	p := slices.Clone(m.Params())
	g, err := tr.Run(&gossip.TrainRequest{ID: 3, Op: gossip.OpGradient, Params: slices.Clone(p)})
	if err != nil || len(g.Grad) != m.NumParams() || g.Examples != 8 {
		t.Fatalf("gradient: %v, %d values, %d examples", err, len(g.Grad), g.Examples)
	}
	f, err := tr.Run(&gossip.TrainRequest{ID: 4, Op: gossip.OpFactors, Params: slices.Clone(p), FactorLayers: []string{"fc1.weight"}})
	if err != nil || len(f.Factors) != 1 || f.Factors[0].Weight != "fc1.weight" || f.Factors[0].K != 8 {
		t.Fatalf("factors: %v %+v", err, f.Factors)
	}
	if _, err := tr.Run(&gossip.TrainRequest{Op: gossip.OpUpdate, Params: make([]float32, 3)}); err == nil {
		t.Fatal("wrong-size parameters accepted")
	}
	if _, err := New(NewWorkspace(m), &Data{D: 4}, nil, Config{}); err == nil {
		t.Fatal("empty data accepted")
	}
}

// TestPegasosStepFollowsAge: the SVM's step is 1/(λ·t) with t from the
// model's age, so an old model moves far less than a new one.
func TestPegasosStepFollowsAge(t *testing.T) {
	spec := model.Spec{Kind: model.SVM, Inputs: 2, Classes: 2, Lambda: 0.01}
	m, _ := model.New(spec)
	X := []float32{1, 0, 0, 1, 1, 1, -1, 0}
	Y := []int32{0, 1, 1, 0}
	tr, err := New(NewWorkspace(m), &Data{X: X, Y: Y, D: 2, Idx: []int{0, 1, 2, 3}}, rand.New(rand.NewPCG(1, 1)), Config{Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	grad := make([]float32, m.NumParams())
	m.Gradient(grad, X, Y, 4) // at w = 0 the gradient is the hinge part alone
	for _, age := range []float64{0, 4000} {
		r, err := tr.Run(&gossip.TrainRequest{ID: 1, Op: gossip.OpUpdate, Params: make([]float32, m.NumParams()), Steps: 1, Age: age})
		if err != nil {
			t.Fatal(err)
		}
		eta := 1 / (0.01 * (1 + age/4))
		for i, g := range grad {
			if want := float32(-eta) * g; math.Abs(float64(r.Params[i]-want)) > 1e-3*math.Abs(float64(want))+1e-6 {
				t.Fatalf("age %v: param %d = %v, want %v (η = %v)", age, i, r.Params[i], want, eta)
			}
		}
	}
}

// TestMixedUpdate: an update that asks for a mix merges into the model's
// own parameters (Trainer.start) and ends exactly where resolving the mix
// first ends, loss and measured Σx² included, without writing either
// vector it was given (they may be shared); a mix of the wrong length is
// an error naming the lengths; and so for a robust merge (MixRule).
func TestMixedUpdate(t *testing.T) {
	trA, m := setup(t, 30)
	trB, _ := setup(t, 30)
	x := slices.Clone(m.Params())
	y := slices.Clone(x)
	for i := range y {
		y[i] = 0.5*y[i] + float32(i%7)*0.01
	}
	x0, y0 := slices.Clone(x), slices.Clone(y)
	fused := &gossip.TrainRequest{ID: 1, Op: gossip.OpUpdate, Params: x, MixWith: y, MixWeight: 0.3, Steps: 3}
	resolved := &gossip.TrainRequest{ID: 1, Op: gossip.OpUpdate, Params: x, MixWith: y, MixWeight: 0.3, Steps: 3}
	resolved.Resolve()
	a, err := trA.Run(fused)
	if err != nil {
		t.Fatal(err)
	}
	b, err := trB.Run(resolved)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x, x0) || !slices.Equal(y, y0) {
		t.Fatal("the update wrote a vector it was given")
	}
	if &a.Params[0] == &x[0] || &a.Params[0] == &y[0] {
		t.Fatal("the result shares a vector it was given")
	}
	if !slices.Equal(a.Params, b.Params) || a.Loss != b.Loss || a.Examples != b.Examples || a.SumSquares != b.SumSquares || !a.Measured {
		t.Fatalf("merged into the model: loss %v, Σx² %v; resolved first: loss %v, Σx² %v", a.Loss, a.SumSquares, b.Loss, b.SumSquares)
	}
	if fused.MixWith != nil || &fused.Params[0] != &a.Params[0] {
		t.Fatal("the request does not name its result's vector as Params, with no mix left")
	}
	// The CPU path merges into the model itself: the request's Params is
	// a new zero vector for the result, the model holds the mix.
	direct := &gossip.TrainRequest{ID: 2, Op: gossip.OpUpdate, Params: x, MixWith: y, MixWeight: 0.3}
	if err := trA.start(direct); err != nil {
		t.Fatal(err)
	}
	mixed := &gossip.TrainRequest{Params: x, MixWith: y, MixWeight: 0.3}
	mixed.Resolve()
	if direct.MixWith != nil || &direct.Params[0] == &x[0] || slices.ContainsFunc(direct.Params, func(v float32) bool { return v != 0 }) ||
		!slices.Equal(trA.model.Params(), mixed.Params) {
		t.Fatal("start did not merge into the model's parameters and give the request a new vector")
	}
	for _, bad := range []*gossip.TrainRequest{
		{Op: gossip.OpUpdate, Params: x, MixWith: y[:5], MixWeight: 0.5},
		{Op: gossip.OpUpdate, Params: x[:5], MixWith: y, MixWeight: 0.5},
	} {
		p, q := bad.Params, bad.MixWith
		want := fmt.Sprintf("a mix of %d and %d parameters, model has %d", len(p), len(q), len(x))
		if _, err := trA.Run(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("a mix of the wrong length: %v, want %q", err, want)
		}
		if &bad.Params[0] != &p[0] || &bad.MixWith[0] != &q[0] || bad.MixWeight != 0.5 {
			t.Fatal("a refused request was changed")
		}
	}
	// A robust merge (MixRule) of the same inputs ends where resolving
	// it first ends; one of the wrong lengths is an error naming them,
	// the request unchanged (a daemon resolves it before it trains).
	robust := &gossip.TrainRequest{ID: 3, Op: gossip.OpUpdate, Params: x, MixRule: merge.Median{}, MixInputs: [][]float32{x, y, y}, MixWeights: []float64{1, 1, 1}, Steps: 2}
	first := &gossip.TrainRequest{ID: 3, Op: gossip.OpUpdate, Params: x, MixRule: merge.Median{}, MixInputs: [][]float32{x, y, y}, MixWeights: []float64{1, 1, 1}, Steps: 2}
	if err := first.Resolve(); err != nil || !slices.Equal(first.Params, y) || first.MixRule != nil {
		t.Fatalf("resolving the median of x, y, y: %v, %v", err, first.MixRule)
	}
	ra, err := trA.Run(robust)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := trB.Run(first)
	if err != nil || !slices.Equal(ra.Params, rb.Params) || !slices.Equal(x, x0) || !slices.Equal(y, y0) {
		t.Fatalf("a robust merge run: %v; the same as resolved first: %v; inputs unwritten: %v", err, slices.Equal(ra.Params, rb.Params), slices.Equal(x, x0) && slices.Equal(y, y0))
	}
	bad := &gossip.TrainRequest{Op: gossip.OpUpdate, Params: x, MixRule: merge.Median{}, MixInputs: [][]float32{x, y[:5]}, MixWeights: []float64{1, 1}}
	if _, err := trA.Run(bad); !errors.Is(err, model.ErrShape) || !strings.Contains(err.Error(), "vector of 5 values") {
		t.Fatalf("a robust merge of the wrong lengths: %v", err)
	}
	if bad.MixRule == nil || &bad.Params[0] != &x[0] {
		t.Fatal("a refused robust merge was changed")
	}
}
