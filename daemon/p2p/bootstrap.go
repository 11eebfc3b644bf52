package p2p

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/sec"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"

	"github.com/gossipd/gossipd/daemon/transport"
)

// Bootstrap by URL. A bootstrap entry may be the HTTP(S) address of a
// daemon's API instead of a multiaddr with /p2p/ID: the host reads that
// daemon's GET /id (its peer ID and addresses, what its announcements
// carry anyway) and dials it. Deployments that cannot know a peer's ID in
// advance, such as a Kubernetes StatefulSet whose pods make their keys on
// first start, then bootstrap from a stable name:
// --bootstrap http://gossipd-0.gossipd:8080. The ID comes over the
// network unauthenticated (use https across untrusted networks); the
// libp2p connection then authenticates the peer as that ID, and a
// consortium still admits members only.

// maxIDResponse bounds a /id response.
const maxIDResponse = 64 << 10

// isBootstrapURL says whether a bootstrap entry is an API URL.
func isBootstrapURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// checkBootstrapURL validates a bootstrap URL.
func checkBootstrapURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("p2p: bootstrap URL %q: %w", s, err)
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return fmt.Errorf("p2p: bootstrap URL %q: want http(s)://HOST:PORT, a daemon's API address", s)
	}
	return nil
}

// ParseIDResponse decodes a /id response into the peer's address info.
func ParseIDResponse(b []byte) (peer.AddrInfo, error) {
	var r transport.IDResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return peer.AddrInfo{}, fmt.Errorf("p2p: /id response: %w", err)
	}
	id, err := peer.Decode(r.PeerID)
	if err != nil {
		return peer.AddrInfo{}, fmt.Errorf("p2p: /id response: peer ID %q: %w", r.PeerID, err)
	}
	ai := peer.AddrInfo{ID: id}
	for _, a := range r.Addrs {
		x, err := peer.AddrInfoFromString(a)
		if err != nil {
			return peer.AddrInfo{}, fmt.Errorf("p2p: /id response: address %q: %w", a, err)
		}
		if x.ID != id {
			return peer.AddrInfo{}, fmt.Errorf("p2p: /id response: address %q is not of peer %s", a, id)
		}
		ai.Addrs = append(ai.Addrs, x.Addrs...)
	}
	if len(ai.Addrs) == 0 {
		return peer.AddrInfo{}, errors.New("p2p: /id response lists no address")
	}
	return ai, nil
}

// resolveBootstrapURL reads a daemon's /id.
func resolveBootstrapURL(ctx context.Context, base string) (peer.AddrInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/id", nil)
	if err != nil {
		return peer.AddrInfo{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return peer.AddrInfo{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return peer.AddrInfo{}, fmt.Errorf("GET %s/id: %s", base, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxIDResponse))
	if err != nil {
		return peer.AddrInfo{}, err
	}
	return ParseIDResponse(b)
}

// bootstrapPeers resolves the bootstrap URLs and returns them with the
// multiaddr bootstrap peers; an entry that cannot be resolved is returned
// with its error, under its URL. known holds what each URL resolved to
// last: a URL whose peer is still connected is not asked again; one whose
// peer is gone is, so that a peer that restarted elsewhere is found again.
func (t *Host) bootstrapPeers(ctx context.Context, boot []peer.AddrInfo, urls []string, known map[string]peer.ID) ([]peer.AddrInfo, map[string]error) {
	out := append([]peer.AddrInfo(nil), boot...)
	var errs map[string]error
	for _, u := range urls {
		if id, ok := known[u]; ok && t.h.Network().Connectedness(id) == network.Connected {
			out = append(out, peer.AddrInfo{ID: id})
			continue
		}
		ai, err := resolveBootstrapURL(ctx, u)
		if err != nil {
			if errs == nil {
				errs = map[string]error{}
			}
			errs[u] = err
			continue
		}
		if ai.ID == t.h.ID() {
			continue // this daemon's own API (pod 0 of a StatefulSet)
		}
		known[u] = ai.ID
		t.h.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.AddressTTL)
		out = append(out, ai)
	}
	return out, errs
}

// Bootstrap faults. Each round the host dials the bootstrap peers it is
// not connected to, and says why one cannot be reached in words a new
// user can act on: down or unreachable; a private network whose key this
// node lacks (libp2p's pre-shared-key protector garbles the security
// handshake); or, for a consortium member's peer that holds the key but
// is not on the member's list, a connection that completes on this
// node's side and is closed by the member at once. A fault is logged when
// it starts or changes, and while it lasts again with backoff (after one
// minute, then twice as long each time, up to maxBootstrapLogEvery); a
// connection that is made and closed every round is not taken for a
// recovery, so the log does not alternate between the two.

// maxBootstrapLogEvery bounds the wait between two logs of one lasting
// bootstrap fault.
const maxBootstrapLogEvery = 30 * time.Minute

// errClosedAtOnce stands for a bootstrap peer that closed the connection
// the previous round made before this round found it.
var errClosedAtOnce = errors.New("it closed the connection right after it was made")

// bootState is what one bootstrap peer last did (maintain's goroutine).
type bootState struct {
	// made: the last round's dial succeeded; the next round confirms it
	// (the peer is still connected) or finds it closed.
	made bool
	// closed counts the rounds in a row that found the connection made by
	// the round before closed.
	closed int
	// fault is the message last logged ("": none), at logged; every is
	// the wait before it is logged again.
	fault  string
	logged time.Time
	every  time.Duration
}

// bootstrapLog says, unless it was just said, why the bootstrap peer ai
// cannot be reached (err).
func (t *Host) bootstrapLog(st *bootState, ai peer.AddrInfo, err error) {
	if errors.Is(err, swarm.ErrDialBackoff) {
		return // libp2p did not dial again so soon after a failure: nothing new
	}
	if errors.Is(err, errClosedAtOnce) {
		// Once may be a peer that restarted between two rounds; twice in
		// a row is a peer that turns this node away.
		if st.closed++; st.closed < 2 {
			return
		}
	} else {
		st.closed = 0
	}
	level, msg := t.bootstrapFault(ai.ID, err)
	now := time.Now()
	switch {
	case msg != st.fault:
		st.every = time.Minute
	case now.Sub(st.logged) < st.every:
		return
	default:
		st.every = min(2*st.every, maxBootstrapLogEvery)
	}
	st.fault, st.logged = msg, now
	t.log.Log(context.Background(), level, msg, "peer", ai.ID, "addrs", ai.Addrs, "err", err)
}

// bootstrapFault explains err, a failure to reach bootstrap peer id, and
// says how grave it is.
func (t *Host) bootstrapFault(id peer.ID, err error) (slog.Level, string) {
	self, c := t.h.ID(), t.cfg.Consortium
	file := "the consortium file"
	if c != nil && c.Path != "" {
		file = "the consortium file " + c.Path
	}
	var mismatch sec.ErrPeerIDMismatch
	switch {
	case errors.Is(err, errClosedAtOnce) && c != nil:
		return slog.LevelError, fmt.Sprintf("this node (peer ID %s) is not a member of the consortium: the bootstrap peer %s closed the connection as soon as it was made, "+
			"as members do to peers their consortium file does not list. Ask an admin to add this node (gossipd consortium add-member --file FILE %s) "+
			"and to give every member, this bootstrap peer included, the updated file", self, id, self)
	case errors.As(err, &mismatch):
		return slog.LevelWarn, fmt.Sprintf("cannot reach bootstrap peer %s: the peer at its address has another ID, %s (a new identity key?): correct --bootstrap", id, mismatch.Actual)
	case handshakeFailed(err) && c == nil:
		return slog.LevelError, fmt.Sprintf("cannot reach bootstrap peer %s: the peer runs a private network (a consortium network key), and this node has no key or a different one: "+
			"run it with --consortium and the consortium's file (or check that the address is a gossipd peer's)", id)
	case handshakeFailed(err):
		return slog.LevelError, fmt.Sprintf("cannot reach bootstrap peer %s: the connection handshake failed: the peer runs a private network with a network key other than "+
			"this node's (%s), or none; both must use the same consortium file", id, file)
	case errors.Is(err, errClosedAtOnce):
		return slog.LevelWarn, fmt.Sprintf("cannot reach bootstrap peer %s: it closed the connection right after it was made: is it over its connection limit, or refusing this node?", id)
	case c != nil:
		return slog.LevelWarn, fmt.Sprintf("cannot reach bootstrap peer %s: is it running, reachable, on the same network key, and is this node in its member list?", id)
	}
	return slog.LevelWarn, fmt.Sprintf("cannot reach bootstrap peer %s: is it running and reachable?", id)
}

// handshakeFailed says whether a dial reached the peer but failed in the
// security handshake for another reason than a peer ID that differs from
// the one dialled: what a private network's protector does to a peer
// without its key (libp2p's upgrader says "failed to negotiate security
// protocol", and types no error for it).
func handshakeFailed(err error) bool {
	return err != nil && strings.Contains(err.Error(), "failed to negotiate security protocol")
}

// maintain keeps bootstrap peers connected and exchanges peer addresses.
// Bootstrap URLs are resolved to peers each round (bootstrap.go).
func (t *Host) maintain(ctx context.Context, fixed []peer.AddrInfo, urls []string) {
	tick := time.NewTicker(t.cfg.PEXInterval)
	defer tick.Stop()
	trimTick := time.NewTicker(TrimEvery)
	defer trimTick.Stop()
	type state struct {
		err    string
		logged time.Time
	}
	// What each bootstrap peer last did, so that a failure is said when
	// it starts or changes, and again with backoff while it lasts
	// (bootstrapLog), and a recovery is said too: a daemon that cannot
	// reach its bootstrap peers (down, unreachable, another network key,
	// not in the consortium) must not sit silently at zero peers.
	last := map[peer.ID]*bootState{}
	lastURL := map[string]*state{}
	resolved := map[string]peer.ID{}
	for {
		boot := fixed
		if len(urls) > 0 {
			var errs map[string]error
			boot, errs = t.bootstrapPeers(ctx, fixed, urls, resolved)
			for _, u := range urls {
				st := lastURL[u]
				if st == nil {
					st = &state{}
					lastURL[u] = st
				}
				err := errs[u]
				switch {
				case err == nil:
					st.err = ""
				case ctx.Err() != nil:
					return
				case err.Error() != st.err || time.Since(st.logged) >= time.Minute:
					t.log.Warn("cannot read the bootstrap peer's ID from its API: is it running, and is its API reachable?", "url", u, "err", err)
					st.err, st.logged = err.Error(), time.Now()
				}
			}
		}
		if t.partial.Load() && t.hasNeighbours() {
			// A member of partial views needs its bootstrap peers only
			// to get in: redialling them would give each of them a
			// connection from every member.
			boot = nil
		}
		for _, ai := range boot {
			st := last[ai.ID]
			if st == nil {
				st = &bootState{}
				last[ai.ID] = st
			}
			if t.h.Network().Connectedness(ai.ID) == network.Connected {
				// It stayed (or came by itself): reached.
				if st.fault != "" {
					t.log.Info("reached bootstrap peer", "peer", ai.ID)
				}
				*st = bootState{}
				continue
			}
			made := st.made
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := t.h.Connect(cctx, ai)
			cancel()
			st.made = err == nil
			switch {
			case ctx.Err() != nil:
				return
			case err == nil && !made:
				continue // confirmed when the next round finds it connected
			case err == nil:
				// The connection the last round made is gone: the peer
				// closed it at once, as a consortium member does to a peer
				// that holds the key but is not on its list.
				err = errClosedAtOnce
			}
			t.bootstrapLog(st, ai, err)
		}
		if !t.cfg.NoPEX {
			t.exchangePeers(ctx)
		}
		t.trim(boot)
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				waiting = false
			case <-trimTick.C:
				// The DHT and peers that join open connections between
				// rounds: a partial view closes them every TrimEvery.
				t.trim(boot)
			}
		}
	}
}
