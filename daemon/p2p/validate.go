package p2p

import (
	"fmt"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Validate checks what New would refuse in cfg, without starting
// anything: the DHT mode, the limits, and the listen, bootstrap and relay
// addresses, each error naming the value. The identity key and the
// consortium are New's to check. A daemon calls it before it loads its
// data or opens its store, so that a mistyped address is a usage error
// at once.
func (cfg Config) Validate() error {
	if cfg.DHT != "" && !slices.Contains([]string{DHTOff, DHTAuto, DHTClient, DHTServer}, cfg.DHT) {
		return fmt.Errorf("p2p: dht mode %q, want off|auto|client|server", cfg.DHT)
	}
	if err := cfg.Limits.Validate(); err != nil {
		return err
	}
	for _, s := range cfg.Listen {
		if _, err := ma.NewMultiaddr(s); err != nil {
			return fmt.Errorf("p2p: listen address %q: %w", s, err)
		}
	}
	for _, s := range cfg.Bootstrap {
		if err := CheckBootstrap(s); err != nil {
			return err
		}
	}
	for _, s := range cfg.NAT.Relays {
		if _, err := peer.AddrInfoFromString(s); err != nil {
			return fmt.Errorf("p2p: relay address %q: %w", s, err)
		}
	}
	return nil
}

// CheckBootstrap checks one bootstrap address: a multiaddr with /p2p/ID,
// or another daemon's API URL (http://HOST:PORT) to ask for its addresses.
func CheckBootstrap(s string) error {
	if isBootstrapURL(s) {
		return checkBootstrapURL(s)
	}
	if _, err := peer.AddrInfoFromString(s); err != nil {
		return fmt.Errorf("p2p: bootstrap address %.100q: %w", s, err)
	}
	return nil
}
