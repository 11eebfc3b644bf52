package simulation

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/device"
	"github.com/gossipd/gossipd/peer/trainer"
)

// Many peers on one device. With Config.PeerBatch N > 1 a peer's
// training request (a local update; a gradient for D-PSGD, AD-PSGD and
// push-sum; sufficient factors for SFB) does not train when it is asked
// for: it waits, with the others asked for since, until N wait or until
// the simulation needs one of their results (its done event comes up, or
// a set-aside result is taken: overlap.go), and then they all train in
// one batched call (trainer.RunBatch: their models stacked in a
// model.Stack, every step a few strided-batched GEMMs for all of them).
// The call runs on a goroutine of its own while the event loop goes on,
// one batch at a time, in order. Which requests train together depends
// on the events alone, and on the CPU backend a request's result does not
// depend on the others in its batch (model.Stack), so a run is the same
// whatever the batch size and however many cores run it; against
// requests trained alone it differs by rounding (the batched pass sums in
// another order). On a GPU
// this is what lets one device train ten thousand peers: a peer's update
// of a few examples is far too small to fill a GPU alone.

// DefaultGPUPeerBatch is PeerBatch's default on a GPU: 4096 softmax
// models of Fashion-MNIST are 129 MB, an MLP 784-128-10's 1.7 GB.
const DefaultGPUPeerBatch = 4096

// openDevice opens the device cfg asks for: the backend the peers train
// on (nil for the CPU, whose peers train on single-threaded backends of
// their own) and the choice to report. For --device auto it opens the GPU
// if there is one and the run is long enough to time (chooseAuto then
// times the run on both).
func openDevice(cfg *Config) (compute.Backend, device.Choice, error) {
	dev, _ := device.Parse(cfg.Device) // checked by Validate
	if !isGossip(cfg) {
		if dev.Kind == "cuda" {
			return nil, device.Choice{}, fmt.Errorf("%w: --device %s: the %s baseline trains on the CPU backend (the GPU trains the gossip protocols' peers); use --device cpu or auto", ErrConfig, dev, cfg.Protocol)
		}
		note := ""
		if dev.Kind == "auto" {
			note = "the baselines train on the CPU backend"
		}
		return cpuDevice(dev.String(), note)
	}
	switch {
	case dev.Kind == "cpu":
		return cpuDevice(dev.String(), "")
	case dev.Kind == "auto" && cfg.Rounds < AutoMinRounds:
		return cpuDevice(dev.String(), fmt.Sprintf("auto simulates on the CPU without looking for a GPU: a run of %d rounds is too short to time on a GPU and the CPU (at least %d)", cfg.Rounds, AutoMinRounds))
	}
	if testDevice != nil {
		ch := device.Describe(testDevice)
		ch.Requested = dev.String()
		return testDevice, ch, nil
	}
	be, choice, err := device.Open(dev)
	if err != nil {
		return nil, choice, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if choice.Device == "cpu" {
		return cpuDevice(dev.String(), choice.Note)
	}
	return be, choice, nil
}

// cpuDevice is the choice of the CPU, for a run that asked for
// requested (--device, as parsed: device.Spec.String), with note saying
// why if not "".
func cpuDevice(requested, note string) (compute.Backend, device.Choice, error) {
	_, choice, err := device.Open(device.Spec{Kind: "cpu"}, compute.WithThreads(1))
	if err != nil {
		return nil, choice, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	choice.Requested, choice.Note = requested, note
	return nil, choice, nil
}

// testDevice, set by tests, is the device --device cuda opens.
var testDevice compute.Backend

// peerBatch is the batch size cfg resolves to on the device for spec:
// for a layered model, 1 unless --peer-batch says otherwise (refused for
// one with dropout).
func peerBatch(cfg *Config, gpu compute.Backend, spec model.Spec) (int, error) {
	switch {
	case spec.Stochastic() && cfg.PeerBatch > 1:
		return 0, fmt.Errorf("%w: --peer-batch %d: %s has dropout, whose masks each peer draws from its own randomness: its updates train each on its own; leave out --peer-batch", ErrConfig, cfg.PeerBatch, cfg.Model)
	case spec.Kind == model.Net && cfg.PeerBatch == 0:
		return 1, nil // each alone unless asked: a GPU's default batch of networks could outgrow its memory
	case cfg.PeerBatch > 0:
		return cfg.PeerBatch, nil
	case gpu != nil:
		return DefaultGPUPeerBatch, nil
	}
	return 1, nil
}

// batcher gathers batchable updates and trains them in batches.
type batcher struct {
	size int
	// open are the batches being gathered, in the order they will be
	// sent: open[i] is to be batch number batches+1+i (gathering.go).
	open [][]batchItem
	// gathered counts the requests in open: at most size.
	gathered int
	work     chan batchWork
	// lazy: the models trained stay on the device until fetched
	// (leaveOnDevice).
	lazy bool
	// mixer, where set, holds the mixes the batches' requests may
	// start from (mixer.go): resolved before they train.
	mixer *lazyMixer
	// failure is the first device failure of a mix or a copy asked for
	// outside a training request (the run ends with it).
	failure error
	ws      *trainer.BatchWorkspace
	// trainers and reqs are the batches' goroutine's scratch lists.
	trainers []*trainer.Trainer
	reqs     []*gossip.TrainRequest
	wg       sync.WaitGroup
	// Batches counts the calls, Updates the updates trained in them.
	batches, updates uint64
	// busy is the time the batches' goroutine spent on its work (read
	// once it has stopped); waited the time the event loop spent waiting
	// for it, in waits waits (the loop's).
	busy, waited time.Duration
	waits        uint64
	closed       bool
	// resident is how the models kept on the device served the batches
	// (set once they are done; residentOn: on a device).
	resident   trainer.ResidentStats
	residentOn bool
	// admits, where set, checks a model's Σx² as the peers' cores do: the
	// batcher then promises a random walk's results (promise.go), outputs
	// being the vectors promised in the batches not yet run (each with
	// its batch's number; ran is the number of the last batch run), and
	// missed the first promise broken (or batch failed), found on the
	// batches' goroutine (check).
	admits  func(ss float64) bool
	grads   bool         // gradients promised (to mixes: gossip.Config.HandsMixes), not a random walk's updates
	vectors *vectorMaker // a random walk's promised merges' vectors
	outputs map[*float32]uint64
	ran     atomic.Uint64
	missed  atomic.Pointer[error]
	intos   [][]float32 // the batches' goroutine's scratch list
	// promised counts the results promised.
	promised uint64
}

type batchItem struct {
	tr   *trainer.Trainer
	req  *gossip.TrainRequest
	job  *trainJob
	into []float32 // a promised merge's vector (trainer.RunBatchInto)
}

// batchWork is a batch to train, vectors to fetch from the device, or
// vectors whose consensus distance to measure there (done is closed once
// it is done, err set first if it failed).
type batchWork struct {
	items   []batchItem
	seq     uint64 // a batch's number, from 1 (batcher.batches)
	fetch   [][]float32
	mix     bool // carry out the mixes pending (lazyMixer.flushOn)
	measure *consensusWork
	done    chan struct{}
	err     *error
}

// consensusWork is a measure of vs to take on the device: their
// consensus distance into dist, or (moments) their per-coordinate means
// and deviations into out; ok set if it was taken.
type consensusWork struct {
	vs      [][]float32
	moments bool
	dist    float64
	out     []float64
	ok      bool
}

// leaveOnDevice reports whether a run may leave the models its batches
// train on the device until it reads them (trainer.LeaveOnDevice): where
// nothing but the evaluation reads a model on the host. Its peers' cores
// must not read them (gossip.Core.TrainedModelsUnread: a random walk
// that merges by age or by a robust rule), nor may the simulation: no
// codec, bitflip attack (which negates the model sent: the other attacks
// send new vectors, and ipm's and alie's moments are taken where the
// models are), voting, DP-SGD (whose unrecorded steps are skipped on the
// host), churn (a paused peer's request too), netsplit or turnover.
func (s *sim) leaveOnDevice() bool {
	cfg := &s.cfg
	return len(s.peers) > 0 && s.peers[0].Core().TrainedModelsUnread() &&
		!cfg.Codec && cfg.Attack != "bitflip" && !cfg.Voting && !cfg.DP.Enabled() &&
		cfg.Churn == 0 && len(cfg.ChurnTrace) == 0 && len(cfg.Netsplits) == 0 && cfg.Turnover == 0
}

// testPoison, set by tests, fills the host vectors of models left on the
// device with NaN, so that a read that did not fetch them shows.
var testPoison bool

// newBatcher starts a batcher of size updates a call on be (gpu: the same
// device backend, or nil for the CPU).
func newBatcher(spec model.Spec, be, gpu compute.Backend, size int) (*batcher, error) {
	st, err := model.NewStack(spec, size, model.WithBackend(be))
	if err != nil {
		return nil, err
	}
	b := &batcher{size: size, work: make(chan batchWork, 1)}
	ws := trainer.NewBatchWorkspace(st)
	b.ws = ws
	b.wg.Go(func() {
		defer ws.Close()
		defer func() { b.resident, b.residentOn = ws.Resident() }()
		for wk := range b.work {
			t0 := time.Now()
			b.serve(wk, gpu)
			b.busy += time.Since(t0)
		}
	})
	return b, nil
}

// serve carries out wk on the batches' goroutine: a batch to train (its
// jobs' done closed once their results are in), or mixes, a consensus
// distance or copies to the host (wk.done closed).
func (b *batcher) serve(wk batchWork, gpu compute.Backend) {
	ws := b.ws
	switch {
	case wk.mix:
		func() {
			defer deviceFailure(gpu, "mixing models on the device", wk.err)
			b.mixer.flushOn(ws, math.MaxUint64)
		}()
		close(wk.done)
		return
	case wk.measure != nil:
		m := wk.measure
		func() {
			if m.moments {
				defer deviceFailure(gpu, fmt.Sprintf("taking the moments of %d models on the device", len(m.vs)), wk.err)
				m.out, m.ok = ws.Moments(m.vs)
				return
			}
			defer deviceFailure(gpu, fmt.Sprintf("measuring the consensus distance of %d models on the device", len(m.vs)), wk.err)
			m.dist, m.ok = ws.Consensus(m.vs)
		}()
		close(wk.done)
		return
	case wk.done != nil:
		func() {
			defer deviceFailure(gpu, fmt.Sprintf("copying %d models from the device", len(wk.fetch)), wk.err)
			ws.Fetch(wk.fetch...)
		}()
		close(wk.done)
		return
	}
	items := wk.items
	trainers, reqs, intos := b.trainers[:0], b.reqs[:0], b.intos[:0]
	for _, it := range items {
		trainers, reqs, intos = append(trainers, it.tr), append(reqs, it.req), append(intos, it.into)
	}
	b.trainers, b.reqs, b.intos = trainers, reqs, intos
	res, err := func() (res []*gossip.TrainResult, err error) {
		defer deviceFailure(gpu, fmt.Sprintf("a batch of %d training requests", len(reqs)), &err)
		switch {
		case b.mixer == nil:
		case b.mixer.dev != nil:
			b.mixer.flushOn(ws, wk.seq) // the mixes the requests start from, with the rest pending
		default:
			compute.ForEach(len(reqs), runtime.GOMAXPROCS(0), func(i int) { b.mixer.hostValues(reqs[i].Params) })
		}
		return trainer.RunBatchInto(ws, trainers, reqs, intos)
	}()
	if b.admits != nil {
		b.keep(items, res, err)
	}
	for i, it := range items {
		if err != nil {
			it.job.err = err
		} else {
			it.job.res = res[i]
		}
	}
	b.ran.Store(wk.seq)
	close(items[0].job.done) // the batch's, which its jobs share (send)
}

// deviceFailure turns a device backend's panic (a CUDA failure, such as
// running out of device memory) into *err, so that the run ends with a
// message instead of a crash. The CPU's panics are programming errors
// and stay panics.
func deviceFailure(gpu compute.Backend, what string, err *error) {
	if gpu == nil {
		return
	}
	if r := recover(); r != nil {
		*err = fmt.Errorf("simulation: %s on %s failed: %v", what, gpu.Name(), r)
	}
}

// add queues req of peer's tr and returns its job, its result promised
// where the batcher promises it (promise.go), in the first batch being
// gathered that may take it (gathering.go); the first batch starts when
// it is full or when more than a batch's worth of requests is held.
func (b *batcher) add(tr *trainer.Trainer, req *gossip.TrainRequest, peer gossip.PeerID) *trainJob {
	j := &trainJob{queued: true, batched: true} // done is its batch's (send)
	i := b.place(req)
	for len(b.open) <= i {
		b.open = append(b.open, nil)
	}
	j.seq = b.batches + 1 + uint64(i)
	var into []float32
	if b.promises(req) {
		into = b.promise(j, tr, req, string(peer))
	}
	b.open[i] = append(b.open[i], batchItem{tr, req, j, into})
	b.gathered++
	for len(b.open) > 0 && (len(b.open[0]) >= b.size || b.gathered > b.size) {
		b.send()
	}
	return j
}

// leaveOnDevice makes the batches leave the models they train on the
// device, where there is one; before the first batch.
func (b *batcher) leaveOnDevice() {
	b.lazy = b.ws.LeaveOnDevice(testPoison)
}

// fetch copies to the host the models among vs that the batches left on
// the device, after the batches started before it.
func (b *batcher) fetch(vs [][]float32) error {
	if !b.onDevice() || b.closed {
		return nil
	}
	return b.call(batchWork{fetch: vs})
}

// call hands wk to the batches' goroutine, after the batches started
// before it, and waits for it: its device failure, if any.
func (b *batcher) call(wk batchWork) error {
	if b.admits != nil {
		b.flush() // its vectors may be promised in the batches being gathered
	}
	var err error
	wk.done, wk.err = make(chan struct{}), &err
	b.work <- wk
	b.wait(wk.done)
	return err
}

// onDevice reports whether the batches may leave the peers' models on
// the device: their host vectors are then read only after fetch.
func (b *batcher) onDevice() bool { return b.lazy || b.mixes() }

// consensus measures the consensus distance of vs on the device, after
// the batches started before it (false: it could not, for want of
// room, or the run failed).
func (b *batcher) consensus(vs [][]float32) (float64, bool) {
	if b.closed || b.failure != nil {
		return 0, false
	}
	m := &consensusWork{vs: vs}
	err := b.call(batchWork{measure: m})
	b.failed(err)
	return m.dist, m.ok && err == nil
}

// moments takes the per-coordinate means (out[:n]) and deviations
// (out[n:]) of vs on the device, after the batches started before it
// (false: it could not, for want of room, or the run failed).
func (b *batcher) moments(vs [][]float32) ([]float64, bool) {
	if b.closed || b.failure != nil {
		return nil, false
	}
	m := &consensusWork{vs: vs, moments: true}
	err := b.call(batchWork{measure: m})
	b.failed(err)
	return m.out, m.ok && err == nil
}

// mixes reports whether the mixes run on the batches' device.
func (b *batcher) mixes() bool { return b.mixer != nil && b.mixer.dev == b }

// mix carries out the mixes pending on the device, after the batches
// started before it.
func (b *batcher) mix() {
	if b.closed || b.failure != nil {
		return // after a failure the run ends, with it
	}
	b.failed(b.call(batchWork{mix: true}))
}

// failed records err, the first device failure, as the run's (sim.err
// by way of failure).
func (b *batcher) failed(err error) {
	if err != nil && b.failure == nil {
		b.failure = err
	}
}

// close waits for the batches started and stops; updates still queued
// were never needed.
func (b *batcher) close() {
	if b.closed {
		return
	}
	b.closed = true
	if b.admits != nil {
		b.flush() // promised, so their results are checked
	}
	close(b.work)
	b.wg.Wait()
	b.check()
	if b.vectors != nil {
		b.vectors.close()
	}
}

// await waits for job's result, starting its batch if it is still queued.
func (s *sim) await(j *trainJob) {
	if !j.batched { // the training pool's
		<-j.done
		return
	}
	if j.queued {
		s.batch.flushTo(j.seq)
	}
	s.batch.wait(j.done)
}

// wait waits for done, counting the time if it is not closed yet.
func (b *batcher) wait(done <-chan struct{}) {
	select {
	case <-done:
		return
	default:
	}
	t0 := time.Now()
	<-done
	b.waited += time.Since(t0)
	b.waits++
}

// deviceTime is the run's DeviceTime, once the batches are done.
func (s *sim) deviceTime() *DeviceTime {
	b := s.batch
	waited, waits := b.waited, b.waits
	if m := s.mixer; m != nil {
		m.mu.Lock()
		waited, waits = waited+m.waited, waits+m.waits
		m.mu.Unlock()
	}
	return &DeviceTime{BusySeconds: b.busy.Seconds(), WaitedSeconds: waited.Seconds(), Waits: waits, Promised: b.promised}
}

// profiled puts the GPU's profile in res's device time
// (Config.DeviceProfile).
func (s *sim) profiled(res *Result) {
	p, ok := s.gpu.(compute.Profiler)
	if !ok || !s.cfg.DeviceProfile {
		return
	}
	if res.DeviceTime == nil {
		res.DeviceTime = &DeviceTime{}
	}
	res.DeviceTime.Calls = p.Profiled()
}

// batchFailed makes the batches' failure the run's, if it has none: a
// mix or a copy on the device that failed, or a batch's, or a promise
// broken (promise.go).
func (s *sim) batchFailed() {
	s.batch.check()
	if s.batch.failure != nil && s.err == nil {
		s.err = s.batch.failure
	}
}
