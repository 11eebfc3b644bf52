package simulation

import (
	"cmp"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/peer/trainer"
)

// lazyMixer is the simulator's gossip.Mixer: it records each mix
// and carries it out when something first needs the result. On the CPU
// that is one mix, on whatever goroutine needs it: a peer's gradient
// request on its new model resolves it on the training pool, beside the
// event loop and the other peers' mixes; a neighbour checking the model
// it received finds it resolved, or resolves it. On a device (dev) it is
// every mix pending, in one call on the batches' goroutine
// (trainer.BatchWorkspace.Mix): before a batch trains, or when the event
// loop needs a result's Σx² or values: for its Σx² (a received model's
// norm checked), where a batch already sent will mix it first, it waits
// for that batch's mixes, not for its training; values come back in a
// call after every batch sent. Either way the event loop no
// longer waits for each mix, which took most of its time in a D-PSGD
// run, and every mix is the same arithmetic wherever it runs
// (merge.Combine, compute.Rows.CombineRows), so the numbers are those of
// the core mixing at once.
type lazyMixer struct {
	mu      sync.Mutex
	pending map[*float32]*lazyMix
	made    uint64 // mixes recorded (guarded by mu)
	// dev, where set, mixes on its device; bulk: Resolve leaves the
	// copy to the host to its caller (params, which copies all at once).
	dev  *batcher
	bulk bool
	// On a device, covered is the order (seq) of the last mix recorded
	// when the event loop last sent a batch: the batch's flush (flushOn,
	// before it trains) carries out every mix up to it but those that read
	// a later batch's results, so a mix the loop needs before then is
	// waited for, not asked for in a call of its own queued behind the
	// batches (one that the flush left is asked for then). Tried is the
	// last mix a flush has taken on, done or failed; flushed signals the
	// end of each flush (guarded by mu).
	covered, tried uint64
	flushed        *sync.Cond
	waited         time.Duration // resolves' time waiting for a flush
	waits          uint64        // and their number, counted as each starts
	// vectors makes new vectors for Vector beside the event loop.
	vectors *vectorMaker
}

// lazyMix is one recorded mix, dst = Σ w[k]·xs[k] + a·g, or with blend
// dst = xs[0] + w[0]·(xs[1] − xs[0]), or with agg agg's combination of
// xs with weights ws + a·g, or with quant xs[0] compressed so and
// decompressed, or with mask xs[0] at the indices keep, 0 elsewhere.
type lazyMix struct {
	once  sync.Once // on the CPU
	dst   []float32
	xs    [][]float32
	w     []float32
	g     []float32
	a     float32
	blend bool
	agg   merge.Aggregator
	ws    []float64
	quant compress.Kind
	keep  []uint32 // with mask
	mask  bool
	top   int         // > 0: Top's k
	bytes int32       // Top's index bytes, once made
	made  atomic.Bool // Top's: bytes is set
	ss    float64     // Σ dst², once resolved
	seq   uint64      // its order among the mixes
	done  bool        // on a device: resolved (guarded by the mixer's mu)
	// after is the number of the last batch whose results it reads,
	// directly or through the mixes it reads, not yet run when it was
	// recorded (sent or still gathered): it runs only once that batch has
	// (0: none; afterOf).
	// Vouched says its sum was given as 0 before it was
	// computed (SumLater), to be checked (guarded by mu).
	after   uint64
	vouched bool
}

// item is p as the batches' workspace computes it.
func (p *lazyMix) item() trainer.MixItem {
	it := trainer.MixItem{Dst: p.dst, Xs: p.xs, W: p.w, G: p.g, A: p.a, Blend: p.blend, Agg: p.agg, Ws: p.ws, Quantize: p.quant, Mask: p.mask, Keep: p.keep, Top: p.top}
	if p.top > 0 {
		it.IndexBytes = &p.bytes
	}
	return it
}

// inputs returns the vectors p reads: xs, and g where set.
func (p *lazyMix) inputs() [][]float32 {
	if p.g == nil {
		return p.xs
	}
	return append(p.xs[:len(p.xs):len(p.xs)], p.g)
}

// newLazyMixer returns a mixer of models of size values, whose vectors
// for results are made on goroutines of their own until close
// (vectorMaker). Up to block consecutive ones share an allocation
// (compute.UnzeroedRows; sim.vectorBlock): mixes on a device, whose host
// vectors are never written unless fetched and are dropped a round
// later, about together; up to 64 MiB of them are ready at a time on
// the CPU, where they are written, and more where they mix on a device
// (onDevice: readyOnDevice), where they are written only if fetched.
func newLazyMixer(size, block int, onDevice bool) *lazyMixer {
	ready := min(256, max(1, (64<<20)/(4*max(1, size))))
	if onDevice {
		ready = readyOnDevice(size)
	}
	m := &lazyMixer{pending: map[*float32]*lazyMix{}, vectors: newVectorMaker(size, block, ready)}
	m.flushed = sync.NewCond(&m.mu)
	return m
}

// close stops the vector makers.
func (m *lazyMixer) close() { m.vectors.close() }

// Vector implements gossip.Mixer: a vector made beside the event loop,
// or here when none is ready.
func (m *lazyMixer) Vector(n int) []float32 { return m.vectors.get(n) }

var _ gossip.Mixer = (*lazyMixer)(nil)

// Mix implements gossip.Mixer.
func (m *lazyMixer) Mix(dst []float32, xs [][]float32, w []float32, g []float32, a float32) {
	m.record(&lazyMix{dst: dst, xs: xs, w: w, g: g, a: a})
}

// Blend implements gossip.Mixer.
func (m *lazyMixer) Blend(dst, a, b []float32, t float32) {
	m.record(&lazyMix{dst: dst, xs: [][]float32{a, b}, w: []float32{t}, blend: true})
}

// Aggregate implements gossip.Mixer.
func (m *lazyMixer) Aggregate(dst []float32, xs [][]float32, ws []float64, agg merge.Aggregator, g []float32, a float32) {
	m.record(&lazyMix{dst: dst, xs: xs, ws: ws, g: g, a: a, agg: agg})
}

// Quantize implements gossip.Mixer.
func (m *lazyMixer) Quantize(dst, src []float32, kind compress.Kind) {
	m.record(&lazyMix{dst: dst, xs: [][]float32{src}, quant: kind})
}

// Mask implements gossip.Mixer.
func (m *lazyMixer) Mask(dst, src []float32, keep []uint32) {
	m.record(&lazyMix{dst: dst, xs: [][]float32{src}, mask: true, keep: keep})
}

// Top implements gossip.Mixer: the index bytes are known once p is
// made (on a device, by the flush that computes it).
func (m *lazyMixer) Top(dst, src []float32, k int) func(wait bool) (int, bool) {
	p := &lazyMix{dst: dst, xs: [][]float32{src}, top: k}
	m.record(p)
	return func(wait bool) (int, bool) {
		if !p.made.Load() && wait {
			m.resolve(p) // not made where the device failed or closed
		}
		if !p.made.Load() {
			return 0, false
		}
		return int(p.bytes), true
	}
}

// record makes p a pending mix.
func (m *lazyMixer) record(p *lazyMix) {
	dst := p.dst
	if m.promising() {
		p.after = m.afterOf(p.inputs())
	}
	if testPoison {
		poison(dst) // a read before it is resolved shows
	}
	m.mu.Lock()
	m.made++
	p.seq = m.made
	m.pending[&dst[0]] = p
	m.mu.Unlock()
}

// afterOf is the after of a mix of vs (lazyMix.after): the latest
// number of the batches not yet run that vs are results promised in, or
// that the pending mixes among vs wait for (0: none). A mix that reads
// only models already made runs in the next flush, whatever batches are
// being gathered.
func (m *lazyMixer) afterOf(vs [][]float32) uint64 {
	var a uint64
	for _, v := range vs {
		a = max(a, m.dev.promisedIn(v))
		if q := m.find(v); q != nil {
			a = max(a, q.after)
		}
	}
	return a
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

// resolve carries out p: on a device, with every mix pending (by the
// flush of a batch already sent, if one covers p, else by a call of its
// own); on the CPU, alone, once, after the mixes of its inputs still
// pending (each older than p: no cycle).
func (m *lazyMixer) resolve(p *lazyMix) {
	if m.dev != nil {
		m.mu.Lock()
		if m.coming(p) {
			m.waits++ // counted as it starts
			t0 := time.Now()
			for m.coming(p) {
				m.flushed.Wait()
			}
			m.waited += time.Since(t0)
		}
		done := p.done
		m.mu.Unlock()
		if !done { // no batch sent covers it, or its flush failed
			m.dev.mix()
		}
		return
	}
	p.once.Do(func() {
		for _, x := range p.inputs() {
			if q := m.find(x); q != nil {
				m.resolve(q)
			}
		}
		p.ss = p.item().OnHost()
		p.made.Store(true)
		m.mu.Lock()
		delete(m.pending, &p.dst[0])
		m.mu.Unlock()
		p.xs, p.w, p.g, p.ws = nil, nil, nil, nil
	})
}

// coming reports whether p is still to be carried out by the flush of a
// batch already sent (guarded by mu).
func (m *lazyMixer) coming(p *lazyMix) bool {
	return !p.done && p.seq > m.tried && p.seq <= m.covered
}

// flushOn carries out the pending mixes on ws's device that may run
// before batch number next (all: math.MaxUint64), on the batches'
// goroutine: a call per generation (a mix whose input is another's
// result after it).
func (m *lazyMixer) flushOn(ws *trainer.BatchWorkspace, next uint64) {
	ps, upTo := m.pendingMixes()
	ps = slices.DeleteFunc(ps, func(p *lazyMix) bool { return p.after >= next }) // their gradients are to come
	defer func() {                                                               // done or failed (a device failure panics)
		m.mu.Lock()
		m.tried = max(m.tried, upTo)
		m.mu.Unlock()
		m.flushed.Broadcast()
	}()
	if len(ps) == 0 {
		return
	}
	slices.SortFunc(ps, func(a, b *lazyMix) int { return cmp.Compare(a.seq, b.seq) })
	// Each mix's generation, then the generations' items, each list
	// made once at its length (thousands of items a round).
	gen := make(map[*float32]int, len(ps))
	gens := make([]int, len(ps))
	var count []int
	for i, p := range ps {
		k := 0
		for _, x := range p.xs {
			if g, ok := gen[&x[0]]; ok {
				k = max(k, g+1)
			}
		}
		if p.g != nil {
			if g, ok := gen[&p.g[0]]; ok {
				k = max(k, g+1)
			}
		}
		gen[&p.dst[0]], gens[i] = k, k
		for len(count) <= k {
			count = append(count, 0)
		}
		count[k]++
	}
	items, of := make([][]trainer.MixItem, len(count)), make([][]*lazyMix, len(count))
	for k, n := range count {
		items[k], of[k] = make([]trainer.MixItem, 0, n), make([]*lazyMix, 0, n)
	}
	for i, p := range ps {
		k := gens[i]
		items[k] = append(items[k], p.item())
		of[k] = append(of[k], p)
	}
	for k := range items {
		sums := make([]float64, len(items[k]))
		ws.Mix(items[k], sums)
		for i, p := range of[k] {
			p.ss = sums[i]
			p.made.Store(true)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range ps {
		p.done = true
		delete(m.pending, &p.dst[0])
		p.xs, p.w, p.g, p.ws = nil, nil, nil, nil
		if p.vouched && !m.dev.admits(p.ss) {
			m.dev.miss(&errMisspeculated{what: "a mixed model", ss: p.ss})
		}
	}
}

// promising reports whether the batches promise gradients that go to
// mixes (promise.go): a mix may then read one still to come (lazyMix.after),
// and its Σx² is given as 0 until it has run (SumLater), then checked as
// the peers' cores check it (flushOn).
func (m *lazyMixer) promising() bool { return m.dev != nil && m.dev.grads }

// pendingMixes returns the mixes pending now, in no order, and the order
// of the last one recorded (every mix up to it is pending or done).
func (m *lazyMixer) pendingMixes() ([]*lazyMix, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := make([]*lazyMix, 0, len(m.pending))
	for _, p := range m.pending {
		ps = append(ps, p)
	}
	return ps, m.made
}

// cover records that a batch is sent, whose flush will carry out every
// mix recorded so far (resolve).
func (m *lazyMixer) cover() {
	m.mu.Lock()
	m.covered = m.made
	m.mu.Unlock()
}

// Resolve implements gossip.Mixer.
func (m *lazyMixer) Resolve(v []float32) { m.hostValues(v) }

// hostValues makes those of vs that are pending hold their values on the
// host: resolved, and on a device copied back (unless bulk).
func (m *lazyMixer) hostValues(vs ...[]float32) {
	for _, v := range vs {
		if p := m.find(v); p != nil {
			m.resolve(p)
		}
		if m.dev != nil && !m.bulk && len(v) > 0 && m.dev.ws.Stale(v) {
			if err := m.dev.fetch([][]float32{v}); err != nil {
				m.dev.failed(err)
			}
		}
	}
}

// SumLater implements gossip.Mixer.
func (m *lazyMixer) SumLater(v []float32) func() float64 {
	if p := m.find(v); p != nil && m.promising() {
		return func() float64 {
			m.mu.Lock()
			defer m.mu.Unlock()
			if p.done {
				return p.ss
			}
			p.vouched = true // checked once computed (flushOn)
			return 0
		}
	} else if p != nil {
		return func() float64 {
			m.resolve(p)
			return p.ss
		}
	}
	// Measured once, for all the receivers of the messages that share v.
	return sync.OnceValue(func() float64 {
		if m.dev != nil {
			if ss, ok := m.dev.ws.KnownSum(v); ok {
				return ss
			}
		}
		m.hostValues(v)
		return merge.SumSquares(v)
	})
}

// resolvePending resolves every pending mix: on a device in one flush,
// on the CPU side by side.
func (m *lazyMixer) resolvePending() {
	if m.dev != nil {
		m.dev.mix()
		return
	}
	ps, _ := m.pendingMixes()
	compute.ForEach(len(ps), runtime.GOMAXPROCS(0), func(i int) { m.resolve(ps[i]) })
}

// size is how many mixes are pending.
func (m *lazyMixer) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}

// defersMixes reports whether the peers are given a lazyMixer: under a
// protocol whose cores hand it their plain mixes (gossip.MixesOf,
// gossip.Config.HandsMixes).
func (s *sim) defersMixes() bool { return gossip.MixesOf(s.cfg.Protocol) && !testMixNow }

// testMixNow, set by tests, leaves the mixes to the core, at once.
var testMixNow bool

// poison fills v with NaN.
func poison(v []float32) {
	nan := float32(math.NaN())
	for i := range v {
		v[i] = nan
	}
}

// vectorBlock is how many host vectors of models left on a device
// (gradients and mixes, which the device fills only if they are
// read) may share an allocation: vectorsPerBlock where every peer stays
// online, so that a round's vectors are dropped about together, else 1
// (CHOCO's copies of a neighbour's model, under rand-k, may outlive the
// round).
// One vector still held keeps its whole allocation, and with it every
// other vector's device slot: an offline peer's gradient and model, or
// under the other protocols that mix (push-sum, GoSGD, AD-PSGD), whose
// vectors live from a few events to many rounds, any peer's.
func (s *sim) vectorBlock() int {
	c := s.cfg
	if c.Protocol != gossip.DPSGD || c.Churn > 0 || len(c.ChurnTrace) > 0 || len(c.Netsplits) > 0 || c.Turnover > 0 || sparse(c.Compression) {
		return 1
	}
	return vectorsPerBlock
}

// sparse reports whether a --compression is CHOCO's (rand-k, top-k),
// whose copies of the neighbours' models may outlive a round.
func sparse(compression string) bool {
	return strings.HasPrefix(compression, "randk") || strings.HasPrefix(compression, "topk")
}

// vectorsPerBlock: 32 vectors an allocation (compute.UnzeroedRows) saved
// most of what the allocator and the collector spent on D-PSGD's host
// vectors on a GPU; thousands in one allocation cost more, as the
// runtime keeps an object's weak pointers and cleanups (the arena's
// keys) in a list it walks for each one added. Tests lower it.
var vectorsPerBlock = 32
