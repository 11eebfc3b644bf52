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

// Encoder encodes outgoing messages for one transport, into one buffer
// that it reuses: the daemon's sender workers each keep one, encode a
// message, hand the bytes to the transport (which retains none of them
// once its Send returns) and encode the next into the same memory. An
// Encoder is not safe for concurrent use.
//
// Its buffer grows to the largest message encoded (a daemon sends models
// of one size again and again) and is kept.
type Encoder struct {
	authenticated bool
	buf           appender
}

// NewEncoder returns an Encoder for a transport that authenticates every
// byte it carries, or not (transport.Transport.Authenticates, asked once).
// Over a channel that authenticates, the encoding's CRC-32C trailer is
// left zero (gossip.WriteMessageUnchecked), which spares the sender a pass
// over the model; receivers skip it (Envelope.Authenticated). Otherwise
// the encoding is gossip.Encode's, checksum included.
func NewEncoder(authenticated bool) *Encoder {
	return &Encoder{authenticated: authenticated}
}

// Encode returns m's encoding (gossip.EncodedSize(m) bytes). The bytes
// are the Encoder's: they stay valid until the next call to Encode.
func (e *Encoder) Encode(m *gossip.Message) ([]byte, error) {
	size := gossip.EncodedSize(m)
	if cap(e.buf) < size {
		e.buf = make(appender, 0, size)
	}
	e.buf = e.buf[:0]
	if e.authenticated {
		if err := gossip.WriteMessageUnchecked(&e.buf, m); err != nil {
			return nil, err
		}
	} else {
		b, err := gossip.AppendEncode(e.buf, m)
		if err != nil {
			return nil, err
		}
		e.buf = b
	}
	if len(e.buf) != size {
		return nil, fmt.Errorf("peer: encoded %d bytes, EncodedSize says %d", len(e.buf), size)
	}
	return e.buf, nil
}

// appender is an io.Writer that appends to a slice: the streaming encoder
// writes a model's vectors into it straight from memory.
type appender []byte

func (a *appender) Write(p []byte) (int, error) {
	*a = append(*a, p...)
	return len(p), nil
}
