package p2p

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/daemon/transporttest"
	"github.com/gossipd/gossipd/gossip"
)

func mustKey(t testing.TB) crypto.PrivKey {
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newHost(t *testing.T, boot ...string) *Host {
	t.Helper()
	h, err := New(Config{Key: mustKey(t), Listen: []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"},
		Bootstrap: boot, PEXInterval: 200 * time.Millisecond, ReadTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// waitFor polls cond (bounded) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cluster starts n hosts bootstrapped through the first and waits until
// every host is connected to every other (peer exchange).
func cluster(t *testing.T, n int) []transport.Transport {
	first := newHost(t)
	hosts := []*Host{first}
	for i := 1; i < n; i++ {
		hosts = append(hosts, newHost(t, first.Addrs()...))
	}
	out := make([]transport.Transport, n)
	for i, h := range hosts {
		out[i] = h
		waitFor(t, "full mesh", func() bool { return len(h.Peers()) == n-1 })
	}
	return out
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, n int) []transport.Transport { return cluster(t, n) })
}

// TestPeerExchange: four hosts that only know the first learn each other.
func TestPeerExchange(t *testing.T) {
	trs := cluster(t, 4)
	for _, tr := range trs {
		others := slices.DeleteFunc(slices.Clone(trs), func(o transport.Transport) bool { return o == tr })
		for _, o := range others {
			if !slices.Contains(tr.Peers(), o.ID()) {
				t.Fatalf("%s does not know %s", tr.ID(), o.ID())
			}
		}
	}
}

func TestFrameRoundTripAndErrors(t *testing.T) {
	f := transport.Frame{Job: transport.JobID{9}, Kind: uint8(gossip.KindModel), Lane: transport.LaneModel, Payload: []byte("abc")}
	var b bytes.Buffer
	if err := WriteFrame(&b, f); err != nil {
		t.Fatal(err)
	}
	raw := b.Bytes()
	got, err := ReadFrame(bytes.NewReader(raw), 100)
	if err != nil || got.Job != f.Job || got.Kind != f.Kind || string(got.Payload) != "abc" {
		t.Fatalf("%+v %v", got, err)
	}
	flip := slices.Clone(raw)
	flip[10] ^= 1 // inside the job ID: the header checksum catches it
	badVer := slices.Clone(raw)
	badVer[4] = 7
	binary.LittleEndian.PutUint32(badVer[38:], crc32.Checksum(badVer[:38], castagnoli))
	for name, c := range map[string]struct {
		b   []byte
		max int
	}{
		"checksum": {flip, 100}, "version": {badVer, 100}, "too big": {raw, 2},
	} {
		if _, err := ReadFrame(bytes.NewReader(c.b), c.max); !errors.Is(err, ErrFrame) || errors.Is(err, ErrBroken) {
			t.Errorf("%s: %v, want ErrFrame", name, err)
		}
	}
	// A stream that ends inside a frame is a network fault, not bad input.
	for name, b := range map[string][]byte{"truncated payload": raw[:len(raw)-2], "truncated header": raw[:10], "empty": nil} {
		if _, err := ReadFrame(bytes.NewReader(b), 100); !errors.Is(err, ErrBroken) || errors.Is(err, ErrFrame) {
			t.Errorf("%s: %v, want ErrBroken", name, err)
		}
	}
}

func FuzzReadFrame(f *testing.F) {
	var b bytes.Buffer
	WriteFrame(&b, transport.Frame{Kind: uint8(gossip.KindParams), Payload: []byte{1, 2, 3}})
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		fr, err := ReadFrame(bytes.NewReader(in), 1<<16)
		if err != nil {
			return
		}
		var out bytes.Buffer
		WriteFrame(&out, fr)
		if !bytes.Equal(out.Bytes(), in[:out.Len()]) {
			t.Fatal("re-encoding differs")
		}
	})
}

func TestKeyFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "identity.key")
	k1, err := LoadOrCreateKey(p)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", st.Mode().Perm())
	}
	k2, err := LoadOrCreateKey(p)
	if err != nil || !k1.Equals(k2) {
		t.Fatalf("reloaded key differs: %v", err)
	}
	os.Chmod(p, 0o644)
	if _, err := LoadOrCreateKey(p); err == nil {
		t.Fatal("world-readable key accepted")
	}
	os.Chmod(p, 0o600)
	os.WriteFile(p, []byte("garbage"), 0o600)
	if _, err := LoadOrCreateKey(p); err == nil {
		t.Fatal("corrupt key accepted")
	}
	_ = context.Background
}

// TestParsePEXHostile: peer-exchange answers are untrusted; entries without
// addresses, with bad IDs or addresses, or naming this host are skipped,
// never a panic (a peer once crashed others with an entry without
// addresses).
func TestParsePEXHostile(t *testing.T) {
	self, _ := peer.IDFromPrivateKey(mustKey(t))
	other, _ := peer.IDFromPrivateKey(mustKey(t))
	got := parsePEX([]pexEntry{
		{ID: other.String()},                                         // no addresses
		{ID: other.String(), Addrs: []string{}},                      // empty list
		{ID: "not-a-peer-id", Addrs: []string{"/ip4/1.2.3.4/tcp/1"}}, // bad ID
		{ID: self.String(), Addrs: []string{"/ip4/1.2.3.4/tcp/1"}},   // ourselves
		{ID: other.String(), Addrs: []string{"garbage", "/ip4/127.0.0.1/tcp/9"}},
	}, self)
	if len(got) != 1 || got[0].ID != other || len(got[0].Addrs) != 1 {
		t.Fatalf("parsed %+v", got)
	}
}

func FuzzParsePEX(f *testing.F) {
	f.Add([]byte(`[{"id":"x"},{"id":"12D3KooWGUZYfTKVsJddJJavst3wHGxLRJLgixoFoz7LdXK2hvG1","addrs":["/ip4/1.2.3.4/tcp/5"]}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e []pexEntry
		if json.Unmarshal(b, &e) == nil {
			parsePEX(e, "")
		}
	})
}

// TestRecycledBuffers: a received payload stays intact until its Inbound
// is Done, however many frames arrive meanwhile; after Done, later frames
// (which may land in the recycled buffer) arrive intact too.
func TestRecycledBuffers(t *testing.T) {
	trs := cluster(t, 2)
	a, b := trs[0], trs[1]
	payload := func(v byte) []byte { return bytes.Repeat([]byte{v}, 1<<20) }
	recv := func() transport.Inbound {
		select {
		case in := <-b.Inbound():
			return in
		case <-time.After(20 * time.Second):
			t.Fatal("no frame")
		}
		return transport.Inbound{}
	}
	send := func(v byte) {
		if err := a.Send(t.Context(), b.ID(), transport.Frame{Kind: uint8(gossip.KindModel), Lane: transport.LaneModel, Payload: payload(v)}); err != nil {
			t.Fatal(err)
		}
	}
	send(1)
	send(2)
	in1, in2 := recv(), recv()
	if !bytes.Equal(in1.Payload, payload(1)) || !bytes.Equal(in2.Payload, payload(2)) {
		t.Fatal("payloads differ from what was sent")
	}
	if in1.Recycle == nil {
		t.Fatal("a model-sized frame is not recyclable")
	}
	in2.Done()
	for v := byte(3); v < 8; v++ {
		send(v)
		in := recv()
		if !bytes.Equal(in.Payload, payload(v)) {
			t.Fatalf("frame %d arrived corrupted", v)
		}
		in.Done()
	}
	if !bytes.Equal(in1.Payload, payload(1)) {
		t.Fatal("a payload not yet Done was overwritten by later frames")
	}
	in1.Done()
	in1.Done() // Done twice must not put the buffer back twice
}

// TestAdvertisedAddrs: loopback addresses are not advertised beside
// others (a remote peer cannot dial them), but a node on loopback only
// keeps them; a host listening on every interface lists no loopback
// address when the machine has another.
func TestAdvertisedAddrs(t *testing.T) {
	m := func(s string) ma.Multiaddr { return ma.StringCast(s) }
	got := advertised([]ma.Multiaddr{m("/ip4/127.0.0.1/tcp/1"), m("/ip4/10.1.2.3/tcp/1"), m("/ip6/::1/udp/1/quic-v1"), m("/ip4/172.17.0.2/udp/1/quic-v1")})
	if len(got) != 2 || got[0].String() != "/ip4/10.1.2.3/tcp/1" || got[1].String() != "/ip4/172.17.0.2/udp/1/quic-v1" {
		t.Fatalf("advertised %v", got)
	}
	if got := advertised([]ma.Multiaddr{m("/ip4/127.0.0.1/tcp/1")}); len(got) != 1 {
		t.Fatalf("loopback only: %v", got)
	}
	h, err := New(Config{Key: mustKey(t), Listen: []string{"/ip4/0.0.0.0/tcp/0"}, DHT: DHTOff, NoPEX: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	addrs := h.Addrs()
	loop, other := 0, 0
	for _, a := range addrs {
		if strings.Contains(a, "/ip4/127.") {
			loop++
		} else {
			other++
		}
	}
	if other > 0 && loop > 0 {
		t.Fatalf("listening on every interface, the host advertises loopback beside %d other addresses: %v", other, addrs)
	}
}

// TestBootstrapFailureIsLogged: a host that cannot reach its bootstrap
// peer says so at warning level, naming the peer, instead of sitting
// silently at zero peers.
func TestBootstrapFailureIsLogged(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	dead := newHost(t)
	addr := dead.Addrs()[0]
	id := dead.ID()
	dead.Close() // nothing listens there any more
	h, err := New(Config{Key: mustKey(t), Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Bootstrap: []string{addr}, DHT: DHTOff, NoPEX: true,
		PEXInterval: 100 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	waitFor(t, "a warning about the bootstrap peer", func() bool {
		s := buf.String()
		return strings.Contains(s, "level=WARN") && strings.Contains(s, "cannot reach bootstrap peer") && strings.Contains(s, string(id))
	})
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
