package daemon_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/daemon/memnet"
	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// shards returns n IID shards of digits' training split and its test split,
// scaled.
func shards(t *testing.T, n int) ([]*dataset.Dataset, *dataset.Dataset) {
	return shardsOf(t, "digits", n, 0)
}

// shardsOf returns n IID shards of a dataset's training split and the
// first testN examples of its test split (0: all), scaled.
func shardsOf(t *testing.T, name string, n, testN int) ([]*dataset.Dataset, *dataset.Dataset) {
	tr, te, err := dataset.Open(name, dataset.OpenOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if testN > 0 && testN < te.N {
		idx := make([]int, testN)
		for i := range idx {
			idx[i] = i
		}
		te = te.Subset(idx)
	}
	sc, _ := dataset.FitScaler("global", tr)
	sc.Transform(tr)
	sc.Transform(te)
	parts, err := dataset.IID{}.Partition(tr, n, 1)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*dataset.Dataset, n)
	for i, p := range parts {
		out[i] = tr.Subset(p)
	}
	return out, te
}

// testModels are the models the protocol and checkpoint tests run, a
// table over kinds: softmax, and a CNN preset for the 8×8 digits.
var testModels = []model.Spec{
	{Kind: model.Softmax, Inputs: 64, Classes: 10},
	{Kind: model.Net, Inputs: 64, Classes: 10, Shape: []int{1, 8, 8}, Layers: "small-cnn"},
}

func testJob() job.Spec {
	return job.Spec{Name: "test", Model: model.Spec{Kind: model.Softmax, Inputs: 64, Classes: 10}, DeltaMillis: 20}
}

// pollEvery is how often waitFor looks, on the bubble's virtual clock.
const pollEvery = 20 * time.Millisecond

// waitFor, called inside a synctest bubble, looks at cond every pollEvery
// of the bubble's virtual clock, each time once every goroutine of the
// bubble is durably blocked (synctest.Wait), until it holds or limit of
// virtual time has passed. The limit is thus one of the daemons' own time
// (rounds, ticks, timeouts), not of how fast the machine runs the test.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	waitEvery(t, what, limit, pollEvery, cond)
}

// waitEvery is waitFor looking every every of virtual time (a large
// fleet's cond reads thousands of statuses).
func waitEvery(t *testing.T, what string, limit, every time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		synctest.Wait()
		if cond() {
			return
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("waited %v of virtual time for %s", limit, what)
		}
		time.Sleep(every)
	}
}

// virtualCPU is the backend of the daemons in bubbles, as in
// TestRoundDeadlinesOnVirtualClock: the CPU, one goroutine per GEMM.
// These tests are about the daemons' timing and protocols, not devices;
// device auto would, on a host with a GPU, share one process-wide CUDA
// context among the bubbles of every test.
func virtualCPU() compute.Backend { return compute.NewCPU(compute.WithThreads(1)) }

type running struct {
	nodes   []*daemon.Node
	eps     []*memnet.Endpoint
	cancels []context.CancelFunc
	killed  []*atomic.Bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// kill stops daemon i as a crash would: its endpoint closes first, so
// that no goodbye goes out, then it stops.
func (r *running) kill(i int) {
	r.killed[i].Store(true)
	r.eps[i].Close()
	r.cancels[i]()
}

func (r *running) stop() {
	r.cancel()
	r.wg.Wait()
}

// start runs n daemons on net until the test ends. Call it inside a
// synctest bubble (with net made there): the daemons' goroutines, timers
// and channels are then the bubble's.
func start(t *testing.T, net *memnet.Network, n int, mk func(i int, c *daemon.Config)) *running {
	parts, test := shards(t, n)
	return startOn(t, net, parts, test, mk)
}

// startOn is start on given shards and test split.
func startOn(t *testing.T, net *memnet.Network, parts []*dataset.Dataset, test *dataset.Dataset, mk func(i int, c *daemon.Config)) *running {
	n := len(parts)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel}
	for i := 0; i < n; i++ {
		ep, err := net.Join(gossip.PeerID(fmt.Sprintf("d%03d", i)), 1024)
		if err != nil {
			t.Fatal(err)
		}
		c := daemon.Config{Job: testJob(), Local: daemon.Local{LR: 0.5}, Train: parts[i], Test: test, Transport: ep, Logger: quiet(), EvalInterval: 100 * time.Millisecond,
			Backend: virtualCPU()}
		if mk != nil {
			mk(i, &c)
		}
		nd, err := daemon.New(c)
		if err != nil {
			t.Fatal(err)
		}
		nctx, ncancel := context.WithCancel(ctx)
		killed := new(atomic.Bool)
		r.nodes, r.eps, r.cancels, r.killed = append(r.nodes, nd), append(r.eps, ep), append(r.cancels, ncancel), append(r.killed, killed)
		r.wg.Go(func() {
			if err := nd.Run(nctx); err != nil && !killed.Load() {
				t.Error(err)
			}
		})
	}
	t.Cleanup(r.stop)
	return r
}

// TestClusterConverges: five daemons on memnet, random walk over their
// digits shards, all reach 0.9 test accuracy.
func TestClusterConverges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, memnet.New(), 5, nil)
		waitFor(t, "every daemon at ≥ 0.9 accuracy", 60*time.Second, func() bool {
			for _, nd := range r.nodes {
				if nd.Status().Accuracy < 0.9 {
					return false
				}
			}
			return true
		})
		for _, nd := range r.nodes {
			s := nd.Status()
			if s.MessagesIn == 0 || s.MessagesOut == 0 || s.Updates == 0 || s.ModelAge == 0 {
				t.Fatalf("%s: %+v", s.PeerID, s)
			}
		}
	})
}

// TestHostileInput: wrong-job, undecodable, spoofed, NaN, wrong-shape and
// huge-norm frames are counted as rejects by reason, and the daemons keep
// learning.
func TestHostileInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		r := start(t, net, 3, nil)
		evil, _ := net.Join("evil", 16)
		id := r.nodes[0].JobID()
		good, _ := gossip.Encode(&gossip.Message{Kind: gossip.KindModel, From: "evil", Params: make([]float32, 650), Age: 1})
		spoof, _ := gossip.Encode(&gossip.Message{Kind: gossip.KindModel, From: "d001", Params: make([]float32, 650), Age: 1})
		nanP := make([]float32, 650)
		nanP[7] = float32(math.NaN())
		nan, _ := gossip.Encode(&gossip.Message{Kind: gossip.KindModel, From: "evil", Params: nanP, Age: 1})
		shape, _ := gossip.Encode(&gossip.Message{Kind: gossip.KindModel, From: "evil", Params: make([]float32, 651), Age: 1})
		hugeP := make([]float32, 650)
		hugeP[3] = 1e30 // finite, far beyond the default bound of 1000·√650
		huge, _ := gossip.Encode(&gossip.Message{Kind: gossip.KindModel, From: "evil", Params: hugeP, Age: 1})
		ctx := context.Background()
		for k := 0; k < 5; k++ {
			evil.Send(ctx, "d000", transport.Frame{Job: transport.JobID{0xBA, 0xD}, Kind: uint8(gossip.KindModel), Payload: good})
			evil.Send(ctx, "d000", transport.Frame{Job: id, Kind: uint8(gossip.KindModel), Lane: transport.LaneModel, Payload: []byte("garbage")})
			evil.Send(ctx, "d000", transport.Frame{Job: id, Kind: uint8(gossip.KindModel), Lane: transport.LaneModel, Payload: spoof})
			evil.Send(ctx, "d000", transport.Frame{Job: id, Kind: uint8(gossip.KindModel), Lane: transport.LaneModel, Payload: nan})
			evil.Send(ctx, "d000", transport.Frame{Job: id, Kind: uint8(gossip.KindModel), Lane: transport.LaneModel, Payload: shape})
			evil.Send(ctx, "d000", transport.Frame{Job: id, Kind: uint8(gossip.KindModel), Lane: transport.LaneModel, Payload: huge})
		}
		waitFor(t, "rejects counted", 20*time.Second, func() bool {
			rej := r.nodes[0].Status().Rejected
			return rej["wrong_job"] == 5 && rej["undecodable"] == 5 && rej["spoofed_sender"] == 5 &&
				rej["non_finite"] == 5 && rej["shape"] == 5 && rej["norm"] == 5
		})
		waitFor(t, "learning despite the attacker", 60*time.Second, func() bool { return r.nodes[0].Status().Accuracy >= 0.85 })
	})
}

// TestResumeFromCheckpoint: a daemon stopped and started again on its store
// resumes with at least its last checkpoint's age.
//
// The stores of this test and TestCheckpointFailure are opened and closed
// inside the bubble, so that badger's goroutines and tickers are the
// bubble's (its file I/O only holds the virtual clock still while it runs).
// A store opened outside could not be written from inside: badger's commit
// Adds to a WaitGroup in the caller's goroutine, and its writer goroutine,
// outside the bubble, calling Done on it is a fatal error.
func TestResumeFromCheckpoint(t *testing.T) {
	for _, m := range testModels {
		t.Run(m.Kind, func(t *testing.T) { resumeFromCheckpoint(t, m) })
	}
}

func resumeFromCheckpoint(t *testing.T, m model.Spec) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		net := memnet.New()
		var store *daemon.Store
		r := start(t, net, 3, func(i int, c *daemon.Config) {
			c.Job.Model = m
			if i == 0 {
				var err error
				if store, err = daemon.OpenStore(dir, daemon.StoreOptions{Keep: 2, Logger: quiet()}); err != nil {
					t.Fatal(err)
				}
				c.Store, c.CheckpointEvery = store, 5
			}
		})
		waitFor(t, "a few checkpoints", 30*time.Second, func() bool { return r.nodes[0].Status().Checkpoint >= 3 })
		r.stop()
		final := r.nodes[0].Status()
		store.Close()
		store, err := daemon.OpenStore(dir, daemon.StoreOptions{Keep: 2, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		parts, test := shards(t, 3)
		ep, _ := memnet.New().Join("d000", 16)
		job := testJob()
		job.Model = m
		nd, err := daemon.New(daemon.Config{Job: job, Train: parts[0], Test: test, Transport: ep, Store: store, Logger: quiet(), Backend: virtualCPU()})
		if err != nil {
			t.Fatal(err)
		}
		s := nd.Status()
		if s.ResumedFrom != final.Checkpoint || s.ModelAge < final.ModelAge || s.Updates != final.Updates {
			t.Fatalf("resumed %+v; before the stop: checkpoint %d, age %v, updates %d", s, final.Checkpoint, final.ModelAge, final.Updates)
		}
		other := job
		other.InitSeed = 3
		nd2, err := daemon.New(daemon.Config{Job: other, Train: parts[0], Test: test, Transport: ep, Store: store, Logger: quiet(), Backend: virtualCPU()})
		if err != nil || nd2.Status().ResumedFrom != 0 {
			t.Fatal("a checkpoint of another job was resumed")
		}
	})
}

// movingEndpoint is a memnet endpoint whose address changes, as a host's
// does when its IP does.
type movingEndpoint struct {
	*memnet.Endpoint
	addr atomic.Pointer[string]
}

func (m *movingEndpoint) Addrs() []string { return []string{*m.addr.Load()} }

// TestStatusAddrsFollowTheTransport: /status shows the transport's
// current addresses, not those it had at the start.
func TestStatusAddrsFollowTheTransport(t *testing.T) {
	parts, test := shards(t, 1)
	ep, _ := memnet.New().Join("d000", 16)
	m := &movingEndpoint{Endpoint: ep}
	old, now := "/ip4/10.0.0.1/tcp/4001", "/ip4/10.0.0.9/tcp/4001"
	m.addr.Store(&old)
	nd, err := daemon.New(daemon.Config{Job: testJob(), Train: parts[0], Test: test, Transport: m, Addrs: []string{old}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	m.addr.Store(&now)
	if got := nd.Status().Addrs; len(got) != 1 || got[0] != now {
		t.Fatalf("/status addrs %v after the address changed to %s", got, now)
	}
}

// TestReadyz: /readyz is 503 with its reason until the node runs with a
// peer; /healthz is 200 from the start.
func TestReadyz(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parts, test := shards(t, 2)
		net := memnet.New()
		var nodes []*daemon.Node
		for i := range 2 {
			ep, _ := net.Join(fmt.Sprintf("r%03d", i), 16)
			nd, err := daemon.New(daemon.Config{Job: testJob(), Train: parts[i], Test: test, Transport: ep, Logger: quiet(), Backend: virtualCPU()})
			if err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, nd)
		}
		get := func(path string) (int, string) {
			rec := httptest.NewRecorder()
			nodes[0].Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			return rec.Code, rec.Body.String()
		}
		if code, _ := get("/healthz"); code != 200 {
			t.Fatalf("/healthz %d before the start", code)
		}
		if code, body := get("/id"); code != 200 || !strings.Contains(body, `"peer_id":"r000"`) {
			t.Fatalf("/id: %d %q", code, body)
		}
		if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "starting") {
			t.Fatalf("/readyz before the start: %d %q", code, body)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		for _, nd := range nodes {
			wg.Go(func() { nd.Run(ctx) })
		}
		code, body := 0, ""
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("/readyz with a peer: %d %q", code, body)
			}
		})
		waitFor(t, "/readyz to answer 200 with a peer", 30*time.Second, func() bool {
			code, body = get("/readyz")
			return code == 200
		})
		cancel()
		wg.Wait()
	})
}

// TestPredictRequests: /predict answers one vector or several, and
// refuses, with 400 and the reason, a body it would otherwise misread: an
// unknown key (a misspelt "features" read as no vectors), both keys, a
// second JSON value, a vector of the wrong length, no body.
func TestPredictRequests(t *testing.T) {
	parts, test := shards(t, 1)
	ep, _ := memnet.New().Join("p000", 16)
	nd, err := daemon.New(daemon.Config{Job: testJob(), Train: parts[0], Test: test, Transport: ep, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	vec := "[" + strings.Repeat("0.5,", 63) + "0.5]"
	post := func(body string) (int, string) {
		rec := httptest.NewRecorder()
		nd.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/predict", strings.NewReader(body)))
		return rec.Code, rec.Body.String()
	}
	if code, body := post(`{"features": ` + vec + `}`); code != 200 || !strings.Contains(body, `"class"`) {
		t.Errorf("one vector: %d %s", code, body)
	}
	if code, body := post(`{"instances": [` + vec + `,` + vec + `]}`); code != 200 || strings.Count(body, `"class"`) != 2 {
		t.Errorf("two vectors: %d %s", code, body)
	}
	for body, want := range map[string]string{
		`{"feature": ` + vec + `}`:                              `unknown field "feature"`,
		`{"features": ` + vec + `, "instances": [` + vec + `]}`: "both features and instances",
		`{"features": ` + vec + `} {"features": ` + vec + `}`:   "more than one JSON value",
		`{"features": [1, 2]}`:                                  "has 2 features, the model takes 64",
		``:                                                      "EOF",
		`{}`:                                                    "no feature vectors",
	} {
		if code, got := post(body); code != 400 || !strings.Contains(got, want) {
			t.Errorf("%.40q: %d %q, want 400 with %q", body, code, got, want)
		}
	}
}

// TestCheckpointFailure: a store that can no longer be written (here,
// closed under the node) does not stop the node: it keeps learning, and
// says so in /status's checkpoint_error and the failure counter that
// operators alert on, instead of only in its log.
func TestCheckpointFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, err := daemon.OpenStore(t.TempDir(), daemon.StoreOptions{Keep: 2, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		r := start(t, memnet.New(), 2, func(i int, c *daemon.Config) {
			if i == 0 {
				c.Store, c.CheckpointEvery = store, 5
			}
		})
		nd := r.nodes[0]
		waitFor(t, "a checkpoint", 30*time.Second, func() bool { return nd.Status().Checkpoint >= 1 })
		if s := nd.Status(); s.CheckpointError != "" {
			t.Fatalf("checkpoint_error %q while the store works", s.CheckpointError)
		}
		store.Close()
		waitFor(t, "a failed checkpoint", 30*time.Second, func() bool { return nd.Status().CheckpointError != "" })
		before := nd.Status()
		waitFor(t, "updates after the failure", 30*time.Second, func() bool { return nd.Status().Updates > before.Updates+5 })
		rec := httptest.NewRecorder()
		nd.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		m := regexp.MustCompile(`(?m)^gossipd_checkpoint_failures_total (\d+)`).FindStringSubmatch(rec.Body.String())
		if m == nil || m[1] == "0" {
			t.Fatalf("gossipd_checkpoint_failures_total: %v", m)
		}
		if s := nd.Status(); s.Checkpoint != before.Checkpoint || !strings.Contains(s.CheckpointError, "DB Closed") {
			t.Fatalf("status after the failure: checkpoint %d (was %d), error %q", s.Checkpoint, before.Checkpoint, s.CheckpointError)
		}
	})
}
