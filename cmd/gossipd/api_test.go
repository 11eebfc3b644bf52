package main

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gossipd/gossipd/daemon/apiserver"
	"github.com/gossipd/gossipd/internal/testcert"
)

// TestAPINeedsToken: without a token the daemon refuses to serve its API
// beyond loopback (before it touches the network or the data), and a
// half-given TLS pair is refused too.
func TestAPINeedsToken(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--api", "0.0.0.0:0"}, "--api-token"},
		{[]string{"--api", ":0"}, "beyond loopback"},
		{[]string{"--api", "example.org:0"}, "beyond loopback"},
		{[]string{"--api-tls-cert", "c.pem"}, "go together"},
	} {
		args := append([]string{"run", "--store", filepath.Join(dir, "s"), "--listen", "/ip4/127.0.0.1/tcp/0", "--mdns=false"}, c.args...)
		var out bytes.Buffer
		code := mainExit(t.Context(), args, io.Discard, &out)
		if code != 2 || !strings.Contains(out.String(), c.want) {
			t.Errorf("run %v: exit %d, %q; want 2 and %q", c.args, code, out.String(), c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "s")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused run created its store (%v): it should stop before", err)
	}
}

// TestDaemonJobControl runs two real daemons with DP-SGD and one token:
// node 0's API on loopback, node 1's on every interface. It checks who may
// read and change what, then pauses node 0 (its privacy spending stops
// while it still exchanges models), resumes it (spending goes on), exports
// its model through the API, and makes node 1 leave: it exits with status
// 0 and node 0 loses its peer.
func TestDaemonJobControl(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "api.token")
	if out, err := exec.Command(bin, "token", "--out", tokenFile).CombinedOutput(); err != nil {
		t.Fatalf("token: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "token", "--out", tokenFile).CombinedOutput(); err == nil {
		t.Fatalf("token over an existing file: no error\n%s", out)
	}
	token, err := apiserver.LoadTokenFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	ds := startCluster(t, bin, dir, 2, "100ms", "--api-token", tokenFile, "--dp-clip", "1", "--dp-noise", "1.1")
	// Node 1 listens on every interface: restart it so.
	port := ds[1].api[strings.LastIndex(ds[1].api, ":")+1:]
	ds[1].cmd.Process.Kill()
	ds[1].cmd.Wait()
	ds[1].args = append(ds[1].args, "--api", "0.0.0.0:"+port)
	ds[1].start(t, bin)
	ds[1].token = token

	code := func(d *proc, method, path, tok string) int {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+d.api+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	poll(t, ds[1], "node 1 up with a peer", 60*time.Second, func(s status) bool { return s.Peers > 0 })
	poll(t, ds[0], "DP-SGD steps on node 0", 60*time.Second, func(s status) bool { return s.DPSteps > 0 && s.Peers > 0 })

	// Beyond loopback every read but the public ones needs the token.
	for _, p := range []string{"/status", "/metrics", "/model", "/history", "/jobs", "/announcements"} {
		if c := code(ds[1], "GET", p, ""); c != http.StatusUnauthorized {
			t.Errorf("node 1 (every interface): GET %s without the token: %d, want 401", p, c)
		}
		if c := code(ds[1], "GET", p, token); c != http.StatusOK {
			t.Errorf("node 1: GET %s with the token: %d", p, c)
		}
	}
	for _, p := range []string{"/healthz", "/readyz", "/id", "/"} {
		if c := code(ds[1], "GET", p, ""); c != http.StatusOK {
			t.Errorf("node 1: public GET %s without the token: %d, want 200", p, c)
		}
	}
	// Mutating requests need the token everywhere.
	for _, d := range ds {
		for _, p := range []string{"/pause", "/resume", "/leave"} {
			if c := code(d, "POST", p, ""); c != http.StatusUnauthorized {
				t.Errorf("%s: POST %s without the token: %d, want 401", d.api, p, c)
			}
			if c := code(d, "POST", p, "wrong-token-wrong-token"); c != http.StatusUnauthorized {
				t.Errorf("%s: POST %s with a wrong token: %d, want 401", d.api, p, c)
			}
		}
	}
	if c := code(ds[0], "GET", "/status", ""); c != http.StatusOK {
		t.Errorf("node 0 (loopback): GET /status without the token: %d, want 200", c)
	}

	ctl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// Pause: no more DP steps, yet models still come and go.
	if out, err := exec.Command(bin, "pause", "--api", ds[0].api).CombinedOutput(); err == nil || !strings.Contains(string(out), "401") {
		t.Errorf("pause without the token: %v\n%s", err, out)
	}
	ctl("pause", "--api", ds[0].api, "--api-token", tokenFile)
	paused := poll(t, ds[0], "paused", 10*time.Second, func(s status) bool { return s.Paused })
	if v := metric(t, ds[0], "gossipd_paused"); v != 1 {
		t.Errorf("gossipd_paused = %v while paused", v)
	}
	still := poll(t, ds[0], "models exchanged while paused", 60*time.Second, func(s status) bool { return s.MessagesIn >= paused.MessagesIn+10 })
	if still.DPSteps != paused.DPSteps || still.DPEpsilon != paused.DPEpsilon {
		t.Errorf("paused: DP steps went from %d to %d (ε %v to %v): a paused node must not train", paused.DPSteps, still.DPSteps, paused.DPEpsilon, still.DPEpsilon)
	}
	out := ctl("resume", "--api", ds[0].api, "--api-token", tokenFile)
	if !strings.Contains(out, "paused: false") {
		t.Errorf("resume said %q", out)
	}
	poll(t, ds[0], "DP steps after resume", 60*time.Second, func(s status) bool { return !s.Paused && s.DPSteps > still.DPSteps })

	// Export through the API (node 1's: beyond loopback, with the token).
	f := filepath.Join(dir, "live.safetensors")
	out = ctl("export", "--api", ds[1].api, "--api-token", tokenFile, "--out", f)
	if !strings.Contains(out, "wrote "+f) {
		t.Errorf("export --api said %q", out)
	}
	if out, err := exec.Command(bin, "export", "--api", ds[1].api, "--store", dir, "--out", f).CombinedOutput(); err == nil || !strings.Contains(string(out), "one or the other") {
		t.Errorf("export --api --store: %v\n%s", err, out)
	}

	// Leave: node 1 exits 0 and node 0 loses its peer.
	ctl("leave", "--api", ds[1].api, "--api-token", tokenFile)
	done := make(chan error, 1)
	go func() { done <- ds[1].cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("node 1 exited with %v after leaving", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("node 1 did not exit within 30 s of POST /leave")
	}
	log, _ := os.ReadFile(ds[1].log)
	if !strings.Contains(string(log), "left the job") {
		t.Errorf("node 1's log does not say it left the job:\n%s", tail(string(log), 1500))
	}
	poll(t, ds[0], "node 0 without its peer", 30*time.Second, func(s status) bool { return s.Peers == 0 && s.Members == 1 })
	stopAll(t, ds[:1], nil)
}

// TestDaemonAPITLS serves the API over TLS: clients trust it through
// --api-ca; plain HTTP gets no answer.
func TestDaemonAPITLS(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	testcert.Write(t, cert, key, "gossipd-test")
	ds := startCluster(t, bin, dir, 1, "100ms", "--api-tls-cert", cert, "--api-tls-key", key, "--api-token", filepath.Join(dir, "tok"))
	api := "https://" + ds[0].api
	var out []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		out, err = exec.Command(bin, "status", "--api", api, "--api-ca", cert).CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status over TLS: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(string(out), `"peer_id"`) {
		t.Errorf("status over TLS: %s", out)
	}
	if out, err := exec.Command(bin, "status", "--api", ds[0].api).CombinedOutput(); err == nil {
		t.Errorf("plain HTTP to a TLS API: no error\n%s", out)
	}
	if out, err := exec.Command(bin, "status", "--api", api).CombinedOutput(); err == nil || !strings.Contains(string(out), "certificate") {
		t.Errorf("TLS without --api-ca (a self-signed certificate): %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "pause", "--api", api, "--api-ca", cert, "--api-token", filepath.Join(dir, "tok")).CombinedOutput(); err != nil || !strings.Contains(string(out), "paused: true") {
		t.Errorf("pause over TLS: %v\n%s", err, out)
	}
	stopAll(t, ds, nil)
}
