package p2p

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/gossipd/gossipd/daemon/transport"
)

// FuzzParseConsortium: any bytes give a consortium with a 32-byte key and
// valid member IDs, or an error naming the file.
func FuzzParseConsortium(f *testing.F) {
	f.Add([]byte("psk: " + strings.Repeat("ab", 32) + "\nmembers:\n  - 12D3KooWRP1m4r8V9EQp11BeqcJ3PkHPDDGCBWJZ8zjBByH5Ncah\n"))
	f.Add([]byte("psk: 00\nmembers: [x]\n"))
	f.Add([]byte("members: {a: 1}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConsortium(b, "club.yaml")
		if err != nil {
			if !strings.Contains(err.Error(), "club.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if len(c.PSK) != 32 {
			t.Fatalf("a %d-byte key accepted", len(c.PSK))
		}
		for _, m := range c.Members {
			if err := CheckPeerID(m); err != nil {
				t.Fatalf("member %q accepted: %v", m, err)
			}
		}
	})
}

// FuzzDecodeAnnouncement: any bytes give an announcement attributed to its
// verified author with a bounded address list, or an error.
func FuzzDecodeAnnouncement(f *testing.F) {
	b, _ := json.Marshal(transport.Announcement{JobID: "ab", Name: "n", Protocol: "randomwalk", Addrs: []string{"/ip4/1.2.3.4/tcp/1"}})
	f.Add(b)
	f.Add([]byte(`{"peer":"someone-else","addrs":[]}`))
	f.Add([]byte(`[]`))
	from, _ := peer.Decode("12D3KooWRP1m4r8V9EQp11BeqcJ3PkHPDDGCBWJZ8zjBByH5Ncah")
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := decodeAnnouncement(b, from)
		if err != nil {
			return
		}
		if a.Peer != transport.PeerID(from.String()) || len(a.Addrs) > maxPEX {
			t.Fatalf("accepted %+v", a)
		}
	})
}

// TestVerifySpec: an announcement's spec is accepted only if it hashes to
// the job ID and its creator's signature verifies: a tampered spec, a
// signature by someone else, a spec under another job's ID and a
// signature without a spec are all refused.
func TestVerifySpec(t *testing.T) {
	key, err := NewEphemeralKey()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewEphemeralKey()
	id, _ := PeerIDOf(key)
	spec := []byte(`{"name":"j","protocol":"dpsgd"}`)
	sum := sha256.Sum256(spec)
	sign := func(k crypto.PrivKey, b []byte) []byte {
		s, err := k.Sign(append([]byte(transport.SpecSigningContext), b...))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good := transport.Announcement{JobID: hex.EncodeToString(sum[:]), Spec: spec, Creator: id, CreatorSig: sign(key, spec)}
	if err := VerifySpec(good); err != nil {
		t.Fatalf("a good spec: %v", err)
	}
	tampered := good
	tampered.Spec = []byte(`{"name":"j","protocol":"sfb"}`)
	forged := good
	forged.CreatorSig = sign(other, spec)
	moved := good
	moved.JobID = strings.Repeat("0", 64)
	bare := transport.Announcement{JobID: good.JobID, Creator: id, CreatorSig: good.CreatorSig}
	for name, a := range map[string]transport.Announcement{"tampered": tampered, "forged": forged, "moved": moved, "bare": bare} {
		if err := VerifySpec(a); !errors.Is(err, ErrSpec) {
			t.Errorf("%s spec: %v, want ErrSpec", name, err)
		}
	}
}
