package p2p

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gossipd/gossipd/daemon/transport"
)

// idServer serves h's GET /id, as a daemon's API does.
func idServer(t *testing.T, h *Host) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/id" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(transport.IDResponse{PeerID: h.ID(), Addrs: h.Addrs()})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestBootstrapURL: a host bootstraps from another daemon's API address,
// without knowing its peer ID; a URL that names the host itself is
// skipped; an unreachable one is a warning naming it.
func TestBootstrapURL(t *testing.T) {
	a := newHost(t)
	srv := idServer(t, a)
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	dead := "http://127.0.0.1:1"
	b, err := New(Config{Key: mustKey(t), Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Bootstrap: []string{srv.URL, dead}, DHT: DHTOff, NoPEX: true,
		Logger: log, PEXInterval: 100_000_000})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	waitFor(t, "b connected to a through a's API", func() bool { return len(b.Peers()) == 1 && b.Peers()[0] == a.ID() })
	waitFor(t, "a warning naming the dead URL", func() bool {
		s := buf.String()
		return strings.Contains(s, "level=WARN") && strings.Contains(s, dead)
	})
	// A host's own API among its bootstrap entries (pod 0 of a
	// StatefulSet) is skipped, not dialled.
	var dp atomic.Pointer[Host] // set once New returns; its rounds start before
	var hits atomic.Int32
	self := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := dp.Load()
		if d == nil {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		hits.Add(1)
		json.NewEncoder(w).Encode(transport.IDResponse{PeerID: d.ID(), Addrs: d.Addrs()})
	}))
	defer self.Close()
	var dbuf syncBuffer
	d, err := New(Config{Key: mustKey(t), Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Bootstrap: []string{self.URL}, DHT: DHTOff, NoPEX: true,
		Logger: slog.New(slog.NewTextHandler(&dbuf, nil)), PEXInterval: 100_000_000})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	dp.Store(d)
	waitFor(t, "d's third round", func() bool { return hits.Load() >= 3 }) // its rounds resolve the URL first, then dial
	// Its first rounds found the API starting (a warning naming it); none
	// may warn of dialling itself.
	if s := dbuf.String(); strings.Contains(s, "cannot reach bootstrap peer") {
		t.Fatalf("a host bootstrapping from its own API warned:\n%s", s)
	}
	for _, bad := range []string{"http://", "http://x:1/status", "http://x:1/?a=b"} {
		if _, err := New(Config{Key: mustKey(t), Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Bootstrap: []string{bad}, DHT: DHTOff}); err == nil {
			t.Errorf("bootstrap URL %q accepted", bad)
		}
	}
}

func TestParseIDResponse(t *testing.T) {
	a := newHost(t)
	b, _ := json.Marshal(transport.IDResponse{PeerID: a.ID(), Addrs: a.Addrs()})
	ai, err := ParseIDResponse(b)
	if err != nil || string(ai.ID.String()) != string(a.ID()) || len(ai.Addrs) == 0 {
		t.Fatalf("%+v, %v", ai, err)
	}
	other := newHost(t)
	for name, r := range map[string]transport.IDResponse{
		"no address":       {PeerID: a.ID()},
		"bad ID":           {PeerID: "nope", Addrs: a.Addrs()},
		"another's addrs":  {PeerID: a.ID(), Addrs: other.Addrs()},
		"not an multiaddr": {PeerID: a.ID(), Addrs: []string{"127.0.0.1:4001"}},
	} {
		b, _ := json.Marshal(r)
		if _, err := ParseIDResponse(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParseIDResponse: any bytes parse or fail, without panicking.
func FuzzParseIDResponse(f *testing.F) {
	f.Add([]byte(`{"peer_id":"12D3KooWRP1m4r8V9EQp11BeqcJ3PkHPDDGCBWJZ8zjBByH5Ncah","addrs":["/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWRP1m4r8V9EQp11BeqcJ3PkHPDDGCBWJZ8zjBByH5Ncah"]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ai, err := ParseIDResponse(b)
		if err == nil && (ai.ID == "" || len(ai.Addrs) == 0) {
			t.Fatalf("accepted %+v", ai)
		}
	})
}
