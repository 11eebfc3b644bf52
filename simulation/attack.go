package simulation

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gossipd/gossipd/gossip"
)

// Byzantine attacks (ALGORITHMS.md, after He, Karimireddy, Jaggi 2022):
// a fraction of the peers, chosen by the seed, misbehave. They train like
// the others but (label-flip) on labels 9 − y, or they replace the
// parameters of every message they send:
//
//	bitflip   −x, the negation of what they would have sent;
//	gaussian  pure noise N(0, 1) per coordinate;
//	ipm       −ε·μ, μ the honest peers' mean, ε = 0.1 (inner-product manipulation);
//	alie      μ − z·σ per coordinate ("a little is enough"; z from the numbers of peers and attackers).
//
// ipm and alie are omniscient: the simulator gives them the honest peers'
// current parameters. Evaluations cover honest peers only.

// Attacks lists the attacks Config.Attack accepts.
var Attacks = []string{"bitflip", "labelflip", "ipm", "alie", "gaussian"}

type adversary struct {
	attack string
	byz    []bool
	honest []int
	rng    *rand.Rand
	z      float64
	// The honest moments of all coordinates at momentsAt: every attacker's
	// messages of one instant share them.
	momentsAt  time.Duration
	mu, sd     []float64
	haveMoment bool
}

// newAdversary picks round(fraction·n) Byzantine peers by the seed.
func newAdversary(cfg Config) *adversary {
	n := cfg.Peers
	f := int(math.Round(cfg.Byzantine * float64(n)))
	a := &adversary{attack: cfg.Attack, byz: make([]bool, n), rng: rand.New(rand.NewPCG(cfg.Seed, 0x62797a))}
	for _, i := range a.rng.Perm(n)[:f] {
		a.byz[i] = true
	}
	for i := range a.byz {
		if !a.byz[i] {
			a.honest = append(a.honest, i)
		}
	}
	// ALIE (Baruch et al. 2019): s = ⌊n/2 + 1⌋ − f supporters needed,
	// z = Φ⁻¹((n − s)/n).
	s := n/2 + 1 - f
	if p := float64(n-s) / float64(n); p > 0 && p < 1 {
		a.z = math.Sqrt2 * math.Erfinv(2*p-1)
	}
	return a
}

// count is the number of Byzantine peers.
func (a *adversary) count() int { return len(a.byz) - len(a.honest) }

// tamper rewrites a message a Byzantine peer sends.
func (a *adversary) tamper(s *sim, from int, m *gossip.Message) {
	if !a.byz[from] || a.attack == "labelflip" || len(m.Params) == 0 {
		return
	}
	if s.mixer != nil {
		s.mixer.hostValues(m.Params) // a D-PSGD mix still pending
	}
	x := slices.Clone(m.Params) // the message owns its slice; do not touch the sender's model
	switch a.attack {
	case "bitflip":
		for i := range x {
			x[i] = -x[i]
		}
	case "gaussian":
		for i := range x {
			x[i] = float32(a.rng.NormFloat64())
		}
	case "ipm", "alie":
		mu, sd := a.moments(s, m)
		for i := range x {
			if a.attack == "ipm" {
				x[i] = float32(-0.1 * mu[i])
			} else {
				x[i] = float32(mu[i] - a.z*sd[i])
			}
		}
		if m.Kind == gossip.KindPushSum { // push-sum shares carry x·share: keep the scale
			for i := range x {
				x[i] *= float32(m.Weight)
			}
		}
	}
	m.Params = x
}

// moments returns the per-coordinate mean and standard deviation of the
// honest peers' current parameters at the coordinates m carries (all of
// them, or a subsampled model's indices), computed once per instant.
func (a *adversary) moments(s *sim, m *gossip.Message) (mu, sd []float64) {
	if !a.haveMoment || a.momentsAt != s.now {
		a.mu, a.sd = s.honestMoments(a.honest)
		a.momentsAt, a.haveMoment = s.now, true
	}
	if m.Indices == nil {
		return a.mu, a.sd
	}
	mu, sd = make([]float64, len(m.Indices)), make([]float64, len(m.Indices))
	for i, k := range m.Indices {
		mu[i], sd[i] = a.mu[k], a.sd[k]
	}
	return mu, sd
}

// honestMoments returns the per-coordinate mean and standard deviation of
// the honest peers' current parameters.
func (s *sim) honestMoments(honest []int) (mu, sd []float64) {
	n := len(s.peers[honest[0]].Core().Params())
	mu, sd = make([]float64, n), make([]float64, n)
	for _, h := range honest {
		for i, v := range s.peers[h].Core().Params() {
			mu[i] += float64(v)
		}
	}
	for i := range mu {
		mu[i] /= float64(len(honest))
	}
	for _, h := range honest {
		for i, v := range s.peers[h].Core().Params() {
			d := float64(v) - mu[i]
			sd[i] += d * d
		}
	}
	for i := range sd {
		sd[i] = math.Sqrt(sd[i] / float64(len(honest)))
	}
	return mu, sd
}

// validateAttack checks the Byzantine settings.
func (c *Config) validateAttack() error {
	if c.Byzantine == 0 && c.Attack == "" {
		return nil
	}
	switch {
	case c.Attack == "":
		return fmt.Errorf("%w: byzantine fraction %v without an attack, want one of %v", ErrConfig, c.Byzantine, Attacks)
	case !slices.Contains(Attacks, c.Attack):
		return fmt.Errorf("%w: attack %q, want one of %v", ErrConfig, c.Attack, Attacks)
	case !(c.Byzantine > 0 && c.Byzantine < 0.5):
		return fmt.Errorf("%w: attack %s needs a byzantine fraction in (0, 0.5), got %v", ErrConfig, c.Attack, c.Byzantine)
	}
	if !slices.Contains(gossip.Protocols, c.Protocol) || c.Protocol == gossip.SFB {
		return fmt.Errorf("%w: attacks are simulated for randomwalk, dpsgd, adpsgd and pushsum", ErrConfig)
	}
	return nil
}
