//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// compose runs docker-compose (v1, as installed here; the files work with
// v2 too) on a file of deploy/ under a project name of the suite's.
func compose(t testing.TB, project, file string, args ...string) string {
	t.Helper()
	cmd := exec.Command("docker-compose", append([]string{"-p", project, "-f", filepath.Join("..", file)}, args...)...)
	cmd.Env = append(os.Environ(), "GOSSIPD_IMAGE="+image)
	timer := time.AfterFunc(4*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docker-compose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// composeNodes finds the containers of a project's services and their
// first address.
func composeNodes(t testing.TB, project, file string, services ...string) []node {
	t.Helper()
	var out []node
	for _, s := range services {
		id := compose(t, project, file, "ps", "-q", s)
		if id == "" {
			t.Fatalf("%s: no container for service %s", project, s)
		}
		ips := strings.Fields(docker(t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", id))
		if len(ips) == 0 {
			t.Fatalf("%s: service %s has no address", project, s)
		}
		out = append(out, node{name: s, ip: ips[0]})
	}
	return out
}

// composeDown keeps the project's logs on failure and removes it with its
// volumes.
func composeDown(t *testing.T, project, file string) {
	if t.Failed() {
		d := filepath.Join("..", "..", "e2e-logs", project)
		os.MkdirAll(d, 0o755)
		out, _ := exec.Command("docker-compose", "-p", project, "-f", filepath.Join("..", file), "logs", "--no-color").CombinedOutput()
		os.WriteFile(filepath.Join(d, "compose.log"), out, 0o644)
		t.Logf("compose logs kept in e2e-logs/%s", project)
	}
	exec.Command("docker-compose", "-p", project, "-f", filepath.Join("..", file), "down", "-v", "--remove-orphans").Run()
}

// TestCompose brings up deploy/compose.yaml (five nodes bootstrapping by
// service name through a keygen one-shot) and deploy/consortium (two
// organisations on two networks, a network key and a member list) with
// docker-compose, as a user would.
func TestCompose(t *testing.T) {
	t.Run("cluster", func(t *testing.T) {
		const project, file = "gossipde2e", "compose.yaml"
		composeDown(t, project, file)
		defer composeDown(t, project, file)
		start := time.Now()
		compose(t, project, file, "up", "-d")
		nodes := composeNodes(t, project, file, "node0", "node1", "node2", "node3", "node4")
		at := waitAll(t, "five nodes with 4 peers each at ≥ 0.85", 120*time.Second, nodes, func(s status) bool {
			return s.Peers == 4 && s.Accuracy >= 0.85
		})
		note("compose: deploy/compose.yaml up to five nodes at ≥ 0.85 with 4 peers each in %.1f s (docker-compose %s).", at.Sub(start).Seconds(), composeVersion())
	})
	t.Run("consortium", func(t *testing.T) {
		const project, file = "gossipde2econs", "consortium/compose.yaml"
		outsider := "e2e-consortium-outsider"
		removeAll([]string{outsider}, nil, nil)
		composeDown(t, project, file)
		defer func() {
			keepLogs(t, project, []string{outsider})
			removeAll([]string{outsider}, nil, nil)
			composeDown(t, project, file)
		}()
		start := time.Now()
		compose(t, project, file, "up", "-d")
		nodes := composeNodes(t, project, file, "a0", "a1", "b0", "b1")
		// The gateways reach everyone; a1 and b1 reach the two gateways.
		want := map[string]int{}
		for _, n := range nodes {
			want[statusOf(t, n.ip).PeerID] = map[bool]int{true: 3, false: 2}[strings.HasSuffix(n.name, "0")]
		}
		at := waitAll(t, "four members learning across the two networks", 120*time.Second, nodes, func(s status) bool {
			return s.Peers == want[s.PeerID] && s.Accuracy >= 0.85
		})
		note("consortium: deploy/consortium up to four members of two organisations at ≥ 0.85 in %.1f s.", at.Sub(start).Seconds())
		// An outsider that holds the network key but is not a member is
		// turned away, and both sides say so.
		docker(t, "run", "-d", "--name", outsider, "--network", project+"_org-a", "-v", project+"_shared:/shared:ro", image,
			"run", "--consortium", "/shared/consortium.yaml", "--bootstrap", "@/shared/a0.addr", "--shard", "0/4")
		ip := docker(t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", outsider)
		them := statusOf(t, ip)
		a0 := compose(t, project, file, "ps", "-q", "a0")
		deadline := time.Now().Add(60 * time.Second)
		for {
			theirs, _ := dockerErr("logs", a0)
			ours, _ := dockerErr("logs", outsider)
			s, err := getStatus(ip)
			if err == nil && s.Peers == 0 && strings.Contains(theirs, "refused a peer outside the consortium") && strings.Contains(theirs, them.PeerID) &&
				strings.Contains(ours, "cannot reach bootstrap peer") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the outsider (%s): peers %d (%v); a0 logged its refusal: %v; the outsider logged its failure: %v", them.PeerID, s.Peers, err,
					strings.Contains(theirs, them.PeerID), strings.Contains(ours, "cannot reach bootstrap peer"))
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
}

func composeVersion() string {
	out, _ := run(10*time.Second, "docker-compose", "version", "--short")
	return out
}
