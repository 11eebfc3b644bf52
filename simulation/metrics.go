package simulation

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/device"
	"github.com/gossipd/gossipd/peer/trainer"
)

// Row is one line of metrics.csv: the state of the network after a round.
type Row struct {
	Round int
	// Time is virtual seconds.
	Time float64
	// Messages and Bytes are cumulative.
	Messages, Bytes uint64
	// Test accuracy and loss over the evaluated peers.
	MeanAcc, MinAcc, MaxAcc    float64
	MeanLoss, MinLoss, MaxLoss float64
	// Consensus is (1/n)·Σ‖x_i − x̄‖² over all peers.
	Consensus float64
	Online    int
	// accs is each evaluated peer's accuracy, in the peers' order.
	accs []float64
}

// setAccuracy takes the accuracy and loss figures of m.
func (r *Row) setAccuracy(m Row) {
	r.MeanAcc, r.MinAcc, r.MaxAcc = m.MeanAcc, m.MinAcc, m.MaxAcc
	r.MeanLoss, r.MinLoss, r.MaxLoss = m.MeanLoss, m.MinLoss, m.MaxLoss
}

// CSVHeader is metrics.csv's first line.
const CSVHeader = "round,time,messages,bytes,mean_accuracy,min_accuracy,max_accuracy,mean_loss,min_loss,max_loss,consensus_distance,online\n"

// WriteCSV writes rows as metrics.csv.
func WriteCSV(w io.Writer, rows []Row) error {
	if _, err := io.WriteString(w, CSVHeader); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	for _, r := range rows {
		_, err := fmt.Fprintf(w, "%d,%s,%d,%d,%s,%s,%s,%s,%s,%s,%s,%d\n", r.Round, f(r.Time), r.Messages, r.Bytes,
			f(r.MeanAcc), f(r.MinAcc), f(r.MaxAcc), f(r.MeanLoss), f(r.MinLoss), f(r.MaxLoss), f(r.Consensus), r.Online)
		if err != nil {
			return err
		}
	}
	return nil
}

// DeviceTime is where a batched run's time went, as measured by the
// wall clock (so, unlike the rest of the summary, not the same from run
// to run): BusySeconds on the batches' goroutine (training, mixing,
// measuring and copying on the device, with the driver's calls and their
// host side), and WaitedSeconds of the event loop's, over Waits waits,
// for a batch's results, a copy or a mix. Where the loop waits nearly as
// long as the device works, the run is bound by the device; where it
// hardly waits, by the event loop.
type DeviceTime struct {
	BusySeconds   float64 `json:"busy_seconds"`
	WaitedSeconds float64 `json:"waited_seconds"`
	Waits         uint64  `json:"waits"`
	// Promised counts the updates whose results the event loop took
	// before their batch had computed them (a random walk's or D-PSGD's
	// gradients on a device: promise.go), so without waiting for it.
	Promised uint64 `json:"promised,omitempty"`
	// Calls, with Config.DeviceProfile, is the time of the device's calls
	// by name, the longest first, each call timed apart (so the run's
	// other figures are of a slower run; of both runs where a broken
	// promise had the run simulated twice, promise.go).
	Calls []compute.CallTime `json:"calls,omitempty"`
}

// Result is the outcome of a run.
type Result struct {
	Config Config `json:"-"`
	Rows   []Row  `json:"-"`
	// FinalAccuracy is the mean test accuracy of the evaluated peers' models
	// on the whole test set at the end.
	FinalAccuracy float64 `json:"final_accuracy"`
	// Device is where the peers trained and why (--device).
	Device device.Choice `json:"device"`
	// DevicePeakBytes is the most device memory the peers' backend held
	// at once (a GPU's: tensors and scratch buffers; compute.MemoryCounter;
	// absent on the CPU, whose memory is the process's peak RSS; under
	// --device auto, the GPU's trial included).
	DevicePeakBytes int64 `json:"device_peak_bytes,omitempty"`
	// AutoTrial is what --device auto timed on the GPU and the CPU to
	// choose between them (absent where it timed nothing: no GPU, a short
	// run, another --device).
	AutoTrial *AutoTrial `json:"auto_trial,omitempty"`
	// PeerBatch is how many requests (local updates, gradients) trained
	// in one batched call at most (Config.PeerBatch; absent: each alone);
	// Batches counts the calls and BatchedUpdates the requests they
	// trained.
	PeerBatch      int    `json:"peer_batch,omitempty"`
	Batches        uint64 `json:"batches,omitempty"`
	BatchedUpdates uint64 `json:"batched_updates,omitempty"`
	// DeviceTime says, for a run whose updates trained in batches, how
	// long the batches' goroutine worked and how long the event loop
	// waited for it.
	DeviceTime *DeviceTime `json:"device_time,omitempty"`
	// Resident says, on a device, how the models its batches keep there
	// between calls served them: vectors found there (hits), copied in
	// (uploads), and copied in for want of room (full).
	Resident         *trainer.ResidentStats `json:"resident,omitempty"`
	FinalMinAccuracy float64                `json:"final_min_accuracy"`
	FinalMaxAccuracy float64                `json:"final_max_accuracy"`
	FinalLoss        float64                `json:"final_loss"`
	EvaluatedPeers   int                    `json:"evaluated_peers"`
	// FinalVotingAccuracy is the mean accuracy of the evaluated peers'
	// majority votes over their cached models (Config.Voting).
	FinalVotingAccuracy float64 `json:"final_voting_accuracy,omitempty"`
	// ByzantinePeers attacked (Config.Byzantine); accuracies cover the
	// honest peers only.
	ByzantinePeers int `json:"byzantine_peers,omitempty"`
	// DPEpsilon is each peer's spent ε (DP-SGD), at DPDelta; DPEpsilonMax
	// their maximum, the guarantee of the run.
	DPEpsilon    []float64 `json:"dp_epsilon_per_peer,omitempty"`
	DPEpsilonMax float64   `json:"dp_epsilon_max,omitempty"`
	DPDelta      float64   `json:"dp_delta,omitempty"`
	// With turnover: the live members at the end, how many peers joined,
	// and (push-sum) the sum of the live members' weights, which stays
	// their number when members leave (not when they die).
	LiveMembers      int     `json:"live_members,omitempty"`
	JoinedPeers      int     `json:"joined_peers,omitempty"`
	PushSumWeightSum float64 `json:"pushsum_weight_sum,omitempty"`
	// PushSumWeightDead is the weight the members that died took with
	// them: with the live sum, every peer's unit is accounted for.
	PushSumWeightDead float64 `json:"pushsum_weight_dead,omitempty"`
	// FinalAccuracySpread is the final accuracy over the evaluated peers:
	// least, percentiles, greatest (FinalMinAccuracy, FinalMaxAccuracy).
	FinalAccuracySpread Spread `json:"final_accuracy_spread"`
	// Reach: how many models each peer took in, and the views' in-degrees.
	Reach Reach `json:"reach"`
	Stats
}

// evalChunk is how many test examples the evaluator measures every model
// on at a time: 256 rows of Fashion-MNIST are 800 KB, within a core's L2.
const evalChunk = 256

// evaluator measures peers' models on test data, several at once: one
// model per core, each on one thread, or on the simulation's device
// (onDevice).
type evaluator struct {
	m          *model.Model
	workers    []*model.Model
	dev        *onDevice // nil: on the host
	sub        *dataset.Dataset
	roundPeers []int
	finalPeers []int
}

// newEvaluator samples the peers to evaluate from eligible (nil: all).
// With gpu (the peers' device; nil: the CPU), it measures them there.
func newEvaluator(spec model.Spec, test *dataset.Dataset, cfg Config, eligible []int, gpu compute.Backend) (*evaluator, error) {
	m, err := model.New(spec)
	if err != nil {
		return nil, err
	}
	workers := make([]*model.Model, runtime.GOMAXPROCS(0))
	for i := range workers {
		if workers[i], err = model.New(spec, model.WithBackend(compute.NewCPU(compute.WithThreads(1)))); err != nil {
			return nil, err
		}
	}
	var dev *onDevice // last: nothing after it fails
	if gpu != nil {
		if dev, err = newOnDevice(spec, gpu); err != nil {
			return nil, err
		}
	}
	rng := dataset.NewRand(cfg.Seed ^ 0x6576616c)
	idx := rng.Perm(test.N)[:min(cfg.EvalExamples, test.N)]
	slices.Sort(idx)
	if eligible == nil {
		eligible = make([]int, cfg.Peers)
		for i := range eligible {
			eligible[i] = i
		}
	}
	pick := func(k int) []int {
		if k == 0 || k >= len(eligible) {
			return slices.Clone(eligible)
		}
		out := make([]int, k)
		for j, r := range rng.Perm(len(eligible))[:k] {
			out[j] = eligible[r]
		}
		slices.Sort(out)
		return out
	}
	return &evaluator{m: m, workers: workers, dev: dev, sub: test.Subset(idx), roundPeers: pick(cfg.EvalPeers), finalPeers: pick(cfg.FinalEvalPeers)}, nil
}

// close frees what the evaluator holds on a device.
func (e *evaluator) close() {
	if e.dev != nil {
		e.dev.close()
	}
}

// row evaluates xs[i] for i in peers on ds (indices past len(xs) use the last
// vector, so baselines with one model pass a single one). It fails only
// where the device does.
func (e *evaluator) row(xs [][]float32, peers []int, ds *dataset.Dataset) (Row, error) {
	var tallies []model.Tally
	if e.dev != nil {
		var err error
		if tallies, err = e.dev.tally(xs, peers, ds); err != nil {
			return Row{}, err
		}
	} else {
		tallies = e.tally(xs, peers, ds)
	}
	r := Row{MinAcc: math.Inf(1), MinLoss: math.Inf(1), MaxAcc: math.Inf(-1), MaxLoss: math.Inf(-1)}
	mets := make([]model.Metrics, len(peers))
	for j := range tallies {
		mets[j] = tallies[j].Metrics(ds.Classes)
	}
	// Summed in the peers' order, whichever worker measured each.
	for _, met := range mets {
		r.MeanAcc += met.Accuracy
		r.MeanLoss += met.Loss
		r.MinAcc, r.MaxAcc = math.Min(r.MinAcc, met.Accuracy), math.Max(r.MaxAcc, met.Accuracy)
		r.MinLoss, r.MaxLoss = math.Min(r.MinLoss, met.Loss), math.Max(r.MaxLoss, met.Loss)
	}
	r.MeanAcc /= float64(len(peers))
	r.MeanLoss /= float64(len(peers))
	r.accs = make([]float64, len(mets))
	for j, met := range mets {
		r.accs[j] = met.Accuracy
	}
	return r, nil
}

// tally measures xs[i] for i in peers on ds on the host's cores.
func (e *evaluator) tally(xs [][]float32, peers []int, ds *dataset.Dataset) []model.Tally {
	// Each worker takes every W-th peer and walks the test set once, in
	// chunks that stay in its cache while all its peers are measured on
	// them: the test set is read from memory once per worker instead of
	// once per peer. Each peer's tally adds its chunks in order, so the
	// numbers do not depend on the number of workers.
	tallies := make([]model.Tally, len(peers))
	workers := e.workers[:min(len(e.workers), len(peers))]
	var wg sync.WaitGroup
	for w, m := range workers {
		wg.Go(func() {
			d := ds.D
			for lo := 0; lo < ds.N; lo += evalChunk {
				k := min(evalChunk, ds.N-lo)
				for j := w; j < len(peers); j += len(workers) {
					m.TallyWith(&tallies[j], xs[min(peers[j], len(xs)-1)], ds.X[lo*d:(lo+k)*d], ds.Y[lo:lo+k], k)
				}
			}
		})
	}
	wg.Wait()
	return tallies
}

// maxSnapshot bounds the memory that measuring a round's row beside the
// simulation may copy; larger sets of models are measured in place, with
// the simulation waiting (10,000 MLP peers evaluated at 10% would copy
// 400 MB).
const maxSnapshot = 64 << 20

// measurement is a row of accuracy and loss being measured (start).
type measurement struct {
	done chan struct{}
	row  Row
	err  error
}

// wait returns the measured figures, or the device's failure.
func (m *measurement) wait() (Row, error) {
	<-m.done
	return m.row, m.err
}

// start measures xs[i] for i in peers on ds, as row does, beside the
// caller: the models are copied first, so the caller may change them
// as soon as start returns. Sets of models larger than maxSnapshot are
// measured before start returns. The figures are the same either way.
func (e *evaluator) start(xs [][]float32, peers []int, ds *dataset.Dataset) *measurement {
	m := &measurement{done: make(chan struct{})}
	size := 0
	for _, i := range peers {
		size += 4 * len(xs[min(i, len(xs)-1)])
	}
	if size > maxSnapshot {
		m.row, m.err = e.row(xs, peers, ds)
		close(m.done)
		return m
	}
	snap := make([][]float32, len(peers))
	idx := make([]int, len(peers))
	for j, i := range peers {
		snap[j], idx[j] = slices.Clone(xs[min(i, len(xs)-1)]), j
	}
	go func() {
		defer close(m.done)
		m.row, m.err = e.row(snap, idx, ds)
	}()
	return m
}

// voteAccuracy is the accuracy of the majority vote of sets on ds.
func (e *evaluator) voteAccuracy(sets [][]float32, ds *dataset.Dataset) float64 {
	pred := make([]int32, ds.N)
	if err := e.m.Vote(pred, sets, ds.X, ds.N); err != nil {
		panic(err) // every peer has the job's layout
	}
	ok := 0
	for i, p := range pred {
		if p == ds.Y[i] {
			ok++
		}
	}
	return float64(ok) / float64(ds.N)
}
