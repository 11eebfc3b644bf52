//go:build deploytools

// Package deploy checks the deployment files with the tools that read
// them (`make deploy-check`, in `make test`): systemd-analyze for the
// systemd unit, promtool for the Prometheus configuration, alert rules
// and their unit tests, and that every gossipd series the rules and the
// Grafana dashboard use is one a daemon exports.
package deploy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/node"
	"github.com/gossipd/gossipd/node/memnet"
)

// tool runs a command (bounded) and returns its combined output.
func tool(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s is not installed (.ci/run installs it): %v", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

// TestSystemdUnit: systemd-analyze verifies the unit without a warning
// and rates its exposure OK or better (below 5.0 of 10).
func TestSystemdUnit(t *testing.T) {
	// verify checks that ExecStart's program exists: point it at a build.
	dir := t.TempDir()
	bin := filepath.Join(dir, "gossipd")
	build := exec.Command("go", "build", "-o", bin, "../cmd/gossipd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	unit, err := os.ReadFile("systemd/gossipd.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/gossipd ") {
		t.Fatal("the unit does not run /usr/local/bin/gossipd")
	}
	path := filepath.Join(dir, "gossipd.service")
	os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/gossipd", bin)), 0o644)
	out, err := tool(t, "systemd-analyze", "verify", path)
	if err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = tool(t, "systemd-analyze", "security", "--offline=true", "--no-pager", path)
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for gossipd.service: ([0-9.]+) (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	score, _ := strconv.ParseFloat(m[1], 64)
	t.Logf("systemd-analyze security: exposure %s %s", m[1], m[2])
	if score >= 5 || !slices.Contains([]string{"SAFE", "OK"}, m[2]) {
		t.Fatalf("exposure %s %s, want OK or better", m[1], m[2])
	}
}

// TestPrometheus: promtool accepts the scrape configuration and the rules,
// and the rules' unit tests pass (each alert fires when it should, and
// not before).
func TestPrometheus(t *testing.T) {
	for _, args := range [][]string{
		{"check", "config", "prometheus/prometheus.yml"},
		{"check", "rules", "prometheus/rules.yml"},
		{"test", "rules", "prometheus/rules_test.yml"},
	} {
		if out, err := tool(t, "promtool", args...); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestSeriesExist: every gossipd_* series that the alert rules and the
// Grafana dashboard read is one a daemon exports.
func TestSeriesExist(t *testing.T) {
	exported := daemonSeries(t)
	var used []string
	rules, err := os.ReadFile("prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	used = append(used, seriesIn(string(rules))...)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	b, err := os.ReadFile("prometheus/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if len(dash.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			used = append(used, seriesIn(q.Expr)...)
		}
	}
	if len(used) == 0 {
		t.Fatal("no gossipd series used")
	}
	for _, s := range used {
		if !exported[s] {
			t.Errorf("%s is used but no daemon exports it", s)
		}
	}
}

var seriesRE = regexp.MustCompile(`\bgossipd_[a-z0-9_]+`)

func seriesIn(s string) []string { return seriesRE.FindAllString(s, -1) }

// daemonSeries lists the gossipd_* series a daemon exports: those its
// /metrics shows now, and those it declares (labelled series appear once
// counted).
func daemonSeries(t *testing.T) map[string]bool {
	tr, te, err := dataset.Open("digits", dataset.OpenOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := memnet.New().Join("m000", 16)
	nd, err := node.New(node.Config{Job: node.JobSpec{Name: "series", Model: model.Spec{Kind: model.Softmax, Inputs: tr.D, Classes: tr.Classes}, DeltaMillis: 100},
		Train: tr, Test: te, Transport: ep, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	nd.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := map[string]bool{}
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			out[strings.Fields(name)[0]] = true
		}
	}
	declared := node.SeriesNames()
	for _, s := range declared {
		out[s] = true
	}
	// What /metrics shows is declared.
	for s := range out {
		if strings.HasPrefix(s, "gossipd_") && !slices.Contains(declared, s) {
			t.Errorf("%s is in /metrics but not in node.SeriesNames", s)
		}
	}
	if len(declared) < 10 {
		t.Fatalf("node.SeriesNames: %v", declared)
	}
	return out
}
