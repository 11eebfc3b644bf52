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

// composeTool is a Compose implementation: docker-compose v1 as Debian
// installs it, or v2 (`make e2e` builds it from the Go module proxy, since
// this machine has no `docker compose` plugin; COMPOSE_V2 names it).
type composeTool struct{ name, bin string }

func composeTools(t testing.TB) []composeTool {
	v2 := os.Getenv("COMPOSE_V2")
	if v2 == "" {
		t.Fatal("COMPOSE_V2 is not set: `make e2e` builds Compose v2 (make compose-v2) and sets it")
	}
	return []composeTool{{"v1", "docker-compose"}, {"v2", v2}}
}

// project is one Compose project of the suite: a file of deploy/ under a
// name of the suite's, run by one tool.
type project struct {
	tool       composeTool
	name, file string
}

// compose runs the project's tool with args.
func (p project) compose(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(p.tool.bin, append([]string{"-p", p.name, "-f", filepath.Join("..", p.file)}, args...)...)
	cmd.Env = append(os.Environ(), "GOSSIPD_IMAGE="+image)
	timer := time.AfterFunc(4*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output() // warnings go to stderr
	if err != nil {
		t.Fatalf("compose %s %s: %v\n%s%s", p.tool.name, strings.Join(args, " "), err, out, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// nodes finds the containers of a project's services and their first
// address, and reads their API tokens.
func (p project) nodes(t testing.TB, services ...string) []node {
	t.Helper()
	var out []node
	for _, s := range services {
		id := p.compose(t, "ps", "-q", s)
		if id == "" {
			t.Fatalf("%s: no container for service %s", p.name, s)
		}
		ips := strings.Fields(docker(t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", id))
		if len(ips) == 0 {
			t.Fatalf("%s: service %s has no address", p.name, s)
		}
		if err := containerToken(id, ips[0]); err != nil {
			t.Fatalf("%s: service %s: its API token: %v", p.name, s, err)
		}
		out = append(out, node{name: s, ip: ips[0]})
	}
	return out
}

// down keeps the project's logs on failure and removes it with its
// volumes.
func (p project) down(t *testing.T) {
	base := []string{"-p", p.name, "-f", filepath.Join("..", p.file)}
	if t.Failed() {
		d := filepath.Join("..", "..", "e2e-logs", p.name)
		os.MkdirAll(d, 0o755)
		out, _ := exec.Command(p.tool.bin, append(base, "logs", "--no-color")...).CombinedOutput()
		os.WriteFile(filepath.Join(d, "compose.log"), out, 0o644)
		t.Logf("compose logs kept in e2e-logs/%s", p.name)
	}
	exec.Command(p.tool.bin, append(base, "down", "-v", "--remove-orphans")...).Run()
}

// TestCompose brings up deploy/compose.yaml (five nodes bootstrapping by
// service name through a keygen one-shot) and deploy/consortium (two
// organisations on two networks, a network key and a member list) with
// docker-compose, as a user would.
func TestCompose(t *testing.T) {
	for _, tool := range composeTools(t) {
		t.Run(tool.name, func(t *testing.T) {
			t.Run("cluster", func(t *testing.T) { composeCluster(t, project{tool, "gossipde2e" + tool.name, "compose.yaml"}) })
			t.Run("consortium", func(t *testing.T) {
				composeConsortium(t, project{tool, "gossipde2econs" + tool.name, "consortium/compose.yaml"})
			})
		})
	}
}

// composeCluster: deploy/compose.yaml's five nodes reach 0.85 with 4 peers
// each.
func composeCluster(t *testing.T, p project) {
	p.down(t)
	defer p.down(t)
	start := time.Now()
	p.compose(t, "up", "-d")
	nodes := p.nodes(t, "node0", "node1", "node2", "node3", "node4")
	at := waitAll(t, "five nodes with 4 peers each at ≥ 0.85", 120*time.Second, nodes, func(s status) bool {
		return s.Peers == 4 && s.Accuracy >= 0.85
	})
	note("compose %s (%s): deploy/compose.yaml up to five nodes at ≥ 0.85 with 4 peers each in %.1f s.", p.tool.name, composeVersion(p.tool), at.Sub(start).Seconds())
}

// composeConsortium: deploy/consortium's four members learn across the
// two networks. An outsider given their consortium file, which does not
// list it, refuses to start, naming the file and its peer ID. Once the
// file on the shared volume lists it too (the members, running, still
// hold the list they started with), it starts and is turned away, both
// sides saying so.
func composeConsortium(t *testing.T, p project) {
	outsider := "e2e-consortium-outsider-" + p.tool.name
	data := outsider + "-data"
	removeAll([]string{outsider}, []string{data}, nil)
	p.down(t)
	defer func() {
		keepLogs(t, p.name, []string{outsider})
		removeAll([]string{outsider}, []string{data}, nil)
		p.down(t)
	}()
	start := time.Now()
	p.compose(t, "up", "-d")
	nodes := p.nodes(t, "a0", "a1", "b0", "b1")
	// The gateways reach everyone; a1 and b1 reach the two gateways.
	want := map[string]int{}
	for _, n := range nodes {
		want[statusOf(t, n.ip).PeerID] = map[bool]int{true: 3, false: 2}[strings.HasSuffix(n.name, "0")]
	}
	at := waitAll(t, "four members learning across the two networks", 120*time.Second, nodes, func(s status) bool {
		return s.Peers == want[s.PeerID] && s.Accuracy >= 0.85
	})
	note("consortium, compose %s: deploy/consortium up to four members of two organisations at ≥ 0.85 in %.1f s.", p.tool.name, at.Sub(start).Seconds())
	args := []string{"--name", outsider, "--network", p.name + "_org-a", "-v", p.name + "_shared:/shared:ro", "-v", data + ":/data", image,
		"run", "--consortium", "/shared/consortium.yaml", "--bootstrap", "@/shared/a0.addr", "--shard", "0/4"}
	// Its identity first: a daemon that refuses to start writes nothing.
	id := docker(t, "run", "--rm", "-v", data+":/data", image, "keygen", "--keep", "--out", "/data/identity.key")
	out, err := dockerErr(append([]string{"run"}, args...)...) // it exits at once
	if err == nil || !strings.Contains(out, "/shared/consortium.yaml does not list this node (peer ID "+id+")") {
		t.Fatalf("an outsider its consortium file does not list started, or did not say why: %v\n%s", err, out)
	}
	removeAll([]string{outsider}, nil, nil)
	docker(t, "run", "--rm", "-v", p.name+"_shared:/shared", image, "consortium", "add-member", "--file", "/shared/consortium.yaml", id)
	docker(t, append([]string{"run", "-d"}, args...)...)
	ip := docker(t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", outsider)
	if err := containerToken(outsider, ip); err != nil { // the image's default, on its own /data
		t.Fatalf("the outsider's API token: %v", err)
	}
	them := statusOf(t, ip)
	a0 := p.compose(t, "ps", "-q", "a0")
	deadline := time.Now().Add(60 * time.Second)
	for {
		theirs, _ := dockerErr("logs", a0)
		ours, _ := dockerErr("logs", outsider)
		s, err := getStatus(ip)
		said := "this node (peer ID " + them.PeerID + ") is not a member of the consortium"
		if err == nil && s.Peers == 0 && strings.Contains(theirs, "refused a peer outside the consortium") && strings.Contains(theirs, them.PeerID) &&
			strings.Contains(ours, said) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the outsider (%s): peers %d (%v); a0 logged its refusal: %v; the outsider said it is not a member: %v", them.PeerID, s.Peers, err,
				strings.Contains(theirs, them.PeerID), strings.Contains(ours, said))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func composeVersion(tool composeTool) string {
	out, _ := run(10*time.Second, tool.bin, "version", "--short")
	return out
}
