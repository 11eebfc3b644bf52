package simulation

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gossipd/gossipd/gossip"
)

// peerName is peer i's name, "p" and at least five digits.
func peerName(i int) gossip.PeerID {
	if t := peerNames.Load(); t != nil && i >= 0 && i < len(*t) {
		return (*t)[i]
	}
	return gossip.PeerID(fmt.Sprintf("p%05d", i))
}

// peerNames holds the names of peers 0…n−1 for the largest n a run has
// asked for (reservePeerNames), their bytes side by side in one string:
// Cyclon's shuffles read the names of the entries they receive, which,
// allocated one by one among the peers' other state, were a cache miss
// each (an eighth of a random walk's event loop at 10,000 peers).
var peerNames atomic.Pointer[[]gossip.PeerID]

// reservePeerNames makes peerName's names of peers 0…n−1 come from one
// string.
func reservePeerNames(n int) {
	namesMu.Lock()
	defer namesMu.Unlock()
	if t := peerNames.Load(); t != nil && len(*t) >= n {
		return
	}
	var b strings.Builder
	ends := make([]int, n)
	for i := range n {
		fmt.Fprintf(&b, "p%05d", i)
		ends[i] = b.Len()
	}
	all, t, start := b.String(), make([]gossip.PeerID, n), 0
	for i, end := range ends {
		t[i], start = gossip.PeerID(all[start:end]), end
	}
	peerNames.Store(&t)
}

var namesMu sync.Mutex

// index returns the index of the peer named id: peerName's inverse, read
// from the name's digits instead of hashing it into a map (every message
// is looked up, a cache miss into a map of every peer at 10,000). ok is
// false for a name peerName gives no peer of this run.
func (s *sim) index(id gossip.PeerID) (i int, ok bool) {
	if len(id) < 6 || id[0] != 'p' || (len(id) > 6 && id[1] == '0') {
		return 0, false
	}
	for _, c := range []byte(id[1:]) {
		if c < '0' || c > '9' || i >= len(s.peers) {
			return 0, false
		}
		i = i*10 + int(c-'0')
	}
	return i, i < len(s.peers)
}
