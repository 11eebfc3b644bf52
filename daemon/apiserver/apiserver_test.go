package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gossipd/gossipd/internal/testcert"
)

func TestTokenFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "api.token")
	tok, created, err := LoadOrCreateTokenFile(path)
	if err != nil || !created || len(tok) != 43 {
		t.Fatalf("create: %q, created %v, err %v", tok, created, err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("created with mode %v, want 0600", st.Mode().Perm())
	}
	again, created, err := LoadOrCreateTokenFile(path)
	if err != nil || created || again != tok {
		t.Fatalf("load: %q (created %v, err %v), want %q", again, created, err, tok)
	}
	if _, err := CreateTokenFile(path); !errors.Is(err, fs.ErrExist) {
		t.Errorf("CreateTokenFile over an existing file: %v, want ErrExist", err)
	}
	other, _ := NewToken()
	if other == tok {
		t.Error("two new tokens are equal")
	}

	for _, mode := range []os.FileMode{0o644, 0o604, 0o660, 0o620} {
		os.Chmod(path, mode)
		if _, err := LoadTokenFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") || !strings.Contains(err.Error(), path) {
			t.Errorf("a token file of mode %v: %v, want an error naming the file and chmod 600", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o400, 0o440, 0o640} { // a Secret shared through a group
		os.Chmod(path, mode)
		if _, err := LoadTokenFile(path); err != nil {
			t.Errorf("a token file of mode %v: %v", mode, err)
		}
	}
	os.Chmod(path, 0o600)
	for _, c := range []struct{ body, want string }{
		{"short\n", "characters long"},
		{"abcdefghijklmnop qrs\n", "character 17"},
		{"abcdefghijklmnopqrs\nsecond\n", "character 20"},
		{"", "0 characters"},
	} {
		p := filepath.Join(dir, "bad.token")
		os.Remove(p)
		os.WriteFile(p, []byte(c.body), 0o600)
		if _, err := LoadTokenFile(p); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("token file %q: %v, want an error naming the file and %q", c.body, err, c.want)
		}
	}
	p := filepath.Join(dir, "crlf.token")
	os.WriteFile(p, []byte("abcdefghijklmnopqrstuvwxyz\r\n"), 0o600)
	if tok, err := LoadTokenFile(p); err != nil || tok != "abcdefghijklmnopqrstuvwxyz" {
		t.Errorf("a CRLF token file: %q, %v", tok, err)
	}
	if _, err := LoadTokenFile(dir); err == nil {
		t.Error("a directory as the token file: no error")
	}
}

// TestGuard walks the policy's matrix: who may read, who may change what,
// with and without a token, on loopback and beyond.
func TestGuard(t *testing.T) {
	const token = "0123456789abcdefghij"
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	policy := func(tok string, beyond bool) Policy {
		return Policy{Token: tok, ReadsNeedToken: beyond, Public: []string{"/healthz", "/"}, ReadOnlyPosts: []string{"/predict"}}
	}
	type req struct {
		method, path, host, auth string
		want                     int
	}
	bearer := "Bearer " + token
	cases := []struct {
		name   string
		policy Policy
		reqs   []req
	}{
		{"loopback, no token", policy("", false), []req{
			{"GET", "/status", "127.0.0.1:8080", "", 200},
			{"GET", "/status", "localhost:8080", "", 200},
			{"GET", "/status", "[::1]:8080", "", 200},
			{"POST", "/predict", "127.0.0.1:8080", "", 200},
			{"POST", "/pause", "127.0.0.1:8080", "", 403},
			{"POST", "/pause", "127.0.0.1:8080", bearer, 403}, // no token to match
			{"DELETE", "/status", "127.0.0.1:8080", "", 403},
			{"GET", "/status", "evil.example:8080", "", 403}, // DNS rebinding
			{"GET", "/healthz", "evil.example:8080", "", 200},
		}},
		{"loopback, token", policy(token, false), []req{
			{"GET", "/status", "127.0.0.1:8080", "", 200},
			{"POST", "/pause", "127.0.0.1:8080", "", 401},
			{"POST", "/pause", "127.0.0.1:8080", "Bearer wrong-token-of-some-length", 401},
			{"POST", "/pause", "127.0.0.1:8080", "Basic " + token, 401},
			{"POST", "/pause", "127.0.0.1:8080", bearer, 200},
			{"POST", "/pause", "127.0.0.1:8080", "bearer  " + token, 200},
			{"GET", "/status", "evil.example:8080", "", 403},
			{"GET", "/status", "evil.example:8080", bearer, 200},
		}},
		{"beyond loopback, token", policy(token, true), []req{
			{"GET", "/healthz", "10.0.0.1:8080", "", 200},
			{"HEAD", "/", "10.0.0.1:8080", "", 200},
			{"GET", "/status", "10.0.0.1:8080", "", 401},
			{"GET", "/status", "127.0.0.1:8080", "", 401},
			{"GET", "/status", "10.0.0.1:8080", bearer, 200},
			{"POST", "/predict", "10.0.0.1:8080", "", 401},
			{"POST", "/predict", "10.0.0.1:8080", bearer, 200},
			{"POST", "/healthz", "10.0.0.1:8080", "", 401}, // public to reads only
			{"POST", "/leave", "10.0.0.1:8080", token, 401},
			{"POST", "/leave", "10.0.0.1:8080", bearer, 200},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := Guard(ok, c.policy)
			for _, r := range c.reqs {
				req := httptest.NewRequest(r.method, "http://"+r.host+r.path, nil)
				if r.auth != "" {
					req.Header.Set("Authorization", r.auth)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != r.want {
					t.Errorf("%s %s (Host %s, Authorization %q): %d %s, want %d", r.method, r.path, r.host, r.auth, w.Code, strings.TrimSpace(w.Body.String()), r.want)
				}
				if w.Code == 401 && w.Header().Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s: 401 without a WWW-Authenticate challenge", r.method, r.path)
				}
				if w.Code != 200 && !strings.Contains(w.Body.String(), r.path) && !strings.Contains(w.Body.String(), "Host") {
					t.Errorf("%s %s: refusal %q does not say what was refused", r.method, r.path, w.Body.String())
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string // "" ok
	}{
		{Config{Addr: "127.0.0.1:0"}, ""},
		{Config{Addr: "localhost:0"}, ""},
		{Config{Addr: "[::1]:0"}, ""},
		{Config{Addr: "0.0.0.0:8080"}, "beyond loopback"},
		{Config{Addr: ":8080"}, "beyond loopback"},
		{Config{Addr: "10.1.2.3:8080"}, "beyond loopback"},
		{Config{Addr: "node0:8080"}, "beyond loopback"},
		{Config{Addr: "0.0.0.0:8080", TokenFile: "t"}, ""},
		{Config{Addr: "127.0.0.1"}, "listen address"},
		{Config{Addr: "127.0.0.1:0", CertFile: "c"}, "go together"},
		{Config{}, "no listen address"},
	} {
		err := c.cfg.Validate()
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
		if c.want == "beyond loopback" && !errors.Is(err, ErrNeedsToken) {
			t.Errorf("%+v: %v is not ErrNeedsToken", c.cfg, err)
		}
	}
}

// TestListen serves for real over TCP: with a token created on first use,
// over TLS, and with the certificate renewed in place.
func TestListen(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	pool := x509.NewCertPool()
	pool.AddCert(testcert.Write(t, cert, key, "first"))
	tokenFile := filepath.Join(dir, "api.token")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("status")) })
	mux.HandleFunc("POST /pause", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("paused")) })
	s, err := Listen(Config{Addr: "127.0.0.1:0", TokenFile: tokenFile, CertFile: cert, KeyFile: key}, mux)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	defer s.Shutdown(context.Background())
	if !s.TokenCreated || s.Guarded || !strings.HasPrefix(s.URL(), "https://127.0.0.1:") {
		t.Fatalf("created %v, guarded %v, url %s", s.TokenCreated, s.Guarded, s.URL())
	}
	token, err := LoadTokenFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}, DisableKeepAlives: true}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	do := func(method, path, auth string) (int, string, *tls.ConnectionState) {
		t.Helper()
		req, _ := http.NewRequest(method, s.URL()+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.TLS
	}
	if code, body, _ := do("GET", "/status", ""); code != 200 || body != "status" {
		t.Errorf("GET /status on loopback: %d %q", code, body)
	}
	if code, _, _ := do("POST", "/pause", ""); code != 401 {
		t.Errorf("POST /pause without the token: %d, want 401", code)
	}
	code, body, cs := do("POST", "/pause", token)
	if code != 200 || body != "paused" {
		t.Errorf("POST /pause with the token: %d %q", code, body)
	}
	if cs == nil || cs.PeerCertificates[0].Subject.CommonName != "first" {
		t.Fatalf("TLS state %v", cs)
	}
	// Renew: a new key pair in the same files, a second later (mtimes).
	pool.AddCert(testcert.Write(t, cert, key, "second"))
	later := time.Now().Add(2 * time.Second)
	os.Chtimes(cert, later, later)
	os.Chtimes(key, later, later)
	if _, _, cs := do("GET", "/status", ""); cs.PeerCertificates[0].Subject.CommonName != "second" {
		t.Errorf("after renewal the server still presents %q", cs.PeerCertificates[0].Subject.CommonName)
	}
	// A broken renewal keeps the last good certificate.
	os.WriteFile(key, []byte("not a key"), 0o600)
	later = later.Add(2 * time.Second)
	os.Chtimes(key, later, later)
	if code, _, cs := do("GET", "/status", ""); code != 200 || cs.PeerCertificates[0].Subject.CommonName != "second" {
		t.Errorf("after a broken renewal: %d, %q", code, cs.PeerCertificates[0].Subject.CommonName)
	}
}

// TestListenBeyondLoopback binds every interface: refused without a
// token; with one, reads need it too.
func TestListenBeyondLoopback(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	if _, err := Listen(Config{Addr: "0.0.0.0:0"}, ok); !errors.Is(err, ErrNeedsToken) {
		t.Fatalf("0.0.0.0 without a token: %v, want ErrNeedsToken", err)
	}
	s, err := Listen(Config{Addr: "0.0.0.0:0", TokenFile: filepath.Join(t.TempDir(), "t")}, ok)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	defer s.Shutdown(context.Background())
	if !s.Guarded {
		t.Fatal("an API on 0.0.0.0 is not guarded")
	}
	_, port, _ := net.SplitHostPort(s.Addr())
	resp, err := http.Get("http://127.0.0.1:" + port + "/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("GET /status of an API on every interface without the token: %d, want 401", resp.StatusCode)
	}
}

// TestTokenFileRace: daemons that share a token path and start together
// all end up with the one token, never half of it.
func TestTokenFileRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api.token")
	toks := make([]string, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range toks {
		wg.Go(func() { toks[i], _, errs[i] = LoadOrCreateTokenFile(path) })
	}
	wg.Wait()
	for i := range toks {
		if errs[i] != nil || toks[i] != toks[0] {
			t.Errorf("daemon %d: %q, %v; daemon 0: %q", i, toks[i], errs[i], toks[0])
		}
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".api-token-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
