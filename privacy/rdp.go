// Package privacy is gossipd's differential privacy: a Rényi-DP accountant
// for the sampled Gaussian mechanism (Mironov 2017; Mironov, Talwar, Zhang
// 2019) with the (ε, δ) conversion of Balle et al. 2020, and the budget a
// node spends by training with DP-SGD (Abadi et al. 2016).
package privacy

import (
	"errors"
	"fmt"
	"math"
)

// ErrParams marks invalid accountant parameters.
var ErrParams = errors.New("privacy: invalid parameters")

// DefaultOrders are the Rényi orders the accountant evaluates:
// {1 + x/10 : x = 1..99} ∪ {12, …, 63}.
func DefaultOrders() []float64 {
	var out []float64
	for x := 1; x <= 99; x++ {
		out = append(out, 1+float64(x)/10)
	}
	for a := 12; a <= 63; a++ {
		out = append(out, float64(a))
	}
	return out
}

// RDP returns the Rényi differential privacy of steps compositions of the
// sampled Gaussian mechanism with sampling rate q and noise multiplier sigma,
// at each order: ε_α = steps·log(A_α)/(α−1).
func RDP(q, sigma float64, steps int, orders []float64) ([]float64, error) {
	if !(q >= 0 && q <= 1) || !(sigma > 0) || steps < 0 {
		return nil, fmt.Errorf("%w: sampling rate %v (want [0,1]), noise multiplier %v (want > 0), steps %d", ErrParams, q, sigma, steps)
	}
	out := make([]float64, len(orders))
	for i, a := range orders {
		if !(a > 1) {
			return nil, fmt.Errorf("%w: order %v (want > 1)", ErrParams, a)
		}
		out[i] = float64(steps) * rdpStep(q, sigma, a)
	}
	return out, nil
}

// rdpStep is one step's RDP at order a.
func rdpStep(q, sigma, a float64) float64 {
	switch {
	case q == 0:
		return 0
	case q == 1:
		return a / (2 * sigma * sigma)
	case math.IsInf(a, 1):
		return math.Inf(1)
	}
	return logA(q, sigma, a) / (a - 1)
}

// logA is log A_α (Mironov, Talwar, Zhang 2019, section 3.3), by the
// binomial sum for integer orders and the two-sided series otherwise.
func logA(q, sigma, a float64) float64 {
	if a == math.Trunc(a) {
		return logAInt(q, sigma, int(a))
	}
	return logAFrac(q, sigma, a)
}

func logAInt(q, sigma float64, a int) float64 {
	la := math.Inf(-1)
	for i := 0; i <= a; i++ {
		coef := logBinom(float64(a), float64(i)) + float64(i)*math.Log(q) + float64(a-i)*math.Log1p(-q)
		la = logAdd(la, coef+float64(i*i-i)/(2*sigma*sigma))
	}
	return la
}

func logAFrac(q, sigma, a float64) float64 {
	la0, la1 := math.Inf(-1), math.Inf(-1)
	z0 := sigma*sigma*math.Log(1/q-1) + 0.5
	for i := 0.0; ; i++ {
		lc, sign := logBinomSigned(a, i)
		j := a - i
		lt0 := lc + i*math.Log(q) + j*math.Log1p(-q)
		lt1 := lc + j*math.Log(q) + i*math.Log1p(-q)
		le0 := math.Log(0.5) + logErfc((i-z0)/(math.Sqrt2*sigma))
		le1 := math.Log(0.5) + logErfc((z0-j)/(math.Sqrt2*sigma))
		ls0 := lt0 + (i*i-i)/(2*sigma*sigma) + le0
		ls1 := lt1 + (j*j-j)/(2*sigma*sigma) + le1
		if sign > 0 {
			la0, la1 = logAdd(la0, ls0), logAdd(la1, ls1)
		} else {
			la0, la1 = logSub(la0, ls0), logSub(la1, ls1)
		}
		if math.Max(ls0, ls1) < -30 || i > 1e6 {
			break
		}
	}
	return logAdd(la0, la1)
}

// logBinom is log C(n, k) for real n ≥ k ≥ 0 with C > 0.
func logBinom(n, k float64) float64 {
	l, _ := logBinomSigned(n, k)
	return l
}

// logBinomSigned is log|C(a, i)| and its sign, for real a and integer i ≥ 0
// (C(a, i) = Γ(a+1)/(Γ(i+1)·Γ(a−i+1)) is negative for some i > a).
func logBinomSigned(a, i float64) (float64, int) {
	l1, s1 := math.Lgamma(a + 1)
	l2, _ := math.Lgamma(i + 1)
	l3, s3 := math.Lgamma(a - i + 1)
	return l1 - l2 - l3, s1 * s3
}

// logAdd is log(e^x + e^y).
func logAdd(x, y float64) float64 {
	a, b := math.Min(x, y), math.Max(x, y)
	if math.IsInf(a, -1) {
		return b
	}
	return math.Log1p(math.Exp(a-b)) + b
}

// logSub is log(e^x − e^y) for x ≥ y (−Inf when they are equal).
func logSub(x, y float64) float64 {
	if math.IsInf(y, -1) {
		return x
	}
	if x <= y {
		return math.Inf(-1)
	}
	return math.Log(-math.Expm1(y-x)) + x
}

// logErfc is log(erfc(x)), accurate where erfc underflows.
func logErfc(x float64) float64 {
	if x < 25 {
		return math.Log(math.Erfc(x))
	}
	// Asymptotic series: erfc(x) ≈ e^{−x²}/(x√π)·(1 − 1/(2x²) + 3/(4x⁴) − 15/(8x⁶)).
	x2 := x * x
	s := 1 - 1/(2*x2) + 3/(4*x2*x2) - 15/(8*x2*x2*x2)
	return -x2 - math.Log(x) - 0.5*math.Log(math.Pi) + math.Log(s)
}

// Epsilon converts RDP values at the given orders to (ε, δ)-DP by Balle et
// al. 2020, Theorem 21: ε = min_α [RDP(α) + log((α−1)/α) − (log δ + log α)/(α−1)].
// It returns ε and the order that attains it.
func Epsilon(rdp, orders []float64, delta float64) (eps, order float64, err error) {
	if len(rdp) != len(orders) || len(orders) == 0 {
		return 0, 0, fmt.Errorf("%w: %d RDP values for %d orders", ErrParams, len(rdp), len(orders))
	}
	if !(delta > 0 && delta < 1) {
		return 0, 0, fmt.Errorf("%w: delta %v (want (0,1))", ErrParams, delta)
	}
	eps, order = math.Inf(1), math.NaN()
	for i, a := range orders {
		if !(a > 1) || rdp[i] < 0 || math.IsNaN(rdp[i]) {
			return 0, 0, fmt.Errorf("%w: order %v with RDP %v", ErrParams, a, rdp[i])
		}
		e := rdp[i] + math.Log((a-1)/a) - (math.Log(delta)+math.Log(a))/(a-1)
		if e < eps {
			eps, order = e, a
		}
	}
	return math.Max(eps, 0), order, nil
}

// SpentEpsilon is ε after steps of DP-SGD with sampling rate q and noise
// multiplier sigma at δ, over DefaultOrders, and the best order.
func SpentEpsilon(q, sigma float64, steps int, delta float64) (eps, order float64, err error) {
	orders := DefaultOrders()
	rdp, err := RDP(q, sigma, steps, orders)
	if err != nil {
		return 0, 0, err
	}
	return Epsilon(rdp, orders, delta)
}

// NoiseFor finds the smallest noise multiplier (to a relative 1e-4) whose ε
// after steps at sampling rate q and δ is at most target.
func NoiseFor(target, q float64, steps int, delta float64) (float64, error) {
	if !(target > 0) {
		return 0, fmt.Errorf("%w: target epsilon %v (want > 0)", ErrParams, target)
	}
	eps := func(sigma float64) (float64, error) {
		e, _, err := SpentEpsilon(q, sigma, steps, delta)
		return e, err
	}
	lo, hi := 0.0, 1.0
	for {
		e, err := eps(hi)
		if err != nil {
			return 0, err
		}
		if e <= target {
			break
		}
		lo, hi = hi, 2*hi
		if hi > 1e6 {
			return 0, fmt.Errorf("%w: no noise multiplier up to 1e6 reaches epsilon %v", ErrParams, target)
		}
	}
	for (hi-lo)/hi > 1e-4 {
		mid := (lo + hi) / 2
		e, err := eps(mid)
		if err != nil {
			return 0, err
		}
		if e <= target {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}
