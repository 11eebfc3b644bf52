package daemon

import (
	"maps"
	"sync"
	"time"

	"github.com/gossipd/gossipd/gossip"
)

// PeerTraffic is what a node exchanged with one peer, as /status shows it
// under "traffic". A message counts as sent once the transport took it
// for a live connection; one that it could not deliver counts under
// SendErrors instead.
type PeerTraffic struct {
	MessagesIn  uint64    `json:"messages_in"`
	BytesIn     uint64    `json:"bytes_in"`
	MessagesOut uint64    `json:"messages_out"`
	BytesOut    uint64    `json:"bytes_out"`
	SendErrors  uint64    `json:"send_errors"`
	Last        time.Time `json:"last"`
}

// trafficIdle is how long a peer's traffic is kept after its last
// message: a churning fleet does not grow the table without bound.
const trafficIdle = 30 * time.Minute

// traffic counts messages per peer.
type traffic struct {
	mu    sync.Mutex
	peers map[gossip.PeerID]*PeerTraffic
}

func (t *traffic) entry(p gossip.PeerID, now time.Time) *PeerTraffic {
	if t.peers == nil {
		t.peers = map[gossip.PeerID]*PeerTraffic{}
	}
	e := t.peers[p]
	if e == nil {
		e = &PeerTraffic{}
		t.peers[p] = e
	}
	e.Last = now
	return e
}

func (t *traffic) in(p gossip.PeerID, bytes int, now time.Time) {
	t.mu.Lock()
	e := t.entry(p, now)
	e.MessagesIn++
	e.BytesIn += uint64(bytes)
	t.mu.Unlock()
}

func (t *traffic) out(p gossip.PeerID, bytes int, now time.Time) {
	t.mu.Lock()
	e := t.entry(p, now)
	e.MessagesOut++
	e.BytesOut += uint64(bytes)
	t.mu.Unlock()
}

func (t *traffic) failed(p gossip.PeerID, now time.Time) {
	t.mu.Lock()
	t.entry(p, now).SendErrors++
	t.mu.Unlock()
}

// snapshot copies the table, dropping peers idle for trafficIdle.
func (t *traffic) snapshot(now time.Time) map[gossip.PeerID]PeerTraffic {
	t.mu.Lock()
	defer t.mu.Unlock()
	maps.DeleteFunc(t.peers, func(_ gossip.PeerID, e *PeerTraffic) bool { return now.Sub(e.Last) > trafficIdle })
	out := make(map[gossip.PeerID]PeerTraffic, len(t.peers))
	for p, e := range t.peers {
		out[p] = *e
	}
	return out
}
