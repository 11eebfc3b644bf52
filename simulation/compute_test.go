package simulation

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/job"
)

// TestComputeTime: with compute speeds an update takes 6·P·E/speed of
// virtual time, so slow peers commit fewer updates in the same rounds;
// the default ("0") is today's instant training, byte for byte; runs with
// drawn speeds are deterministic.
func TestComputeTime(t *testing.T) {
	base := Config{Peers: 10, Rounds: 12, Seed: 5, EvalPeers: 3, EvalExamples: 200, FinalEvalPeers: 10}
	for _, proto := range []string{"randomwalk", "dpsgd", "pushsum"} {
		c := base
		c.Protocol = proto
		def, defRes := csvOf(t, c)
		c.Compute = "0"
		if zero, _ := csvOf(t, c); zero != def {
			t.Fatalf("%s: --compute 0 changed the metrics", proto)
		}
		// Digits softmax: 650 parameters, about 144 examples a peer, so an
		// epoch is about 0.56 MFLOP: 50 kFLOP/s makes it last ~11 rounds.
		c.Compute = "50k"
		_, slow := csvOf(t, c)
		if slow.Updates*2 > defRes.Updates {
			t.Errorf("%s: %d updates at 50 kFLOP/s, %d with instant training: slow peers should commit far fewer", proto, slow.Updates, defRes.Updates)
		}
		// Updates run on a pool of one worker per core; the metrics do
		// not depend on how many.
		c.Compute = "lognormal:5M:1.5"
		prev := runtime.GOMAXPROCS(1)
		a, _ := csvOf(t, c)
		runtime.GOMAXPROCS(3)
		b, _ := csvOf(t, c)
		runtime.GOMAXPROCS(prev)
		if a != b {
			t.Fatalf("%s: drawn speeds on one core and on three differ:\n%s\n%s", proto, a, b)
		}
	}

	s := &sim{init: make([]float32, 650)}
	var err error
	if s.speed, err = parseCompute("uniform:1M:3M", nil, 9); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		sp := s.speed(i)
		if sp < 1e6 || sp > 3e6 || sp != s.speed(i) {
			t.Fatalf("peer %d: speed %v outside uniform:1M:3M or not stable", i, sp)
		}
		want := 6 * 650 * 144 / sp
		if got := s.trainTime(i, 144).Seconds(); math.Abs(got-want) > 1e-9*want+1e-9 {
			t.Fatalf("peer %d: update of 144 examples takes %v s, want %v", i, got, want)
		}
	}
	s.speed, _ = parseCompute("", []float64{1e6, 2e6}, 1)
	if s.speed(0) != 1e6 || s.speed(3) != 2e6 {
		t.Fatalf("trace speeds %v %v", s.speed(0), s.speed(3))
	}
	if s.speed, _ = parseCompute("0", nil, 1); s.trainTime(0, 100) != 0 {
		t.Fatal("compute 0 takes time")
	}
}

// TestComputeErrors: bad speeds are refused, naming what is wrong, and
// the baselines, which do not model compute time, refuse it.
func TestComputeErrors(t *testing.T) {
	for _, spec := range []string{"fast", "-5G", "0.5", "1e-300", "uniform:3G:1G", "uniform:1G", "lognormal:1G:-1", "0:1", "inf", "NaN"} {
		c := Config{Compute: spec}
		if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "compute") {
			t.Errorf("--compute %q: %v", spec, err)
		}
	}
	c := Config{Compute: "1G", ComputeTrace: []float64{1}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "together") {
		t.Errorf("--compute with --compute-trace: %v", err)
	}
	for _, proto := range []string{FedAvg, AllReduce, Centralized} {
		c := Config{Settings: job.Settings{Protocol: proto}, Compute: "1G"}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := c.CheckOptions([]string{"compute"}); err == nil || !strings.Contains(err.Error(), "compute") {
			t.Errorf("%s with --compute: %v", proto, err)
		}
		if err := c.CheckOptions(nil); err == nil { // set by a scenario file, not a flag

			t.Errorf("%s with Compute set: no error", proto)
		}
	}
	if _, err := ParseComputeTrace([]byte("# speeds\n1G\n\nslow\n"), "speeds.txt"); err == nil || !strings.Contains(err.Error(), "speeds.txt:4") {
		t.Errorf("bad trace line: %v", err)
	}
	if got, err := ParseComputeTrace([]byte("1G\n500M\n"), "s"); err != nil || len(got) != 2 || got[1] != 5e8 {
		t.Errorf("trace: %v %v", got, err)
	}
}
