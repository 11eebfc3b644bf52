package simulation

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/peer/trainer"
)

// Training in virtual time. By default a local update finishes at the
// instant it starts, as it always has. With Config.Compute (or
// Config.ComputeTrace) every peer gets a compute speed in FLOP/s, and an
// update of E examples on a model of P parameters finishes 6·P·E/speed
// seconds later: the usual count of a dense network's training work, two
// FLOPs per weight and example forward and four backward. Meanwhile the
// peer's core goes on receiving and ticking, as a daemon's does while its
// trainer runs, so slow peers (stragglers) hold models longer and forward
// them later, on a simulated fleet as on a real one. The work charged is
// what the request plans (its steps times the batch), so the update can
// run on another core while the simulation goes on (trainPool).

// computeSpeeds gives each peer its speed in FLOP/s; nil means training
// takes no virtual time.
type computeSpeeds func(peer int) float64

// trainFLOPs is the work of one update: 6 FLOPs per parameter and example.
func trainFLOPs(params, examples int) float64 { return 6 * float64(params) * float64(examples) }

// parseCompute reads a speed distribution: "" or "0" (instant training),
// RATE (every peer), uniform:LO:HI or lognormal:MEDIAN:SIGMA, with rates in
// FLOP/s and an optional k, M, G or T suffix ("20G"). trace, when not
// empty, gives peer i the speed on line i mod len(trace) instead. Each
// peer's draw comes from its own stream of seed, so a speed does not
// depend on the order peers are created or on the network's randomness.
func parseCompute(spec string, trace []float64, seed uint64) (computeSpeeds, error) {
	if len(trace) > 0 {
		if spec != "" && spec != "0" {
			return nil, fmt.Errorf("%w: --compute %q and --compute-trace together: give one", ErrConfig, spec)
		}
		return func(i int) float64 { return trace[i%len(trace)] }, nil
	}
	bad := func() (computeSpeeds, error) {
		return nil, fmt.Errorf("%w: --compute %q, want 0, RATE, uniform:LO:HI or lognormal:MEDIAN:SIGMA (FLOP/s, with k, M, G or T: 20G)", ErrConfig, spec)
	}
	draw := func(i int) *rand.Rand { return rand.New(rand.NewPCG(seed^0x636f6d70757465, uint64(i))) }
	parts := strings.Split(spec, ":")
	switch parts[0] {
	case "", "0":
		if len(parts) != 1 {
			return bad()
		}
		return nil, nil
	case "uniform":
		if len(parts) != 3 {
			return bad()
		}
		lo, err1 := parseRate(parts[1])
		hi, err2 := parseRate(parts[2])
		if err1 != nil || err2 != nil || hi < lo {
			return bad()
		}
		return func(i int) float64 { return lo + draw(i).Float64()*(hi-lo) }, nil
	case "lognormal":
		if len(parts) != 3 {
			return bad()
		}
		med, err1 := parseRate(parts[1])
		sigma, err2 := strconv.ParseFloat(parts[2], 64)
		if err1 != nil || err2 != nil || !(sigma >= 0) || math.IsInf(sigma, 0) {
			return bad()
		}
		return func(i int) float64 { return med * math.Exp(sigma*draw(i).NormFloat64()) }, nil
	}
	r, err := parseRate(spec)
	if err != nil || len(parts) != 1 {
		return bad()
	}
	return func(int) float64 { return r }, nil
}

// parseRate reads a finite rate of at least 1 with an optional k, M, G or
// T suffix.
func parseRate(s string) (float64, error) {
	mul := 1.0
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mul, s = 1e3, s[:n-1]
		case 'M':
			mul, s = 1e6, s[:n-1]
		case 'G':
			mul, s = 1e9, s[:n-1]
		case 'T':
			mul, s = 1e12, s[:n-1]
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	v *= mul
	if err != nil || !(v >= 1) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("rate %.40q: want at least 1 FLOP/s", s)
	}
	return v, nil
}

// ParseComputeTrace reads compute speeds, one per line, in FLOP/s with an
// optional k, M, G or T suffix (peer i gets line i, wrapping around);
// blank lines and lines starting with # are skipped.
func ParseComputeTrace(data []byte, name string) ([]float64, error) {
	var out []float64
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		v, err := parseRate(t)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no speeds", name)
	}
	return out, nil
}

// ReadComputeTrace reads a compute trace file (ParseComputeTrace).
func ReadComputeTrace(path string) ([]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseComputeTrace(b, path)
}

// trainPool runs updates that take virtual time on every core, one peer's
// update per goroutine, each goroutine computing in its own workspace
// (single-threaded kernels: no nested threading). An update's result
// depends only on its request and its peer's trainer, which runs one
// request at a time, and the event loop takes results in event order, so
// a run is the same whatever the number of cores.
type trainPool struct {
	jobs chan func(*trainer.Workspace)
	wg   sync.WaitGroup
}

type trainJob struct {
	done chan struct{} // closed once res or err is set; a batch's jobs share one
	// batched: trained in a batch (batch.go), not on the pool; queued:
	// waiting in the batcher for its batch to start.
	batched, queued bool
	// seq is the number of its batch (batcher.open).
	seq uint64
	res *gossip.TrainResult
	err error
	// promise, where set, is the result handed over before the batch has
	// run (promise.go), of peer's update.
	promise *gossip.TrainResult
	peer    string
}

func newTrainPool(spec model.Spec, workers int) (*trainPool, error) {
	p := &trainPool{jobs: make(chan func(*trainer.Workspace), 4*workers)}
	for range workers {
		m, err := model.New(spec, model.WithBackend(compute.NewCPU(compute.WithThreads(1))))
		if err != nil {
			p.close()
			return nil, err
		}
		ws := trainer.NewWorkspace(m)
		p.wg.Go(func() {
			for f := range p.jobs {
				f(ws)
			}
		})
	}
	return p, nil
}

// run starts req on tr and returns its job.
func (p *trainPool) run(tr *trainer.Trainer, req *gossip.TrainRequest, mx *lazyMixer) *trainJob {
	j := &trainJob{done: make(chan struct{})}
	p.jobs <- func(ws *trainer.Workspace) {
		defer close(j.done)
		if mx != nil {
			mx.hostValues(req.Params) // its mix, here beside the event loop
		}
		j.res, j.err = tr.RunIn(ws, req)
	}
	return j
}

// close waits for the updates still running (those whose done events lie
// past the end of the run) and stops the workers.
func (p *trainPool) close() {
	close(p.jobs)
	p.wg.Wait()
}

// trainTime is how long peer i's update of examples takes.
func (s *sim) trainTime(i, examples int) time.Duration {
	if s.speed == nil || examples == 0 {
		return 0
	}
	d := trainFLOPs(len(s.init), examples) / s.speed(i)
	return time.Duration(min(d, maxTraceSeconds) * float64(time.Second)) // no overflow past ~292 years
}
