package model

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gossipd/gossipd/model/compute"
)

var testSpecs = []Spec{
	{Kind: Softmax, Inputs: 7, Classes: 4},
	{Kind: SVM, Inputs: 7, Classes: 3, Lambda: 0.05},
	{Kind: SVM, Inputs: 5, Classes: 2},
	{Kind: MLP, Inputs: 7, Hidden: []int{9}, Classes: 4},
	{Kind: MLP, Inputs: 6, Hidden: []int{8, 5}, Classes: 3},
}

// testBackends are every kernel set this CPU runs.
func testBackends() map[string]compute.Backend {
	out := map[string]compute.Backend{"default": compute.NewCPU()}
	for _, k := range compute.Kernels() {
		out[k] = compute.NewCPU(compute.WithKernel(k), compute.WithThreads(1))
	}
	return out
}

// noGather hides a backend's Gatherer, for SGDStepRows' copying fallback.
type noGather struct{ compute.Backend }

// TestSGDStep: the fused step equals Gradient followed by w −= lr·grad (up
// to rounding), and reading the batch through row indices equals copying
// it out, bit for bit, with or without a gathering backend.
func TestSGDStep(t *testing.T) {
	for name, be := range testBackends() {
		for _, spec := range testSpecs {
			rng := rand.New(rand.NewPCG(7, 8))
			x, y := randBatch(rng, 40, spec.Inputs, spec.Classes)
			rows := []int{3, 17, 3, 39, 0, 22, 11}
			xb := make([]float32, len(rows)*spec.Inputs)
			yb := make([]int32, len(rows))
			for i, r := range rows {
				copy(xb[i*spec.Inputs:], x[r*spec.Inputs:(r+1)*spec.Inputs])
				yb[i] = y[r]
			}
			ref, _ := New(spec, WithSeed(3), WithBackend(be))
			grad := make([]float32, ref.NumParams())
			const lr = 0.3
			wantLoss := ref.Gradient(grad, xb, yb, len(rows))
			want := slices.Clone(ref.Params())
			for i, g := range grad {
				want[i] -= lr * g
			}
			fused, _ := New(spec, WithSeed(3), WithBackend(be))
			loss := fused.SGDStep(xb, yb, len(rows), lr)
			if math.Abs(loss-wantLoss) > 1e-5*math.Max(1, math.Abs(wantLoss)) {
				t.Fatalf("%s %v: SGDStep loss %v, Gradient %v", name, spec, loss, wantLoss)
			}
			for i, w := range want {
				if math.Abs(float64(fused.Params()[i]-w)) > 1e-5 {
					t.Fatalf("%s %v: param %d = %v after SGDStep, %v after Gradient and update", name, spec, i, fused.Params()[i], w)
				}
			}
			for _, gb := range []compute.Backend{be, noGather{be}} {
				g, _ := New(spec, WithSeed(3), WithBackend(gb))
				if l := g.SGDStepRows(x, rows, yb, lr); l != loss {
					t.Fatalf("%s %v: SGDStepRows loss %v, SGDStep %v", name, spec, l, loss)
				}
				if !slices.Equal(g.Params(), fused.Params()) {
					t.Fatalf("%s %v (%T): SGDStepRows and SGDStep on copied rows differ", name, spec, gb)
				}
			}
		}
	}
}

func randBatch(rng *rand.Rand, n, d, classes int) ([]float32, []int32) {
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	y := make([]int32, n)
	for i := range y {
		y[i] = int32(rng.IntN(classes))
	}
	return x, y
}

// meanLoss evaluates the training objective Gradient reports, in float64 of
// the model's float32 arithmetic.
func meanLoss(m *Model, x []float32, y []int32, n int) float64 {
	g := make([]float32, m.NumParams())
	return m.Gradient(g, x, y, n)
}

// kinkDistance returns how close the batch is to a point where the loss is
// not differentiable: a hidden pre-activation at 0 (ReLU) or, for the SVM, a
// margin at 1 (hinge).
func kinkDistance(m *Model, x []float32, y []int32, n int) float64 {
	m.forward(host(x), n)
	d := math.Inf(1)
	L := len(m.layers)
	for l := 0; l < L-1; l++ {
		for _, z := range m.ws.z[l].HostSlice()[:n*m.layers[l].out] {
			d = min(d, math.Abs(float64(z)))
		}
	}
	if m.spec.Kind == SVM {
		C := m.spec.Classes
		for i := 0; i < n; i++ {
			for c := 0; c < C; c++ {
				t := -1.0
				if int(y[i]) == c {
					t = 1
				}
				d = min(d, math.Abs(1-t*float64(m.ws.z[L-1].HostSlice()[i*C+c])))
			}
		}
	}
	return d
}

// TestGradientFiniteDifferences checks every parameter's gradient against a
// central finite difference of the loss, for every model kind and backend,
// at points drawn at least 0.02 away from any ReLU or hinge kink (the
// difference step moves pre-activations by far less).
func TestGradientFiniteDifferences(t *testing.T) {
	for bname, be := range testBackends() {
		for _, spec := range testSpecs {
			t.Run(fmt.Sprintf("%s/%s", bname, spec), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(7, 8))
				m, err := New(spec, WithSeed(3), WithBackend(be))
				if err != nil {
					t.Fatal(err)
				}
				n := 5
				var x []float32
				var y []int32
				for try := 0; ; try++ {
					if try == 1000 {
						t.Fatal("no kink-free point found")
					}
					for i := range m.Params() {
						m.Params()[i] = float32(rng.NormFloat64() * 0.3)
					}
					x, y = randBatch(rng, n, spec.Inputs, spec.Classes)
					if kinkDistance(m, x, y, n) > 0.02 {
						break
					}
				}
				grad := make([]float32, m.NumParams())
				m.Gradient(grad, x, y, n)
				const eps = 1e-3
				for i := range m.Params() {
					orig := m.Params()[i]
					m.Params()[i] = orig + eps
					lp := meanLoss(m, x, y, n)
					m.Params()[i] = orig - eps
					lm := meanLoss(m, x, y, n)
					m.Params()[i] = orig
					fd := (lp - lm) / (2 * eps)
					if d := math.Abs(fd - float64(grad[i])); d > 1e-3+1e-2*math.Abs(fd) {
						t.Errorf("param %d (%s): analytic %.6f, finite difference %.6f", i, tensorOf(m, i), grad[i], fd)
					}
				}
			})
		}
	}
}

func tensorOf(m *Model, i int) string {
	for _, t := range m.layout.Tensors {
		if i >= t.Offset && i < t.Offset+t.Size() {
			return t.Name
		}
	}
	return "?"
}

// perturbedModel returns a model of spec with its initial parameters moved
// randomly (so that the SVM is not at its all-zero start) and a random batch
// of n examples; same seed, same model and batch.
func perturbedModel(spec Spec, seed uint64, n int) (*Model, []float32, []int32) {
	rng := rand.New(rand.NewPCG(seed, 9))
	m, _ := New(spec, WithSeed(seed))
	for i := range m.Params() {
		m.Params()[i] += float32(rng.NormFloat64() * 0.1)
	}
	x, y := randBatch(rng, n, spec.Inputs, spec.Classes)
	return m, x, y
}

// TestPerExampleGradientsAverageToMinibatch: the rows of
// PerExampleGradients average to Gradient, and each row equals the gradient
// of a batch of that one example.
func TestPerExampleGradientsAverageToMinibatch(t *testing.T) {
	for _, spec := range testSpecs {
		t.Run(spec.String(), func(t *testing.T) {
			n := 6
			m, x, y := perturbedModel(spec, 1, n)
			P := m.NumParams()
			per := make([]float32, n*P)
			m.PerExampleGradients(per, x, y, n)
			batch := make([]float32, P)
			m.Gradient(batch, x, y, n)
			single := make([]float32, P)
			for i := 0; i < n; i++ {
				m.Gradient(single, x[i*spec.Inputs:(i+1)*spec.Inputs], y[i:i+1], 1)
				for p := range single {
					if d := math.Abs(float64(single[p] - per[i*P+p])); d > 1e-5 {
						t.Fatalf("example %d param %d: per-example %v, single-example batch %v", i, p, per[i*P+p], single[p])
					}
				}
			}
			for p := 0; p < P; p++ {
				var s float64
				for i := 0; i < n; i++ {
					s += float64(per[i*P+p])
				}
				if d := math.Abs(s/float64(n) - float64(batch[p])); d > 1e-5 {
					t.Fatalf("param %d: mean of per-example %v, minibatch %v", p, s/float64(n), batch[p])
				}
			}
		})
	}
}

// TestSufficientFactorsReconstruct: Uᵀ·V equals each layer's weight gradient
// (less the SVM regulariser, which travels dense).
func TestSufficientFactorsReconstruct(t *testing.T) {
	for _, spec := range testSpecs {
		t.Run(spec.String(), func(t *testing.T) {
			n := 8
			m, x, y := perturbedModel(spec, 4, n)
			grad := make([]float32, m.NumParams())
			lossG := m.Gradient(grad, x, y, n)
			fs, lossF := m.SufficientFactors(x, y, n)
			if lossF != lossG {
				t.Fatalf("loss %v from factors, %v from Gradient", lossF, lossG)
			}
			if len(fs) != len(spec.Hidden)+1 {
				t.Fatalf("%d factor sets for %d layers", len(fs), len(spec.Hidden)+1)
			}
			for _, f := range fs {
				if f.K != n || len(f.U) != f.K*f.J || len(f.V) != f.K*f.D {
					t.Fatalf("%s: bad factor shapes K=%d J=%d D=%d |U|=%d |V|=%d", f.Weight, f.K, f.J, f.D, len(f.U), len(f.V))
				}
				want := m.layout.View(grad, f.Weight)
				got := make([]float32, f.J*f.D)
				f.Reconstruct(m.backend, got)
				w := m.layout.View(m.Params(), f.Weight)
				for i := range got {
					if spec.Kind == SVM {
						got[i] += float32(m.spec.Lambda) * w[i]
					}
					if d := math.Abs(float64(got[i] - want[i])); d > 1e-5 {
						t.Fatalf("%s[%d]: reconstructed %v, gradient %v", f.Weight, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestBackendsAgree: the assembly and pure-Go kernels give the same training
// trajectory up to float rounding.
func TestBackendsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	spec := Spec{Kind: MLP, Inputs: 40, Hidden: []int{33}, Classes: 5}
	x, y := randBatch(rng, 200, spec.Inputs, spec.Classes)
	var ref []float32
	for _, be := range []compute.Backend{compute.NewCPU(compute.WithPureGo(), compute.WithThreads(1)), compute.NewCPU()} {
		m, _ := New(spec, WithSeed(1), WithBackend(be))
		opt, _ := NewOptimizer(OptimizerConfig{Name: "sgd", LR: 0.05})
		if _, err := Train(context.Background(), m, opt, x, y, 200, TrainConfig{Epochs: 2, Batch: 16, Seed: 4}, nil); err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref = m.Params()
			continue
		}
		for i, v := range m.Params() {
			if math.Abs(float64(v-ref[i])) > 1e-3 {
				t.Fatalf("param %d: %v on %s, %v on the pure-Go kernel", i, v, be.Name(), ref[i])
			}
		}
	}
}

// TestTrainDeterministic: same seed, same numbers, bit for bit, whatever the
// thread count.
func TestTrainDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	spec := Spec{Kind: MLP, Inputs: 30, Hidden: []int{64}, Classes: 4}
	x, y := randBatch(rng, 300, spec.Inputs, spec.Classes)
	run := func(threads int, seed uint64) []float32 {
		m, _ := New(spec, WithSeed(seed), WithBackend(compute.NewCPU(compute.WithThreads(threads))))
		opt, _ := NewOptimizer(OptimizerConfig{Name: "adam"})
		if _, err := Train(context.Background(), m, opt, x, y, 300, TrainConfig{Epochs: 2, Batch: 64, Seed: seed}, nil); err != nil {
			t.Fatal(err)
		}
		return m.Params()
	}
	a, b, c := run(1, 9), run(2, 9), run(1, 10)
	same := true
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("param %d: %v with 1 thread, %v with 2", i, a[i], b[i])
		}
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("different seeds gave identical parameters")
	}
}

func TestTrainLearnsSeparableData(t *testing.T) {
	// Four Gaussian blobs; every model must separate them.
	rng := rand.New(rand.NewPCG(11, 12))
	n, d, k := 400, 2, 4
	centers := [][2]float64{{3, 3}, {-3, 3}, {3, -3}, {-3, -3}}
	x := make([]float32, n*d)
	y := make([]int32, n)
	for i := range y {
		c := rng.IntN(k)
		y[i] = int32(c)
		x[2*i] = float32(centers[c][0] + rng.NormFloat64()*0.5)
		x[2*i+1] = float32(centers[c][1] + rng.NormFloat64()*0.5)
	}
	for _, spec := range []Spec{{Kind: Softmax, Inputs: d, Classes: k}, {Kind: SVM, Inputs: d, Classes: k}, {Kind: MLP, Inputs: d, Hidden: []int{16}, Classes: k}} {
		m, _ := New(spec, WithSeed(1))
		name := "sgd"
		if spec.Kind == SVM {
			name = "pegasos"
		}
		opt, _ := NewOptimizer(OptimizerConfig{Name: name, LR: 0.1})
		before := m.Evaluate(x, y, n)
		if _, err := Train(context.Background(), m, opt, x, y, n, TrainConfig{Epochs: 10, Batch: 16, Seed: 1}, nil); err != nil {
			t.Fatal(err)
		}
		after := m.Evaluate(x, y, n)
		if after.Accuracy < 0.97 {
			t.Errorf("%s: accuracy %.3f after training (%.3f before), want ≥ 0.97", spec, after.Accuracy, before.Accuracy)
		}
		total, diag := 0, 0
		for i, row := range after.Confusion {
			for j, v := range row {
				total += v
				if i == j {
					diag += v
				}
			}
		}
		if total != n || float64(diag)/float64(n) != after.Accuracy {
			t.Errorf("%s: confusion sums to %d with %d on the diagonal; accuracy %v", spec, total, diag, after.Accuracy)
		}
	}
}

func TestTrainStopsOnCancel(t *testing.T) {
	m, _ := New(Spec{Kind: Softmax, Inputs: 3, Classes: 2})
	opt, _ := NewOptimizer(OptimizerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	steps := 0
	x, y := randBatch(rand.New(rand.NewPCG(1, 1)), 100, 3, 2)
	_, err := Train(ctx, m, opt, x, y, 100, TrainConfig{Epochs: 5, Batch: 10}, func(Progress) {
		steps++
		if steps == 3 {
			cancel()
		}
	})
	if err != context.Canceled || steps != 3 {
		t.Fatalf("err %v after %d steps, want context.Canceled after 3", err, steps)
	}
}

func TestPredictProbabilities(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	spec := Spec{Kind: MLP, Inputs: 5, Hidden: []int{7}, Classes: 3}
	m, _ := New(spec, WithSeed(1))
	n := 1100 // more than one internal chunk
	x, y := randBatch(rng, n, 5, 3)
	out := make([]float32, n*3)
	m.Predict(out, x, n)
	correct := 0
	for i := 0; i < n; i++ {
		row := out[i*3 : i*3+3]
		s := row[0] + row[1] + row[2]
		if math.Abs(float64(s-1)) > 1e-5 {
			t.Fatalf("row %d probabilities sum to %v", i, s)
		}
		if argmax(row) == int(y[i]) {
			correct++
		}
	}
	if got := m.Evaluate(x, y, n).Accuracy; got != float64(correct)/float64(n) {
		t.Fatalf("Evaluate accuracy %v, Predict gives %v", got, float64(correct)/float64(n))
	}
}

func TestSpecValidate(t *testing.T) {
	for _, s := range []Spec{
		{Kind: "tree", Inputs: 3, Classes: 2},
		{Kind: Softmax, Inputs: 0, Classes: 2},
		{Kind: Softmax, Inputs: 3, Classes: 1},
		{Kind: Softmax, Inputs: 3, Classes: 2, Hidden: []int{4}},
		{Kind: MLP, Inputs: 3, Classes: 2},
		{Kind: MLP, Inputs: 3, Classes: 2, Hidden: []int{0}},
		{Kind: SVM, Inputs: 3, Classes: 2, Lambda: -1},
		{Kind: Softmax, Inputs: 3, Classes: 2, Lambda: 0.1},
	} {
		if err := s.Validate(); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
	s := Spec{Kind: SVM, Inputs: 3, Classes: 2}
	if err := s.Validate(); err != nil || s.Lambda != DefaultLambda {
		t.Errorf("svm default: err %v, lambda %v", err, s.Lambda)
	}
	if _, err := ParseHidden("128,x"); err == nil {
		t.Error("ParseHidden accepted 128,x")
	}
	if h, err := ParseHidden("256, 128"); err != nil || len(h) != 2 || h[1] != 128 {
		t.Errorf("ParseHidden(256, 128) = %v, %v", h, err)
	}
}

func TestLayout(t *testing.T) {
	m, _ := New(Spec{Kind: MLP, Inputs: 784, Hidden: []int{128}, Classes: 10})
	l := m.Layout()
	if l.Size != 784*128+128+128*10+10 || l.String() != "fc1.weight[128 784] fc1.bias[128] fc2.weight[10 128] fc2.bias[10]" {
		t.Fatalf("layout %d: %s", l.Size, l)
	}
	w := l.View(m.Params(), "fc2.bias")
	w[3] = 42
	if m.Params()[784*128+128+1280+3] != 42 {
		t.Fatal("View is not a view of the parameters")
	}
	m2, _ := New(Spec{Kind: MLP, Inputs: 784, Hidden: []int{64}, Classes: 10})
	if l.Equal(m2.Layout()) || !l.Equal(m.Clone().Layout()) {
		t.Fatal("Layout.Equal wrong")
	}
	if err := m.SetParams(make([]float32, 3)); err == nil {
		t.Fatal("SetParams accepted a short vector")
	}
}

func TestOptimizers(t *testing.T) {
	p := []float32{1, -2}
	g := []float32{0.5, 0.25}
	sgd, _ := NewOptimizer(OptimizerConfig{Name: "sgd", LR: 0.1, Momentum: 0.9, WeightDecay: 0.01})
	be := compute.NewCPU()
	sgd.Step(be, compute.Host(p), compute.Host(g)) // v = g + wd·p = (0.51, 0.23); p -= 0.1·v
	sgd.Step(be, compute.Host(p), compute.Host(g)) // v = 0.9·v + g + wd·p
	v0 := []float64{0.51, 0.23}
	p1 := []float64{1 - 0.051, -2 - 0.023}
	want := []float64{p1[0] - 0.1*(0.9*v0[0]+0.5+0.01*p1[0]), p1[1] - 0.1*(0.9*v0[1]+0.25+0.01*p1[1])}
	for i := range p {
		if math.Abs(float64(p[i])-want[i]) > 1e-6 {
			t.Fatalf("sgd momentum: p[%d]=%v want %v", i, p[i], want[i])
		}
	}
	// Adam's first step moves each coordinate by lr against its gradient's sign.
	q := []float32{1, 1}
	adam, _ := NewOptimizer(OptimizerConfig{Name: "adam", LR: 0.01})
	adam.Step(be, compute.Host(q), compute.Host([]float32{3, -0.001}))
	if math.Abs(float64(q[0])-0.99) > 1e-5 || math.Abs(float64(q[1])-1.01) > 1e-4 {
		t.Fatalf("adam first step: %v", q)
	}
	// Pegasos: η_t = 1/(λt); at t=1 with gradient λw the weights go to 0.
	r := []float32{2, -4}
	peg, _ := NewOptimizer(OptimizerConfig{Name: "pegasos", Lambda: 0.5})
	peg.Step(be, compute.Host(r), compute.Host([]float32{1, -2}))
	if r[0] != 0 || r[1] != 0 {
		t.Fatalf("pegasos t=1: %v want 0", r)
	}
	for _, bad := range []OptimizerConfig{{Name: "rmsprop"}, {LR: -1}, {Momentum: 1}, {WeightDecay: -1}, {Name: "pegasos", Lambda: -1}} {
		if _, err := NewOptimizer(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestVote(t *testing.T) {
	m, _ := New(Spec{Kind: Softmax, Inputs: 1, Classes: 3})
	// Three models that each always predict one class (through the bias).
	sets := [][]float32{{0, 0, 0, 5, 0, 0}, {0, 0, 0, 0, 5, 0}, {0, 0, 0, 0, 5, 0}}
	out := make([]int32, 2)
	if err := m.Vote(out, sets, []float32{1, -1}, 2); err != nil || out[0] != 1 || out[1] != 1 {
		t.Fatalf("majority: %v %v", out, err)
	}
	if err := m.Vote(out, sets[:2], []float32{1, -1}, 2); err != nil || out[0] != 0 {
		t.Fatalf("tie goes to the lowest class: %v", out)
	}
	if err := m.Vote(out, [][]float32{{1}}, []float32{1, -1}, 2); err == nil {
		t.Fatal("wrong-size vector accepted")
	}
}

// TestClippedGradientSum: the one-pass clipped sum equals clipping each
// materialised per-example gradient (without the SVM regulariser) and
// summing, for a bound that clips some examples and not others.
func TestClippedGradientSum(t *testing.T) {
	for _, spec := range testSpecs {
		t.Run(spec.String(), func(t *testing.T) {
			n := 8
			m, x, y := perturbedModel(spec, 3, n)
			P := m.NumParams()
			per := make([]float32, n*P)
			m.PerExampleGradients(per, x, y, n)
			reg := make([]float32, P)
			m.AddRegGradient(reg)
			norms := make([]float64, n)
			for i := range norms {
				var ss float64
				for p := 0; p < P; p++ {
					g := float64(per[i*P+p] - reg[p])
					ss += g * g
				}
				norms[i] = math.Sqrt(ss)
			}
			sorted := slices.Clone(norms)
			slices.Sort(sorted)
			clip := (sorted[n/2-1] + sorted[n/2]) / 2 // half the examples get clipped
			want := make([]float64, P)
			wantClipped := 0
			for i, nrm := range norms {
				s := 1.0
				if nrm > clip {
					s, wantClipped = clip/nrm, wantClipped+1
				}
				for p := 0; p < P; p++ {
					want[p] += s * float64(per[i*P+p]-reg[p])
				}
			}
			got := make([]float32, P)
			if c := m.ClippedGradientSum(got, x, y, n, clip); c != wantClipped {
				t.Fatalf("%d examples clipped, want %d", c, wantClipped)
			}
			for p := range got {
				if d := math.Abs(float64(got[p]) - want[p]); d > 1e-4*(1+math.Abs(want[p])) {
					t.Fatalf("param %d: one-pass %v, per-example %v", p, got[p], want[p])
				}
			}
		})
	}
}
