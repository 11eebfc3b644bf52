package p2p

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/gossipd/gossipd/node/transport"
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
