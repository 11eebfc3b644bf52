package privacy

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
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
	// Shares splits the noise among this many contributors (distributed
	// DP under secure aggregation): each adds noise of std σ·C/√Shares,
	// so that a sum of Shares contributions carries σ·C, and ε is
	// accounted at σ. 0 or 1: local DP, each adds σ·C.
	Shares int
}

// AddedNoise is the noise multiplier this node adds itself: σ, or
// σ/√Shares with distributed DP.
func (c Config) AddedNoise() float64 {
	if c.Shares > 1 {
		return c.Noise / math.Sqrt(float64(c.Shares))
	}
	return c.Noise
}

// DefaultDelta is DP-SGD's δ unless another is given.
const DefaultDelta = 1e-5

// Enabled reports whether DP-SGD is on.
func (c Config) Enabled() bool { return c.Clip != 0 || c.Noise != 0 || c.Epsilon != 0 }

// Validate checks the config and fills defaults.
func (c *Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	if c.Delta == 0 {
		c.Delta = DefaultDelta
	}
	if !(c.Clip > 0) || !(c.Noise > 0) {
		return fmt.Errorf("%w: DP-SGD needs a clipping norm > 0 (got %v) and a noise multiplier > 0 (got %v)", ErrParams, c.Clip, c.Noise)
	}
	if c.Shares < 0 {
		return fmt.Errorf("%w: noise shares %d", ErrParams, c.Shares)
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

// Spending is privacy spent on one set of data, in Rényi form: the RDP of
// every step at each of DefaultOrders, summed. RDP composes by addition
// across mechanisms, so steps taken under different sampling rates, noise
// multipliers or jobs add up exactly; ε follows for any δ.
type Spending struct {
	// RDP is ε_α at each of DefaultOrders (nil: nothing spent).
	RDP []float64 `json:"rdp,omitempty"`
	// Steps counts the DP-SGD steps behind RDP.
	Steps uint64 `json:"steps"`
	// Floor is a lower bound on ε that RDP may not show: an ε recorded
	// before spending was kept in Rényi form (a migrated ledger). Epsilon
	// never reports less.
	Floor float64 `json:"epsilon_floor,omitempty"`
}

// Epsilon is the ε of the spending at δ (at least Floor).
func (s Spending) Epsilon(delta float64) float64 {
	if s.Steps == 0 || len(s.RDP) == 0 {
		return s.Floor
	}
	eps, _, err := Epsilon(s.RDP, DefaultOrders(), delta)
	if err != nil {
		return math.Inf(1)
	}
	return math.Max(eps, s.Floor)
}

// Add returns s with o added (RDP summed, the larger floor).
func (s Spending) Add(o Spending) Spending {
	out := Spending{Steps: s.Steps + o.Steps, Floor: math.Max(s.Floor, o.Floor)}
	if len(s.RDP) > 0 || len(o.RDP) > 0 {
		out.RDP = make([]float64, len(DefaultOrders()))
		for _, r := range [][]float64{s.RDP, o.RDP} {
			for i := range min(len(r), len(out.RDP)) {
				out.RDP[i] += r[i]
			}
		}
	}
	return out
}

// Covers reports whether s has spent at least what o has at every order
// (a ledger may only move up).
func (s Spending) Covers(o Spending) bool {
	if s.Steps < o.Steps || s.Floor < o.Floor {
		return false
	}
	for i, r := range o.RDP {
		if r > 0 && (i >= len(s.RDP) || s.RDP[i] < r*(1-1e-12)) {
			return false
		}
	}
	return true
}

// Check reports whether s is well formed: one finite, non-negative RDP
// value per order (or none), a finite floor.
func (s Spending) Check() error {
	if len(s.RDP) != 0 && len(s.RDP) != len(DefaultOrders()) {
		return fmt.Errorf("%w: %d RDP values, want %d", ErrParams, len(s.RDP), len(DefaultOrders()))
	}
	for _, r := range s.RDP {
		if !(r >= 0) || math.IsInf(r, 0) {
			return fmt.Errorf("%w: RDP value %v", ErrParams, r)
		}
	}
	if !(s.Floor >= 0) || math.IsInf(s.Floor, 0) {
		return fmt.Errorf("%w: epsilon floor %v", ErrParams, s.Floor)
	}
	return nil
}

// StepSpending is what steps DP-SGD steps at sampling rate q with noise
// multiplier sigma spend.
func StepSpending(q, sigma float64, steps int) (Spending, error) {
	rdp, err := RDP(q, sigma, steps, DefaultOrders())
	if err != nil {
		return Spending{}, err
	}
	return Spending{RDP: rdp, Steps: uint64(steps)}, nil
}

// Budget accounts one node's DP-SGD steps on its data: Poisson sampling
// rate q per step, the config's σ and δ, on top of what the same data had
// spent before (other runs, jobs or settings: Prior). Steps compose; ε
// follows from the RDP accountant.
type Budget struct {
	cfg    Config
	q      float64
	orders []float64
	step   []float64 // one step's RDP at each order
	prior  Spending
	steps  int // taken under this budget
}

// NewBudget returns a budget for sampling rate q on data that has already
// spent prior (the zero Spending: nothing).
func NewBudget(cfg Config, q float64, prior Spending) (*Budget, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !(q > 0 && q <= 1) {
		return nil, fmt.Errorf("%w: sampling rate %v", ErrParams, q)
	}
	if err := prior.Check(); err != nil {
		return nil, err
	}
	b := &Budget{cfg: cfg, q: q, orders: DefaultOrders(), prior: prior}
	var err error
	if b.step, err = stepRDP(q, cfg.Noise, b.orders); err != nil {
		return nil, err
	}
	return b, nil
}

// stepRDPs remembers one step's RDP at DefaultOrders by sampling rate and
// noise multiplier: it takes milliseconds (150 orders, most of them
// fractional series), and a simulation's thousands of peers share a few
// rates. At most stepRDPMax are kept; the values are never written.
var stepRDPs struct {
	sync.Mutex
	m map[[2]float64][]float64
}

const stepRDPMax = 1024

// stepRDP is RDP(q, sigma, 1, orders), orders being DefaultOrders.
func stepRDP(q, sigma float64, orders []float64) ([]float64, error) {
	key := [2]float64{q, sigma}
	stepRDPs.Lock()
	r, ok := stepRDPs.m[key]
	stepRDPs.Unlock()
	if ok {
		return r, nil
	}
	r, err := RDP(q, sigma, 1, orders)
	if err != nil {
		return nil, err
	}
	stepRDPs.Lock()
	defer stepRDPs.Unlock()
	if stepRDPs.m == nil {
		stepRDPs.m = map[[2]float64][]float64{}
	}
	if len(stepRDPs.m) < stepRDPMax {
		stepRDPs.m[key] = r
	}
	return r, nil
}

// Steps is the number of steps spent on the data, before this budget and
// under it.
func (b *Budget) Steps() int { return int(b.prior.Steps) + b.steps }

// SamplingRate is q.
func (b *Budget) SamplingRate() float64 { return b.q }

// Prior is what the data had spent before this budget.
func (b *Budget) Prior() Spending { return b.prior }

// Run is the spending of the steps taken under this budget once n more
// are taken (without Prior).
func (b *Budget) Run(n int) Spending {
	k := b.steps + n
	s := Spending{Steps: uint64(k), RDP: make([]float64, len(b.step))}
	for i, r := range b.step {
		s.RDP[i] = float64(k) * r
	}
	return s
}

// After is the data's spending once n more steps are taken under this
// budget: Prior and Run(n).
func (b *Budget) After(n int) Spending { return b.prior.Add(b.Run(n)) }

// EpsilonAfter is ε once n more steps are taken (and the Rényi order
// attaining it; NaN when ε is the floor or nothing is spent).
func (b *Budget) EpsilonAfter(n int) (float64, float64) {
	s := b.After(n)
	if s.Steps == 0 {
		return s.Floor, math.NaN()
	}
	eps, order, err := Epsilon(s.RDP, b.orders, b.cfg.Delta)
	if err != nil {
		return math.Inf(1), math.NaN()
	}
	if s.Floor > eps {
		return s.Floor, math.NaN()
	}
	return eps, order
}

// Spent is ε spent on the data so far.
func (b *Budget) Spent() float64 {
	e, _ := b.EpsilonAfter(0)
	return e
}

// Allows reports whether n more steps stay within the budget.
func (b *Budget) Allows(n int) bool {
	if b.cfg.Epsilon == 0 {
		return true
	}
	e, _ := b.EpsilonAfter(n)
	return e <= b.cfg.Epsilon
}

// Spend records n steps.
func (b *Budget) Spend(n int) { b.steps += n }
