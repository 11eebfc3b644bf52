package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDaemonConsortium: five real processes bootstrap through the first.
// Two members of a consortium connect. A daemon holding the network key
// whose own copy of the file lists it, but the members' does not, is
// refused by the members (the first one's log names it) and says once,
// at error level, that it is not a member, never that it reached its
// bootstrap peer. A daemon with another key, and one with none, cannot
// complete a connection and say that the peer runs a private network.
// None of the three outsiders ever counts a peer. A daemon whose own
// consortium file does not list it refuses to start, naming the file and
// its peer ID.
func TestDaemonConsortium(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	dir := t.TempDir()
	ids := make([]string, 5)
	for i := range ids {
		out, err := exec.Command(bin, "keygen", "--out", filepath.Join(dir, fmt.Sprintf("n%d", i), "identity.key")).Output()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = strings.TrimSpace(string(out))
	}
	club, newer, other := filepath.Join(dir, "club.yaml"), filepath.Join(dir, "newer.yaml"), filepath.Join(dir, "other.yaml")
	for _, c := range [][]string{{club, ids[0], ids[1]}, {other, ids[0], ids[1], ids[3]}} {
		if out, err := exec.Command(bin, append([]string{"consortium", "init", "--out", c[0]}, c[1:]...)...).CombinedOutput(); err != nil {
			t.Fatalf("consortium init: %v\n%s", err, out)
		}
	}
	// newer.yaml: the club's key, and the third daemon added, in a copy
	// the members do not have.
	b, err := os.ReadFile(club)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newer, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "consortium", "add-member", "--file", newer, ids[2]).CombinedOutput(); err != nil {
		t.Fatalf("consortium add-member: %v\n%s", err, out)
	}
	ports := freePorts(t, 12)
	// Its own file does not list it: it refuses to start.
	out, err := exec.Command(bin, "run", "--store", filepath.Join(dir, "n2"), "--listen", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[10]),
		"--api", fmt.Sprintf("127.0.0.1:%d", ports[11]), "--mdns=false", "--dht", "off", "--consortium", club).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "does not list this node (peer ID "+ids[2]+")") || !strings.Contains(string(out), club) {
		t.Errorf("a daemon its own consortium file does not list: %v, want an error naming %s and its ID; output:\n%s", err, club, out)
	}
	ds := make([]*proc, 5)
	t.Cleanup(func() {
		for _, d := range ds {
			if d != nil && d.cmd != nil && d.cmd.ProcessState == nil {
				d.cmd.Process.Kill()
				d.cmd.Wait()
			}
		}
	})
	boot := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/%s", ports[0], ids[0])
	for i, file := range []string{club, club, newer, other, ""} {
		ds[i] = &proc{api: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]), log: filepath.Join(dir, fmt.Sprintf("n%d.log", i))}
		ds[i].args = []string{"run", "--store", filepath.Join(dir, fmt.Sprintf("n%d", i)), "--listen", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[2*i]),
			"--api", ds[i].api, "--shard", fmt.Sprintf("%d/5", i), "--delta", "100ms", "--mdns=false", "--dht", "off",
			"--log-format", "json", "--log-level", "debug", "--bootstrap", boot}
		if file != "" {
			ds[i].args = append(ds[i].args, "--consortium", file)
		}
		ds[i].start(t, bin)
	}
	// Each member counts the other once it has heard its announcement.
	poll(t, ds[0], "the two members connected", 30*time.Second, func(s status) bool { return s.Peers == 1 })
	poll(t, ds[1], "the two members connected", 30*time.Second, func(s status) bool { return s.Peers == 1 })
	logHas := func(d *proc, what string, parts ...string) {
		t.Helper()
		waitLog(t, d, what, 30*time.Second, parts...)
	}
	logHas(ds[0], "the first member refusing the non-member", "refused a peer outside the consortium", ids[2])
	logHas(ds[2], "the non-member's error", `"level":"ERROR"`, `"msg":"this node (peer ID `+ids[2]+`) is not a member of the consortium: the bootstrap peer `+ids[0]+` closed the connection`,
		"gossipd consortium add-member")
	logHas(ds[3], "the daemon with another key", `"level":"ERROR"`, `"msg":"cannot reach bootstrap peer `+ids[0]+`: the connection handshake failed: the peer runs a private network`)
	logHas(ds[4], "the daemon without a key", `"level":"ERROR"`, `"msg":"cannot reach bootstrap peer `+ids[0]+`: the peer runs a private network (a consortium network key), and this node has no key or a different one`)
	for i, want := range []int{1, 1, 0, 0, 0} {
		// A daemon logs its first connections before its API listens (it
		// loads its data in between): wait, bounded, for the API.
		s, err := ds[i].status()
		for deadline := time.Now().Add(30 * time.Second); err != nil && time.Now().Before(deadline); s, err = ds[i].status() {
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil || s.Peers != want {
			b, _ := os.ReadFile(ds[i].log)
			t.Errorf("daemon %d: %d peers (%v), want %d; log tail:\n%s", i, s.Peers, err, want, tail(string(b), 1500))
		}
	}
	// The non-member said it once (the next time is a minute away), and
	// never took the connection each round makes for a recovery.
	b, _ = os.ReadFile(ds[2].log)
	if n := strings.Count(string(b), "is not a member of the consortium"); n != 1 || strings.Contains(string(b), "reached bootstrap peer") {
		t.Errorf("the non-member said it is not a member %d times, or said it reached its bootstrap peer; log tail:\n%s", n, tail(string(b), 3000))
	}
}
