//go:build chromium

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// artifacts is where the screenshots are kept (GOSSIPD_ARTIFACTS, default
// test-artifacts/ at the repository's root).
func artifacts(t *testing.T) string {
	d := os.Getenv("GOSSIPD_ARTIFACTS")
	if d == "" {
		d = filepath.Join("..", "..", "test-artifacts")
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// chromium runs headless Chromium (Debian's package) on url with args and
// returns its stdout and its log (stderr).
func chromium(t *testing.T, url string, args ...string) (string, string) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium: %v (apt-get install chromium; .ci/run does)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--enable-logging=stderr", "--v=0", "--virtual-time-budget=6000", "--user-data-dir=" + t.TempDir()}, append(args, url)...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String(), stderr.String()
}

// TestDashboard loads the dashboard of a running daemon (one of two that
// train together) in headless Chromium: the page loads with no console
// message (it logs none, so any is an error), it is live, and its charts
// hold points from the daemon's history. Screenshots at a phone's and a
// desktop's width are kept as test artefacts. Paused through the API, the
// page says so and offers to resume. The other daemon's API listens
// beyond loopback: without its token the page asks for it; given the
// token in the address's fragment, it is live.
func TestDashboard(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "api.token")
	ds := startCluster(t, bin, dir, 2, "200ms", "--api-token", tokenFile)
	poll(t, ds[0], "a peer and some learning", 60*time.Second, func(s status) bool { return s.Peers == 1 && s.Accuracy > 0.5 })
	base := "http://" + ds[0].api + "/"
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "history")
		var h []json.RawMessage
		if err == nil {
			json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
		}
		if len(h) >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/history: %d samples, %v", len(h), err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	dom, log := chromium(t, base, "--dump-dom")
	if strings.Contains(log, ":CONSOLE") || strings.Contains(log, "Uncaught") {
		t.Errorf("console messages:\n%s", consoleLines(log))
	}
	m := regexp.MustCompile(`id="chart-acc"[^>]*data-points="(\d+)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no accuracy chart in the page:\n%s", dom)
	}
	if n, _ := strconv.Atoi(m[1]); n < 4 {
		t.Errorf("the accuracy chart has %d points, want the daemon's history (≥ 4)", n)
	}
	if !regexp.MustCompile(`id="state"[^>]*>live<`).MatchString(dom) {
		t.Errorf("the page is not live:\n%s", dom)
	}
	if !regexp.MustCompile(`id="accuracy">0\.\d{3}<`).MatchString(dom) || !strings.Contains(dom, `class="tag direct"`) {
		t.Errorf("the page shows no accuracy or no direct peer:\n%s", dom)
	}
	if !regexp.MustCompile(`<td>\d+\.\d ms</td>`).MatchString(dom) {
		t.Errorf("the page shows no peer's round-trip time:\n%s", dom)
	}
	shots := artifacts(t)
	for name, size := range map[string]string{"dashboard-phone.png": "390,1500", "dashboard-desktop.png": "1280,1000"} {
		out := filepath.Join(shots, name)
		os.Remove(out)
		_, log := chromium(t, base, "--window-size="+size, "--screenshot="+out)
		if strings.Contains(log, ":CONSOLE") {
			t.Errorf("%s: console messages:\n%s", name, consoleLines(log))
		}
		st, err := os.Stat(out)
		if err != nil || st.Size() < 10_000 {
			t.Fatalf("screenshot %s: %v", out, err)
		}
		abs, _ := filepath.Abs(out)
		t.Logf("screenshot: %s", abs)
	}

	// Paused: the page says so, and only Resume is offered.
	if out, err := exec.Command(bin, "pause", "--api", ds[0].api, "--api-token", tokenFile).CombinedOutput(); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	dom, log = chromium(t, base, "--dump-dom")
	if !regexp.MustCompile(`<span id="paused" class="tag paused">`).MatchString(dom) ||
		!regexp.MustCompile(`<button id="pause" type="button" disabled="">`).MatchString(dom) ||
		!regexp.MustCompile(`<button id="resume" type="button">`).MatchString(dom) {
		t.Errorf("paused: the page does not show it (paused tag, pause disabled, resume enabled):\n%s", dom)
	}
	if strings.Contains(log, ":CONSOLE") {
		t.Errorf("paused: console messages:\n%s", consoleLines(log))
	}

	// Beyond loopback: the token is needed, and works from the fragment.
	port := ds[1].api[strings.LastIndex(ds[1].api, ":")+1:]
	ds[1].cmd.Process.Kill()
	ds[1].cmd.Wait()
	ds[1].args = append(ds[1].args, "--api", "0.0.0.0:"+port)
	ds[1].start(t, bin)
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	ds[1].token = strings.TrimSpace(string(token))
	poll(t, ds[1], "node 1 back, beyond loopback", 60*time.Second, func(s status) bool { return s.Peers == 1 })
	guarded := "http://" + ds[1].api + "/"
	dom, _ = chromium(t, guarded, "--dump-dom")
	if !regexp.MustCompile(`id="state"[^>]*>API token needed<`).MatchString(dom) || strings.Contains(dom, `<form id="token-form" hidden`) {
		t.Errorf("beyond loopback without the token: the page should ask for it:\n%s", dom)
	}
	dom, log = chromium(t, guarded+"#token="+ds[1].token, "--dump-dom")
	if !regexp.MustCompile(`id="state"[^>]*>live<`).MatchString(dom) || !regexp.MustCompile(`id="accuracy">0\.\d{3}<`).MatchString(dom) {
		t.Errorf("beyond loopback with the token in the fragment: the page is not live:\n%s", dom)
	}
	if strings.Contains(log, ":CONSOLE") || strings.Contains(log, "Uncaught") {
		t.Errorf("with the token: console messages:\n%s", consoleLines(log))
	}
	stopAll(t, ds, nil)
}

func consoleLines(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "CONSOLE") || strings.Contains(l, "Uncaught") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
