package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// membership is what /status says of a daemon's peers beyond status.
type membership struct {
	Peers         int      `json:"peers"`
	MemberPeers   []string `json:"member_peers"`
	OtherJobPeers int      `json:"other_job_peers"`
	UnknownPeers  int      `json:"unknown_peers"`
	Withheld      uint64   `json:"withheld"`
}

func (d *proc) membership() (membership, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + d.api + "/status")
	if err != nil {
		return membership{}, err
	}
	defer resp.Body.Close()
	var m membership
	err = json.NewDecoder(resp.Body).Decode(&m)
	return m, err
}

// waitLog polls the daemon's log (bounded) for a line holding every part.
func waitLog(t *testing.T, d *proc, what string, limit time.Duration, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		b, _ := os.ReadFile(d.log)
		for _, line := range strings.Split(string(b), "\n") {
			found := true
			for _, p := range parts {
				found = found && strings.Contains(line, p)
			}
			if found {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no log line with %q within %v; log tail:\n%s", what, parts, limit, tail(string(b), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDaemonJobsApart: two jobs on one host, their daemons connected to
// each other for real. Job X runs two daemons; job Y's lone daemon
// bootstraps through one of X's, so connections across the jobs exist
// (as mDNS makes on a LAN). X's daemons gossip with each other only:
// after dozens of exchanges no message went to Y's daemon (X's per-peer
// traffic to it is zero, and it rejected nothing as wrong_job), and Y's
// daemon, with no other member of its job, counts X's daemons as other
// jobs' peers (in /status and /metrics) and logs that it trains alone.
func TestDaemonJobsApart(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	dir := t.TempDir()
	xs := startCluster(t, bin, dir, 2, "100ms", "--name", "job-x")
	x0 := poll(t, xs[0], "X's first daemon up", 30*time.Second, func(s status) bool { return len(s.Addrs) > 0 })
	poll(t, xs[1], "X's second daemon up", 30*time.Second, func(s status) bool { return len(s.Addrs) > 0 })
	ports := freePorts(t, 2) // after X's daemons bound theirs
	y := &proc{api: fmt.Sprintf("127.0.0.1:%d", ports[1]), log: filepath.Join(dir, "y.log")}
	y.args = []string{"run", "--store", filepath.Join(dir, "y"), "--listen", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[0]), "--api", y.api,
		"--shard", "0/2", "--delta", "100ms", "--lr", "0.5", "--mdns=false", "--log-format", "json", "--announce-interval", "500ms",
		"--name", "job-y", "--bootstrap", x0.Addrs[0]}
	y.start(t, bin)
	t.Cleanup(func() {
		if y.cmd.ProcessState == nil {
			y.cmd.Process.Kill()
			y.cmd.Wait()
		}
	})
	ys := poll(t, y, "Y's daemon up", 30*time.Second, func(s status) bool { return len(s.Addrs) > 0 })
	if ys.JobID == x0.JobID {
		t.Fatalf("both jobs have ID %s", ys.JobID)
	}
	// X's first daemon hears Y's announcement over their connection.
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := xs[0].membership()
		if err == nil && m.OtherJobPeers >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("X's first daemon never counted Y's daemon as another job's peer: %+v, %v", m, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	line := waitLog(t, y, "Y's lone daemon", 30*time.Second, `"level":"WARN"`, `"msg":"no peers: training alone`)
	if !strings.Contains(line, `"other_job_peers":`) || strings.Contains(line, `"other_job_peers":0`) {
		t.Errorf("the warning does not count the other job's daemons: %s", line)
	}
	// Dozens of exchanges within X, all while Y's daemon is connected.
	var sts []status
	for _, d := range xs {
		sts = append(sts, poll(t, d, "models exchanged within X", 60*time.Second, func(s status) bool { return s.MessagesIn >= 40 }))
	}
	for i, s := range sts {
		if tr := s.Traffic[ys.PeerID]; tr.MessagesOut != 0 || tr.SendErrors != 0 {
			t.Errorf("X's daemon %d sent %d messages to Y's daemon (%d failed); want none", i, tr.MessagesOut, tr.SendErrors)
		}
		if s.Rejected["wrong_job"] != 0 {
			t.Errorf("X's daemon %d rejected %d messages of another job", i, s.Rejected["wrong_job"])
		}
		if s.Peers != 1 {
			t.Errorf("X's daemon %d counts %d peers, want its partner alone", i, s.Peers)
		}
	}
	ys, err := y.status()
	if err != nil {
		t.Fatal(err)
	}
	if ys.Rejected["wrong_job"] != 0 || ys.MessagesIn != 0 || ys.Peers != 0 || ys.Members != 1 {
		t.Errorf("Y's daemon: %d wrong_job rejects, %d messages in, %d peers, %d members; want 0, 0, 0, 1",
			ys.Rejected["wrong_job"], ys.MessagesIn, ys.Peers, ys.Members)
	}
	if m, err := y.membership(); err != nil || m.OtherJobPeers < 1 {
		t.Errorf("Y's daemon counts %+v (%v); want X's daemons among other jobs' peers", m, err)
	}
	if v := metric(t, y, "gossipd_other_job_peers"); v < 1 {
		t.Errorf("Y's gossipd_other_job_peers %v, want ≥ 1", v)
	}
	if v := metric(t, y, "gossipd_peers"); v != 0 {
		t.Errorf("Y's gossipd_peers %v, want 0", v)
	}
	stopAll(t, append(xs, y), nil)
}
