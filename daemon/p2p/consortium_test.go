package p2p

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
	stale := &Consortium{PSK: loaded.PSK, Members: []string{ids[0], ids[1], ids[2]}} // the key, and a list a's file lacks
	slices.Sort(stale.Members)
	c := mk(keys[2], stale)    // has the key, not a member of a's list
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

// TestNonMemberSaysSo: a daemon that holds the network key and is on its
// own copy of the member list, but not on its bootstrap peer's, completes
// its own side of the handshake before the member's gater closes the
// connection, so its dials "succeed". It must say plainly, at error
// level, that it is not a member, naming its peer ID and the command
// that adds it; say it once (backoff), not every round; and never take
// the connection made each round for a recovery ("reached bootstrap
// peer").
func TestNonMemberSaysSo(t *testing.T) {
	ka, kc := mustKey(t), mustKey(t)
	ida, _ := PeerIDOf(ka)
	idc, _ := PeerIDOf(kc)
	club, err := NewConsortium(ida)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Key: ka, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: DHTOff, NoPEX: true, Consortium: club})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	mine := &Consortium{PSK: club.PSK, Members: []string{ida}} // a newer copy of the file, which a's is not
	if err := mine.Add(idc); err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, err := New(Config{Key: kc, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: DHTOff, NoPEX: true, Consortium: mine,
		Bootstrap: a.Addrs(), PEXInterval: 50 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	said := `level=ERROR msg="this node (peer ID ` + idc + `) is not a member of the consortium: the bootstrap peer ` + ida + ` closed the connection`
	waitFor(t, "the non-member's error", func() bool { return strings.Contains(buf.String(), said) })
	// Twenty more rounds (50 ms each): the error is not repeated within
	// its minute of backoff, and no round says the peer was reached.
	rounds := time.Now().Add(time.Second)
	waitFor(t, "twenty more rounds", func() bool { return time.Now().After(rounds) })
	s := buf.String()
	if n := strings.Count(s, "is not a member of the consortium"); n != 1 || strings.Contains(s, "reached bootstrap peer") || !strings.Contains(s, "gossipd consortium add-member") {
		t.Fatalf("want the error once, naming add-member, and no \"reached\" line; log:\n%s", s)
	}
}

// TestPrivateNetworkSaysSo: a daemon without the network key, and one
// with another key, cannot complete a connection to a consortium member;
// each says, at error level, that the peer runs a private network and
// what to do, once.
func TestPrivateNetworkSaysSo(t *testing.T) {
	ka, kb, kc := mustKey(t), mustKey(t), mustKey(t)
	ida, _ := PeerIDOf(ka)
	idc, _ := PeerIDOf(kc)
	club, err := NewConsortium(ida)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Key: ka, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: DHTOff, NoPEX: true, Consortium: club})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	other, err := NewConsortium(ida, idc)
	if err != nil {
		t.Fatal(err)
	}
	other.Path = "other.yaml"
	for _, c := range []struct {
		name string
		key  crypto.PrivKey
		club *Consortium
		want string
	}{
		{"no key", kb, nil, "the peer runs a private network (a consortium network key), and this node has no key or a different one"},
		{"another key", kc, other, "the peer runs a private network with a network key other than this node's (the consortium file other.yaml), or none"},
	} {
		var buf syncBuffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		h, err := New(Config{Key: c.key, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: DHTOff, NoPEX: true, Consortium: c.club,
			Bootstrap: a.Addrs(), PEXInterval: 50 * time.Millisecond, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, c.name+": the error", func() bool { return strings.Contains(buf.String(), c.want) })
		rounds := time.Now().Add(time.Second)
		waitFor(t, "twenty more rounds", func() bool { return time.Now().After(rounds) })
		h.Close()
		s := buf.String()
		if n := strings.Count(s, "cannot reach bootstrap peer"); n != 1 || !strings.Contains(s, "level=ERROR") || !strings.Contains(s, ida) {
			t.Errorf("%s: want one error naming the peer; log:\n%s", c.name, s)
		}
	}
}

// TestOwnConsortiumListsSelf: a host whose own consortium file does not
// list it refuses to start, naming the file and its peer ID; a
// throwaway observer (gossipd jobs) may.
func TestOwnConsortiumListsSelf(t *testing.T) {
	ka, kc := mustKey(t), mustKey(t)
	ida, _ := PeerIDOf(ka)
	idc, _ := PeerIDOf(kc)
	club, err := NewConsortium(ida)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "club.yaml")
	if err := club.SaveNew(path); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadConsortium(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{Key: kc, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: DHTOff, NoPEX: true, Consortium: loaded})
	if !errors.Is(err, ErrNotMember) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), idc) ||
		!strings.Contains(err.Error(), "gossipd consortium add-member --file "+path+" "+idc) {
		t.Fatalf("a host its consortium does not list: %v", err)
	}
	h, err := New(Config{Key: kc, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: DHTOff, NoPEX: true, Consortium: loaded, Observer: true})
	if err != nil {
		t.Fatalf("an observer: %v", err)
	}
	h.Close()
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
