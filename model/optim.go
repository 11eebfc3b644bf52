package model

import (
	"fmt"
	"math"
	"strings"

	"github.com/gossipd/gossipd/model/compute"
)

// Optimizer updates a parameter vector from a gradient. Optimizers keep
// per-parameter state (momentum, moments) in their backend's memory,
// allocated on the first Step; the update runs as one backend kernel
// (compute.Updates), so parameters, gradients and state stay where the
// backend computes.
type Optimizer interface {
	// Step updates params in place from grad (same length) on be, which
	// must be the same backend on every call.
	Step(be compute.Backend, params, grad compute.Tensor)
	// Name names the optimizer and its settings.
	Name() string
}

// OptimizerConfig configures NewOptimizer. Zero values take the defaults
// documented on each field.
type OptimizerConfig struct {
	// Name is sgd (default), adam or pegasos.
	Name string
	// LR is the learning rate (sgd default 0.1, adam default 0.001; pegasos
	// ignores it and uses 1/(λ·t)).
	LR float64
	// Momentum for sgd (default 0).
	Momentum float64
	// WeightDecay adds WeightDecay·w to the gradient (default 0).
	WeightDecay float64
	// Lambda is the Pegasos regularisation; 0 means DefaultLambda.
	Lambda float64
}

// Optimizers lists the optimizer names.
var Optimizers = []string{"sgd", "adam", "pegasos"}

// NewOptimizer builds an optimizer from cfg.
func NewOptimizer(cfg OptimizerConfig) (Optimizer, error) {
	if cfg.LR < 0 || math.IsNaN(cfg.LR) || math.IsInf(cfg.LR, 0) {
		return nil, fmt.Errorf("model: learning rate %v must be a non-negative number", cfg.LR)
	}
	if cfg.Momentum < 0 || cfg.Momentum >= 1 {
		return nil, fmt.Errorf("model: momentum %v not in [0,1)", cfg.Momentum)
	}
	if cfg.WeightDecay < 0 {
		return nil, fmt.Errorf("model: weight decay %v is negative", cfg.WeightDecay)
	}
	switch strings.ToLower(cfg.Name) {
	case "", "sgd":
		lr := cfg.LR
		if lr == 0 {
			lr = 0.1
		}
		return &SGD{LR: float32(lr), Momentum: float32(cfg.Momentum), WeightDecay: float32(cfg.WeightDecay)}, nil
	case "adam":
		lr := cfg.LR
		if lr == 0 {
			lr = 1e-3
		}
		return &Adam{LR: float32(lr), Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: float32(cfg.WeightDecay)}, nil
	case "pegasos":
		lam := cfg.Lambda
		if lam == 0 {
			lam = DefaultLambda
		}
		if !(lam > 0) {
			return nil, fmt.Errorf("model: pegasos lambda %v must be positive", lam)
		}
		return &Pegasos{Lambda: lam}, nil
	}
	return nil, fmt.Errorf("model: optimizer %q, want %s", cfg.Name, strings.Join(Optimizers, "|"))
}

// SGD is stochastic gradient descent with optional momentum and weight decay,
// as torch.optim.SGD: g ← g + wd·w; v ← μ·v + g; w ← w − lr·v.
type SGD struct {
	LR, Momentum, WeightDecay float32
	// Velocity is the momentum buffer (empty until the first step with
	// μ > 0).
	Velocity compute.Tensor
}

// Name implements Optimizer.
func (o *SGD) Name() string {
	return fmt.Sprintf("sgd(lr=%g, momentum=%g, weight_decay=%g)", o.LR, o.Momentum, o.WeightDecay)
}

// Step implements Optimizer.
func (o *SGD) Step(be compute.Backend, params, grad compute.Tensor) {
	grad = grad.Slice(0, params.Len())
	first := false
	if o.Momentum != 0 && o.Velocity.Len() != params.Len() {
		o.Velocity, first = be.Alloc(params.Len()), true // torch: the first step's buffer is the gradient
	}
	be.SGDUpdate(params, grad, o.Velocity, o.LR, o.Momentum, o.WeightDecay, first)
}

// Adam is Kingma & Ba's optimizer with bias correction, as torch.optim.Adam
// (L2 weight decay added to the gradient).
type Adam struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	// M and V are the first and second moment estimates; T counts steps.
	M, V compute.Tensor
	T    int
}

// Name implements Optimizer.
func (o *Adam) Name() string {
	return fmt.Sprintf("adam(lr=%g, betas=(%g,%g), eps=%g, weight_decay=%g)", o.LR, o.Beta1, o.Beta2, o.Eps, o.WeightDecay)
}

// Step implements Optimizer.
func (o *Adam) Step(be compute.Backend, params, grad compute.Tensor) {
	if o.M.Len() != params.Len() {
		o.M, o.V, o.T = be.Alloc(params.Len()), be.Alloc(params.Len()), 0
	}
	o.T++
	b1, b2 := o.Beta1, o.Beta2
	c1 := 1 - float32(math.Pow(float64(b1), float64(o.T)))
	c2 := 1 - float32(math.Pow(float64(b2), float64(o.T)))
	step := o.LR / c1
	sc2 := float32(1 / math.Sqrt(float64(c2)))
	be.AdamUpdate(params, grad.Slice(0, params.Len()), o.M, o.V, step, b1, b2, sc2, o.Eps, o.WeightDecay)
}

// Pegasos is the step rule of Shalev-Shwartz et al. (2011): η_t = 1/(λ·t).
// With the SVM's gradient λ·W + hinge subgradient, w ← w − η_t·∇ is
// w ← (1 − 1/t)·w − η_t·(hinge subgradient).
type Pegasos struct {
	Lambda float64
	// T counts steps.
	T int
}

// Name implements Optimizer.
func (o *Pegasos) Name() string { return fmt.Sprintf("pegasos(lambda=%g)", o.Lambda) }

// Step implements Optimizer.
func (o *Pegasos) Step(be compute.Backend, params, grad compute.Tensor) {
	o.T++
	eta := float32(1 / (o.Lambda * float64(o.T)))
	be.Axpby(params, -eta, grad.Slice(0, params.Len()), 1)
}
