//go:build e2e

// Package e2e runs gossipd in containers on the Docker engine (`make
// e2e`): real hosts with their own addresses, lossy, slow and delayed
// links (iptables statistic, tbf, and linkemu's NFQUEUE delayer, since
// this kernel has no netem), partitions cut with iptables in the
// containers' network namespaces, kills, restarts, a late joiner, an
// address change, two peers behind NATs that meet through a relay and
// punch a hole, and the compose files of deploy/. It covers random walk,
// D-PSGD and push-sum.
//
// It needs the images `make e2e-images` builds, the Docker CLI,
// docker-compose, and root (nsenter, iptables). Every wait is bounded;
// containers, volumes and networks are removed at the end, and on
// failure each container's log is kept under e2e-logs/. The timings of
// every scenario are written to e2e-logs/timings.md (docs/explanation/reliability.md
// quotes them).
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gossipd/gossipd/model"
)

var (
	image        = envOr("GOSSIPD_IMAGE", "gossipd:dev")
	linkemuImage = envOr("LINKEMU_IMAGE", "gossipd-linkemu:dev")
)

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// docker runs the Docker CLI (bounded) and returns its trimmed output.
func docker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := dockerErr(args...)
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func dockerErr(args ...string) (string, error) {
	return run(90*time.Second, "docker", args...)
}

// run runs a command, bounded, and returns its trimmed combined output.
func run(limit time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// status is what the suite reads of /status.
type status struct {
	PeerID      string             `json:"peer_id"`
	Addrs       []string           `json:"addrs"`
	JobID       string             `json:"job_id"`
	Peers       int                `json:"peers"`
	Members     int                `json:"members"`
	Accuracy    float64            `json:"accuracy"`
	Updates     uint64             `json:"updates"`
	Joined      bool               `json:"joined"`
	ResumedFrom uint64             `json:"resumed_from_seq"`
	MessagesIn  uint64             `json:"messages_in"`
	BytesIn     uint64             `json:"bytes_in"`
	BytesOut    uint64             `json:"bytes_out"`
	Uptime      float64            `json:"uptime_seconds"`
	Rejected    map[string]uint64  `json:"rejected"`
	Traffic     map[string]traffic `json:"traffic"`
	Connections []struct {
		Peer, Type, Transport, Direction, Addr string
	} `json:"connections"`
	HolePunches struct {
		Succeeded, Failed uint64
	} `json:"hole_punches"`
	DeadPeersDropped uint64 `json:"dead_peers_dropped"`
}

type traffic struct {
	MessagesIn  uint64 `json:"messages_in"`
	MessagesOut uint64 `json:"messages_out"`
	SendErrors  uint64 `json:"send_errors"`
}

// connTo returns the types of s's connections to peer ("direct",
// "relayed"), sorted.
func (s status) connTo(peer string) []string {
	var out []string
	for _, c := range s.Connections {
		if c.Peer == peer {
			out = append(out, c.Type)
		}
	}
	slices.Sort(out)
	return out
}

var httpc = &http.Client{Timeout: 3 * time.Second}

// getStatus reads /status from a daemon's API at ip:8080 (the host reaches
// every container on the Docker bridges).
func getStatus(ip string) (status, error) {
	var s status
	b, err := get("http://" + ip + ":8080/status")
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

// get reads a URL of a daemon's API with its token.
func get(url string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tokenFor(url))
	resp, err := httpc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", url, resp.Status)
	}
	return b, err
}

// node is one daemon the suite polls: its container and its address.
type node struct{ name, ip string }

// waitAll polls every node (bounded by limit) until cond holds for all of
// them on three polls in a row, and returns when it first held: the
// start of that streak.
func waitAll(t testing.TB, what string, limit time.Duration, nodes []node, cond func(status) bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	held := 0
	var first time.Time
	for {
		ok := true
		var last status
		var lastErr error
		var who string
		start := time.Now()
		for _, n := range nodes {
			s, err := getStatus(n.ip)
			if err != nil || !cond(s) {
				ok, last, lastErr, who = false, s, err, n.name
				break
			}
		}
		if ok {
			if held == 0 {
				first = start
			}
			held++
			if held == 3 {
				return first
			}
		} else {
			held = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (%s: peers %d, accuracy %.3f, updates %d, connections %+v; %v)",
				what, limit, who, last.Peers, last.Accuracy, last.Updates, last.Connections, lastErr)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// pid is a running container's process, for nsenter.
func pid(t testing.TB, name string) string {
	return docker(t, "inspect", "-f", "{{.State.Pid}}", name)
}

// nsenter runs a command in a container's network namespace (iptables,
// tc, ip).
func nsenter(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := run(30*time.Second, "nsenter", append([]string{"-t", pid(t, name), "-n"}, args...)...); err != nil {
		t.Fatalf("nsenter %s %v: %v\n%s", name, args, err, out)
	}
}

// keepLogs saves the logs of the named containers under e2e-logs/dir if
// the test failed.
func keepLogs(t testing.TB, dir string, names []string) {
	if !t.Failed() {
		return
	}
	d := filepath.Join("..", "..", "e2e-logs", dir)
	os.MkdirAll(d, 0o755)
	for _, n := range names {
		out, _ := dockerErr("logs", n)
		os.WriteFile(filepath.Join(d, n+".log"), []byte(out), 0o644)
	}
	t.Logf("container logs kept in e2e-logs/%s", dir)
}

// removeAll removes containers (with their anonymous volumes), named
// volumes and networks, ignoring those that do not exist.
func removeAll(containers, volumes, networks []string) {
	if len(containers) > 0 {
		dockerErr(append([]string{"rm", "-f", "-v"}, containers...)...)
	}
	if len(volumes) > 0 {
		dockerErr(append([]string{"volume", "rm", "-f"}, volumes...)...)
	}
	for _, n := range networks {
		dockerErr("network", "rm", n)
	}
}

// params fetches a daemon's model (/model, safetensors) as one vector, its
// tensors in name order.
func params(ip string) ([]float32, error) {
	b, err := get("http://" + ip + ":8080/model")
	if err != nil {
		return nil, err
	}
	_, vals, _, err := model.ReadSafetensors(b)
	if err != nil {
		return nil, err
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range vals {
			if !yield(k) {
				return
			}
		}
	})
	var out []float32
	for _, k := range names {
		out = append(out, vals[k]...)
	}
	return out, nil
}

// consensusDistance is the mean squared distance of the nodes' models
// from their average: how far the replicas are apart.
func consensusDistance(nodes []node) (float64, error) {
	var xs [][]float32
	for _, n := range nodes {
		p, err := params(n.ip)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", n.name, err)
		}
		if len(xs) > 0 && len(p) != len(xs[0]) {
			return 0, fmt.Errorf("%s: %d parameters, %s has %d", n.name, len(p), nodes[0].name, len(xs[0]))
		}
		xs = append(xs, p)
	}
	if len(xs) == 0 {
		return 0, nil
	}
	var d float64
	for j := range xs[0] {
		var mean float64
		for _, x := range xs {
			mean += float64(x[j])
		}
		mean /= float64(len(xs))
		for _, x := range xs {
			d += (float64(x[j]) - mean) * (float64(x[j]) - mean)
		}
	}
	return d / float64(len(xs)), nil
}

// tcpConnectTime measures a TCP handshake from the host to addr (the
// added delay of a node's incoming packets shows in it).
func tcpConnectTime(addr string) (time.Duration, error) {
	best := time.Duration(math.MaxInt64)
	for range 3 {
		start := time.Now()
		c, err := (&net.Dialer{Timeout: 3 * time.Second}).Dial("tcp", addr)
		if err != nil {
			return 0, err
		}
		best = min(best, time.Since(start))
		c.Close()
	}
	return best, nil
}
