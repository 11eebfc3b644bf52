package p2p

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestConsortium: over real libp2p connections on 127.0.0.1, a member
// connects to a member; a peer with the key but not on the list is refused
// (by the gater, both ways); a peer without the key cannot connect at all.
func TestConsortium(t *testing.T) {
	keys := make([]crypto.PrivKey, 4)
	ids := make([]string, 4)
	for i := range keys {
		keys[i] = mustKey(t)
		ids[i], _ = PeerIDOf(keys[i])
	}
	club, err := NewConsortium(ids[0], ids[1])
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "consortium.yaml")
	if err := club.SaveNew(path); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadConsortium(path)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(k crypto.PrivKey, c *Consortium) *Host {
		h, err := New(Config{Key: k, Listen: []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}, DHT: DHTOff, NoPEX: true, Consortium: c})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	outsider, _ := NewConsortium(ids[0], ids[1], ids[3]) // another key, listing everyone
	a, b := mk(keys[0], loaded), mk(keys[1], loaded)
	c := mk(keys[2], loaded)   // has the key, not a member
	d := mk(keys[3], outsider) // not the key
	for _, addr := range a.h.Addrs() {
		if _, err := addr.ValueForProtocol(0x01cc); err == nil { // quic-v1
			t.Fatalf("a consortium host listens on QUIC: %s", addr)
		}
	}
	connect := func(from, to *Host) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return from.h.Connect(ctx, peer.AddrInfo{ID: to.h.ID(), Addrs: to.h.Addrs()})
	}
	if err := connect(b, a); err != nil {
		t.Fatalf("member to member: %v", err)
	}
	// The non-member's own handshake may complete before a's gater closes
	// the connection: what matters is that a never admits it.
	connect(c, a)
	waitFor(t, "the non-member's connection closed", func() bool { return c.h.Network().Connectedness(a.h.ID()) != 1 })
	if a.h.Network().Connectedness(c.h.ID()) == 1 {
		t.Fatal("a admitted a non-member holding the key")
	}
	if err := connect(a, c); err == nil {
		t.Fatal("a member dialled a non-member")
	}
	if err := connect(d, a); err == nil {
		t.Fatal("a peer without the network key connected")
	}
	if got := a.h.Network().Peers(); len(got) != 1 || got[0] != b.h.ID() {
		t.Fatalf("a is connected to %v, want only b", got)
	}
	os.Chmod(path, 0o644)
	if _, err := LoadConsortium(path); err == nil {
		t.Fatal("a world-readable consortium file was accepted")
	}
}

// TestNonMemberSaysSo: a daemon that holds the network key but is not in
// the member list completes its own handshake before the member's gater
// closes the connection, so its dial "succeeds"; it must still warn that
// it cannot reach its bootstrap peer, naming the member list.
func TestNonMemberSaysSo(t *testing.T) {
	ka, kc := mustKey(t), mustKey(t)
	ida, _ := PeerIDOf(ka)
	club, err := NewConsortium(ida)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Key: ka, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: DHTOff, NoPEX: true, Consortium: club})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, err := New(Config{Key: kc, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: DHTOff, NoPEX: true, Consortium: club,
		Bootstrap: a.Addrs(), PEXInterval: 100 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitFor(t, "the non-member's warning", func() bool {
		s := buf.String()
		return strings.Contains(s, "level=WARN") && strings.Contains(s, "cannot reach bootstrap peer") &&
			strings.Contains(s, "member list") && strings.Contains(s, ida)
	})
}

// TestParseConsortiumStrict: a consortium file with a key it does not
// know (a misspelt "members", which would admit nobody) or without a
// valid network key is refused naming the file; a good one parses.
func TestParseConsortiumStrict(t *testing.T) {
	psk := strings.Repeat("ab", 32)
	c, err := ParseConsortium([]byte("psk: "+psk+"\nmembers: []\n"), "c.yaml")
	if err != nil || len(c.PSK) != 32 || len(c.Members) != 0 {
		t.Fatalf("good file: %+v, %v", c, err)
	}
	for text, want := range map[string]string{
		"psk: " + psk + "\nmember: [a]\n": "field member not found",
		"psk: abc\n":                      "psk must be 64 hex digits",
		"":                                "psk must be 64 hex digits",
		"members: [x]\n":                  "psk must be 64 hex digits",
	} {
		if _, err := ParseConsortium([]byte(text), "c.yaml"); err == nil || !strings.Contains(err.Error(), "c.yaml") || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming c.yaml with %q", text, err, want)
		}
	}
}
