package p2p

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"

	"github.com/gossipd/gossipd/node/transport"
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
