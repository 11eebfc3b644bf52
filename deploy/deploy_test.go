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
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
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

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/daemon/apiserver"
	"github.com/gossipd/gossipd/daemon/memnet"
	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/demo"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/model"
	"gopkg.in/yaml.v3"
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

// TestPrometheus: promtool accepts the scrape configuration (beside the
// API token file and the rules it names, as an install puts them) and the
// rules, and the rules' unit tests pass (each alert fires when it should,
// and not before).
func TestPrometheus(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"prometheus.yml", "rules.yml"} {
		b, err := os.ReadFile(filepath.Join("prometheus", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	if _, err := apiserver.CreateTokenFile(filepath.Join(dir, "gossipd-api.token")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"check", "config", filepath.Join(dir, "prometheus.yml")},
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
	nd, err := daemon.New(daemon.Config{Job: job.Spec{Name: "series", Model: model.Spec{Kind: model.Softmax, Inputs: tr.D, Classes: tr.Classes}, DeltaMillis: 100},
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
	declared := daemon.SeriesNames()
	for _, s := range declared {
		out[s] = true
	}
	// What /metrics shows is declared.
	for s := range out {
		if strings.HasPrefix(s, "gossipd_") && !slices.Contains(declared, s) {
			t.Errorf("%s is in /metrics but not in daemon.SeriesNames", s)
		}
	}
	if len(declared) < 10 {
		t.Fatalf("daemon.SeriesNames: %v", declared)
	}
	return out
}

// TestKubernetes: `kubectl kustomize deploy/k8s` renders offline, and the
// objects fit together: a headless Service that publishes pods before
// they are ready, a StatefulSet whose probes hit /healthz and /readyz on
// its API port, whose store is a volume claim mounted where the config
// says, and whose replicas match the shard count; a PodDisruptionBudget
// over the same pods; and the ConfigMap's settings start a real daemon.
func TestKubernetes(t *testing.T) {
	objs := kustomize(t, "k8s")
	for _, k := range []string{"ConfigMap", "Service", "StatefulSet", "PodDisruptionBudget"} {
		if objs[k] == nil {
			t.Fatalf("no %s rendered (got %v)", k, slices.Sorted(maps.Keys(objs)))
		}
	}
	svc, sts, pdb, cm := objs["Service"], objs["StatefulSet"], objs["PodDisruptionBudget"], objs["ConfigMap"]
	at := func(o any, path ...any) any {
		for _, p := range path {
			switch k := p.(type) {
			case string:
				m, _ := o.(map[string]any)
				o = m[k]
			case int:
				l, _ := o.([]any)
				if k >= len(l) {
					return nil
				}
				o = l[k]
			}
		}
		return o
	}
	str := func(o any, path ...any) string { s, _ := at(o, path...).(string); return s }
	env := func(c any) map[string]string {
		m := map[string]string{}
		for _, e := range at(c, "env").([]any) {
			m[str(e, "name")] = str(e, "value")
		}
		return m
	}
	if str(svc, "spec", "clusterIP") != "None" || at(svc, "spec", "publishNotReadyAddresses") != true {
		t.Errorf("service: clusterIP %q, publishNotReadyAddresses %v; want a headless service that publishes pods before they are ready",
			str(svc, "spec", "clusterIP"), at(svc, "spec", "publishNotReadyAddresses"))
	}
	if str(sts, "spec", "serviceName") != str(svc, "metadata", "name") {
		t.Errorf("statefulset serviceName %q, service %q", str(sts, "spec", "serviceName"), str(svc, "metadata", "name"))
	}
	labels := fmt.Sprint(at(sts, "spec", "template", "metadata", "labels"))
	for name, sel := range map[string]any{"statefulset": at(sts, "spec", "selector", "matchLabels"), "service": at(svc, "spec", "selector"), "pdb": at(pdb, "spec", "selector", "matchLabels")} {
		if fmt.Sprint(sel) != labels {
			t.Errorf("%s selects %v, the pods are labelled %s", name, sel, labels)
		}
	}
	c := at(sts, "spec", "template", "spec", "containers", 0)
	ports := map[string]string{}
	for _, p := range at(c, "ports").([]any) {
		ports[str(p, "name")] = fmt.Sprintf("%v/%s", at(p, "containerPort"), str(p, "protocol"))
	}
	for name, want := range map[string]string{"p2p-tcp": "4001/TCP", "p2p-quic": "4001/UDP", "api": "8080/TCP"} {
		if ports[name] != want {
			t.Errorf("container port %s: %q, want %s", name, ports[name], want)
		}
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		if str(c, probe, "httpGet", "path") != path || str(c, probe, "httpGet", "port") != "api" {
			t.Errorf("%s: %v, want GET %s on the api port", probe, at(c, probe), path)
		}
	}
	mounts := map[string]string{}
	for _, m := range at(c, "volumeMounts").([]any) {
		mounts[str(m, "name")] = str(m, "mountPath")
	}
	if str(sts, "spec", "volumeClaimTemplates", 0, "metadata", "name") != "data" || mounts["data"] != "/data" {
		t.Errorf("store: claim %q mounted at %q, want the volume claim data at /data", str(sts, "spec", "volumeClaimTemplates", 0, "metadata", "name"), mounts["data"])
	}
	if str(sts, "spec", "template", "spec", "volumes", 0, "configMap", "name") != str(cm, "metadata", "name") || mounts["config"] != "/etc/gossipd" {
		t.Errorf("config: volume %v mounted at %q", at(sts, "spec", "template", "spec", "volumes"), mounts["config"])
	}
	// The API listens beyond loopback, so it has a token: on the volume,
	// or, in the shared-token overlay, from a Secret its group may read.
	token := env(c)["GOSSIPD_API_TOKEN"]
	if !strings.HasPrefix(token, mounts["data"]+"/") {
		t.Errorf("GOSSIPD_API_TOKEN %q, want a file on the store's volume %s", token, mounts["data"])
	}
	shared := kustomize(t, "k8s/shared-token")["StatefulSet"]
	sc := at(shared, "spec", "template", "spec", "containers", 0)
	smounts := map[string]string{}
	for _, m := range at(sc, "volumeMounts").([]any) {
		smounts[str(m, "name")] = str(m, "mountPath")
	}
	var secret any
	for _, v := range at(shared, "spec", "template", "spec", "volumes").([]any) {
		if str(v, "name") == "api-token" {
			secret = at(v, "secret")
		}
	}
	if str(secret, "secretName") != "gossipd-api-token" || fmt.Sprint(at(secret, "defaultMode")) != "288" || // 0440
		env(sc)["GOSSIPD_API_TOKEN"] != smounts["api-token"]+"/api.token" || smounts["data"] != "/data" {
		t.Errorf("shared-token overlay: secret %v, mounts %v, GOSSIPD_API_TOKEN %q", secret, smounts, env(sc)["GOSSIPD_API_TOKEN"])
	}
	if r := fmt.Sprint(at(sts, "spec", "replicas")); r != str(cm, "data", "shards") {
		t.Errorf("%s replicas, %s shards", r, str(cm, "data", "shards"))
	}
	if at(pdb, "spec", "maxUnavailable") != 1 {
		t.Errorf("pdb maxUnavailable %v, want 1", at(pdb, "spec", "maxUnavailable"))
	}
	var conf map[string]any
	if err := yaml.Unmarshal([]byte(str(cm, "data", "gossipd.yaml")), &conf); err != nil {
		t.Fatalf("gossipd.yaml: %v", err)
	}
	if conf["store"] != "/data" || !strings.HasPrefix(fmt.Sprint(conf["bootstrap"]), "http://gossipd-0."+str(svc, "metadata", "name")+":") {
		t.Errorf("gossipd.yaml: store %v, bootstrap %v", conf["store"], conf["bootstrap"])
	}
	// The settings start a daemon, as the pod's args and environment run
	// it (its store, API port and listen address moved to this machine
	// by flags, which win over the file): beyond loopback, with the token
	// it creates.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gossipd.yaml")
	os.WriteFile(cfg, []byte(str(cm, "data", "gossipd.yaml")), 0o600)
	bin := filepath.Join(dir, "gossipd")
	build := exec.Command("go", "build", "-o", bin, "../cmd/gossipd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	free, err := demo.FreePorts(1) // below the ephemeral range: no dial takes it first
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(free[0])
	api := "127.0.0.1:" + port
	var log strings.Builder
	tokenFile := filepath.Join(dir, "data", "api.token")
	d := exec.Command(bin, "run", "--config", cfg, "--shard", "1/"+str(cm, "data", "shards"), "--store", filepath.Join(dir, "data"),
		"--api", "0.0.0.0:"+port, "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", "")
	d.Env = append(os.Environ(), "GOSSIPD_API_TOKEN="+tokenFile)
	d.Stdout, d.Stderr = &log, &log
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer d.Process.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + api + "/readyz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "no peers") {
				break
			}
		}
		if time.Now().After(deadline) || d.ProcessState != nil {
			t.Fatalf("the daemon with the ConfigMap's settings did not come up (alone, not ready): %v\n%s", err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.Get("http://" + api + "/status")
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /status without the token: %v %v, want 401", resp.Status, err)
	}
	resp.Body.Close()
	out, err := exec.Command(bin, "status", "--api", api, "--api-token", tokenFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"peer_id"`) {
		t.Errorf("gossipd status with the token the daemon created: %v\n%s", err, out)
	}
	d.Process.Signal(os.Interrupt)
	d.Wait()
}

// kustomize renders a kustomization under deploy/ offline, by kind.
func kustomize(t *testing.T, dir string) map[string]map[string]any {
	t.Helper()
	out, err := tool(t, "kubectl", "kustomize", dir)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	objs := map[string]map[string]any{}
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var o map[string]any
		if err := dec.Decode(&o); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		kind := o["kind"].(string)
		if objs[kind] != nil {
			t.Fatalf("%s: two %s objects", dir, kind)
		}
		objs[kind] = o
	}
	return objs
}

// TestEnvNamesAreFlags: every GOSSIPD_* variable the deployment files
// set names a flag of gossipd run (which refuses any other), but the
// compose files' own GOSSIPD_IMAGE, read by Compose on the host.
func TestEnvNamesAreFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gossipd")
	build := exec.Command("go", "build", "-o", bin, "../cmd/gossipd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	help, _ := exec.Command(bin, "run", "--help").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  --?([a-z0-9][a-z0-9-]*)`).FindAllStringSubmatch(string(help), -1) {
		flags[m[1]] = true
	}
	if !flags["listen"] || !flags["api-token"] {
		t.Fatalf("run --help lists no --listen or --api-token:\n%s", help)
	}
	names := regexp.MustCompile(`GOSSIPD_[A-Z0-9_]+`)
	seen := 0
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && path != "." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir // make image's and e2e's build outputs (.build, .build-e2e): binaries
		}
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range names.FindAllString(string(b), -1) {
			seen++
			flag := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(n, "GOSSIPD_")), "_", "-")
			if n != "GOSSIPD_IMAGE" && !flags[flag] {
				t.Errorf("%s sets %s, but gossipd run has no flag --%s", path, n, flag)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 10 {
		t.Errorf("%d GOSSIPD_* names found in the deployment files; the walk missed them", seen)
	}
}
