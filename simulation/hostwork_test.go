package simulation

import (
	"context"
	"flag"
	"strings"
	"sync"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// BenchmarkHostWork times what a simulation on a GPU asks of the host,
// the part a GPU does not speed up: the run on nullDevice, whose kernels
// do nothing, so that the event loop, the batches' host side, the
// allocations and the copies asked for are all that takes time (the
// accuracy is meaningless). 2,000 MLP 784-128-10 peers of Fashion-MNIST,
// 20 rounds evaluated at the end, a random walk, D-PSGD, push-sum, GoSGD
// and AD-PSGD (-hostwork.protocols names others):
//
//	go test ./simulation -run '^$' -bench HostWork -benchtime 1x
//
// It reports the updates a batch trained (a GPU's work per call), the
// batches' goroutine's busy time and the event loop's waits for it
// (summary.json's device_time), and checks that the models stayed on the device: a random walk's
// trained models left there, the other protocols' mixes computed there,
// and the consensus distance measured there.
//
// -hostwork.peers sets the number of peers (the H200's figures are of
// 10,000), -hostwork.aggregator a robust rule (its merges on the device
// too; not GoSGD's or AD-PSGD's, which have none), -hostwork.compression
// a --compression (fp16, int8, or CHOCO's randk:F for D-PSGD, push-sum
// and AD-PSGD), -hostwork.attack an attack by a tenth of the peers.
func BenchmarkHostWork(b *testing.B) {
	for _, protocol := range strings.Split(*hostworkProtocols, ",") {
		b.Run(protocol, func(b *testing.B) {
			c := Config{Settings: job.Settings{Model: "mlp", Protocol: protocol, Aggregator: *hostworkAggregator, Compression: *hostworkCompression}, Data: job.Data{Dataset: "fashion-mnist"}, Hidden: []int{128},
				Peers: *hostworkPeers, Rounds: 20, EvalEvery: 20, Seed: 1, Device: "cuda"}
			if *hostworkAttack != "" {
				c.Byzantine, c.Attack = 0.1, *hostworkAttack
			}
			defer cli.CollectSooner()() // as the simulate command (Execute) runs
			defer cli.NoHeapProfile()()
			testDevice = newNullDevice()
			defer func() { testDevice = nil }()
			var res *Result
			for b.Loop() {
				var err error
				if res, err = Run(context.Background(), c, nil); err != nil {
					b.Fatal(err)
				}
			}
			if res.Device.Note != "" { // simulated twice, for one
				b.Logf("%s: %s", protocol, res.Device.Note)
			}
			st := res.Resident
			if st == nil || st.Consensus != uint64(len(res.Rows)) || (protocol == gossip.RandomWalk && st.Left == 0) || (protocol != gossip.RandomWalk && st.Mixed == 0) {
				b.Fatalf("%s on the device: resident counts %+v, %d rows", protocol, st, len(res.Rows))
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(res.Stats.Updates), "µs/update")
			b.ReportMetric(float64(res.BatchedUpdates)/float64(max(1, res.Batches)), "updates/batch")
			// Vectors that found the device's arena full: mixed on the
			// host, where nullDevice left them unwritten, so that a
			// promise may break and the run be simulated again
			// (promised 0).
			b.ReportMetric(float64(st.Full), "full")
			if dt := res.DeviceTime; dt != nil {
				b.ReportMetric(dt.BusySeconds, "busy-s")
				b.ReportMetric(dt.WaitedSeconds, "waited-s")
				b.ReportMetric(float64(dt.Waits), "waits")
				b.ReportMetric(float64(dt.Promised), "promised")
			}
		})
	}
}

var hostworkPeers = flag.Int("hostwork.peers", 2000, "BenchmarkHostWork's peers")

var hostworkAggregator = flag.String("hostwork.aggregator", "", "BenchmarkHostWork's --aggregator (a robust rule of random walk, D-PSGD and push-sum: median, trimmed:B, krum:F, multikrum:F, clipped[:TAU])")

var hostworkCompression = flag.String("hostwork.compression", "", "BenchmarkHostWork's --compression (fp16, int8, randk:F)")

var hostworkAttack = flag.String("hostwork.attack", "", "BenchmarkHostWork's --attack of a tenth of the peers (bitflip, gaussian, ipm, alie, labelflip)")

var hostworkProtocols = flag.String("hostwork.protocols", strings.Join([]string{gossip.RandomWalk, gossip.DPSGD, gossip.PushSum, gossip.GoSGD, gossip.ADPSGD}, ","), "BenchmarkHostWork's protocols")

// nullDevice is a device of addresses only, whose kernels do nothing
// (BenchmarkHostWork): the emulated device for what it does not
// override, which the simulation does not call.
type nullDevice struct {
	*backendtest.Device
	mu   *sync.Mutex
	next *uintptr
}

func newNullDevice() nullDevice {
	n := uintptr(1 << 20)
	return nullDevice{backendtest.NewDevice(), &sync.Mutex{}, &n}
}

func (d nullDevice) Alloc(n int) compute.Tensor {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := *d.next
	*d.next += uintptr(4*n) + 256
	return compute.DeviceTensor(a, n)
}
func (nullDevice) Free(compute.Tensor)                   {}
func (nullDevice) DeviceMemory() (int64, int64)          { return 0, 0 }
func (nullDevice) TotalMemory() int64                    { return 140 << 30 }
func (nullDevice) Copy(dst, src compute.Tensor)          {}
func (d nullDevice) Load(x []float32) compute.Tensor     { return d.Alloc(len(x)) }
func (nullDevice) Store(dst []float32, t compute.Tensor) {}
func (nullDevice) AllocPinned(n int) ([]float32, func(), error) {
	return make([]float32, n), func() {}, nil
}
func (nullDevice) GemmStrided(bool, bool, int, int, int, float32, compute.Tensor, int, int, compute.Tensor, int, int, float32, compute.Tensor, int, int, int) {
}
func (nullDevice) Gemm(bool, bool, int, int, int, float32, compute.Tensor, int, compute.Tensor, int, float32, compute.Tensor, int) {
}
func (nullDevice) CombineRows(compute.Tensor, compute.Tensor, int, []int32, []int32, []int32, []float32) {
}
func (nullDevice) TrimmedRows(compute.Tensor, compute.Tensor, int, []int32, []int32, []int32, []int32) {
}
func (nullDevice) PairDistanceRows([]float64, compute.Tensor, int, []int32, []int32)          {}
func (nullDevice) AverageRows(compute.Tensor, compute.Tensor, int, []int32, []int32, []int32) {}
func (nullDevice) ClipRows(compute.Tensor, compute.Tensor, int, []int32, []int32, []int32, []float64) {
}
func (nullDevice) QuantizeRows(compute.Tensor, compute.Tensor, int, []int32, []int32, compute.Quantization, int) {
}
func (nullDevice) MaskRows(compute.Tensor, compute.Tensor, int, []int32, []int32, []int32, []int32) {
}
func (nullDevice) TopKRows(_, _ compute.Tensor, _ int, rows, _ []int32, k int, bytes []int32) {
	for i := range rows {
		bytes[i] = int32(k) // the fewest a step's indices take: a byte each
	}
}
func (nullDevice) InterpolateRows(compute.Tensor, compute.Tensor, int, []int32, []int32, []int32, []float32) {
}
func (nullDevice) SumSquaresRows(out []float64, x compute.Tensor, n int, rows []int32) {
	for i := range rows {
		out[i] = 1
	}
}
func (nullDevice) GatherRows(dst, src compute.Tensor, rows []int, cols, ld int)   {}
func (nullDevice) ScaleRows(x compute.Tensor, m, n int, s []float32)              {}
func (nullDevice) ReLUInto(dst, src compute.Tensor)                               {}
func (nullDevice) ReLU(x compute.Tensor)                                          {}
func (nullDevice) ReLUBackward(g, z compute.Tensor)                               {}
func (nullDevice) Axpby(y compute.Tensor, a float32, x compute.Tensor, b float32) {}
func (nullDevice) MeanRows(dst, src compute.Tensor, n int, rows []int32)          {}
func (nullDevice) MomentsRows([]float64, compute.Tensor, int, []int32)            {}
func (nullDevice) DistanceRows(out []float64, x compute.Tensor, n int, rows []int32, ref compute.Tensor, chunk int) {
}
func (nullDevice) TallyRows(logits compute.Tensor, y []int32, k, m, n int, hinge bool, loss []float64, correct []int) {
}
func (nullDevice) SoftmaxCrossEntropyRows(probs, grad, logits compute.Tensor, y []int32, m, n int, scale float32, loss []float64) int {
	return 0
}
func (nullDevice) HingeOneVsRestRows(grad, scores compute.Tensor, y []int32, m, n int, scale float32, loss []float64) int {
	return 0
}
