package peer

import (
	"fmt"

	"github.com/gossipd/gossipd/gossip"
)

// Encode returns m's encoding laid out so that its parameter vector is
// 4-byte aligned: Receive then uses the model in place, without a copy,
// as it does with the daemon's receive buffers.
func Encode(m *gossip.Message) ([]byte, error) {
	size := gossip.EncodedSize(m)
	pad := (4 - gossip.ParamsOffset(m)%4) % 4
	b, err := gossip.AppendEncode(make([]byte, pad, pad+size), m)
	if err != nil {
		return nil, err
	}
	if b = b[pad:]; len(b) != size {
		return nil, fmt.Errorf("peer: encoded %d bytes, EncodedSize says %d", len(b), size)
	}
	return b, nil
}
