//go:build e2e

// Package e2e runs gossipd clusters in containers on the Docker engine
// (`make e2e`): real hosts with their own addresses, lossy and slow links
// (iptables statistic, tbf), partitions cut with iptables in the
// containers' network namespaces, kills, restarts, a late joiner and an
// address change, for random walk, D-PSGD and push-sum.
// It needs the image `make image` builds, the Docker CLI, and root for
// nsenter. Every wait is bounded; containers, volumes and networks are
// removed at the end, and on failure each container's log is kept under
// e2e-logs/.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var image = envOr("GOSSIPD_IMAGE", "gossipd:dev")

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// docker runs the Docker CLI (bounded) and returns its trimmed output.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := dockerErr(args...)
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func dockerErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// status is what the e2e suite reads of /status.
type status struct {
	PeerID      string   `json:"peer_id"`
	Addrs       []string `json:"addrs"`
	JobID       string   `json:"job_id"`
	Peers       int      `json:"peers"`
	Members     int      `json:"members"`
	Accuracy    float64  `json:"accuracy"`
	Updates     uint64   `json:"updates"`
	Joined      bool     `json:"joined"`
	ResumedFrom uint64   `json:"resumed_from_seq"`
}

// cluster is one protocol's containers on a network of their own.
type cluster struct {
	t      *testing.T
	proto  string
	net    string
	subnet string // a /24, "10.77.N"
	nodes  []string
	boot   string
}

func (c *cluster) name(i int) string { return fmt.Sprintf("e2e-%s-%d", c.proto, i) }

// start runs node i on its own volume with the cluster's job flags.
func (c *cluster) start(i int, extra ...string) {
	c.t.Helper()
	name := c.name(i)
	args := []string{"run", "-d", "--name", name, "--network", c.net, "--ip", fmt.Sprintf("%s.%d", c.subnet, 10+i),
		"-v", name + ":/data", image, "run", "--shard", fmt.Sprintf("%d/6", i), "--lr", "0.5", "--announce-interval", "1s"}
	if len(extra) == 0 || extra[0] != "--join" {
		args = append(args, "--protocol", c.proto, "--delta", "200ms")
	}
	if c.boot != "" {
		args = append(args, "--bootstrap", c.boot)
	}
	args = append(args, extra...)
	docker(c.t, args...)
	c.nodes = append(c.nodes, name)
}

// status reads a node's /status through the binary in its container.
func (c *cluster) status(name string) (status, error) {
	var s status
	out, err := dockerErr("exec", name, "/gossipd", "status")
	if err != nil {
		return s, fmt.Errorf("%v: %s", err, out)
	}
	return s, json.Unmarshal([]byte(out), &s)
}

// waitAll polls every named node (bounded) until cond holds for all of
// them on three polls in a row.
func (c *cluster) waitAll(what string, limit time.Duration, names []string, cond func(status) bool) {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	held := 0
	for {
		ok := true
		var last status
		var lastErr error
		var who string
		for _, n := range names {
			s, err := c.status(n)
			if err != nil || !cond(s) {
				ok, last, lastErr, who = false, s, err, n
				break
			}
		}
		if ok {
			held++
			if held == 3 {
				return
			}
		} else {
			held = 0
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: %s: not within %v (%s: %+v, %v)", c.proto, what, limit, who, last, lastErr)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// nsenter runs a command in a container's network namespace (iptables).
func (c *cluster) nsenter(name string, args ...string) {
	c.t.Helper()
	pid := docker(c.t, "inspect", "-f", "{{.State.Pid}}", name)
	cmd := exec.Command("nsenter", append([]string{"-t", pid, "-n"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("nsenter %s %v: %v\n%s", name, args, err, out)
	}
}

func (c *cluster) ip(i int) string { return fmt.Sprintf("%s.%d", c.subnet, 10+i) }

// teardown keeps the logs of a failed run and removes everything.
func (c *cluster) teardown(t *testing.T) {
	if t.Failed() {
		dir := filepath.Join("..", "..", "e2e-logs", c.proto)
		os.MkdirAll(dir, 0o755)
		for _, n := range c.nodes {
			out, _ := dockerErr("logs", n)
			os.WriteFile(filepath.Join(dir, n+".log"), []byte(out), 0o644)
		}
		t.Logf("container logs kept in e2e-logs/%s", c.proto)
	}
	for _, n := range c.nodes {
		dockerErr("rm", "-f", "-v", n)
		dockerErr("volume", "rm", "-f", n)
	}
	dockerErr("network", "rm", c.net)
}

func TestMain(m *testing.M) {
	if _, err := dockerErr("image", "inspect", image); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: no image %s: run `make image` first (or `make e2e`)\n", image)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestCluster runs the scenarios in turn on one five-node cluster per
// protocol; each scenario is a subtest, so the output names it as it
// passes.
func TestCluster(t *testing.T) {
	for k, proto := range []string{"randomwalk", "dpsgd", "pushsum"} {
		t.Run(proto, func(t *testing.T) {
			c := &cluster{t: t, proto: proto, net: "gossipd-e2e-" + proto, subnet: fmt.Sprintf("10.77.%d", 10+k)}
			for i := range 6 { // leftovers of an interrupted run
				c.nodes = append(c.nodes, c.name(i))
			}
			c.teardown(t)
			c.nodes = nil
			docker(t, "network", "create", "--subnet", c.subnet+".0/24", c.net)
			defer c.teardown(t)
			c.start(0)
			first := status{}
			c.waitAll("node 0 up", 60*time.Second, c.nodes[:1], func(s status) bool { first = s; return s.PeerID != "" })
			c.boot = "/dns4/" + c.name(0) + "/tcp/4001/p2p/" + first.PeerID
			for i := 1; i < 5; i++ {
				c.start(i)
			}
			all := func() []string { return append([]string(nil), c.nodes...) }

			t.Run("converge", func(t *testing.T) {
				c.t = t
				c.waitAll("accuracy ≥ 0.85 with 4 peers each", 120*time.Second, all(), func(s status) bool {
					return s.Accuracy >= 0.85 && s.Peers == 4
				})
			})
			t.Run("bad-links", func(t *testing.T) {
				c.t = t
				// 5% loss (iptables statistic on INPUT: a drop on OUTPUT would
				// return EPERM to the sender) and 1 Mbit/s (tbf) everywhere,
				// then 25% and 128 kbit/s on node 4. This kernel has no netem,
				// so there is no added delay.
				shape := func(i int, loss, rate string) {
					c.nsenter(c.name(i), "iptables", "-A", "INPUT", "-m", "statistic", "--mode", "random", "--probability", loss, "-j", "DROP")
					c.nsenter(c.name(i), "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate, "burst", "32kbit", "latency", "400ms")
				}
				for i := range 4 {
					shape(i, "0.05", "1mbit")
				}
				shape(4, "0.25", "128kbit")
				defer func() {
					for i := range 5 {
						c.nsenter(c.name(i), "iptables", "-F", "INPUT")
						c.nsenter(c.name(i), "tc", "qdisc", "del", "dev", "eth0", "root")
					}
				}()
				before := map[string]uint64{} // by peer ID
				for _, n := range all() {
					s, _ := c.status(n)
					before[s.PeerID] = s.Updates
				}
				// The healthy nodes go on learning; the slow one does not
				// stall them (D-PSGD closes rounds at their deadline), and it
				// learns too.
				c.waitAll("20 more updates on every healthy node at ≥ 0.85", 90*time.Second, all()[:4], func(s status) bool {
					return s.Updates >= before[s.PeerID]+20 && s.Accuracy >= 0.85
				})
				c.waitAll("the slow node learning on", 90*time.Second, all()[4:], func(s status) bool {
					return s.Updates > before[s.PeerID] && s.Accuracy >= 0.8
				})
			})
			t.Run("partition", func(t *testing.T) {
				c.t = t
				a, b := []int{0, 1}, []int{2, 3, 4}
				cut := func(flag string) {
					for _, i := range a {
						for _, j := range b {
							c.nsenter(c.name(i), "iptables", flag, "INPUT", "-s", c.ip(j), "-j", "DROP")
							c.nsenter(c.name(j), "iptables", flag, "INPUT", "-s", c.ip(i), "-j", "DROP")
						}
					}
				}
				before := map[string]uint64{}
				for _, n := range all() {
					s, _ := c.status(n)
					before[n] = s.Updates
				}
				cut("-A")
				// Each side sees only its own (the liveness check drops the rest)
				// and goes on training.
				c.waitAll("side A alone, training", 60*time.Second, all()[:2], func(s status) bool { return s.Peers == 1 && s.Updates > before[c.name(0)] })
				c.waitAll("side B alone, training", 60*time.Second, all()[2:], func(s status) bool { return s.Peers == 2 })
				cut("-D")
				c.waitAll("the full mesh back after the heal", 90*time.Second, all(), func(s status) bool { return s.Peers == 4 && s.Accuracy >= 0.85 })
			})
			t.Run("crash", func(t *testing.T) {
				c.t = t
				victim := c.name(2)
				docker(t, "kill", "-s", "KILL", victim)
				rest := []string{c.name(0), c.name(1), c.name(3), c.name(4)}
				// Liveness: the survivors drop the dead peer within 10 s of
				// checks (bound 20 s here, with the polls).
				c.waitAll("the dead peer dropped", 20*time.Second, rest, func(s status) bool { return s.Peers == 3 })
				docker(t, "start", victim)
				c.waitAll("the restarted node resumed from its checkpoint and caught up", 90*time.Second, []string{victim}, func(s status) bool {
					return s.ResumedFrom > 0 && s.Peers == 4 && s.Accuracy >= 0.85
				})
			})
			t.Run("late-joiner", func(t *testing.T) {
				c.t = t
				s0, err := c.status(c.name(0))
				if err != nil {
					t.Fatal(err)
				}
				c.start(5, "--join", s0.JobID)
				c.waitAll("the joiner took a member's state and reached 0.85", 90*time.Second, []string{c.name(5)}, func(s status) bool {
					return s.Joined && s.JobID == s0.JobID && s.Peers == 5 && s.Accuracy >= 0.85
				})
			})
			t.Run("address-change", func(t *testing.T) {
				c.t = t
				n := c.name(1)
				newIP := c.subnet + ".99"
				docker(t, "network", "disconnect", c.net, n)
				docker(t, "network", "connect", "--ip", newIP, c.net, n)
				c.waitAll("/status shows the new address, and the peers found it again", 90*time.Second, []string{n}, func(s status) bool {
					return len(s.Addrs) > 0 && strings.Contains(strings.Join(s.Addrs, " "), "/ip4/"+newIP+"/") && s.Peers == 5
				})
				c.waitAll("every node sees 5 peers", 90*time.Second, all(), func(s status) bool { return s.Peers == 5 })
			})
		})
	}
}
