package peer

import (
	"fmt"
	"sync"

	"github.com/gossipd/gossipd/gossip"
)

// Encoding says whether a peer encodes what it sends, and how: a world
// that carries bytes (the daemon) has the peer encode every message as
// the core hands it over, so that a message crosses the peer once on its
// way out; a world that carries messages as values (the simulator without
// --codec) asks for none.
type Encoding uint8

const (
	// EncodeNone leaves messages as values: Do.Wire is nil.
	EncodeNone Encoding = iota
	// EncodeChecksummed is gossip.Encode's encoding, CRC-32C trailer
	// included, for a channel that does not authenticate what it carries
	// (memnet).
	EncodeChecksummed
	// EncodeAuthenticated leaves the trailer zero
	// (gossip.WriteMessageUnchecked), sparing the sender a pass over the
	// model, for a channel that authenticates every byte (libp2p's secure
	// streams): receivers skip the checksum (Envelope.Authenticated).
	EncodeAuthenticated
)

// Wire is the encoding of one message, in a buffer that goes back to a
// pool once the world has written it (Release): a daemon sends models of
// one size again and again, and reuses the same few buffers for them.
type Wire struct {
	// Bytes is the encoding (gossip.EncodedSize bytes).
	Bytes []byte
}

var wires = sync.Pool{New: func() any { return new(Wire) }}

// Release hands the buffer back for a later message; w's bytes must not
// be used after. Safe for concurrent use (a daemon's sender workers each
// release what they wrote). Not releasing is safe: the buffer is then
// garbage.
func (w *Wire) Release() {
	if w == nil {
		return
	}
	w.Bytes = w.Bytes[:0]
	wires.Put(w)
}

// EncodeWire encodes m (enc: EncodeChecksummed or EncodeAuthenticated)
// into a pooled buffer.
func EncodeWire(m *gossip.Message, enc Encoding) (*Wire, error) {
	size := gossip.EncodedSize(m)
	w := wires.Get().(*Wire)
	if cap(w.Bytes) < size {
		w.Bytes = make([]byte, 0, size)
	}
	buf := appender(w.Bytes[:0])
	switch enc {
	case EncodeAuthenticated:
		if err := gossip.WriteMessageUnchecked(&buf, m); err != nil {
			w.Release()
			return nil, err
		}
	case EncodeChecksummed:
		b, err := gossip.AppendEncode(buf, m)
		if err != nil {
			w.Release()
			return nil, err
		}
		buf = b
	default:
		w.Release()
		return nil, fmt.Errorf("peer: no encoding %d", enc)
	}
	if len(buf) != size {
		w.Release()
		return nil, fmt.Errorf("peer: encoded %d bytes, EncodedSize says %d", len(buf), size)
	}
	w.Bytes = buf
	return w, nil
}

// Encode returns m's encoding laid out so that its parameter vector is
// 4-byte aligned: Receive then uses the model in place, without a copy,
// as it does with the daemon's receive buffers. The simulator's --codec
// path uses it, after its adversary has had its way with the message.
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

// appender is an io.Writer that appends to a slice: the streaming encoder
// writes a model's vectors into it straight from memory.
type appender []byte

func (a *appender) Write(p []byte) (int, error) {
	*a = append(*a, p...)
	return len(p), nil
}
