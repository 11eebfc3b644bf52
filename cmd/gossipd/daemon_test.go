package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	stdpng "image/png"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/demo"
	"github.com/gossipd/gossipd/model"
)

// freePorts returns k distinct free TCP ports on 127.0.0.1, from below
// the kernel's ephemeral range (demo.FreePorts), where no dial can take
// one before the daemon given it binds it.
func freePorts(t testing.TB, k int) []int {
	t.Helper()
	ports, err := demo.FreePorts(k)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

type proc struct {
	args  []string
	api   string
	cmd   *exec.Cmd
	log   string
	token string // the API token, if reads need it
}

func (d *proc) start(t testing.TB, bin string) {
	t.Helper()
	f, err := os.OpenFile(d.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(bin, d.args...)
	d.cmd.Stdout, d.cmd.Stderr = f, f
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

type status struct {
	PeerID      string            `json:"peer_id"`
	Addrs       []string          `json:"addrs"`
	Peers       int               `json:"peers"`
	Accuracy    float64           `json:"accuracy"`
	ModelAge    float64           `json:"model_age"`
	MessagesIn  uint64            `json:"messages_in"`
	Checkpoint  uint64            `json:"checkpoint_seq"`
	CkptAge     float64           `json:"checkpoint_age"`
	Round       uint64            `json:"round"`
	DPEpsilon   float64           `json:"dp_epsilon"`
	DPSteps     uint64            `json:"dp_steps"`
	ResumedFrom uint64            `json:"resumed_from_seq"`
	JobID       string            `json:"job_id"`
	Rejected    map[string]uint64 `json:"rejected"`
	Members     int               `json:"members"`
	Joined      bool              `json:"joined"`
	Updates     uint64            `json:"updates"`
	Paused      bool              `json:"paused"`
	Uptime      float64           `json:"uptime_seconds"`
	Traffic     map[string]struct {
		MessagesOut uint64 `json:"messages_out"`
		SendErrors  uint64 `json:"send_errors"`
	} `json:"traffic"`
	// PushSumWeight is push-sum's weight.
	PushSumWeight float64 `json:"pushsum_weight"`
	Device        struct {
		Requested, Device, Backend, Note string
	} `json:"device"`
	Connections []struct {
		Peer, Type, Transport, Direction string
	} `json:"connections"`
	ActiveView []string `json:"active_view"`
	// MemberPeers are the connected live members.
	MemberPeers []string `json:"member_peers"`
	// Secure counts the node's secure-aggregation rounds.
	Secure *struct {
		Summed, Skipped uint64
		Recovered       uint64 `json:"dropouts_recovered"`
		ClearWithheld   uint64 `json:"clear_withheld"`
	} `json:"secure"`
	MembershipBytes struct {
		In, Out uint64
		By      map[string]struct{ In, Out uint64 }
	} `json:"membership_bytes"`
}

// connectedPeers counts the distinct peers a daemon holds connections to.
func (s status) connectedPeers() int {
	peers := map[string]bool{}
	for _, c := range s.Connections {
		peers[c.Peer] = true
	}
	return len(peers)
}

func (d *proc) status() (status, error) {
	c := http.Client{Timeout: 2 * time.Second}
	req, _ := http.NewRequest("GET", "http://"+d.api+"/status", nil)
	if d.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return status{}, err
	}
	defer resp.Body.Close()
	var s status
	err = json.NewDecoder(resp.Body).Decode(&s)
	return s, err
}

// poll waits (bounded) until cond holds for the daemon's status.
func poll(t *testing.T, d *proc, what string, limit time.Duration, cond func(status) bool) status {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		s, err := d.status()
		if err == nil && cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(d.log)
			t.Fatalf("%s: timed out after %v waiting for %s (last status %+v, err %v)\nlog tail:\n%s", d.api, limit, what, s, err, tail(string(log), 2000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestDaemonCluster starts five real `gossipd run` processes on 127.0.0.1,
// each on its own shard of digits with random walk; all reach 0.90
// accuracy. One is killed with SIGKILL and restarted on its store: it resumes
// from its last checkpoint (model age at least that checkpoint's) and
// rejoins. SIGINT then stops every daemon cleanly.
func TestDaemonCluster(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	dir := t.TempDir()
	ds := startCluster(t, bin, dir, 5, "100ms", "--checkpoint-every", "5")
	converge(t, ds)
	// /status says where training runs: the CPU, the default --device
	// auto having found no GPU gossipd can use, and why.
	if s, err := ds[0].status(); err != nil || s.Device.Requested != "auto" || s.Device.Device != "cpu" || !strings.HasPrefix(s.Device.Backend, "cpu/") || s.Device.Note == "" {
		t.Fatalf("/status device: %+v, %v", s.Device, err)
	}
	checkExportedModel(t, ds[1], dir)
	killAndRestart(t, bin, ds, 3)
	stopAll(t, ds, func() {
		// The stopped daemon's store exports a loadable model.
		f := filepath.Join(dir, "exported.safetensors")
		if out, err := exec.Command(bin, "export", "--store", filepath.Join(dir, "n0"), "--out", f).CombinedOutput(); err != nil {
			t.Fatalf("export: %v\n%s", err, out)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, _, meta, err := model.ReadSafetensors(b)
		if err != nil || meta["job_id"] == "" || meta["scaler"] == "" {
			t.Fatalf("exported model: %v, metadata %v", err, meta)
		}
	})
}

// TestDaemonClusterMembers does the same with four processes for D-PSGD on
// a ring and for SFB (its updates broadcast on gossipsub): all reach 0.90,
// one is SIGKILLed and restarted on its store, resumes at least at its last
// checkpoint, catches up with the others' round and learns on.
func TestDaemonClusterMembers(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	for _, proto := range []string{"dpsgd", "sfb"} {
		t.Run(proto, func(t *testing.T) {
			dir := t.TempDir()
			ds := startCluster(t, bin, dir, 4, "100ms", "--protocol", proto, "--checkpoint-every", "10", "--dht", "server")
			converge(t, ds)
			if proto == "sfb" {
				if v := metric(t, ds[0], "gossipd_messages_published_total"); v < 1 {
					t.Fatalf("SFB published %v messages on gossipsub", v)
				}
			}
			killAndRestart(t, bin, ds, 2)
			// Caught up: within a few rounds of a neighbour (D-PSGD's ring
			// and SFB's clocks advance together).
			poll(t, ds[2], "round caught up with the others", 60*time.Second, func(s status) bool {
				o, err := ds[1].status()
				return err == nil && s.Round+5 >= o.Round
			})
			stopAll(t, ds, nil)
		})
	}
}

// TestDaemonCompression: three daemons run D-PSGD with int8 vectors over
// loopback, reach 0.90, and their /metrics show a quarter or so of the
// bytes plain float32 would have taken (issue 17).
func TestDaemonCompression(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	dir := t.TempDir()
	ds := startCluster(t, bin, dir, 3, "100ms", "--protocol", "dpsgd", "--compression", "int8")
	converge(t, ds)
	sent, full := bytesOut(t, ds[0], 20)
	if sent <= 0 || sent > 0.45*full {
		t.Fatalf("int8: %v bytes out, %v as float32: want at most 45%%", sent, full)
	}
	stopAll(t, ds, nil)
}

// TestDaemonSparseCompression: three daemons train with CHOCO steps of 1%
// of the coordinates (--compression topk:0.01) over libp2p and converge,
// with D-PSGD, push-sum (per-link copies of the estimates, its shares'
// accounts as usual) and AD-PSGD (per-link copies); /metrics counts a
// small fraction of float32's bytes on the wire, and no message was
// refused.
func TestDaemonSparseCompression(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	for _, proto := range []string{"dpsgd", "pushsum", "adpsgd"} {
		dir := t.TempDir()
		ds := startCluster(t, bin, dir, 3, "100ms", "--protocol", proto, "--compression", "topk:0.01")
		converge(t, ds)
		for _, d := range ds {
			sent, full := bytesOut(t, d, 200) // past the first rounds' dense keyframes
			if sent <= 0 || sent > 0.15*full {
				t.Errorf("%s %s: topk:0.01: %v bytes out, %v as float32: want at most 15%%", proto, d.api, sent, full)
			}
			if s, err := d.status(); err != nil || len(s.Rejected) != 0 {
				t.Errorf("%s %s: rejected %v (%v)", proto, d.api, s.Rejected, err)
			}
		}
		stopAll(t, ds, nil)
	}
}

// TestDaemonOuterOptimizer: three daemons train with ten local steps
// between exchanges and the outer Nesterov step (part of the job) and
// converge, with D-PSGD and with random walk (each result to one random
// peer, here as int8); each round trains ten minibatches (the model's
// age, in examples, grows by about 10·32 a round, not 32).
func TestDaemonOuterOptimizer(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	for _, args := range [][]string{
		{"--protocol", "dpsgd", "--local-steps", "10", "--outer-lr", "0.5"},
		{"--protocol", "randomwalk", "--local-steps", "10", "--compression", "int8"},
	} {
		dir := t.TempDir()
		ds := startCluster(t, bin, dir, 3, "100ms", args...)
		converge(t, ds)
		for _, d := range ds {
			s := poll(t, d, "rounds", 30*time.Second, func(s status) bool { return s.Round >= 5 })
			if perRound := s.ModelAge / float64(s.Round); perRound < 200 {
				t.Errorf("%v: %s: %.0f examples a round over %d rounds, want about 320 (10 local steps of 32)", args, d.api, perRound, s.Round)
			}
		}
		stopAll(t, ds, nil)
	}
}

// bytesOut waits until a daemon has sent messages (a daemon may reach the
// target accuracy on its own shard before its first send completes) and
// returns its bytes out, as sent and as float32, once it has sent that
// many messages.
func bytesOut(t *testing.T, d *proc, messages float64) (sent, full float64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		sent, full = metric(t, d, "gossipd_bytes_out_total"), metric(t, d, "gossipd_bytes_out_uncompressed_total")
		if sent > 0 && metric(t, d, "gossipd_messages_out_total") >= messages {
			return sent, full
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after 60 s, %v bytes out in %v messages, %v send errors", d.api, sent,
				metric(t, d, "gossipd_messages_out_total"), metric(t, d, "gossipd_send_errors_total"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metric reads one unlabelled series from a daemon's /metrics.
func metric(t *testing.T, d *proc, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + d.api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	t.Fatalf("%s: no series %s in /metrics", d.api, name)
	return 0
}

// TestDaemonPrivacyLedger: a daemon training with DP-SGD is SIGKILLed three
// times while it trains (no checkpoint in between: the privacy ledger alone
// must carry the spending); after each restart its spent ε is at least what
// it reported before the kill, and it keeps spending.
func TestDaemonPrivacyLedger(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	dir := t.TempDir()
	ds := startCluster(t, bin, dir, 2, "100ms", "--dp-clip", "1", "--dp-noise", "1.1", "--checkpoint-every", "100000")
	d := ds[1]
	last := poll(t, d, "DP-SGD steps", 60*time.Second, func(s status) bool { return s.DPSteps > 0 && s.DPEpsilon > 0 })
	for k := 0; k < 3; k++ {
		before := poll(t, d, "more DP-SGD steps", 60*time.Second, func(s status) bool { return s.DPSteps > last.DPSteps })
		after := d.killRestart(t, bin)
		if after.DPEpsilon < before.DPEpsilon || after.DPSteps < before.DPSteps {
			t.Fatalf("restart %d: ε %v after %d steps; before the kill ε %v after %d steps", k+1,
				after.DPEpsilon, after.DPSteps, before.DPEpsilon, before.DPSteps)
		}
		last = after
	}
}

// TestDaemonLedgerFollowsData: a daemon spends ε with DP-SGD under one
// job, stops, and starts again on the same store and data with another
// --lr and another --name (another job): it continues from the ε already
// spent, and `gossipd privacy ledger` shows one set of data with both jobs
// and the total.
func TestDaemonLedgerFollowsData(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	dir := t.TempDir()
	ds := startCluster(t, bin, dir, 2, "100ms", "--dp-clip", "1", "--dp-noise", "1.1")
	d := ds[1]
	before := poll(t, d, "DP-SGD steps", 60*time.Second, func(s status) bool { return s.DPSteps >= 5 && s.DPEpsilon > 0 })
	stopWith(t, ds[0], syscall.SIGHUP) // a closed terminal stops it as SIGTERM does
	stop(t, ds[1])
	final, err := ledgerOf(bin, d)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds { // both move to the new job, so that models flow again
		d.args = append(slices.Clone(d.args), "--lr", "0.2", "--name", "another-job") // the last of a repeated flag wins
		d.start(t, bin)
	}
	after := poll(t, d, "the restarted daemon's API", 30*time.Second, func(status) bool { return true })
	if after.JobID == before.JobID {
		t.Fatalf("a new --name kept the job ID %s", after.JobID)
	}
	if after.DPEpsilon < final.Data[0].Epsilon || after.DPSteps < final.Data[0].Steps || after.DPSteps < before.DPSteps {
		t.Fatalf("new job started at ε %v after %d steps; the data had spent ε %v in %d steps", after.DPEpsilon, after.DPSteps, final.Data[0].Epsilon, final.Data[0].Steps)
	}
	poll(t, d, "more DP-SGD steps under the new job", 60*time.Second, func(s status) bool { return s.DPSteps > after.DPSteps })
	stop(t, d)
	rep, err := ledgerOf(bin, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Data) != 1 || len(rep.Data[0].Jobs) != 2 || rep.Data[0].Epsilon <= final.Data[0].Epsilon {
		t.Fatalf("ledger after two jobs on one set of data: %+v", rep)
	}
	var sum uint64
	for _, j := range rep.Data[0].Jobs {
		sum += j.Steps
		if j.Epsilon > rep.Data[0].Epsilon {
			t.Fatalf("job %s alone spent ε %v, more than the data's %v", j.Job, j.Epsilon, rep.Data[0].Epsilon)
		}
	}
	if sum != rep.Data[0].Steps {
		t.Fatalf("jobs' steps sum to %d, the data's %d", sum, rep.Data[0].Steps)
	}
}

// stop ends the daemon with SIGTERM and waits for it to exit.
func stop(t *testing.T, d *proc) { stopWith(t, d, syscall.SIGTERM) }

// stopWith ends the daemon with sig, which it must take as a request to
// stop (goodbye, final checkpoint, exit 0), and waits for it to exit.
func stopWith(t *testing.T, d *proc, sig syscall.Signal) {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("%s: exit after %v: %v", d.api, sig, err)
	}
}

// ledgerOf runs `gossipd privacy ledger --json` on a stopped daemon's store.
func ledgerOf(bin string, d *proc) (daemon.LedgerSummary, error) {
	var rep daemon.LedgerSummary
	out, err := exec.Command(bin, "privacy", "ledger", "--json", "--store", d.flag("--store")).Output()
	if err != nil {
		return rep, fmt.Errorf("privacy ledger: %w", err)
	}
	return rep, json.Unmarshal(out, &rep)
}

// flag returns the value of a flag in the daemon's arguments.
func (d *proc) flag(name string) string {
	i := slices.Index(d.args, name)
	if i < 0 || i+1 >= len(d.args) {
		return ""
	}
	return d.args[i+1]
}

// killRestart SIGKILLs the daemon, starts it again on the same flags and
// store, and returns its first status.
func (d *proc) killRestart(t *testing.T, bin string) status {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.cmd.Wait()
	d.start(t, bin)
	return poll(t, d, "the restarted daemon's API", 30*time.Second, func(status) bool { return true })
}

// converge waits until every daemon reaches 0.90 accuracy with all others
// connected.
func converge(t *testing.T, ds []*proc) {
	t.Helper()
	for _, d := range ds {
		var s status
		deadline := time.Now().Add(90 * time.Second)
		for {
			var err error
			if s, err = d.status(); err == nil && s.Accuracy >= 0.90 && s.Peers == len(ds)-1 {
				break
			}
			if time.Now().After(deadline) {
				// Every daemon's side: one that never started, or never
				// dialled, shows in its own log, not in d's.
				t.Fatalf("%s: timed out after 90s waiting for accuracy ≥ 0.90 with all peers (last status %+v, err %v)\n%s", d.api, s, err, clusterReport(ds))
			}
			time.Sleep(100 * time.Millisecond)
		}
		// /status says how each peer is reached: on loopback, directly.
		peers := map[string]bool{}
		for _, c := range s.Connections {
			if c.Type != "direct" || c.Transport == "" || (c.Direction != "inbound" && c.Direction != "outbound") {
				t.Errorf("%s: connection %+v, want a direct one with its transport and direction", d.api, c)
			}
			peers[c.Peer] = true
		}
		if len(peers) < s.Peers {
			t.Errorf("%s: connections to %d peers listed, %d peers", d.api, len(peers), s.Peers)
		}
	}
}

// clusterReport says, for each daemon, whether it still runs, its peers
// and the tail of its log.
func clusterReport(ds []*proc) string {
	var b strings.Builder
	for i, d := range ds {
		state := "running"
		if d.cmd != nil && d.cmd.ProcessState != nil {
			state = d.cmd.ProcessState.String()
		}
		s, err := d.status()
		log, _ := os.ReadFile(d.log)
		fmt.Fprintf(&b, "daemon %d (%s, %s): peer %s, %d peers, accuracy %.3f, members %d, err %v; log tail:\n%s\n", i, d.api, state, s.PeerID, s.Peers, s.Accuracy, s.Members, err, tail(string(log), 1500))
	}
	return b.String()
}

// killAndRestart SIGKILLs daemon i once it has checkpointed, restarts it on
// its store, and checks that it resumed from that checkpoint and rejoins.
func killAndRestart(t *testing.T, bin string, ds []*proc, i int) {
	t.Helper()
	victim := ds[i]
	before := poll(t, victim, "a checkpoint", 30*time.Second, func(s status) bool { return s.Checkpoint >= 2 })
	after := victim.killRestart(t, bin)
	if after.ResumedFrom < before.Checkpoint || after.ModelAge < before.CkptAge {
		t.Fatalf("restart resumed from checkpoint %d with age %v; before the kill: checkpoint %d of age %v",
			after.ResumedFrom, after.ModelAge, before.Checkpoint, before.CkptAge)
	}
	poll(t, victim, "rejoining (peers, messages, accuracy)", 60*time.Second, func(s status) bool {
		return s.Peers == len(ds)-1 && s.MessagesIn > 0 && s.Accuracy >= 0.90
	})
}

// stopAll sends SIGINT to every daemon and checks each exits 0 within 20 s;
// after, if set, runs once all have stopped.
func stopAll(t *testing.T, ds []*proc, after func()) {
	t.Helper()
	for _, d := range ds {
		d.cmd.Process.Signal(os.Interrupt)
	}
	for i, d := range ds {
		done := make(chan error, 1)
		go func() { done <- d.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon %d exited with %v after SIGINT", i, err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("daemon %d did not stop within 20 s of SIGINT", i)
		}
	}
	if after != nil && !t.Failed() {
		after()
	}
}

// checkExportedModel loads the daemon's /model with NumPy (a Python script
// beside this test) and checks that it predicts what /predict says.
func checkExportedModel(t *testing.T, d *proc, dir string) {
	t.Helper()
	feats := [][]float32{}
	for k := 0; k < 8; k++ {
		row := make([]float32, 64)
		for j := range row {
			row[j] = float32((k*7 + j*3) % 17)
		}
		feats = append(feats, row)
	}
	fb, _ := json.Marshal(feats)
	featPath := filepath.Join(dir, "features.json")
	os.WriteFile(featPath, fb, 0o644)
	get := func() []byte {
		resp, err := http.Get("http://" + d.api + "/model")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	for try := 0; ; try++ {
		if try == 50 {
			t.Fatal("the model changed during every /model–/predict–/model window")
		}
		before := get()
		body, _ := json.Marshal(map[string]any{"instances": feats})
		resp, err := http.Post("http://"+d.api+"/predict", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var pred struct {
			Predictions []struct {
				Class         int       `json:"class"`
				Probabilities []float64 `json:"probabilities"`
			} `json:"predictions"`
		}
		json.NewDecoder(resp.Body).Decode(&pred)
		resp.Body.Close()
		if !bytes.Equal(before, get()) {
			continue // an update landed in between; try again
		}
		mp := filepath.Join(dir, "model.safetensors")
		os.WriteFile(mp, before, 0o644)
		out, err := exec.Command(python(), "testdata/predict_safetensors.py", mp, featPath).Output()
		if err != nil {
			t.Fatalf("%s with numpy (apt-get install python3-numpy, or set $GOSSIPD_PYTHON): %v", python(), err)
		}
		var py struct {
			Classes       []int       `json:"classes"`
			Probabilities [][]float64 `json:"probabilities"`
		}
		if err := json.Unmarshal(out, &py); err != nil {
			t.Fatalf("python output %q: %v", out, err)
		}
		if len(py.Classes) != len(feats) || len(pred.Predictions) != len(feats) {
			t.Fatalf("%d python and %d /predict answers for %d inputs", len(py.Classes), len(pred.Predictions), len(feats))
		}
		for k := range feats {
			if py.Classes[k] != pred.Predictions[k].Class {
				t.Fatalf("input %d: numpy predicts %d, /predict %d", k, py.Classes[k], pred.Predictions[k].Class)
			}
			for c, p := range py.Probabilities[k] {
				if math.Abs(p-pred.Predictions[k].Probabilities[c]) > 1e-4 {
					t.Fatalf("input %d class %d: numpy %v, /predict %v", k, c, p, pred.Predictions[k].Probabilities[c])
				}
			}
		}
		return
	}
}

// python is the interpreter with NumPy: $GOSSIPD_PYTHON, else Debian's
// /usr/bin/python3 (where apt-get install python3-numpy puts NumPy), else
// python3 on the PATH.
func python() string {
	if p := os.Getenv("GOSSIPD_PYTHON"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

// startCluster starts n `gossipd run` processes in dir on 127.0.0.1, each on
// shard i/n of digits, all bootstrapped through the first, announcing
// their job every 500 ms; extra flags are appended. Every identity is
// created first. No member list is given: protocols that mix over a
// topology build it over the live members. The processes are killed when
// the test or benchmark ends.
func startCluster(tb testing.TB, bin, dir string, n int, delta string, extra ...string) []*proc {
	tb.Helper()
	ids := make([]string, n)
	for i := range ids {
		out, err := exec.Command(bin, "keygen", "--out", filepath.Join(dir, fmt.Sprintf("n%d", i), "identity.key")).Output()
		if err != nil {
			tb.Fatal(err)
		}
		ids[i] = strings.TrimSpace(string(out))
	}
	ds := make([]*proc, n)
	tb.Cleanup(func() { // also when the test fails
		for _, d := range ds {
			if d != nil && d.cmd != nil && d.cmd.ProcessState == nil {
				d.cmd.Process.Kill()
				d.cmd.Wait()
			}
		}
	})
	var boot string
	ports := freePorts(tb, 2*n)
	for i := range ds {
		listen := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[2*i])
		if i == 0 {
			boot = listen + "/p2p/" + ids[0]
		}
		ds[i] = &proc{api: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]), log: filepath.Join(dir, fmt.Sprintf("n%d.log", i))}
		ds[i].args = append([]string{"run", "--store", filepath.Join(dir, fmt.Sprintf("n%d", i)), "--listen", listen, "--api", ds[i].api,
			"--shard", fmt.Sprintf("%d/%d", i, n), "--delta", delta, "--lr", "0.5", "--mdns=false", "--log-format", "json",
			"--announce-interval", "500ms"}, extra...)
		if i > 0 {
			ds[i].args = append(ds[i].args, "--bootstrap", boot)
		}
		ds[i].start(tb, bin)
	}
	return ds
}

// TestDemo runs `gossipd demo` as `make demo` does, smaller: four real
// daemons on non-IID pieces of digits learn together well beyond what one
// reaches alone; the PNG of the curves is written, and no daemon is left
// running.
func TestDemo(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	dir := t.TempDir()
	png := filepath.Join(dir, "curves.png")
	cmd := exec.Command(bin, "demo", "--peers", "4", "--target", "0.85", "--duration", "90s", "--json", "--png", png, "--dir", filepath.Join(dir, "peers"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	var s struct {
		Peers   int     `json:"peers"`
		Mean    float64 `json:"mean_accuracy"`
		Alone   float64 `json:"alone"`
		Reached bool    `json:"reached"`
		Msgs    uint64  `json:"messages"`
		Devices []string
	}
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("demo summary %q: %v", out, err)
	}
	if s.Peers != 4 || !s.Reached || s.Mean < 0.85 || s.Alone > s.Mean-0.2 || s.Msgs == 0 {
		t.Fatalf("demo summary %+v: want 4 peers reaching 0.85, well above one alone", s)
	}
	// Where each daemon trained, from its /status: the CPU, as --device
	// auto picks without a usable GPU.
	if len(s.Devices) != 4 {
		t.Fatalf("demo devices %q: want one for each of 4 peers", s.Devices)
	}
	for _, d := range s.Devices {
		if !strings.HasPrefix(d, "cpu/") {
			t.Errorf("demo device %q: want the CPU backend", d)
		}
	}
	f, err := os.Open(png)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if img, err := stdpng.Decode(f); err != nil || img.Bounds().Dx() < 400 {
		t.Fatalf("curves: %v", err)
	}
	// Every daemon stopped: their stores can be opened again (badger locks
	// a store while a daemon holds it).
	for i := range 4 {
		st, err := daemon.OpenStore(filepath.Join(dir, "peers", fmt.Sprintf("p%d", i), "checkpoints"), daemon.StoreOptions{})
		if err != nil {
			t.Fatalf("peer %d's store is still held: %v", i, err)
		}
		st.Close()
	}
}
