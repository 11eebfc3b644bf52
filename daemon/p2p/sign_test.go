package p2p

import (
	"testing"

	"github.com/gossipd/gossipd/daemon/transport"
)

var _ transport.Signer = (*Host)(nil)

// TestSignVerify: a host's signature verifies by its peer ID on another
// host (the public key is in the ID), not for another message, another
// signer or a malformed ID.
func TestSignVerify(t *testing.T) {
	a, b := newHost(t), newHost(t)
	msg := []byte("gossipd secure advert v1\nkeys")
	sig, err := a.Sign(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Verify(a.ID(), msg, sig); err != nil {
		t.Fatalf("a's signature on b: %v", err)
	}
	for name, c := range map[string]struct {
		signer transport.PeerID
		msg    []byte
	}{
		"another message": {a.ID(), []byte("gossipd secure advert v1\nother keys")},
		"another signer":  {b.ID(), msg},
		"a malformed ID":  {"not-a-peer-id", msg},
	} {
		if err := b.Verify(c.signer, c.msg, sig); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}
