package privacy

import (
	"math"
	"testing"
)

// The published test vectors of ALGORITHMS.md (from the RDP accountants of
// TensorFlow Privacy and Opacus), to 1e-6 of the digits given.
func TestRDPVectors(t *testing.T) {
	check := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-6 {
			t.Errorf("%s = %.10g, want %.10g", name, got, want)
		}
	}
	r, err := RDP(0.1, 2, 10, []float64{5})
	if err != nil {
		t.Fatal(err)
	}
	check("RDP(q=0.1, σ=2, 10 steps, α=5)", r[0], 0.07737)
	orders := []float64{1.5, 2.5, 5, 50, 100}
	r, err = RDP(0.01, 2.5, 50, orders)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{0.00065, 0.001085, 0.00218075, 0.023846, 167.416307} {
		check("RDP(q=0.01, σ=2.5, 50 steps)", r[i], want)
	}
	r, _ = RDP(1, 10, 1, []float64{20})
	check("RDP(q=1, σ=10, α=20)", r[0], 0.1)

	var ords, rdp []float64
	for a := 2; a <= 32; a++ {
		ords, rdp = append(ords, float64(a)), append(rdp, 1.1)
	}
	eps, order, err := Epsilon(rdp, ords, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	check("ε(RDP ≡ 1.1, δ=1e-5)", eps, 1.32783806)
	if order != 32 {
		t.Errorf("best order %v, want 32", order)
	}
}

// TestIntegerAndFractionalAgree: the fractional-order series, evaluated just
// beside an integer order, matches the binomial sum at it.
func TestIntegerAndFractionalAgree(t *testing.T) {
	for _, c := range []struct{ q, sigma, a float64 }{{0.01, 1.1, 8}, {0.05, 2, 20}, {0.2, 0.9, 3}} {
		exact := logAInt(c.q, c.sigma, int(c.a))
		frac := logAFrac(c.q, c.sigma, c.a+1e-9)
		if math.Abs(exact-frac) > 1e-6*math.Max(1, math.Abs(exact)) {
			t.Errorf("q=%v σ=%v α=%v: integer %v, fractional %v", c.q, c.sigma, c.a, exact, frac)
		}
	}
}

// TestEpsilonMonotone: more steps or less noise never spend less ε.
func TestEpsilonMonotone(t *testing.T) {
	prev := 0.0
	for _, steps := range []int{1, 10, 100, 1000} {
		e, _, err := SpentEpsilon(0.01, 1.1, steps, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		if !(e > prev) {
			t.Fatalf("%d steps: ε %v, not above %v", steps, e, prev)
		}
		prev = e
	}
	lo, _, _ := SpentEpsilon(0.01, 2, 1000, 1e-5)
	hi, _, _ := SpentEpsilon(0.01, 1, 1000, 1e-5)
	if !(hi > lo) {
		t.Fatalf("σ=1: ε %v; σ=2: ε %v", hi, lo)
	}
}

func TestNoiseFor(t *testing.T) {
	for _, target := range []float64{0.5, 1, 3, 8} {
		sigma, err := NoiseFor(target, 0.01, 1000, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		e, _, _ := SpentEpsilon(0.01, sigma, 1000, 1e-5)
		less, _, _ := SpentEpsilon(0.01, sigma*0.999, 1000, 1e-5)
		if e > target || less <= target {
			t.Errorf("target %v: σ %v gives ε %v (σ·0.999 gives %v)", target, sigma, e, less)
		}
	}
}

func TestBadParameters(t *testing.T) {
	if _, err := RDP(1.5, 1, 1, DefaultOrders()); err == nil {
		t.Error("q = 1.5 accepted")
	}
	if _, err := RDP(0.1, 0, 1, DefaultOrders()); err == nil {
		t.Error("σ = 0 accepted")
	}
	if _, err := RDP(0.1, 1, 1, []float64{1}); err == nil {
		t.Error("order 1 accepted")
	}
	if _, _, err := Epsilon([]float64{1}, []float64{2}, 0); err == nil {
		t.Error("δ = 0 accepted")
	}
}

// TestBudget: a budget charges steps, agrees with the accountant, and
// refuses the step that would overspend.
func TestBudget(t *testing.T) {
	cfg := Config{Clip: 1, Noise: 1.1, Epsilon: 1}
	b, err := NewBudget(cfg, 0.01, Spending{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Spent() != 0 || !b.Allows(1) {
		t.Fatalf("fresh budget: spent %v", b.Spent())
	}
	for b.Allows(10) {
		b.Spend(10)
	}
	want, _, _ := SpentEpsilon(0.01, 1.1, b.Steps(), 1e-5)
	if b.Spent() != want || b.Spent() > 1 {
		t.Fatalf("after %d steps: budget says %v, accountant %v", b.Steps(), b.Spent(), want)
	}
	if next, _ := b.EpsilonAfter(10); next <= 1 {
		t.Fatalf("stopped at %d steps though 10 more give ε %v", b.Steps(), next)
	}
	resumed, _ := NewBudget(cfg, 0.01, b.After(0))
	if resumed.Spent() != b.Spent() || resumed.Steps() != b.Steps() {
		t.Fatal("a budget restored with the spending reports another ε")
	}
	if _, err := NewBudget(Config{Clip: 1}, 0.01, Spending{}); err == nil {
		t.Fatal("DP without noise accepted")
	}
}

// TestSpendingComposes: steps taken under different sampling rates and
// noise multipliers compose by adding their RDP, whichever budget took
// them; ε of the sum is more than either part's, and a floor is kept.
func TestSpendingComposes(t *testing.T) {
	a, err := StepSpending(0.01, 1.1, 300)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := StepSpending(0.02, 2, 200)
	sum := a.Add(b)
	if sum.Steps != 500 {
		t.Fatalf("steps %d", sum.Steps)
	}
	ea, eb, es := a.Epsilon(1e-5), b.Epsilon(1e-5), sum.Epsilon(1e-5)
	if !(es > ea && es > eb && es < ea+eb) {
		t.Fatalf("ε: a %v, b %v, a+b %v (want above each, below their sum)", ea, eb, es)
	}
	// A budget with a's spending as its prior, spending b's steps under b's
	// setting, ends where the sum does.
	budget, err := NewBudget(Config{Clip: 1, Noise: 2}, 0.02, a)
	if err != nil {
		t.Fatal(err)
	}
	budget.Spend(200)
	if got := budget.Spent(); math.Abs(got-es) > 1e-12 {
		t.Fatalf("budget over a prior: ε %v, composed %v", got, es)
	}
	if !sum.Covers(a) || a.Covers(sum) {
		t.Fatal("Covers: the sum must cover its part and not the reverse")
	}
	floored := Spending{Floor: 7}.Add(a)
	if floored.Epsilon(1e-5) != 7 {
		t.Fatalf("floor lost: ε %v", floored.Epsilon(1e-5))
	}
	for _, bad := range []Spending{{RDP: []float64{1}}, {RDP: append(make([]float64, len(DefaultOrders())-1), math.NaN())}, {Floor: -1}} {
		if bad.Check() == nil {
			t.Errorf("Check accepted %+v", bad)
		}
	}
}

// TestBudgetsShareStepRDP: budgets of one sampling rate and noise
// multiplier share one step's RDP, computed once (a simulation's
// thousands of peers would otherwise spend milliseconds each), equal to
// RDP's; another rate or multiplier gets its own.
func TestBudgetsShareStepRDP(t *testing.T) {
	cfg := Config{Clip: 1, Noise: 1.3, Delta: 1e-5}
	a, err := NewBudget(cfg, 0.017, Spending{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewBudget(cfg, 0.017, Spending{Steps: 3, RDP: make([]float64, len(DefaultOrders()))})
	c, _ := NewBudget(cfg, 0.018, Spending{})
	cfg.Noise = 1.2
	d, _ := NewBudget(cfg, 0.017, Spending{})
	want, err := RDP(0.017, 1.3, 1, DefaultOrders())
	if err != nil {
		t.Fatal(err)
	}
	if &a.step[0] != &b.step[0] || &a.step[0] == &c.step[0] || &a.step[0] == &d.step[0] {
		t.Fatal("budgets of one rate and multiplier do not share their step's RDP, or others do")
	}
	for i, v := range want {
		if a.step[i] != v {
			t.Fatalf("order %v: shared step RDP %v, RDP %v", DefaultOrders()[i], a.step[i], v)
		}
	}
	a.Spend(5)
	if e1, e2 := a.Spent(), d.Spent(); !(e1 > 0) || e2 != 0 {
		t.Fatalf("after 5 steps ε %v; another budget's %v", e1, e2)
	}
}
