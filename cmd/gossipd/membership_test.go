package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gossipd/gossipd/daemon"
)

// TestDaemonJoinLeave: four real daemons run a job with no member list;
// a fifth joins it with --join JOB_ID --bootstrap ADDR and no job flag,
// takes its state from a member (it does not start from the initial
// model), and all five reach 0.90. Then one leaves with SIGTERM and
// another is killed with -9 and restarted on its store: the others drop
// the leaver, take the restarted one back, and keep improving; the job ID
// never changes. For D-PSGD (ring) and push-sum (exponential graph, where
// the weights over the live members must also keep summing to their
// number within 1%), and for D-PSGD with a CNN (small-cnn, to 0.85).
func TestDaemonJoinLeave(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	for _, c := range []struct {
		name, proto, model string
		floor              float64
	}{{"dpsgd", "dpsgd", "softmax", 0.90}, {"pushsum", "pushsum", "softmax", 0.90}, {"dpsgd-cnn", "dpsgd", "small-cnn", 0.85}} {
		proto, floor := c.proto, c.floor
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ds := startCluster(t, bin, dir, 4, "100ms", "--protocol", proto, "--model", c.model, "--checkpoint-every", "10")
			first := poll(t, ds[0], "a job and four live members", 60*time.Second, func(s status) bool { return s.Members == 4 })
			boot := ds[0].flag("--listen") + "/p2p/" + first.PeerID
			port := freePorts(t, 2)
			joiner := &proc{api: fmt.Sprintf("127.0.0.1:%d", port[1]), log: filepath.Join(dir, "joiner.log"),
				args: []string{"run", "--join", first.JobID, "--bootstrap", boot, "--store", filepath.Join(dir, "joiner"),
					"--listen", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port[0]), "--api", fmt.Sprintf("127.0.0.1:%d", port[1]),
					"--shard", "1/5", "--lr", "0.5", "--mdns=false", "--announce-interval", "500ms", "--log-format", "json"}}
			joiner.start(t, bin)
			t.Cleanup(func() {
				if joiner.cmd.ProcessState == nil {
					joiner.cmd.Process.Kill()
					joiner.cmd.Wait()
				}
			})
			j := poll(t, joiner, "the joiner to take a member's state", 60*time.Second, func(s status) bool { return s.Joined })
			if j.JobID != first.JobID || j.ModelAge == 0 {
				t.Fatalf("joiner: job %s (want %s), model age %v (a member's state has seen examples)", j.JobID, first.JobID, j.ModelAge)
			}
			all := append(slices.Clone(ds), joiner)
			t.Cleanup(func() { dumpLogs(t, all) })
			for _, d := range all {
				poll(t, d, fmt.Sprintf("accuracy ≥ %.2f with five live members", floor), 120*time.Second, func(s status) bool {
					return s.Accuracy >= floor && s.Members == 5 && s.JobID == first.JobID
				})
			}
			checkMass(t, proto, all)
			checkJobs(t, bin, first.JobID, ds[0], boot, floor)

			// ds[1] leaves; ds[2] is killed with -9 and restarted.
			stop(t, ds[1])
			if os.Getenv("DEBUG_MASS") != "" {
				rest := []*proc{ds[0], ds[2], ds[3], joiner}
				for _, d := range rest {
					poll(t, d, "four live members", 30*time.Second, func(s status) bool { return s.Members == 4 })
				}
				checkMass(t, proto, rest)
				t.Log("mass ok after the leave")
			}
			after := ds[2].killRestart(t, bin)
			if after.JobID != first.JobID {
				t.Fatalf("restarted daemon runs job %s, want %s", after.JobID, first.JobID)
			}
			live := []*proc{ds[0], ds[2], ds[3], joiner}
			for _, d := range live {
				before, _ := d.status()
				poll(t, d, "four live members, improving on", 90*time.Second, func(s status) bool {
					return s.Members == 4 && s.Updates > before.Updates+20 && s.Accuracy >= floor && s.JobID == first.JobID
				})
			}
			checkMass(t, proto, live)
			stopAll(t, live, nil)
		})
	}
}

// checkMass: for push-sum, the weights over the live members sum to their
// number within 1% (polled: shares in flight are counted nowhere).
func checkMass(t *testing.T, proto string, ds []*proc) {
	t.Helper()
	if proto != "pushsum" {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		sum, n := 0.0, 0
		for _, d := range ds {
			if s, err := d.status(); err == nil {
				sum += s.PushSumWeight
				n++
			}
		}
		if n == len(ds) && sum > 0.99*float64(n) && sum < 1.01*float64(n) {
			return
		}
		if time.Now().After(deadline) {
			for _, d := range ds {
				s, _ := d.status()
				t.Logf("%s: weight %.4f members %d updates %d rejected %v", d.api, s.PushSumWeight, s.Members, s.Updates, s.Rejected)
			}
			t.Fatalf("push-sum weights over %d live members sum to %.4f (want within 1%% of %d)", len(ds), sum, len(ds))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkJobs: `gossipd jobs` lists the job with its five members and their
// best accuracy, as a daemon heard it (--api) and as a listener that joins
// the network on its own (--bootstrap).
func checkJobs(t *testing.T, bin, job string, d *proc, boot string, floor float64) {
	t.Helper()
	for _, args := range [][]string{{"jobs", "--json", "--api", d.api}, {"jobs", "--json", "--bootstrap", boot, "--listen-for", "3s"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var jobs []daemon.AnnouncedJob
		if err := json.Unmarshal(out, &jobs); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		i := slices.IndexFunc(jobs, func(j daemon.AnnouncedJob) bool { return j.JobID == job })
		if i < 0 || jobs[i].MembersSeen != 5 || jobs[i].BestAccuracy < floor || !jobs[i].Joinable || jobs[i].Protocol == "" {
			t.Fatalf("%v: job %.12s not listed with 5 members, accuracy ≥ %.2f and its spec: %+v", args, job, floor, jobs)
		}
	}
}

// TestDaemonDeadPeerOverQUIC: two daemons connected over QUIC only; one is
// killed with -9. UDP gives no reset, and QUIC would keep the connection
// for its 30 s idle timeout, sending models into the void; the survivor's
// liveness check (a ping to a peer that has sent nothing for 5 s)
// disconnects it well before: its peers drop to 0 within 20 s, and from
// then on no frame to the dead peer counts as sent (a send fails, or the
// peer-sampling view has dropped the peer that stopped answering, so no
// model goes its way).
func TestDaemonDeadPeerOverQUIC(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	dir := t.TempDir()
	ports := freeUDPPorts(t, 2)
	api := freePorts(t, 2)
	ds := make([]*proc, 2)
	var boot string
	for i := range ds {
		listen := fmt.Sprintf("/ip4/127.0.0.1/udp/%d/quic-v1", ports[i])
		ds[i] = &proc{api: fmt.Sprintf("127.0.0.1:%d", api[i]), log: filepath.Join(dir, fmt.Sprintf("q%d.log", i)),
			args: []string{"run", "--store", filepath.Join(dir, fmt.Sprintf("q%d", i)), "--listen", listen, "--api", fmt.Sprintf("127.0.0.1:%d", api[i]),
				"--shard", fmt.Sprintf("%d/2", i), "--delta", "100ms", "--mdns=false", "--dht", "off", "--log-format", "json"}}
		if i == 1 {
			ds[i].args = append(ds[i].args, "--bootstrap", boot)
		}
		ds[i].start(t, bin)
		t.Cleanup(func() {
			if ds[i].cmd.ProcessState == nil {
				ds[i].cmd.Process.Kill()
				ds[i].cmd.Wait()
			}
		})
		if i == 0 {
			s := poll(t, ds[0], "the first daemon's API", 30*time.Second, func(status) bool { return true })
			boot = listen + "/p2p/" + s.PeerID
		}
	}
	poll(t, ds[0], "a peer over QUIC exchanging models", 30*time.Second, func(s status) bool { return s.Peers == 1 && s.MessagesIn > 0 })
	dead := poll(t, ds[1], "the second daemon's ID", 10*time.Second, func(status) bool { return true }).PeerID
	if err := ds[1].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ds[1].cmd.Wait()
	at := poll(t, ds[0], "the dead peer dropped (liveness check, not QUIC's 30 s idle timeout)", 20*time.Second, func(s status) bool { return s.Peers == 0 })
	// Two more seconds of the survivor's life (20 of its gossip periods):
	// nothing more counts as sent to the dead peer.
	later := poll(t, ds[0], "two more seconds of the survivor's uptime", 20*time.Second, func(s status) bool { return s.Uptime >= at.Uptime+2 })
	if sent, then := later.Traffic[dead].MessagesOut, at.Traffic[dead].MessagesOut; sent != then {
		t.Errorf("%d frames to the dead peer counted as sent after it was dropped: models went into the void", sent-then)
	}
	t.Logf("to the dead peer: %d frames sent before it was dropped, %d sends failed", later.Traffic[dead].MessagesOut, later.Traffic[dead].SendErrors)
}

// freeUDPPorts returns k distinct free UDP ports on 127.0.0.1.
func freeUDPPorts(t testing.TB, k int) []int {
	t.Helper()
	out := make([]int, k)
	for i := range out {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		out[i] = c.LocalAddr().(*net.UDPAddr).Port
	}
	return out
}

// dumpLogs, when t failed, logs whether each daemon still runs and the
// tail of its log: a poll that timed out on one daemon may have been
// kept waiting by another (one that died, or stopped announcing).
func dumpLogs(t *testing.T, ds []*proc) {
	if !t.Failed() {
		return
	}
	for _, d := range ds {
		state := "running"
		switch {
		case d.cmd == nil || d.cmd.Process == nil:
			state = "not started"
		case d.cmd.ProcessState != nil:
			state = "exited: " + d.cmd.ProcessState.String()
		default:
			// A child that died is a zombie until waited for.
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid)); err != nil || strings.Contains(string(b), ") Z ") {
				state = "died"
			}
		}
		log, _ := os.ReadFile(d.log)
		t.Logf("%s (%s), log tail:\n%s", d.api, state, tail(string(log), 1500))
	}
}
