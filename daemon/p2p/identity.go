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
	k, created, err := LoadOrNewKey(path)
	if err != nil || !created {
		return k, err
	}
	return k, SaveKey(path, k)
}

// LoadOrNewKey reads the identity at path, or where there is no file
// there makes a new one (created) without writing it: a daemon writes it
// (SaveKey) only once everything else has been checked.
func LoadOrNewKey(path string) (k crypto.PrivKey, created bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		return k, true, err
	}
	if err != nil {
		return nil, false, err
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, false, fmt.Errorf("p2p: identity key %s has mode %v; it must be readable by its owner only (chmod 600)", path, st.Mode().Perm())
	}
	k, err = crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, false, fmt.Errorf("p2p: identity key %s: %w", path, err)
	}
	return k, false, nil
}

// SaveKey writes k to path (mode 0600), creating its directory; it
// refuses to replace an existing file.
func SaveKey(path string, k crypto.PrivKey) error {
	raw, err := crypto.MarshalPrivateKey(k)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("p2p: writing identity key: %w", err)
	}
	_, err = f.Write(raw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
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
