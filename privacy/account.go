package privacy

import (
	"flag"
	"fmt"
)

// Accounting is what Steps steps of DP-SGD at SamplingRate with
// NoiseMultiplier spend: ε at Delta, and the Rényi order that gives it
// (`gossipd privacy epsilon|noise --json`; fields in JSON's key order).
type Accounting struct {
	Delta           float64 `json:"delta"`
	Epsilon         float64 `json:"epsilon"`
	NoiseMultiplier float64 `json:"noise_multiplier"`
	Order           float64 `json:"order"`
	SamplingRate    float64 `json:"sampling_rate"`
	Steps           int     `json:"steps"`
}

// Account is SpentEpsilon's ε and order with the parameters that give
// them.
func Account(q, sigma float64, steps int, delta float64) (Accounting, error) {
	eps, order, err := SpentEpsilon(q, sigma, steps, delta)
	return Accounting{Delta: delta, Epsilon: eps, NoiseMultiplier: sigma, Order: order, SamplingRate: q, Steps: steps}, err
}

// Calibrate finds the smallest noise multiplier whose ε stays within
// target (NoiseFor) and accounts for it.
func Calibrate(target, q float64, steps int, delta float64) (Accounting, error) {
	sigma, err := NoiseFor(target, q, steps, delta)
	if err != nil {
		return Accounting{}, err
	}
	return Account(q, sigma, steps, delta)
}

// AccountantFlags are the settings of `gossipd privacy epsilon` (the
// noise multiplier given) and `gossipd privacy noise` (a target ε given).
type AccountantFlags struct {
	SamplingRate, Delta float64
	Steps               int
	// Noise is the noise multiplier of `epsilon`, Target the budget of
	// `noise`; the other is 0.
	Noise, Target float64
	JSON          bool
	target        bool // the settings of `noise`
}

// Register declares the flags on fs: --target-epsilon where target, else
// --noise-multiplier.
func (a *AccountantFlags) Register(fs *flag.FlagSet, target bool) {
	a.target = target
	fs.Float64Var(&a.SamplingRate, "sampling-rate", 0, "Poisson sampling rate q: lot size / dataset size (required)")
	fs.IntVar(&a.Steps, "steps", 0, "DP-SGD steps (required)")
	fs.Float64Var(&a.Delta, "delta", 1e-5, "δ of the (ε, δ) guarantee")
	fs.BoolVar(&a.JSON, "json", false, "print JSON")
	if target {
		fs.Float64Var(&a.Target, "target-epsilon", 0, "the privacy budget ε (required)")
	} else {
		fs.Float64Var(&a.Noise, "noise-multiplier", 0, "noise multiplier σ: noise std / clipping norm (required)")
	}
}

// Check refuses settings out of range with an error that starts with cmd
// and names the flag: the caller's usage error.
func (a *AccountantFlags) Check(cmd string) error {
	switch {
	case !(a.SamplingRate > 0 && a.SamplingRate <= 1):
		return fmt.Errorf("%s: --sampling-rate %v, want (0, 1]", cmd, a.SamplingRate)
	case a.Steps < 1:
		return fmt.Errorf("%s: --steps %d, want ≥ 1", cmd, a.Steps)
	case !(a.Delta > 0 && a.Delta < 1):
		return fmt.Errorf("%s: --delta %v, want (0, 1)", cmd, a.Delta)
	case a.target && !(a.Target > 0):
		return fmt.Errorf("%s: --target-epsilon %v, want > 0", cmd, a.Target)
	case !a.target && !(a.Noise > 0):
		return fmt.Errorf("%s: --noise-multiplier %v, want > 0", cmd, a.Noise)
	}
	return nil
}

// Account accounts for the settings: for the noise multiplier given, or
// for the smallest one that keeps ε within Target.
func (a *AccountantFlags) Account() (Accounting, error) {
	if a.target {
		return Calibrate(a.Target, a.SamplingRate, a.Steps, a.Delta)
	}
	return Account(a.SamplingRate, a.Noise, a.Steps, a.Delta)
}
