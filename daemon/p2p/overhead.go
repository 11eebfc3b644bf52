package p2p

import (
	"github.com/libp2p/go-libp2p/core/metrics"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/gossipd/gossipd/daemon/transport"
)

// newOverhead returns the bandwidth counter the host reports its streams
// to (libp2p.BandwidthReporter).
func newOverhead() *metrics.BandwidthCounter { return metrics.NewBandwidthCounter() }

// lanes are the protocols gossip frames travel on: what the daemon
// counts itself.
var lanes = func() map[protocol.ID]bool {
	m := map[protocol.ID]bool{}
	for _, l := range transport.Lanes {
		m[ProtocolFor(l)] = true
	}
	return m
}()

// OverheadBytes implements transport.OverheadCounter: the bytes of every
// stream but the gossip lanes' (gossipsub's announcements and control,
// peer exchange, identify, liveness pings, the DHT, relays), received and
// sent since the host started. Connection handshakes before a protocol
// is chosen are not counted.
func (t *Host) OverheadBytes() map[string]transport.Bytes {
	out := map[string]transport.Bytes{}
	for p, s := range t.bwc.GetBandwidthByProtocol() {
		if !lanes[p] {
			name := string(p)
			if name == "" {
				name = "unnegotiated"
			}
			out[name] = transport.Bytes{In: uint64(s.TotalIn), Out: uint64(s.TotalOut)}
		}
	}
	return out
}

var _ transport.OverheadCounter = (*Host)(nil)
