package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/backendtest"
	"github.com/gossipd/gossipd/privacy"
)

// TestPeerBatch: peers' updates trained in batches (batch.go) give the
// same run, byte for byte, whatever the batch size and on one core or
// three; against updates trained alone, the same messages and updates and
// accuracies within rounding's reach, for random walk with every model and
// the options that change when results are needed, and for the other
// protocols' local updates.
func TestPeerBatch(t *testing.T) {
	base := Config{Peers: 24, Rounds: 6, Seed: 11, EvalPeers: 5, EvalExamples: 200, FinalEvalPeers: 24}
	tokens, err := gossip.ParseTokens("2:4")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*Config){
		"randomwalk":         func(*Config) {},
		"svm":                func(c *Config) { c.Model = "svm" },
		"mlp":                func(c *Config) { c.Model, c.Hidden = "mlp", []int{16} },
		"tokens":             func(c *Config) { c.Tokens = tokens },
		"churn codec":        func(c *Config) { c.Churn, c.Drop, c.Latency, c.Codec = 0.3, 0.1, "uniform:0s:100ms", true },
		"compute":            func(c *Config) { c.Compute = "lognormal:2G:1" },
		"local-steps":        func(c *Config) { c.LocalSteps = 3 },
		"dpsgd":              func(c *Config) { c.Protocol = "dpsgd" },
		"adpsgd":             func(c *Config) { c.Protocol = "adpsgd" },
		"pushsum":            func(c *Config) { c.Protocol, c.Model, c.Hidden = "pushsum", "mlp", []int{8} },
		"dpsgd local-steps":  func(c *Config) { c.Protocol, c.LocalSteps = "dpsgd", 2 },
		"pushsum local-step": func(c *Config) { c.Protocol, c.LocalSteps = "pushsum", 2 },
		"sfb local-steps":    func(c *Config) { c.Protocol, c.LocalSteps, c.Model, c.Hidden = "sfb", 2, "mlp", []int{8} },
		"sfb":                func(c *Config) { c.Protocol, c.Model, c.Hidden = "sfb", "mlp", []int{8} },
		"dp-sgd":             func(c *Config) { c.DP = privacy.Config{Clip: 1, Noise: 0.5, Delta: 1e-5} },
		"dpsgd dp-sgd svm": func(c *Config) {
			c.Protocol, c.Model, c.DP = "dpsgd", "svm", privacy.Config{Clip: 1, Noise: 0.5, Delta: 1e-5}
		},
		// 64 requests a batch: the host's DP-SGD work split among cores.
		"dpsgd dp-sgd 64": func(c *Config) {
			c.Protocol, c.Peers, c.DP = "dpsgd", 64, privacy.Config{Clip: 1, Noise: 0.5, Delta: 1e-5}
		},
		"sfb dp-sgd": func(c *Config) {
			c.Protocol, c.Model, c.Hidden, c.DP = "sfb", "mlp", []int{8}, privacy.Config{Clip: 1, Noise: 0.5, Delta: 1e-5}
		},
		// Strict event order: results are never set aside (batches of one).
		"turnover":  func(c *Config) { c.Turnover, c.Rounds = 0.3, 8 },
		"ipm":       func(c *Config) { c.Byzantine, c.Attack = 0.2, "ipm" },
		"labelflip": func(c *Config) { c.Byzantine, c.Attack = 0.2, "labelflip" },
		// Layered networks: a stack trains them one by one, each the step
		// it takes alone.
		"cnn":        func(c *Config) { c.Model = "small-cnn" },
		"cnn dpsgd":  func(c *Config) { c.Protocol, c.Model = "dpsgd", "small-cnn" },
		"cnn sfb":    func(c *Config) { c.Protocol, c.Model = "sfb", "small-cnn" },
		"cnn dp-sgd": func(c *Config) { c.Model, c.DP = "small-cnn", privacy.Config{Clip: 1, Noise: 0.5, Delta: 1e-5} },
	}
	for name, edit := range cases {
		if trimmed() && strings.HasPrefix(name, "cnn ") {
			continue // one CNN case under the race detector ("cnn"); make kernels runs them all
		}
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			c := base
			edit(&c)
			c.PeerBatch = 1
			alone, aloneRes := csvOf(t, c)
			if aloneRes.Batches != 0 || aloneRes.PeerBatch != 0 || aloneRes.DeviceTime != nil {
				t.Fatalf("--peer-batch 1: %d batches (peer_batch %d), device time %+v", aloneRes.Batches, aloneRes.PeerBatch, aloneRes.DeviceTime)
			}
			c.PeerBatch = 64
			aside := -1
			afterRun = func(s *sim) { aside = s.setAsides }
			want, res := csvOf(t, c)
			afterRun = nil
			if strict := c.Turnover > 0 || c.Attack == "ipm"; strict && aside != 0 {
				t.Fatalf("%d results set aside in a run that keeps strict event order", aside)
			}
			c.PeerBatch = 5
			five, _ := csvOf(t, c)
			prev := runtime.GOMAXPROCS(1)
			one, _ := csvOf(t, c)
			runtime.GOMAXPROCS(3)
			three, _ := csvOf(t, c)
			runtime.GOMAXPROCS(prev)
			if five != want || one != want || three != want {
				t.Fatalf("batched runs differ:\nbatch 64:\n%s\nbatch 5:\n%s\none core:\n%s\nthree cores:\n%s", want, five, one, three)
			}
			if res.PeerBatch != 64 || res.Batches == 0 || res.BatchedUpdates < res.Batches || res.BatchedUpdates > res.Updates+uint64(c.Peers) {
				t.Fatalf("peer_batch %d, %d batches of %d updates in all (%d updates)", res.PeerBatch, res.Batches, res.BatchedUpdates, res.Updates)
			}
			// The batches' goroutine worked; the loop's waits are counted
			// with their time (both wall-clock: only their presence is
			// checked).
			if d := res.DeviceTime; d == nil || !(d.BusySeconds > 0) || d.WaitedSeconds < 0 || (d.Waits == 0) != (d.WaitedSeconds == 0) {
				t.Fatalf("device time %+v", d)
			}
			if res.Messages != aloneRes.Messages || res.Updates != aloneRes.Updates {
				t.Fatalf("batched: %d messages, %d updates; alone %d, %d", res.Messages, res.Updates, aloneRes.Messages, aloneRes.Updates)
			}
			if strings.HasPrefix(name, "cnn") && want != alone {
				t.Fatalf("a layered model's batched run differs from its run alone:\nbatched:\n%s\nalone:\n%s", want, alone)
			}
			if math.Abs(res.FinalAccuracy-aloneRes.FinalAccuracy) > 0.02 {
				t.Fatalf("final accuracy batched %v, alone %v\nbatched:\n%s\nalone:\n%s", res.FinalAccuracy, aloneRes.FinalAccuracy, want, alone)
			}
		})
	}
}

// TestPeerBatchGathers: at 200 random-walk peers, batches hold many
// updates at once (a batch starts when a result is needed: its size grows
// with the peers).
func TestPeerBatchGathers(t *testing.T) {
	c := Config{Peers: 200, Rounds: 3, Seed: 5, EvalPeers: 2, EvalExamples: 100, FinalEvalPeers: 2, PeerBatch: 1000}
	_, res := csvOf(t, c)
	if mean := float64(res.BatchedUpdates) / float64(res.Batches); mean < 5 {
		t.Fatalf("%d updates in %d batches: %.1f a batch", res.BatchedUpdates, res.Batches, mean)
	}
}

// TestPeerBatchRefused: --peer-batch where no update could train in a
// batch (the baselines) is an error naming the flag, as is a negative
// size and --device cuda for a baseline.
func TestPeerBatchRefused(t *testing.T) {
	for name, c := range map[string]Config{
		"fedavg":      {Settings: job.Settings{Protocol: "fedavg"}, PeerBatch: 8},
		"centralized": {Settings: job.Settings{Protocol: "centralized"}, PeerBatch: 8},
	} {
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.CheckOptions([]string{"peer-batch"}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--peer-batch") {
			t.Errorf("%s: CheckOptions = %v", name, err)
		}
	}
	c := Config{PeerBatch: -1}
	if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--peer-batch -1") {
		t.Errorf("--peer-batch -1: %v", err)
	}
	c = Config{Settings: job.Settings{Protocol: "fedavg"}, Device: "cuda"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openDevice(&c); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "fedavg baseline trains on the CPU") {
		t.Errorf("fedavg on cuda: %v", err)
	}
}

// TestPeersOnDevice: peers that train on a device (the emulated one of
// backendtest: device tensors, the CPU's kernels) give the CPU run's
// metrics byte for byte: batched updates, gradients, factors and DP-SGD
// steps in a stack on the device; the device's stack, data and model are
// freed at the end, and the summary gives the device's memory peak. A
// random walk's batches find most of the models they start from and
// merge with on the device (the summary's resident counts: its robust
// rules' merges run there too), and leave
// the models they train there (leaveOnDevice) but for a run that reads
// them on the host (compression here): their host vectors are NaN until
// fetched (testPoison), so a read that forgot to fetch would show. Where
// they are left there, every row's consensus distance is measured there
// too, and only the evaluated peers' models come to the host. The
// evaluation runs on the device too (Stack.TallyRows).
func TestPeersOnDevice(t *testing.T) {
	testPoison = true
	defer func() { testPoison = false }()
	for name, c := range map[string]Config{
		"randomwalk":        {Settings: job.Settings{Model: "mlp"}, Hidden: []int{8}},
		"randomwalk int8":   {Settings: job.Settings{Model: "mlp", Compression: "int8"}, Hidden: []int{8}},
		"randomwalk eval 4": {Settings: job.Settings{Model: "mlp"}, Hidden: []int{8}, EvalEvery: 4},
		// Robust merges, run where the models are (TrainRequest.MixRule).
		"randomwalk median":    {Settings: job.Settings{Model: "mlp", Aggregator: "median"}, Hidden: []int{8}},
		"randomwalk trimmed":   {Settings: job.Settings{Aggregator: "trimmed:1"}},
		"randomwalk multikrum": {Settings: job.Settings{Aggregator: "multikrum:1"}},
		"randomwalk clipped":   {Settings: job.Settings{Model: "mlp", Aggregator: "clipped"}, Hidden: []int{8}},
		"randomwalk clipped:1": {Settings: job.Settings{Aggregator: "clipped:1"}},
		// Attacks that send new vectors leave the models there too; ipm's
		// and alie's moments are taken there. Bitflip's −x reads the model.
		"randomwalk median gaussian": {Settings: job.Settings{Model: "mlp", Aggregator: "median"}, Hidden: []int{8}, Byzantine: 0.2, Attack: "gaussian"},
		"randomwalk alie":            {Settings: job.Settings{Model: "mlp"}, Hidden: []int{8}, Byzantine: 0.2, Attack: "alie"},
		"randomwalk trimmed ipm":     {Settings: job.Settings{Aggregator: "trimmed:1"}, Byzantine: 0.2, Attack: "ipm"},
		"randomwalk bitflip":         {Byzantine: 0.2, Attack: "bitflip"},
		"randomwalk labelflip":       {Byzantine: 0.2, Attack: "labelflip"},
		"dpsgd":                      {Settings: job.Settings{Protocol: "dpsgd"}},
		"dpsgd local-steps":          {Settings: job.Settings{Protocol: "dpsgd", LocalSteps: 2}},
		"sfb":                        {Settings: job.Settings{Protocol: "sfb", Model: "mlp"}, Hidden: []int{8}},
		"dpsgd dp-sgd":               {Settings: job.Settings{Protocol: "dpsgd", DP: privacy.Config{Clip: 1, Noise: 0.5, Delta: 1e-5}}},
		// Layered networks, each update alone and in a stack on the device.
		"cnn randomwalk":       {Settings: job.Settings{Model: "conv:4:3:1:1,gelu,maxpool:2,groupnorm:2,dense:8,relu,dense"}, PeerBatch: 1},
		"cnn dpsgd":            {Settings: job.Settings{Protocol: "dpsgd", Model: "conv:4:3,relu,avgpool:2,dense"}, PeerBatch: 1},
		"cnn randomwalk batch": {Settings: job.Settings{Model: "conv:4:3:1:1,gelu,maxpool:2,groupnorm:2,dense:8,relu,dense"}},
		"cnn sfb batch":        {Settings: job.Settings{Protocol: "sfb", Model: "conv:4:3,relu,avgpool:2,dense:8,relu,dense"}},
		"cnn dp-sgd batch":     {Settings: job.Settings{Protocol: "dpsgd", Model: "conv:4:3,relu,avgpool:2,dense", DP: privacy.Config{Clip: 1, Noise: 0.5, Delta: 1e-5}}},
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			c.Peers, c.Rounds, c.Seed, c.EvalPeers, c.EvalExamples, c.FinalEvalPeers = 16, 4, 7, 4, 200, 16
			if c.PeerBatch == 0 {
				c.PeerBatch = 32
			}
			c.Device = "cpu"
			want, wantRes := csvOf(t, c)
			dev := backendtest.NewDevice()
			tallies := new(int)
			testDevice = tallyCounter{dev, tallies}
			defer func() { testDevice = nil }()
			c.Device = "cuda"
			var lazy bool // whether the run may leave its models on the device
			afterRun = func(s *sim) { lazy = s.leaveOnDevice() }
			defer func() { afterRun = nil }()
			got, res := csvOf(t, c)
			if got != want || res.FinalAccuracy != wantRes.FinalAccuracy {
				t.Fatalf("on the device:\n%s\non the CPU:\n%s", got, want)
			}
			if !strings.HasPrefix(res.Device.Device, "emulated-device") {
				t.Fatalf("summary's device: %+v", res.Device)
			}
			if *tallies == 0 && !strings.HasPrefix(c.Model, "conv") {
				t.Fatal("no evaluation on the device")
			}
			switch st := res.Resident; {
			case wantRes.Resident != nil || (c.PeerBatch > 1) != (st != nil):
				t.Fatalf("resident counts %+v on the device (batch %d), %+v on the CPU", st, c.PeerBatch, wantRes.Resident)
			case st != nil && c.Protocol == "" && c.Compression == "" && (st.Hits < res.BatchedUpdates || st.Uploads >= res.BatchedUpdates || st.Full != 0):
				t.Fatalf("a random walk's %d batched updates: %+v; want a hit at least each, fewer uploads", res.BatchedUpdates, *st)
			case st != nil && c.Aggregator != "" && (st.Merged == 0 || !lazy):
				t.Fatalf("%d batched updates: %+v; robust merges on the device: none (models left there: %v)", res.BatchedUpdates, *st, lazy)
			case st != nil && lazy != (st.Left > 0 && st.Fetched > 0 && st.Fetched <= st.Left):
				t.Fatalf("%d batched updates: %+v; left on the device: %v", res.BatchedUpdates, *st, lazy)
			case st != nil && (lazy || c.Protocol == gossip.DPSGD) != (st.Consensus == uint64(len(res.Rows))):
				t.Fatalf("%d rows, %d consensus distances measured on the device; models left there: %v (D-PSGD's mixes: always)", len(res.Rows), st.Consensus, lazy)
			}
			if omniscient := c.Attack == "ipm" || c.Attack == "alie"; (dev.Stats().Moments > 0) != (omniscient && lazy) || c.Attack != "" && lazy == (c.Attack == "bitflip") || res.Resident != nil && res.Resident.Moments != uint64(dev.Stats().Moments) {
				t.Fatalf("attack %q: the honest moments taken %d times on the device (the summary's resident counts: %+v); models left there: %v", c.Attack, dev.Stats().Moments, res.Resident, lazy)
			}
			if live := dev.Stats().Live; live > 0 {
				t.Fatalf("%d device buffers live after the run", live)
			}
			if _, peak := dev.DeviceMemory(); res.DevicePeakBytes != peak || peak == 0 || wantRes.DevicePeakBytes != 0 {
				t.Fatalf("device memory peak %d bytes in the summary, %d on the device; %d on the CPU", res.DevicePeakBytes, peak, wantRes.DevicePeakBytes)
			}
		})
	}
}

// tallyCounter is the emulated device counting its TallyRows calls.
type tallyCounter struct {
	*backendtest.Device
	n *int
}

func (d tallyCounter) TallyRows(logits compute.Tensor, y []int32, k, m, n int, hinge bool, loss []float64, correct []int) {
	*d.n++
	d.Device.TallyRows(logits, y, k, m, n, hinge, loss, correct)
}

// failingEvalDevice fails as a GPU would in the evaluation's loss kernel.
type failingEvalDevice struct{ *backendtest.Device }

func (failingEvalDevice) TallyRows(compute.Tensor, []int32, int, int, int, bool, []float64, []int) {
	panic("cuda: tally_rows: an illegal memory access was encountered")
}

// failingDevice fails as a GPU out of memory would, in its batched GEMM.
type failingDevice struct{ *backendtest.Device }

func (failingDevice) GemmStrided(bool, bool, int, int, int, float32, compute.Tensor, int, int, compute.Tensor, int, int, float32, compute.Tensor, int, int, int) {
	panic("cuda: cublasSgemmStridedBatched 3 × 6×10×64: status 3 (on cuda:0)")
}

// TestDeviceFailureEndsRun: a device that fails in a batch, or while
// evaluating the peers' models, ends the run with an error naming what
// failed, the device and the failure, not a crash.
func TestDeviceFailureEndsRun(t *testing.T) {
	defer func() { testDevice = nil }()
	for _, tc := range []struct {
		dev       compute.Backend
		what, why string
	}{
		{failingDevice{backendtest.NewDevice()}, "training requests on emulated-device", "status 3"},
		{failingEvalDevice{backendtest.NewDevice()}, "evaluating 8 models on emulated-device", "illegal memory access"},
	} {
		testDevice = tc.dev
		c := Config{Peers: 8, Rounds: 2, Seed: 1, PeerBatch: 4, Device: "cuda"}
		_, err := Run(context.Background(), c, nil)
		if err == nil || !strings.Contains(err.Error(), tc.what) || !strings.Contains(err.Error(), tc.why) {
			t.Fatalf("err = %v", err)
		}
	}
}

// TestAutoTimesBoth: --device auto with a GPU (here the emulated device)
// simulates a short run on the CPU without touching the GPU, times a
// longer one's first rounds on both (the run as configured, stopped
// early) and runs on the faster by a clock the test sets (the run is
// then the same as --device cuda's, or --device cpu's, byte for byte,
// all its rounds), says why, and takes the CPU when the GPU fails in its
// trial, without timing the CPU.
func TestAutoTimesBoth(t *testing.T) {
	dev := backendtest.NewDevice()
	testDevice = dev
	defer func() { testDevice, autoClock = nil, time.Now }()
	c := Config{Peers: 8, Rounds: 2, Seed: 1, Device: "auto", PeerBatch: 4}
	_, res := csvOf(t, c)
	if res.Device.Requested != "auto" || res.Device.Device != "cpu" || !strings.Contains(res.Device.Note, "too short to time on a GPU and the CPU") || res.AutoTrial != nil {
		t.Fatalf("a short run: device %+v, trial %+v: want the CPU, untimed", res.Device, res.AutoTrial)
	}
	if st := dev.Stats(); st != (backendtest.DeviceStats{}) {
		t.Fatalf("a short run under auto used the GPU: %+v", st)
	}

	c.Rounds = AutoMinRounds
	want := map[string]string{}
	for _, d := range []string{"cuda", "cpu"} {
		c := c
		c.Device = d
		want[d], _ = csvOf(t, c)
	}
	// Three readings a trial (start, round 1, round 3), the GPU's first:
	// a second to the end of the first round on each, then the GPU's or
	// the CPU's rounds half a second each and the other's two seconds.
	clock := func(gpuRound, cpuRound time.Duration) func() time.Time {
		at := []time.Duration{0, time.Second, time.Second + 2*gpuRound, 0, time.Second, time.Second + 2*cpuRound}
		return func() time.Time {
			if len(at) == 0 {
				t.Fatal("the clock was read more than six times")
			}
			d := at[0]
			at = at[1:]
			return time.Unix(0, 0).Add(d)
		}
	}
	for _, tc := range []struct {
		gpu, cpu time.Duration
		on       string
		gpuSec   float64
	}{{time.Second / 2, 2 * time.Second, "cuda", 10.5}, {2 * time.Second, time.Second / 2, "cpu", 39}} {
		autoClock = clock(tc.gpu, tc.cpu)
		got, res := csvOf(t, c)
		// 1 s and 19 rounds each; the trials took 1 s and 2 rounds each.
		trial := AutoTrial{Rounds: 2, GPUSeconds: tc.gpuSec, CPUSeconds: 49.5 - tc.gpuSec, Seconds: 7}
		if res.AutoTrial == nil || *res.AutoTrial != trial {
			t.Errorf("GPU rounds %v, CPU rounds %v: trial %+v, want %+v", tc.gpu, tc.cpu, res.AutoTrial, trial)
		}
		onGPU := strings.HasPrefix(res.Device.Device, "emulated-device")
		if onGPU != (tc.on == "cuda") || !strings.Contains(res.Device.Note, "2 rounds timed on each estimate the run") {
			t.Errorf("GPU rounds %v, CPU rounds %v: device %+v, want %s", tc.gpu, tc.cpu, res.Device, tc.on)
		}
		if got != want[tc.on] || res.Config.Rounds != AutoMinRounds || len(res.Rows) != AutoMinRounds {
			t.Errorf("GPU rounds %v, CPU rounds %v: the run differs from --device %s's (%d rows)", tc.gpu, tc.cpu, tc.on, len(res.Rows))
		}
	}
	if st := dev.Stats(); st.Live != 0 {
		t.Errorf("the runs left %d buffers on the device", st.Live)
	}

	testDevice, autoClock = failingDevice{backendtest.NewDevice()}, time.Now
	got, res := csvOf(t, c)
	if tr := res.AutoTrial; res.Device.Device != "cpu" || tr == nil || !strings.Contains(tr.GPUError, "status 3") || tr.GPUSeconds != 0 || tr.CPUSeconds != 0 ||
		!strings.Contains(res.Device.Note, "failed") || got != want["cpu"] {
		t.Errorf("a GPU that fails: device %+v, trial %+v", res.Device, res.AutoTrial)
	}
}

// profilingDevice is the emulated device as a compute.Profiler: it counts
// its batched GEMMs before Profile and after, and profiles them as one
// call name. Like a GPU backend, it serialises its profile's updates
// (the batches and the evaluation call it from goroutines of their own).
type profilingDevice struct {
	*backendtest.Device
	mu     *sync.Mutex
	on     *bool
	before *int
	calls  *compute.CallTimes
}

func (d profilingDevice) Profile() {
	d.mu.Lock()
	defer d.mu.Unlock()
	*d.on = true
}
func (d profilingDevice) Profiled() []compute.CallTime {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls.List()
}
func (d profilingDevice) GemmStrided(ta, tb bool, m, n, k int, alpha float32, a compute.Tensor, lda, sa int, b compute.Tensor, ldb, sb int, beta float32, c compute.Tensor, ldc, sc, count int) {
	d.mu.Lock()
	if *d.on {
		d.calls.Add("GemmStrided", time.Millisecond, time.Microsecond)
	} else {
		*d.before++
	}
	d.mu.Unlock()
	d.Device.GemmStrided(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, count)
}

// TestDeviceProfile: --device-profile starts the GPU's profile before the
// run's first call and puts what it timed in summary.json's device_time,
// printed by simulate; it is refused where no GPU is named, and on a
// device that cannot time its calls.
func TestDeviceProfile(t *testing.T) {
	defer func() { testDevice = nil }()
	d := profilingDevice{backendtest.NewDevice(), &sync.Mutex{}, new(bool), new(int), &compute.CallTimes{}}
	testDevice = d
	c := Config{Peers: 8, Rounds: 2, Seed: 1, PeerBatch: 4, Device: "cuda", DeviceProfile: true}
	res, err := Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *d.before != 0 || res.DeviceTime == nil || len(res.DeviceTime.Calls) != 1 || res.DeviceTime.Calls[0].Name != "GemmStrided" || res.DeviceTime.Calls[0].Calls == 0 {
		t.Fatalf("%d GEMMs before the profile; device_time %+v", *d.before, res.DeviceTime)
	}
	js, err := json.Marshal(res.DeviceTime)
	if err != nil || !strings.Contains(string(js), `"calls":[{"name":"GemmStrided"`) {
		t.Fatalf("device_time in JSON: %s (%v)", js, err)
	}
	testDevice = backendtest.NewDevice()
	if _, err := Run(context.Background(), c, nil); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--device-profile: emulated-device") || !strings.HasSuffix(err.Error(), "cannot time its calls") {
		t.Fatalf("a device without a profile: %v", err)
	}
	for _, dev := range []string{"cpu", "auto"} {
		c.Device = dev
		if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--device-profile times a GPU's calls: give --device cuda or cuda:N, not "+dev) {
			t.Fatalf("--device %s: %v", dev, err)
		}
	}
}
