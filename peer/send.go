package peer

import (
	"fmt"
	"io"

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

// Body is an outgoing message as a transport payload: it encodes itself
// as the transport writes it, so a model is never copied into a buffer
// (on little-endian hosts its vectors go from memory to the connection).
type Body struct{ M *gossip.Message }

// Len is the encoding's length.
func (b Body) Len() int { return gossip.EncodedSize(b.M) }

// WriteBody writes the encoding to w. Over a channel that authenticates
// every byte the checksum is left zero (gossip.WriteMessageUnchecked):
// receivers skip it (Envelope.Authenticated).
func (b Body) WriteBody(w io.Writer, authenticated bool) error {
	if authenticated {
		return gossip.WriteMessageUnchecked(w, b.M)
	}
	return gossip.WriteMessage(w, b.M)
}

// Bytes returns the encoding in a fresh buffer.
func (b Body) Bytes() ([]byte, error) { return gossip.Encode(b.M) }
