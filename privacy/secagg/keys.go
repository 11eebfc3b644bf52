package secagg

import (
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrKey marks a public key or private key that cannot be used.
var ErrKey = errors.New("secagg: invalid key")

// KeyPair is a round's X25519 key pair of one sender.
type KeyPair struct{ priv *ecdh.PrivateKey }

// NewKeyPair draws a key pair from rand (crypto/rand in the daemon).
func NewKeyPair(rand io.Reader) (*KeyPair, error) {
	var b [32]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		return nil, fmt.Errorf("secagg: key pair: %w", err)
	}
	return KeyPairFromBytes(b[:])
}

// KeyPairFromBytes is the key pair of a 32-byte private key (as Bytes
// returns it, or as Shamir's shares rebuild it).
func KeyPairFromBytes(b []byte) (*KeyPair, error) {
	priv, err := ecdh.X25519().NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	return &KeyPair{priv: priv}, nil
}

// Public is the key pair's public key (32 bytes).
func (k *KeyPair) Public() []byte { return k.priv.PublicKey().Bytes() }

// Bytes is the private key (32 bytes), for sharing it out.
func (k *KeyPair) Bytes() []byte { return k.priv.Bytes() }

// Context binds an agreed seed to its use: one job, one round, one
// receiver's group, one pair of its members. Both members derive the
// same seed, whichever calls.
type Context struct {
	Job      string
	Round    uint64
	Receiver string
	// A and B are the pair's member IDs (their order does not matter).
	A, B string
}

// info is the HKDF info string: a label and the context's fields,
// length-prefixed, the pair in sorted order.
func (c Context) info() string {
	a, b := c.A, c.B
	if b < a {
		a, b = b, a
	}
	var buf []byte
	buf = append(buf, "gossipd secagg pair mask v1"...)
	for _, s := range []string{c.Job, c.Receiver, a, b} {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	buf = binary.BigEndian.AppendUint64(buf, c.Round)
	return string(buf)
}

// Agree derives the pair's mask seed from this member's private key and
// the other's public key: X25519, then HKDF-SHA-256 over the shared
// secret with the context as info. A low-order public key (whose shared
// secret is zero) is refused.
func (k *KeyPair) Agree(peerPublic []byte, c Context) (Seed, error) {
	pub, err := x25519Public(peerPublic)
	if err != nil {
		return Seed{}, err
	}
	secret, err := k.priv.ECDH(pub)
	if err != nil {
		return Seed{}, fmt.Errorf("%w: %v", ErrKey, err)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, c.info(), 32)
	if err != nil {
		return Seed{}, fmt.Errorf("secagg: hkdf: %w", err)
	}
	var s Seed
	copy(s[:], key)
	return s, nil
}

// x25519Public reads a 32-byte X25519 public key.
func x25519Public(b []byte) (*ecdh.PublicKey, error) {
	pub, err := ecdh.X25519().NewPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %v", ErrKey, err)
	}
	return pub, nil
}
