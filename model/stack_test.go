package model_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// TestStackStepsAgree: models trained side by side in a Stack take the
// steps each would take alone (backendtest.StackSteps, a check a GPU
// backend is to pass too) on every CPU kernel set and thread count, and
// on the emulated device.
func TestStackStepsAgree(t *testing.T) {
	for _, k := range compute.Kernels() {
		backendtest.StackSteps(t, compute.NewCPU(compute.WithKernel(k), compute.WithThreads(1)))
		backendtest.StackSteps(t, compute.NewCPU(compute.WithKernel(k), compute.WithThreads(3)))
	}
	backendtest.StackSteps(t, backendtest.NewDevice())
}

// stackNet is a layered network on stackData's 40 features (2×4×5).
var stackNet = model.Spec{Kind: model.Net, Inputs: 40, Classes: 5, Shape: []int{2, 4, 5}, Layers: "conv:3:3:1:1,relu,maxpool:2,dense:6,tanh,dense"}

// stackData is a small dataset for the stack tests.
func stackData(n, d, classes int) ([]float32, []int32) {
	rng := rand.New(rand.NewPCG(31, 32))
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.Float64())
	}
	y := make([]int32, n)
	for i := range y {
		y[i] = int32(rng.IntN(classes))
	}
	return x, y
}

// seededParams returns the initial parameters of k models of spec,
// model i's from seed i.
func seededParams(t *testing.T, spec model.Spec, k int) [][]float32 {
	t.Helper()
	params := make([][]float32, k)
	for i := range params {
		m, err := model.New(spec, model.WithSeed(uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		params[i] = m.CopyParams()
	}
	return params
}

// TestStackStepIndependent: on the CPU, a model's stacked step is the
// same, bit for bit, alone in slot 0 and in slot 3 of five, whatever the
// other models and their rates (so a simulator's results do not depend on
// which peers happen to train together).
func TestStackStepIndependent(t *testing.T) {
	const d, classes, n, batch = 40, 5, 60, 4
	x, y := stackData(n, d, classes)
	for _, spec := range []model.Spec{{Kind: model.Softmax, Inputs: d, Classes: classes}, {Kind: model.SVM, Inputs: d, Classes: classes, Lambda: 0.01},
		{Kind: model.MLP, Inputs: d, Hidden: []int{8}, Classes: classes}, stackNet} {
		params := seededParams(t, spec, 5)
		for i := range params {
			if spec.Kind == model.SVM {
				for j := range params[i] {
					params[i][j] = float32(j%7) * 0.01 * float32(i+1)
				}
			}
		}
		rows := make([]int, 5*batch)
		labels := make([]int32, 5*batch)
		for i := range rows {
			rows[i] = (7*i + 3) % n
			labels[i] = y[rows[i]]
		}
		lr := []float32{0.1, 0.3, 0.05, 0.2, 0.15}
		run := func(k, slot int) ([]float32, float64) {
			st, err := model.NewStack(spec, 5, model.WithBackend(compute.NewCPU(compute.WithThreads(2))))
			if err != nil {
				t.Fatal(err)
			}
			ps := slices.Clone(params[:k])
			ps[slot] = params[3]
			r, yl, l := slices.Clone(rows[:k*batch]), slices.Clone(labels[:k*batch]), slices.Clone(lr[:k])
			copy(r[slot*batch:], rows[3*batch:4*batch])
			copy(yl[slot*batch:], labels[3*batch:4*batch])
			l[slot] = lr[3]
			if err := st.Load(ps); err != nil {
				t.Fatal(err)
			}
			loss := make([]float64, k)
			for range 3 {
				st.StepRows(compute.Host(x), r, yl, batch, l, loss)
			}
			out := make([][]float32, k)
			for i := range out {
				out[i] = make([]float32, st.NumParams())
			}
			st.Store(out)
			return out[slot], loss[slot]
		}
		alone, aloneLoss := run(1, 0)
		among, amongLoss := run(5, 3)
		if !slices.Equal(alone, among) || aloneLoss != amongLoss {
			t.Errorf("%v: a model's steps alone (loss %v) and among five (loss %v) differ", spec, aloneLoss, amongLoss)
		}
		if slices.Equal(alone, params[3]) {
			t.Errorf("%v: the steps changed nothing", spec)
		}
	}
}

// TestStackOnDevice: a Stack's steps keep everything on the device: after
// the data and the parameters are loaded, three steps move no tensor
// values between host and device; Store copies the parameters out once;
// Close frees every buffer the stack allocated.
func TestStackOnDevice(t *testing.T) {
	const d, classes, n, batch = 40, 5, 60, 4
	x, y := stackData(n, d, classes)
	for _, spec := range []model.Spec{{Kind: model.SVM, Inputs: d, Classes: classes, Lambda: 0.01}, {Kind: model.MLP, Inputs: d, Hidden: []int{8, 6}, Classes: classes}, stackNet} {
		dev := backendtest.NewDevice()
		xt := dev.Load(x)
		base := dev.Stats()
		st, err := model.NewStack(spec, 3, model.WithBackend(dev))
		if err != nil {
			t.Fatal(err)
		}
		params := make([][]float32, 3)
		for i := range params {
			params[i] = make([]float32, st.NumParams())
		}
		if err := st.Load(params); err != nil {
			t.Fatal(err)
		}
		rows, labels := make([]int, 3*batch), make([]int32, 3*batch)
		for i := range rows {
			rows[i] = (5*i + 1) % n
			labels[i] = y[rows[i]]
		}
		loss := make([]float64, 3)
		st.StepRows(xt, rows, labels, batch, []float32{0.1, 0.2, 0.3}, loss) // allocates the workspace
		before := dev.Stats()
		for range 3 {
			st.StepRows(xt, rows, labels, batch, []float32{0.1, 0.2, 0.3}, loss)
		}
		after := dev.Stats()
		if after.HostIn != before.HostIn || after.HostOut != before.HostOut || after.Allocs != before.Allocs {
			t.Errorf("%v: three stacked steps moved %d values in and %d out and allocated %d buffers, want none",
				spec, after.HostIn-before.HostIn, after.HostOut-before.HostOut, after.Allocs-before.Allocs)
		}
		st.Store(params)
		if got := dev.Stats().HostOut - after.HostOut; got != 3*st.NumParams() {
			t.Errorf("%v: Store copied %d values out, want %d", spec, got, 3*st.NumParams())
		}
		st.Close()
		if live := dev.Stats().Live; live != base.Live {
			t.Errorf("%v: %d buffers live after Close, %d before the stack", spec, live, base.Live)
		}
	}
}

// TestStackErrors: Load refuses too many models and vectors of the wrong
// size; NewStack refuses a capacity of 0.
func TestStackErrors(t *testing.T) {
	spec := model.Spec{Kind: model.Softmax, Inputs: 4, Classes: 3}
	if _, err := model.NewStack(spec, 0); err == nil {
		t.Error("NewStack with capacity 0: no error")
	}
	st, err := model.NewStack(spec, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Load(make([][]float32, 3)); err == nil {
		t.Error("Load of 3 models into a stack of 2: no error")
	}
	if err := st.Load([][]float32{make([]float32, 14)}); err == nil {
		t.Error("Load of a 14-value vector (want 15): no error")
	}
}

// TestStackGrows: a stack's memory follows the models its calls use, not
// its capacity (a million MLP slots would be 400 GB), and growing keeps
// the models it holds.
func TestStackGrows(t *testing.T) {
	spec := model.Spec{Kind: model.MLP, Inputs: 784, Hidden: []int{128}, Classes: 10}
	st, err := model.NewStack(spec, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	P := st.NumParams()
	a, b := make([]float32, P), make([]float32, P)
	for i := range a {
		a[i], b[i] = float32(i%13)*0.01, -float32(i%7)*0.01
	}
	if err := st.Load([][]float32{a}); err != nil {
		t.Fatal(err)
	}
	x, y := stackData(20, 784, 10)
	loss := make([]float64, 3)
	// Three models: the stack grows past the one it holds.
	st.StepRows(compute.Host(x), []int{0, 1, 2, 3, 4, 5}, y[:6], 2, []float32{0, 0, 0}, loss)
	out := [][]float32{make([]float32, P), make([]float32, P), make([]float32, P)}
	st.Store(out)
	if !slices.Equal(out[0], a) || slices.ContainsFunc(out[1], func(v float32) bool { return v != 0 }) {
		t.Fatal("growing lost the model held, or a new slot is not zero (steps at rate 0)")
	}
	if err := st.Load([][]float32{b, a}); err != nil {
		t.Fatal(err)
	}
	st.Store(out[:2])
	if !slices.Equal(out[0], b) || !slices.Equal(out[1], a) {
		t.Fatal("Load after growing did not set the models")
	}
}

// TestStackNets: a stack of layered networks gives each model the
// update, gradient, sufficient factors and clipped gradient sum that the
// model computes alone, bit for bit; a network with dropout is refused.
func TestStackNets(t *testing.T) {
	const d, classes, n, batch, k = 40, 5, 60, 4, 3
	x, y := stackData(n, d, classes)
	rows, labels := make([]int, k*batch), make([]int32, k*batch)
	for i := range rows {
		rows[i] = (11*i + 2) % n
		labels[i] = y[rows[i]]
	}
	lr := []float32{0.1, 0.3, 0.2}
	models := make([]*model.Model, k)
	params := make([][]float32, k)
	for i := range models {
		m, err := model.New(stackNet, model.WithSeed(uint64(i)), model.WithBackend(compute.NewCPU(compute.WithThreads(1))))
		if err != nil {
			t.Fatal(err)
		}
		models[i], params[i] = m, m.CopyParams()
	}
	st, err := model.NewStack(stackNet, k)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	P := st.NumParams()
	newGrads := func() [][]float32 {
		g := make([][]float32, k)
		for i := range g {
			g[i] = make([]float32, P)
		}
		return g
	}
	same := func(what string, got, want []float32) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: the stack's differs from the model's alone", what)
		}
	}
	if err := st.Load(params); err != nil {
		t.Fatal(err)
	}
	// Gradients with the dense layers' factors.
	grads, loss := newGrads(), make([]float64, k)
	factors := st.GradRowsFactors(compute.Host(x), rows, labels, batch, grads, loss, []string{"4.weight"})
	for i, m := range models {
		xb, yb := gather(x, d, rows[i*batch:(i+1)*batch]), labels[i*batch:(i+1)*batch]
		g := make([]float32, P)
		f, l := m.GradientWithFactorsOn(compute.Host(g), compute.Host(xb), yb, batch, []string{"4.weight"})
		same("gradient", grads[i], g)
		if l != loss[i] || len(factors[i]) != 1 || len(f) != 1 {
			t.Fatalf("model %d: loss %v (alone %v), %d factors (alone %d)", i, loss[i], l, len(factors[i]), len(f))
		}
		same("factor U", factors[i][0].U, f[0].U)
		same("factor V", factors[i][0].V, f[0].V)
		// The clipped gradient sum of the first 3 rows (a lot of 3).
		g2 := make([]float32, P)
		m.ClippedGradientSumOn(compute.Host(g2), compute.Host(xb[:3*d]), yb[:3], 3, 0.05)
		params[i] = g2
	}
	clipped := newGrads()
	if c := st.ClippedGradRows(compute.Host(x), rows, labels, batch, []int{3, 3, 3}, 0.05, clipped); c == 0 {
		t.Fatal("no example clipped at norm 0.05")
	}
	for i := range models {
		same("clipped gradient sum", clipped[i], params[i])
	}
	// Three steps.
	for range 3 {
		st.StepRows(compute.Host(x), rows, labels, batch, lr, loss)
		for i, m := range models {
			if l := m.SGDStepRows(x, rows[i*batch:(i+1)*batch], labels[i*batch:(i+1)*batch], lr[i]); l != loss[i] {
				t.Fatalf("model %d: loss %v in the stack, %v alone", i, loss[i], l)
			}
		}
	}
	out := newGrads()
	st.Store(out)
	for i, m := range models {
		same("parameters after three steps", out[i], m.CopyParams())
	}
	drop := stackNet
	drop.Layers = "conv:3:3:1:1,relu,dropout:0.2,dense"
	if _, err := model.NewStack(drop, 2); err == nil || !strings.Contains(err.Error(), "dropout") {
		t.Fatalf("a stack of networks with dropout: %v", err)
	}
}

// gather copies rows of x (d columns).
func gather(x []float32, d int, rows []int) []float32 {
	out := make([]float32, 0, len(rows)*d)
	for _, r := range rows {
		out = append(out, x[r*d:(r+1)*d]...)
	}
	return out
}

// TestStackTallyRows: models measured side by side on one set of
// examples (Stack.TallyRows) get the loss and correct predictions that
// Model.TallyWith gives each, bit for bit, on every CPU kernel set and on
// the emulated device, whatever their slots and however many share the
// call; a layered network's too (one model after the other).
func TestStackTallyRows(t *testing.T) {
	const d, classes, n = 40, 5, 37
	x, y := stackData(n, d, classes)
	for _, spec := range []model.Spec{{Kind: model.Softmax, Inputs: d, Classes: classes}, {Kind: model.SVM, Inputs: d, Classes: classes, Lambda: 0.01},
		{Kind: model.MLP, Inputs: d, Hidden: []int{8, 6}, Classes: classes}, stackNet} {
		params := seededParams(t, spec, 5)
		for i := range params {
			for j := range params[i] {
				params[i][j] *= 1 + float32(i)
			}
		}
		// Each backend against a model alone on its kernel set (the
		// emulated device's: the default).
		kernels := map[compute.Backend]string{}
		dev := backendtest.NewDevice()
		backends := []compute.Backend{dev}
		for _, k := range compute.Kernels() {
			be := compute.NewCPU(compute.WithKernel(k), compute.WithThreads(2))
			backends, kernels[be] = append(backends, be), k
		}
		for _, be := range backends {
			opts := []compute.CPUOption{compute.WithThreads(1)}
			if k, ok := kernels[be]; ok {
				opts = append(opts, compute.WithKernel(k))
			}
			alone, err := model.New(spec, model.WithBackend(compute.NewCPU(opts...)))
			if err != nil {
				t.Fatal(err)
			}
			want := make([]model.Tally, len(params))
			for i, p := range params {
				alone.TallyWith(&want[i], p, x, y, n)
				alone.TallyWith(&want[i], p, x[:10*d], y[:10], 10) // a second call adds
			}
			st, err := model.NewStack(spec, 8, model.WithBackend(be))
			if err != nil {
				t.Fatal(err)
			}
			xt := be.Load(x)
			for _, order := range [][]int{{0, 1, 2, 3, 4}, {3}, {4, 2, 0}} {
				vs := make([][]float32, len(order))
				for j, i := range order {
					vs[j] = params[i]
				}
				if err := st.Load(vs); err != nil {
					t.Fatal(err)
				}
				loss, correct := make([]float64, len(vs)), make([]int, len(vs))
				st.TallyRows(xt, y, n, loss, correct)
				st.TallyRows(xt, y[:10], 10, loss, correct)
				for j, i := range order {
					if loss[j] != want[i].Loss || correct[j] != want[i].Correct {
						t.Fatalf("%v on %s, models %v: model %d in slot %d: loss %v, %d correct; alone %v, %d", spec.Kind, be.Name(), order, i, j, loss[j], correct[j], want[i].Loss, want[i].Correct)
					}
				}
			}
			if !xt.OnHost() {
				be.Free(xt)
			}
			st.Close()
		}
	}
}

// TestStackTallyThenTrain: a stack that only measures (TallyRows) keeps
// no gathered inputs or errors on the device, fewer buffers than one
// that trains; trained afterwards, it allocates them and takes the same
// steps as a stack that trained from the start.
func TestStackTallyThenTrain(t *testing.T) {
	const d, classes, n, batch = 12, 4, 30, 5
	x, y := stackData(n, d, classes)
	spec := model.Spec{Kind: model.MLP, Inputs: d, Hidden: []int{6}, Classes: classes}
	params := seededParams(t, spec, 3)
	dev := backendtest.NewDevice()
	xt := dev.Load(x)
	defer dev.Free(xt)
	rows, labels := make([]int, 3*batch), make([]int32, 3*batch)
	for i := range rows {
		rows[i] = (7*i + 2) % n
		labels[i] = y[rows[i]]
	}
	workspace := func(st *model.Stack, f func()) int {
		before := dev.Stats().Live
		f()
		return dev.Stats().Live - before
	}
	var got, want [][]float32
	var tallyWS, afterWS, freshWS int // buffers: measuring, then training; training alone
	for _, tallyFirst := range []bool{true, false} {
		st, err := model.NewStack(spec, 3, model.WithBackend(dev))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Load(params); err != nil {
			t.Fatal(err)
		}
		loss := make([]float64, 3)
		step := func() { st.StepRows(xt, rows, labels, batch, []float32{0.1, 0.2, 0.3}, loss) }
		if tallyFirst {
			tallyWS = workspace(st, func() { st.TallyRows(xt, y, batch, loss, make([]int, 3)) })
			afterWS = tallyWS + workspace(st, step)
		} else {
			freshWS = workspace(st, step)
		}
		out := make([][]float32, 3)
		for i := range out {
			out[i] = make([]float32, st.NumParams())
		}
		st.Store(out)
		st.Close()
		if tallyFirst {
			got = out
		} else {
			want = out
		}
	}
	if tallyWS <= 0 || tallyWS >= freshWS || afterWS != freshWS {
		t.Fatalf("workspace buffers: %d measuring, %d after training too, %d training alone; want fewer, then the same", tallyWS, afterWS, freshWS)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("model %d trained after measuring differs from one trained alone", i)
		}
	}
}
