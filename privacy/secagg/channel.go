package secagg

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// Shares travel from one member to another through the receiver, which
// must not read them: each pair of members seals them with AES-256-GCM
// under a key agreed between their channel key pairs (X25519 + HKDF,
// bound to the round, the receiver and the direction), so every key
// seals one message and the zero nonce is never reused. The channel
// keys are never shared out: rebuilding a dropped member's mask key
// opens none of these messages.

// ErrSealed marks a sealed share message that does not open: forged,
// corrupted, replayed into another round or sent to another member.
var ErrSealed = errors.New("secagg: sealed shares do not open")

// Sealed is one member's shares for another, as relayed.
type Sealed []byte

// channelInfo binds a channel key to its one message.
func (g Group) channelInfo(from, to int) string {
	var b []byte
	b = append(b, "gossipd secagg share channel v1"...)
	for _, s := range []string{g.Job, g.Receiver, g.Members[from], g.Members[to]} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return string(binary.BigEndian.AppendUint64(b, g.Round))
}

// channel is the AEAD between members from and to (direction from → to).
func (g Group) channel(own *KeyPair, peerPublic []byte, from, to int) (cipher.AEAD, error) {
	pub, err := x25519Public(peerPublic)
	if err != nil {
		return nil, err
	}
	secret, err := own.priv.ECDH(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, g.channelInfo(from, to), 32)
	if err != nil {
		return nil, fmt.Errorf("secagg: hkdf: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal seals member from's shares (of its mask key and self seed) for
// member to, with from's channel key pair and to's channel public key.
func (g Group) Seal(from, to int, channel *KeyPair, toPublic []byte, keyShare, selfShare Share) (Sealed, error) {
	aead, err := g.channel(channel, toPublic, from, to)
	if err != nil {
		return nil, err
	}
	k, _ := keyShare.MarshalBinary()
	s, _ := selfShare.MarshalBinary()
	plain := binary.AppendUvarint(nil, uint64(len(k)))
	plain = append(append(plain, k...), s...)
	return aead.Seal(nil, make([]byte, aead.NonceSize()), plain, nil), nil
}

// Open opens what member from sealed for member to, with to's channel
// key pair and from's channel public key.
func (g Group) Open(from, to int, channel *KeyPair, fromPublic []byte, sealed Sealed) (keyShare, selfShare Share, err error) {
	aead, err := g.channel(channel, fromPublic, from, to)
	if err != nil {
		return Share{}, Share{}, err
	}
	plain, err := aead.Open(nil, make([]byte, aead.NonceSize()), sealed, nil)
	if err != nil {
		return Share{}, Share{}, fmt.Errorf("%w: from %s to %s", ErrSealed, g.Members[from], g.Members[to])
	}
	keyShare, selfShare, err = parseShares(plain)
	if err != nil {
		return Share{}, Share{}, fmt.Errorf("from %s: %w", g.Members[from], err)
	}
	return keyShare, selfShare, nil
}

// parseShares reads an opened plaintext: the key share's length, the key
// share, the self share.
func parseShares(plain []byte) (keyShare, selfShare Share, err error) {
	n, w := binary.Uvarint(plain)
	if w <= 0 || n > uint64(len(plain)-w) {
		return Share{}, Share{}, fmt.Errorf("%w: a malformed plaintext of %d bytes", ErrSealed, len(plain))
	}
	if err := keyShare.UnmarshalBinary(plain[w : w+int(n)]); err != nil {
		return Share{}, Share{}, err
	}
	if err := selfShare.UnmarshalBinary(plain[w+int(n):]); err != nil {
		return Share{}, Share{}, err
	}
	return keyShare, selfShare, nil
}
