package apiserver

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// certReloader serves the certificate in a pair of files and reads them
// again when either changes (a renewal by cert-manager or certbot), so the
// daemon need not restart. A renewal that fails to load keeps the old
// certificate.
type certReloader struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	certMod time.Time
	keyMod  time.Time
	onError func(error)
	lastErr string // the last failure reported, reported once
}

func (c *certReloader) load() error {
	cs, err := os.Stat(c.certFile)
	if err != nil {
		return fmt.Errorf("api tls: %w", err)
	}
	ks, err := os.Stat(c.keyFile)
	if err != nil {
		return fmt.Errorf("api tls: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && cs.ModTime().Equal(c.certMod) && ks.ModTime().Equal(c.keyMod) {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("api tls: certificate %s and key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert, c.certMod, c.keyMod = &cert, cs.ModTime(), ks.ModTime()
	return nil
}

func (c *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	err := c.load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && err.Error() != c.lastErr && c.onError != nil {
		c.onError(err)
	}
	if err != nil {
		c.lastErr = err.Error()
	} else {
		c.lastErr = ""
	}
	return c.cert, nil
}

// TLSConfig loads a certificate and its key (PEM files) and returns a
// server config (TLS 1.2 or newer) that picks up renewed files on the next
// handshake. onError, if not nil, hears of renewals that failed to load.
func TLSConfig(certFile, keyFile string, onError func(error)) (*tls.Config, error) {
	c := &certReloader{certFile: certFile, keyFile: keyFile, onError: onError}
	if err := c.load(); err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get}, nil
}
