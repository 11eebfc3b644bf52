// Package apiclient is the command line's client of a running daemon's
// HTTP API: its address, bearer token and CA certificate as flags, and
// requests whose failures say what went wrong.
package apiclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gossipd/gossipd/daemon/apiserver"
	"github.com/gossipd/gossipd/internal/cli"
)

// TokenEnv names the environment variable that gives the token file when
// --api-token is not set: the daemon's own (a container sets it).
const TokenEnv = "GOSSIPD_API_TOKEN"

// Flags are a client's flags.
type Flags struct {
	API, TokenFile, CAFile string
}

// Declare declares --api, --api-token and --api-ca.
func (f *Flags) Declare(fs *flag.FlagSet) {
	fs.StringVar(&f.API, "api", "127.0.0.1:8080", "the daemon's API: HOST:PORT, or http(s)://HOST:PORT")
	fs.StringVar(&f.TokenFile, "api-token", os.Getenv(TokenEnv), "the daemon's API token file (default $"+TokenEnv+")")
	fs.StringVar(&f.CAFile, "api-ca", "", "PEM CA certificate to trust for an https:// API (default: the system's)")
}

// Client talks to one daemon.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// New builds a client from its flags, reading the token and CA files.
func (f *Flags) New() (*Client, error) {
	base := strings.TrimSuffix(f.API, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		base = "http://" + base
	}
	c := &Client{base: base, hc: &http.Client{Timeout: 30 * time.Second}}
	if f.TokenFile != "" {
		tok, err := apiserver.LoadTokenFile(f.TokenFile)
		if err != nil {
			return nil, err
		}
		c.token = tok
	}
	if f.CAFile != "" {
		if !strings.HasPrefix(base, "https://") {
			return nil, fmt.Errorf("--api-ca %s is for an https:// API, not %s", f.CAFile, base)
		}
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--api-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--api-ca %s: no PEM certificate in it", f.CAFile)
		}
		c.hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	return c, nil
}

// Base is the API's base URL.
func (c *Client) Base() string { return c.base }

// Do sends a request and returns the body of a 2xx answer; any other
// answer is an error quoting the daemon's reason.
func (c *Client) Do(ctx context.Context, method, path string, body io.Reader) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("is a daemon serving its API at %s? %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, c.base+path, err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		// gossipd answers its API in JSON or plain text; a page is some
		// other server (a proxy's error, a web server on that port).
		return nil, fmt.Errorf("%s %s: %s, an HTML page: is %s a gossipd daemon's API?", method, c.base+path, resp.Status, c.base)
	}
	if resp.StatusCode/100 != 2 {
		msg := strings.TrimSpace(string(b))
		if len(msg) > 500 {
			msg = msg[:500] + "…"
		}
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized && c.token == "" {
			hint = " (give --api-token FILE or set $" + TokenEnv + ")"
		}
		return nil, fmt.Errorf("%s %s: %s: %s%s", method, c.base+path, resp.Status, msg, hint)
	}
	return b, nil
}

// Request is one command's call: it builds the client from the flags (a
// bad flag is a usage error, cli.ErrUsage), sends method path bounded by
// limit, and returns the answer's body and the API's base URL. Errors
// start with cmd.
func (f *Flags) Request(ctx context.Context, cmd, method, path string, limit time.Duration) ([]byte, string, error) {
	c, err := f.New()
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s: %v", cli.ErrUsage, cmd, err)
	}
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	b, err := c.Do(rctx, method, path, nil)
	if err != nil {
		return nil, c.Base(), fmt.Errorf("%s: %w", cmd, err)
	}
	return b, c.Base(), nil
}
