package p2p

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// LoadOrCreateKey reads an Ed25519 identity from path, creating it (mode
// 0600) on first use. It refuses a key file others can read.
func LoadOrCreateKey(path string) (crypto.PrivKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			return nil, err
		}
		raw, err := crypto.MarshalPrivateKey(k)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			return nil, err
		}
		return k, nil
	}
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("p2p: identity key %s has mode %v; it must be readable by its owner only (chmod 600)", path, st.Mode().Perm())
	}
	k, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("p2p: identity key %s: %w", path, err)
	}
	return k, nil
}

// PeerIDOf returns the peer ID of a key.
func PeerIDOf(k crypto.PrivKey) (string, error) {
	id, err := peer.IDFromPrivateKey(k)
	return id.String(), err
}

// CheckPeerID reports whether s is a valid libp2p peer ID.
func CheckPeerID(s string) error {
	if _, err := peer.Decode(s); err != nil {
		return fmt.Errorf("peer ID %q: %w", s, err)
	}
	return nil
}

// NewEphemeralKey returns a fresh Ed25519 identity that is never written
// anywhere (a short-lived observer, such as `gossipd jobs`).
func NewEphemeralKey() (crypto.PrivKey, error) {
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	return k, err
}

// CheckAddr reports whether s is a multiaddr ending in /p2p/ID, as
// bootstrap addresses must be.
func CheckAddr(s string) error {
	if _, err := peer.AddrInfoFromString(s); err != nil {
		return fmt.Errorf("address %q: %w", s, err)
	}
	return nil
}
