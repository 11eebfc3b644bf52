package simulation

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model/compute"
)

// Byzantine attacks (ALGORITHMS.md, after He, Karimireddy, Jaggi 2022):
// a fraction of the peers, chosen by the seed, misbehave. They train like
// the others but (label-flip) on labels 9 − y, or they replace the
// parameters of every message they send:
//
//	bitflip   −x, the negation of what they would have sent;
//	gaussian  pure noise N(0, 1) per coordinate (the k-th such message's
//	          drawn by a PCG of the seed and k: noiseMaker);
//	ipm       −ε·μ, μ the honest peers' mean, ε = 0.1 (inner-product manipulation);
//	alie      μ − z·σ per coordinate ("a little is enough"; z from the numbers of peers and attackers).
//
// ipm and alie are omniscient: the simulator gives them the moments of
// the honest peers' parameters, taken once per period Δ of virtual time,
// at the first attacking message of the period (taking them at every
// message cost all honest peers' models each time: at 1,000 MLP peers a
// run ten times as long as under bitflip). Evaluations cover honest
// peers only.

// Attacks lists the attacks Config.Attack accepts.
var Attacks = []string{"bitflip", "labelflip", "ipm", "alie", "gaussian"}

type adversary struct {
	attack string
	byz    []bool
	honest []int
	rng    *rand.Rand
	z      float64
	// noise makes the gaussian attack's vectors (set by the run).
	noise *noiseMaker
	// The honest moments of all coordinates in the period Δ numbered
	// period: every attacker's messages of the period share them.
	period     int64
	mu, sd     []float64
	haveMoment bool
	// asked counts the messages that asked for the moments, taken the
	// times they were taken.
	asked, taken int
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

// tamper rewrites a message a Byzantine peer sends. Only bitflip reads
// what the peer would have sent: the others' vectors are new, and none
// is fetched from where a mixer keeps it.
func (a *adversary) tamper(s *sim, from int, m *gossip.Message) {
	if !a.byz[from] || a.attack == "labelflip" || len(m.Params) == 0 {
		return
	}
	switch a.attack {
	case "bitflip":
		m.SetParams(s.negated(from, m.Params)) // the message owns its slice; the sender's model stays
	case "gaussian":
		m.SetParams(a.noise.get(len(m.Params)))
	case "ipm", "alie":
		x := make([]float32, len(m.Params))
		mu, sd := a.moments(s, m)
		for i := range x {
			if a.attack == "ipm" {
				x[i] = float32(-0.1 * mu[i])
			} else {
				x[i] = float32(mu[i] - float64(a.z*sd[i])) // unfused everywhere
			}
		}
		if m.Kind == gossip.KindPushSum { // push-sum shares carry x·share: keep the scale
			for i := range x {
				x[i] *= float32(m.Weight)
			}
		}
		m.SetParams(x, nil)
	}
}

// negated returns a new vector −v and its Σ x² later: made by the mixer,
// where peer from's core hands it its mixes, and so do its receivers'
// (−1·v rounds to −v exactly, the sign of a zero too), else here
// (measured by its receivers), v's values fetched from the mixer first.
func (s *sim) negated(from int, v []float32) ([]float32, func() float64) {
	if s.mixer != nil {
		if s.peers[from].Core().HandsMixes() {
			x := s.mixer.Vector(len(v))
			s.mixer.Mix(x, [][]float32{v}, []float32{-1}, nil, 0)
			return x, s.mixer.SumLater(x)
		}
		s.mixer.hostValues(v)
	}
	x := make([]float32, len(v))
	for i, f := range v {
		x[i] = -f
	}
	return x, nil
}

// moments returns the per-coordinate mean and standard deviation of the
// honest peers' parameters at the coordinates m carries (all of them, or
// a subsampled model's indices), as they were at the first attacking
// message of the current period Δ.
func (a *adversary) moments(s *sim, m *gossip.Message) (mu, sd []float64) {
	a.asked++
	if p := int64(s.now / s.cfg.Delta); !a.haveMoment || a.period != p {
		a.mu, a.sd = s.honestMoments(a.honest)
		a.period, a.haveMoment = p, true
		a.taken++
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
// the honest peers' current parameters (compute.Moments): on the device
// where the models live there (MomentsRows), else on every core
// from the models read at once (fetched together where a device keeps
// them), the same numbers either way.
func (s *sim) honestMoments(honest []int) (mu, sd []float64) {
	all := s.models()
	xs := make([][]float32, len(honest))
	for k, h := range honest {
		xs[k] = all[h]
	}
	if s.batch != nil && s.batch.onDevice() {
		// The models live there (mixed there, or trained and left there):
		// take the moments there.
		if out, ok := s.batch.moments(xs); ok {
			n := len(out) / 2
			return out[:n:n], out[n:]
		}
		if s.batch.failure != nil { // the run ends with the device's failure
			nan := make([]float64, len(xs[0]))
			for i := range nan {
				nan[i] = math.NaN()
			}
			return nan, nan
		}
	}
	s.onHost(all, honest)
	mu, sd = make([]float64, len(xs[0])), make([]float64, len(xs[0]))
	compute.Moments(mu, sd, xs, runtime.GOMAXPROCS(0))
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

// noiseMaker makes the gaussian attack's vectors beside the event loop,
// which takes them in order (get): the k-th (k = 0, 1, …) holds n values
// of N(0, 1) drawn by a PCG of the run's seed and k, so that which
// goroutine draws it, and when, changes nothing. Drawing a model's worth
// of normal values for every message an attacker sends took most of the
// event loop's time in runs whose merges run elsewhere (a GPU's).
type noiseMaker struct {
	seed  uint64
	ready chan *noiseAt // in order of k
	stop  chan struct{}
}

// noiseAt is the k-th vector, once done is closed.
type noiseAt struct {
	k    uint64
	x    []float32
	ss   float64 // Σ x² (merge.SumSquares)
	done chan struct{}
}

// newNoiseMaker starts drawing vectors of n values on all cores but one,
// a few of them ahead of the loop.
func newNoiseMaker(n int, seed uint64) *noiseMaker {
	workers := max(1, runtime.GOMAXPROCS(0)-1)
	nm := &noiseMaker{seed: seed, ready: make(chan *noiseAt, 2*workers), stop: make(chan struct{})}
	work := make(chan *noiseAt, workers)
	go func() {
		defer close(work)
		for k := uint64(0); ; k++ {
			v := &noiseAt{k: k, done: make(chan struct{})}
			for _, ch := range []chan *noiseAt{work, nm.ready} {
				select {
				case ch <- v:
				case <-nm.stop:
					return
				}
			}
		}
	}()
	for range workers {
		go func() {
			for v := range work {
				v.x = nm.draw(v.k, n)
				v.ss = merge.SumSquares(v.x)
				close(v.done)
			}
		}()
	}
	return nm
}

// draw returns the first n values of the k-th vector.
func (nm *noiseMaker) draw(k uint64, n int) []float32 {
	rng := rand.New(rand.NewPCG(nm.seed, k))
	x := compute.Unzeroed(n) // every value written
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// get returns the next vector and its Σ x², cut to its first n values
// (a subsampled model's message, its sum then measured by the receiver),
// or drawn here where n is longer than those made.
func (nm *noiseMaker) get(n int) ([]float32, func() float64) {
	v := <-nm.ready
	<-v.done
	switch {
	case n > len(v.x):
		return nm.draw(v.k, n), nil
	case n < len(v.x):
		return v.x[:n:n], nil
	}
	return v.x, func() float64 { return v.ss }
}

// close stops the makers.
func (nm *noiseMaker) close() { close(nm.stop) }
