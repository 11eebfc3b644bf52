package simulation

import (
	"math"
	"runtime"
	"sync"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model/compute"
)

// lazyMixer is the simulator's gossip.Mixer: it records each D-PSGD mix
// and carries it out when something first needs the result, on whatever
// goroutine that is. A peer's gradient request on its new model resolves
// it on the training pool, beside the event loop and the other peers'
// mixes; a neighbour checking the model it received finds it resolved,
// or resolves it. The event loop no longer waits for each mix, which
// took most of its time in a D-PSGD run. Every mix is the same
// arithmetic wherever it runs (gossip.MixNow), so the numbers are those
// of the core mixing at once.
type lazyMixer struct {
	mu      sync.Mutex
	pending map[*float32]*lazyMix
	made    uint64 // mixes recorded (guarded by mu)
}

// lazyMix is one recorded mix, dst = Σ w[k]·xs[k] + a·g.
type lazyMix struct {
	once sync.Once
	dst  []float32
	xs   [][]float32
	w    []float32
	g    []float32
	a    float32
	ss   float64 // Σ dst², once resolved
}

func newLazyMixer() *lazyMixer { return &lazyMixer{pending: map[*float32]*lazyMix{}} }

var _ gossip.Mixer = (*lazyMixer)(nil)

// Mix implements gossip.Mixer.
func (m *lazyMixer) Mix(dst []float32, xs [][]float32, w []float32, g []float32, a float32) {
	p := &lazyMix{dst: dst, xs: xs, w: w, g: g, a: a}
	if testPoison {
		poison(dst) // a read before it is resolved shows
	}
	m.mu.Lock()
	m.pending[&dst[0]] = p
	m.made++
	m.mu.Unlock()
}

// find returns v's recorded mix, if v is pending.
func (m *lazyMixer) find(v []float32) *lazyMix {
	if len(v) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pending[&v[0]]
}

// resolve carries out p, and first the mixes of its inputs still
// pending (each is older than p: no cycle), once.
func (m *lazyMixer) resolve(p *lazyMix) {
	p.once.Do(func() {
		for _, x := range p.xs {
			if q := m.find(x); q != nil {
				m.resolve(q)
			}
		}
		gossip.MixNow(p.dst, p.xs, p.w, p.g, p.a)
		p.ss = merge.SumSquares(p.dst)
		m.mu.Lock()
		delete(m.pending, &p.dst[0])
		m.mu.Unlock()
		p.xs, p.w, p.g = nil, nil, nil
	})
}

// Resolve implements gossip.Mixer.
func (m *lazyMixer) Resolve(v []float32) float64 {
	if p := m.find(v); p != nil {
		m.resolve(p)
		return p.ss
	}
	return merge.SumSquares(v)
}

// SumLater implements gossip.Mixer.
func (m *lazyMixer) SumLater(v []float32) func() float64 {
	if p := m.find(v); p != nil {
		return func() float64 {
			m.resolve(p)
			return p.ss
		}
	}
	return func() float64 { return merge.SumSquares(v) }
}

// resolveAll resolves those of vs that are pending.
func (m *lazyMixer) resolveAll(vs ...[]float32) {
	for _, v := range vs {
		if p := m.find(v); p != nil {
			m.resolve(p)
		}
	}
}

// resolvePending resolves every pending mix, side by side.
func (m *lazyMixer) resolvePending() {
	m.mu.Lock()
	ps := make([]*lazyMix, 0, len(m.pending))
	for _, p := range m.pending {
		ps = append(ps, p)
	}
	m.mu.Unlock()
	compute.ForEach(len(ps), runtime.GOMAXPROCS(0), func(i int) { m.resolve(ps[i]) })
}

// size is how many mixes are pending.
func (m *lazyMixer) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}

// defersMixes reports whether the peers are given a lazyMixer: D-PSGD's
// (the core hands it only plain D-PSGD's mixes: gossip.Mixer).
func (s *sim) defersMixes() bool { return s.cfg.Protocol == gossip.DPSGD && !testMixNow }

// testMixNow, set by tests, leaves the mixes to the core, at once.
var testMixNow bool

// poison fills v with NaN.
func poison(v []float32) {
	nan := float32(math.NaN())
	for i := range v {
		v[i] = nan
	}
}
