package privacy

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
)

// Config is a node's DP-SGD setting. The zero value turns DP off.
type Config struct {
	// Clip is the per-example L2 clipping norm C.
	Clip float64
	// Noise is the noise multiplier σ: Gaussian noise of standard deviation
	// σ·C is added to each coordinate of the summed clipped gradient.
	Noise float64
	// Delta is the δ of the (ε, δ) guarantee (default 1e-5).
	Delta float64
	// Epsilon is the budget: a node stops training and sharing once the
	// next step would spend more. 0: no limit (ε is still accounted).
	Epsilon float64
}

// Enabled reports whether DP-SGD is on.
func (c Config) Enabled() bool { return c.Clip > 0 || c.Noise > 0 || c.Epsilon > 0 }

// Validate checks the config and fills defaults.
func (c *Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	if c.Delta == 0 {
		c.Delta = 1e-5
	}
	if !(c.Clip > 0) || !(c.Noise > 0) {
		return fmt.Errorf("%w: DP-SGD needs a clipping norm > 0 (got %v) and a noise multiplier > 0 (got %v)", ErrParams, c.Clip, c.Noise)
	}
	if !(c.Delta > 0 && c.Delta < 1) || c.Epsilon < 0 || math.IsInf(c.Epsilon, 0) || math.IsNaN(c.Epsilon) {
		return fmt.Errorf("%w: delta %v (want (0,1)), epsilon budget %v (want ≥ 0)", ErrParams, c.Delta, c.Epsilon)
	}
	return nil
}

// Source draws the randomness of DP-SGD: standard normal noise and the
// Poisson sampling of lots.
type Source interface {
	NormFloat64() float64
	Float64() float64
}

// NewCryptoSource returns a source keyed from crypto/rand: a ChaCha8
// stream (a cryptographically secure generator) whose 32-byte key comes from
// the operating system. The daemon draws its noise from it; nothing about
// its output can be predicted or replayed.
func NewCryptoSource() Source {
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		panic(fmt.Sprintf("privacy: crypto/rand: %v", err)) // the OS has no entropy: nothing is safe
	}
	return rand.New(rand.NewChaCha8(seed))
}

// NewSeededSourceForSimulation returns a reproducible source for the
// simulator. Its noise protects nothing (whoever knows the seed can remove
// it); the daemon never uses it.
func NewSeededSourceForSimulation(seed uint64) Source {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	copy(key[8:], "gossipd simulation noise")
	return rand.New(rand.NewChaCha8(key))
}

// Clip scales g in place to L2 norm at most c and returns its norm before.
func Clip(g []float32, c float64) float64 {
	var ss float64
	for _, v := range g {
		ss += float64(v) * float64(v)
	}
	norm := math.Sqrt(ss)
	if norm > c {
		s := float32(c / norm)
		for i := range g {
			g[i] *= s
		}
	}
	return norm
}

// AddNoise adds N(0, (σ·C)²) to every coordinate of sum and divides it by
// lot (the expected lot size: under Poisson sampling the divisor must not
// depend on the sample).
func AddNoise(sum []float32, clip, sigma, lot float64, src Source) {
	std := sigma * clip
	inv := 1 / lot
	for i, v := range sum {
		sum[i] = float32((float64(v) + std*src.NormFloat64()) * inv)
	}
}

// Budget accounts one node's DP-SGD steps: Poisson sampling rate Q per
// step, the config's σ and δ. Steps compose; ε follows from the RDP
// accountant.
type Budget struct {
	cfg    Config
	q      float64
	orders []float64
	step   []float64 // one step's RDP at each order
	steps  int
}

// NewBudget returns a budget for sampling rate q with steps already spent.
func NewBudget(cfg Config, q float64, spent int) (*Budget, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !(q > 0 && q <= 1) || spent < 0 {
		return nil, fmt.Errorf("%w: sampling rate %v, spent steps %d", ErrParams, q, spent)
	}
	b := &Budget{cfg: cfg, q: q, orders: DefaultOrders(), steps: spent}
	var err error
	if b.step, err = RDP(q, cfg.Noise, 1, b.orders); err != nil {
		return nil, err
	}
	return b, nil
}

// Steps is the number of steps spent.
func (b *Budget) Steps() int { return b.steps }

// SamplingRate is q.
func (b *Budget) SamplingRate() float64 { return b.q }

// EpsilonAfter is ε after steps steps (and the Rényi order attaining it).
func (b *Budget) EpsilonAfter(steps int) (float64, float64) {
	if steps == 0 {
		return 0, math.NaN()
	}
	rdp := make([]float64, len(b.step))
	for i, r := range b.step {
		rdp[i] = float64(steps) * r
	}
	eps, order, err := Epsilon(rdp, b.orders, b.cfg.Delta)
	if err != nil {
		return math.Inf(1), math.NaN()
	}
	return eps, order
}

// Spent is ε spent so far.
func (b *Budget) Spent() float64 {
	e, _ := b.EpsilonAfter(b.steps)
	return e
}

// Allows reports whether n more steps stay within the budget.
func (b *Budget) Allows(n int) bool {
	if b.cfg.Epsilon == 0 {
		return true
	}
	e, _ := b.EpsilonAfter(b.steps + n)
	return e <= b.cfg.Epsilon
}

// Spend records n steps.
func (b *Budget) Spend(n int) { b.steps += n }
