package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Config configures the API server.
type Config struct {
	// Addr is the listen address, HOST:PORT. Required. Anything but a
	// loopback address (127.0.0.0/8, ::1, localhost) needs a TokenFile.
	Addr string
	// TokenFile holds the bearer token (LoadTokenFile); a missing file is
	// created with a new token, as the identity key is. Default "": no
	// token, so loopback only and no job control.
	TokenFile string
	// CertFile and KeyFile (PEM) turn on TLS: both or neither. Renewed
	// files are picked up without a restart.
	CertFile, KeyFile string
	// Public and ReadOnlyPosts: see Policy.
	Public, ReadOnlyPosts []string
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// ErrNeedsToken means the API would listen beyond loopback without a
// token.
var ErrNeedsToken = errors.New("an API beyond loopback needs a token")

// Validate checks the config and fills in defaults. It reads no file:
// CheckFiles does.
func (c *Config) Validate() error {
	if c.Addr == "" {
		return errors.New("api: no listen address")
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("api: listen address %q: %w", c.Addr, err)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("api: --api-tls-cert and --api-tls-key go together")
	}
	if c.TokenFile == "" && !LoopbackAddr(c.Addr) {
		return fmt.Errorf("api: %w: --api %s listens beyond loopback, where anyone who reaches it could read the model and control the daemon; "+
			"give --api-token FILE (created if missing; gossipd init writes one), or listen on 127.0.0.1", ErrNeedsToken, c.Addr)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// CheckFiles reads the files Listen will read, so that a daemon refuses a
// bad one before it loads its data or joins the network: the token file
// where it exists (Listen creates a missing one), and the TLS pair.
func (c *Config) CheckFiles() error {
	if c.TokenFile != "" {
		if _, err := LoadTokenFile(c.TokenFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if c.CertFile != "" {
		if _, err := TLSConfig(c.CertFile, c.KeyFile, nil); err != nil {
			return err
		}
	}
	return nil
}

// LoopbackAddr reports whether HOST:PORT names a loopback address:
// localhost or a loopback IP. An empty host (every interface) or any
// other name is not loopback.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	return loopbackHost(host)
}

// Server is the API's listener and HTTP server.
type Server struct {
	srv *http.Server
	ln  net.Listener
	url string
	// TokenCreated says the token file was created at this start.
	TokenCreated bool
	// Guarded says reads need the token (the API is beyond loopback).
	Guarded bool
}

// Listen binds the API and wraps h in the policy its config implies; Serve
// starts serving.
func Listen(cfg Config, h http.Handler) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{}
	var token string
	if cfg.TokenFile != "" {
		var err error
		if token, s.TokenCreated, err = LoadOrCreateTokenFile(cfg.TokenFile); err != nil {
			return nil, err
		}
	}
	var tc *tls.Config
	if cfg.CertFile != "" {
		var err error
		tc, err = TLSConfig(cfg.CertFile, cfg.KeyFile, func(err error) {
			cfg.Logger.Error("api: renewed TLS certificate not loaded; serving the previous one", "err", err)
		})
		if err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	a := ln.Addr().(*net.TCPAddr)
	s.Guarded = !a.IP.IsLoopback()
	if s.Guarded && token == "" { // a name that resolved beyond loopback
		ln.Close()
		return nil, fmt.Errorf("api: %w: --api %s listens on %s", ErrNeedsToken, cfg.Addr, a)
	}
	scheme := "http"
	if tc != nil {
		ln = tls.NewListener(ln, tc)
		scheme = "https"
	}
	s.url = scheme + "://" + a.String()
	p := Policy{Token: token, ReadsNeedToken: s.Guarded, Public: cfg.Public, ReadOnlyPosts: cfg.ReadOnlyPosts}
	s.srv = &http.Server{Handler: Guard(h, p), ReadHeaderTimeout: 5 * time.Second, TLSConfig: tc,
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug)}
	s.ln = ln
	if s.Guarded && tc == nil {
		cfg.Logger.Warn("the API listens beyond loopback without TLS: its token crosses the network in the clear; give --api-tls-cert and --api-tls-key, or keep the network private",
			"api", s.url)
	}
	return s, nil
}

// URL is the API's base URL (scheme, bound address and port).
func (s *Server) URL() string { return s.url }

// Addr is the bound HOST:PORT.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve serves until Shutdown; it returns http.ErrServerClosed then.
func (s *Server) Serve() error { return s.srv.Serve(s.ln) }

// Shutdown stops the server, letting requests in flight finish until ctx
// is done.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }
