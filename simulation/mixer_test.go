package simulation

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/backendtest"
	"github.com/gossipd/gossipd/peer/trainer"
	"github.com/gossipd/gossipd/privacy"
)

// TestDeferredMixes: D-PSGD's, push-sum's, GoSGD's and AD-PSGD's mixes, deferred by
// the lazy mixer until
// something reads them, give the numbers of the core mixing at once, to
// the last digit, in every path a pending model can take: trained on the
// pool, in a batch and alone, sent through the wire codec, quantized,
// tampered with by an attacker, sent to a new neighbour of a live view,
// across missed neighbours, churn and drops. The mixes' results are NaN
// until resolved (testPoison), so a read that came first would show; and
// the mixer did record the mixes.
func TestDeferredMixes(t *testing.T) {
	testPoison = true
	defer func() { testPoison = false }()
	base := Config{Settings: job.Settings{Protocol: gossip.DPSGD}, Peers: 12, Rounds: 6, Seed: 5, EvalPeers: 6, EvalExamples: 200, FinalEvalPeers: 6, Latency: "uniform:10ms:300ms"}
	cases := map[string]func(c *Config){
		"plain":         func(c *Config) {},
		"mlp":           func(c *Config) { c.Model = "mlp"; c.Hidden = []int{16} },
		"batched":       func(c *Config) { c.PeerBatch = 4 },
		"alone":         func(c *Config) { c.PeerBatch = 1 },
		"codec":         func(c *Config) { c.Codec = true; c.Drop = 0.1; c.Churn = 0.2 },
		"fp16":          func(c *Config) { c.Compression = "fp16" },
		"attack":        func(c *Config) { c.Byzantine = 0.2; c.Attack = "gaussian" },
		"hyparview":     func(c *Config) { c.Sampling = gossip.SamplingHyParView; c.Peers = 20 },
		"late rounds":   func(c *Config) { c.RoundTimeout = c.Delta / 4; c.Latency = "uniform:10ms:900ms" },
		"pushsum":       func(c *Config) { c.Protocol = gossip.PushSum },
		"gosgd":         func(c *Config) { c.Protocol = gossip.GoSGD; c.Model = "mlp"; c.Hidden = []int{16} },
		"adpsgd":        func(c *Config) { c.Protocol = gossip.ADPSGD },
		"adpsgd codec":  func(c *Config) { c.Protocol, c.Codec, c.Drop, c.Churn = gossip.ADPSGD, true, 0.1, 0.2 },
		"adpsgd fp16":   func(c *Config) { c.Protocol, c.Compression = gossip.ADPSGD, "fp16" },
		"pushsum fp16":  func(c *Config) { c.Protocol, c.Compression = gossip.PushSum, "fp16" },
		"median attack": func(c *Config) { c.Aggregator, c.Byzantine, c.Attack = "median", 0.2, "gaussian" },
		"trimmed late": func(c *Config) {
			c.Aggregator, c.RoundTimeout, c.Latency = "trimmed:1", c.Delta/4, "uniform:10ms:900ms"
		},
		"int8":       func(c *Config) { c.Compression = "int8" },
		"int8 codec": func(c *Config) { c.Compression, c.Codec, c.Drop = "int8", true, 0.1 },
		"multikrum": func(c *Config) {
			c.Aggregator, c.Topology, c.Byzantine, c.Attack = "multikrum:1", "complete", 0.2, "bitflip"
		},
		"clipped mlp": func(c *Config) { c.Aggregator, c.Model, c.Hidden = "clipped", "mlp", []int{16} },
		"topk":        func(c *Config) { c.Compression = "topk:0.1" },
		"topk churn":  func(c *Config) { c.Compression, c.Churn, c.Drop, c.Bandwidth = "topk:0.2", 0.2, 0.1, 2e5 },
		// Gaps past 127 values: indices of two bytes, a delivery later
		// than the earliest it could come (evSized), by enough at 2 kB/s
		// to reorder events (a delivery at the earliest fails it).
		"topk sparse bandwidth": func(c *Config) {
			c.Compression, c.Model, c.Hidden, c.Bandwidth = "topk:0.005", "mlp", []int{16}, 2e3
		},
		"pushsum topk": func(c *Config) {
			c.Protocol, c.Compression, c.Model, c.Hidden = gossip.PushSum, "topk:0.1", "mlp", []int{16}
		},
		"adpsgd topk":   func(c *Config) { c.Protocol, c.Compression, c.Codec = gossip.ADPSGD, "topk:0.1", true },
		"bitflip codec": func(c *Config) { c.Byzantine, c.Attack, c.Codec = 0.2, "bitflip", true },
		"pushsum batched": func(c *Config) {
			c.Protocol, c.PeerBatch, c.Codec, c.Drop, c.Churn = gossip.PushSum, 4, true, 0.1, 0.2
		},
	}
	for _, name := range []string{"plain", "mlp", "batched", "alone", "codec", "fp16", "attack", "hyparview", "late rounds", "pushsum", "gosgd", "pushsum batched", "adpsgd", "adpsgd codec", "adpsgd fp16", "pushsum fp16", "median attack", "trimmed late", "multikrum", "clipped mlp", "int8", "int8 codec", "topk", "topk churn", "topk sparse bandwidth", "pushsum topk", "adpsgd topk", "bitflip codec"} {
		t.Run(name, func(t *testing.T) {
			c := base
			c.Delta = gossip.DefaultDelta
			cases[name](&c)
			var s *sim
			afterRun = func(x *sim) { s = x }
			deferred, _ := csvOf(t, c)
			afterRun = nil
			if s.mixer == nil || s.mixer.made == 0 {
				t.Fatalf("no mixes were deferred")
			}
			testMixNow = true
			now, _ := csvOf(t, c)
			testMixNow = false
			if deferred != now {
				t.Errorf("deferred mixes:\n%s\nmixed at once:\n%s", deferred, now)
			}
		})
	}
}

// TestLazyMixerResolvesInputs: a mix whose inputs are themselves pending
// resolves them first, once, and gives their sums; a vector never mixed
// is summed as it is.
func TestLazyMixerResolvesInputs(t *testing.T) {
	m := newLazyMixer(2, 1, false)
	defer m.close()
	a, b := []float32{1, 2}, []float32{3, 4}
	g := []float32{1, 1}
	x := m.Vector(2)
	m.Mix(x, [][]float32{a, b}, []float32{0.5, 0.5}, g, -1) // (2, 3) − (1, 1) = (1, 2)
	y := make([]float32, 2)
	m.Mix(y, [][]float32{x, b}, []float32{0.5, 0.5}, g, 0) // ((1+3)/2, (2+4)/2) = (2, 3)
	later := m.SumLater(y)
	if m.size() != 2 {
		t.Fatalf("%d mixes pending, want 2", m.size())
	}
	if ss := later(); ss != 13 || y[0] != 2 || y[1] != 3 || x[0] != 1 || x[1] != 2 {
		t.Fatalf("y = %v (Σ² %v), x = %v; want (2, 3) (13) and (1, 2)", y, ss, x)
	}
	if m.size() != 0 {
		t.Fatalf("%d mixes pending after resolving, want 0", m.size())
	}
	if ss := m.SumLater(a)(); ss != 5 {
		t.Fatalf("Σ a² = %v, want 5", ss)
	}
}

// TestMixesOnDevice: on a device (the emulated one), D-PSGD's mixes run
// there, a call for all those pending (the summary's resident counts
// say how many), and the run gives the CPU's numbers with the same peer
// batch, to the last digit: CombineRows and its norms are the CPU's
// arithmetic, and so are the robust rules' (TrimmedRows' medians and
// trimmed means; Krum's and clipped gossip's distances, then their
// picks, means and clips), push-sum's robust rules, and CHOCO's rand-k
// steps (MaskRows). The
// mixes' host vectors stay NaN until copied back
// (testPoison), so a read that forgot to copy would show; no device
// buffer outlives the run. The gradients and mixes share allocations,
// 3 each here (vectorsPerBlock) so that a batch of 8 takes several, but
// for the runs with churn, whose peers go offline holding theirs, and
// under rand-k, whose copies of the neighbours' models may outlive a
// round.
func TestMixesOnDevice(t *testing.T) {
	testPoison = true
	defer func() { testPoison = false }()
	defer func(n int) { vectorsPerBlock = n }(vectorsPerBlock)
	vectorsPerBlock = 3
	for name, c := range map[string]Config{
		"softmax":                {},
		"mlp":                    {Settings: job.Settings{Model: "mlp"}, Hidden: []int{8}},
		"dp-sgd":                 {Settings: job.Settings{DP: privacy.Config{Clip: 1, Noise: 0.5, Delta: 1e-5}}},
		"late rounds":            {Settings: job.Settings{RoundTimeout: gossip.DefaultDelta / 4}, Latency: "uniform:10ms:900ms"},
		"hyparview":              {Sampling: gossip.SamplingHyParView, Peers: 20},
		"codec churn":            {Codec: true, Churn: 0.2, Drop: 0.1},
		"cnn":                    {Settings: job.Settings{Model: "conv:4:3,relu,avgpool:2,dense"}},
		"pushsum":                {Settings: job.Settings{Protocol: gossip.PushSum}},
		"pushsum late":           {Settings: job.Settings{Protocol: gossip.PushSum, Model: "mlp"}, Hidden: []int{8}, Latency: "uniform:10ms:900ms"},
		"gosgd":                  {Settings: job.Settings{Protocol: gossip.GoSGD}},
		"gosgd churn":            {Settings: job.Settings{Protocol: gossip.GoSGD}, Churn: 0.2},
		"pushsum fp16 turnover":  {Settings: job.Settings{Protocol: gossip.PushSum, Compression: "fp16"}, Turnover: 0.25},
		"adpsgd":                 {Settings: job.Settings{Protocol: gossip.ADPSGD, Model: "mlp"}, Hidden: []int{8}},
		"adpsgd late":            {Settings: job.Settings{Protocol: gossip.ADPSGD}, Latency: "uniform:10ms:900ms"},
		"adpsgd fp16":            {Settings: job.Settings{Protocol: gossip.ADPSGD, Compression: "fp16"}},
		"median":                 {Settings: job.Settings{Aggregator: "median", Model: "mlp"}, Hidden: []int{8}},
		"trimmed attack":         {Settings: job.Settings{Aggregator: "trimmed:1"}, Byzantine: 0.2, Attack: "bitflip"},
		"trimmed late":           {Settings: job.Settings{Aggregator: "trimmed:1", RoundTimeout: gossip.DefaultDelta / 4}, Latency: "uniform:10ms:900ms"},
		"krum":                   {Settings: job.Settings{Aggregator: "krum:1", Topology: "complete"}},
		"multikrum attack":       {Settings: job.Settings{Aggregator: "multikrum:1", Topology: "complete"}, Byzantine: 0.2, Attack: "gaussian"},
		"clipped":                {Settings: job.Settings{Aggregator: "clipped:0.5"}},
		"int8":                   {Settings: job.Settings{Compression: "int8", Model: "mlp"}, Hidden: []int{8}},
		"pushsum fp16":           {Settings: job.Settings{Protocol: gossip.PushSum, Compression: "fp16"}},
		"pushsum median":         {Settings: job.Settings{Protocol: gossip.PushSum, Aggregator: "median", Model: "mlp"}, Hidden: []int{8}},
		"pushsum multikrum":      {Settings: job.Settings{Protocol: gossip.PushSum, Aggregator: "multikrum:1"}, Byzantine: 0.2, Attack: "bitflip"},
		"pushsum clipped":        {Settings: job.Settings{Protocol: gossip.PushSum, Aggregator: "clipped"}, Byzantine: 0.2, Attack: "gaussian"},
		"pushsum clipped int8":   {Settings: job.Settings{Protocol: gossip.PushSum, Aggregator: "clipped:0.5", Compression: "int8"}, Drop: 0.1},
		"randk":                  {Settings: job.Settings{Compression: "randk:0.1", Model: "mlp"}, Hidden: []int{8}},
		"randk churn":            {Settings: job.Settings{Compression: "randk:0.2:0.3"}, Churn: 0.2, Drop: 0.1},
		"pushsum randk":          {Settings: job.Settings{Protocol: gossip.PushSum, Compression: "randk:0.1"}, Drop: 0.1},
		"pushsum randk turnover": {Settings: job.Settings{Protocol: gossip.PushSum, Compression: "randk:0.2", Model: "mlp"}, Hidden: []int{8}, Turnover: 0.25},
		"adpsgd randk":           {Settings: job.Settings{Protocol: gossip.ADPSGD, Compression: "randk:0.1", Model: "mlp"}, Hidden: []int{8}, Drop: 0.1},
		"topk":                   {Settings: job.Settings{Compression: "topk:0.1", Model: "mlp"}, Hidden: []int{8}},
		"bitflip codec":          {Byzantine: 0.2, Attack: "bitflip", Codec: true},
		"ipm":                    {Byzantine: 0.2, Attack: "ipm"},
		"alie pushsum":           {Settings: job.Settings{Protocol: gossip.PushSum}, Byzantine: 0.2, Attack: "alie"},
		"topk churn codec":       {Settings: job.Settings{Compression: "topk:0.2:0.3"}, Churn: 0.2, Drop: 0.1, Codec: true},
		"topk bandwidth":         {Settings: job.Settings{Compression: "topk:0.1"}, Bandwidth: 2e5, Latency: "uniform:10ms:300ms"},
		"pushsum topk":           {Settings: job.Settings{Protocol: gossip.PushSum, Compression: "topk:0.1"}, Drop: 0.1},
		"pushsum topk turnover":  {Settings: job.Settings{Protocol: gossip.PushSum, Compression: "topk:0.2", Model: "mlp"}, Hidden: []int{8}, Turnover: 0.25},
		"adpsgd topk":            {Settings: job.Settings{Protocol: gossip.ADPSGD, Compression: "topk:0.1", Model: "mlp"}, Hidden: []int{8}, Drop: 0.1},
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			if c.Protocol == "" {
				c.Protocol = gossip.DPSGD
			}
			c.Rounds, c.Seed, c.EvalPeers, c.EvalExamples, c.FinalEvalPeers, c.PeerBatch = 5, 7, 4, 200, 16, 8
			if c.Peers == 0 {
				c.Peers = 16
			}
			c.Device = "cpu"
			want, wantRes := csvOf(t, c)
			dev := backendtest.NewDevice()
			testDevice = dev
			defer func() { testDevice = nil }()
			c.Device = "cuda"
			var block, sized, waited int
			afterRun = func(s *sim) { block, sized, waited = s.vectorBlock(), s.sizedLate, s.waitedSize }
			defer func() { afterRun = nil }()
			got, res := csvOf(t, c)
			if got != want || res.FinalAccuracy != wantRes.FinalAccuracy {
				t.Fatalf("on the device:\n%s\non the CPU:\n%s", got, want)
			}
			st := res.Resident
			trimmed := c.Aggregator == "median" || strings.HasPrefix(c.Aggregator, "trimmed:")
			picks := strings.Contains(c.Aggregator, "krum") || strings.HasPrefix(c.Aggregator, "clipped")
			switch {
			case block != map[bool]int{true: 3, false: 1}[c.Churn == 0 && c.Protocol == gossip.DPSGD && !sparse(c.Compression)]:
				t.Fatalf("%d vectors an allocation (%s, churn %v)", block, c.Protocol, c.Churn)
			case st == nil || st.Mixed == 0:
				t.Fatalf("resident counts %+v: no mix ran on the device", st)
			case (st.Gradients > 0) != !c.DP.Enabled():
				t.Fatalf("resident counts %+v: gradients left on the device (DP-SGD %v: on the host)", *st, c.DP.Enabled())
			case st.Consensus != uint64(len(res.Rows)):
				t.Fatalf("%d rows, %d consensus distances measured on the device", len(res.Rows), st.Consensus)
			}
			if live := dev.Stats().Live; live > 0 {
				t.Fatalf("%d device buffers live after the run", live)
			}
			ds := dev.Stats()
			multi, clipped := strings.HasPrefix(c.Aggregator, "multikrum"), strings.HasPrefix(c.Aggregator, "clipped")
			if quantized := c.Compression == "fp16" || c.Compression == "int8"; (ds.Quantized > 0) != quantized {
				t.Fatalf("%d vectors rounded to %q on the device", ds.Quantized, c.Compression)
			}
			if masked := strings.HasPrefix(c.Compression, "randk"); (ds.Masked > 0) != masked {
				t.Fatalf("%d steps masked under %q on the device", ds.Masked, c.Compression)
			}
			if omniscient := c.Attack == "ipm" || c.Attack == "alie"; (ds.Moments > 0) != omniscient {
				t.Fatalf("the honest moments taken %d times on the device under attack %q", ds.Moments, c.Attack)
			}
			if late := strings.HasPrefix(c.Compression, "topk") && c.Bandwidth > 0; (sized > 0) != late {
				t.Fatalf("%d deliveries sized after their sending, %d of them waiting for it (top-k under a bandwidth: %v)", sized, waited, late)
			}
			if topped := strings.HasPrefix(c.Compression, "topk"); (ds.TopK > 0) != topped {
				t.Fatalf("%d steps cut to their top k under %q on the device", ds.TopK, c.Compression)
			}
			if (ds.Trimmed > 0) != trimmed || (ds.Pairs > 0) != picks || (ds.Averaged > 0) != multi || (ds.Clipped > 0) != clipped {
				t.Fatalf("robust rows on the device (aggregator %q): %d trimmed means, %d distances of pairs, %d means, %d clips", c.Aggregator, ds.Trimmed, ds.Pairs, ds.Averaged, ds.Clipped)
			}
		})
	}
}

// failingMixDevice fails as a GPU would in its CombineRows.
type failingMixDevice struct{ *backendtest.Device }

func (failingMixDevice) CombineRows(compute.Tensor, compute.Tensor, int, []int32, []int32, []int32, []float32) {
	panic("cuda: combine_rows: an illegal memory access was encountered")
}

// TestMixFailureEndsRun: a device that fails in a D-PSGD mix ends the
// run with an error naming the device and the failure, not a crash.
func TestMixFailureEndsRun(t *testing.T) {
	testDevice = failingMixDevice{backendtest.NewDevice()}
	defer func() { testDevice = nil }()
	c := Config{Settings: job.Settings{Protocol: gossip.DPSGD}, Peers: 8, Rounds: 3, Seed: 1, PeerBatch: 4, Device: "cuda"}
	_, err := Run(context.Background(), c, nil)
	if err == nil || !strings.Contains(err.Error(), "emulated-device") || !strings.Contains(err.Error(), "illegal memory access") {
		t.Fatalf("err = %v", err)
	}
}

// TestMixWaitsForSentBatch: on a device, the event loop that needs a mix
// which a batch already sent will carry out (its flush, before it
// trains) waits for that flush instead of queueing a call of its own
// behind the batch; where the flush fails, it asks for the mix itself,
// which reports the failure. The test plays the batches' goroutine.
func TestMixWaitsForSentBatch(t *testing.T) {
	for _, failing := range []bool{false, true} {
		t.Run(map[bool]string{false: "flushed", true: "flush failed"}[failing], func(t *testing.T) {
			var be compute.Backend = backendtest.NewDevice()
			if failing {
				be = failingMixDevice{backendtest.NewDevice()}
			}
			st, err := model.NewStack(model.Spec{Kind: model.Softmax, Inputs: 3, Classes: 2}, 2, model.WithBackend(be))
			if err != nil {
				t.Fatal(err)
			}
			ws := trainer.NewBatchWorkspace(st)
			defer ws.Close()
			m := newLazyMixer(8, 1, false)
			defer m.close()
			b := &batcher{size: 2, work: make(chan batchWork, 1), mixer: m, ws: ws}
			m.dev = b
			fill := func(v float32) []float32 { return []float32{v, v, v, v, v, v, v, v} }
			x := m.Vector(8)
			m.Mix(x, [][]float32{fill(1), fill(3)}, []float32{0.5, 0.5}, fill(1), -1) // 2 − 1 = 1 each
			b.open, b.gathered = [][]batchItem{{{job: &trainJob{queued: true}}}}, 1
			b.flush() // waits in b.work, which holds one
			later := m.SumLater(x)
			got := make(chan float64)
			go func() { got <- later() }()
			for deadline := time.Now().Add(time.Minute); ; runtime.Gosched() {
				m.mu.Lock()
				waits := m.waits
				m.mu.Unlock()
				if waits > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the mix was not waited for (a call of its own queued behind the batch?)")
				}
			}
			if wk := <-b.work; len(wk.items) != 1 {
				t.Fatalf("the work queued first is %+v, want the batch", wk)
			}
			func() {
				defer func() {
					if r := recover(); (r != nil) != failing {
						t.Fatalf("flush: panic %v", r)
					}
				}()
				m.flushOn(ws, math.MaxUint64)
			}()
			if failing { // the mix asked for alone, which fails in turn
				wk := <-b.work
				if !wk.mix {
					t.Fatalf("after the failed flush: %+v, want a call for the mixes", wk)
				}
				*wk.err = errors.New("combine_rows failed")
				close(wk.done)
				<-got
				if b.failure == nil {
					t.Fatal("the failure was not recorded")
				}
				return
			}
			if ss := <-got; ss != 8 {
				t.Fatalf("Σ x² = %v, want 8", ss)
			}
			select {
			case wk := <-b.work:
				t.Fatalf("a call queued after all: %+v", wk)
			default:
			}
		})
	}
}
