package p2p

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sync"

	"github.com/gossipd/gossipd/daemon/transport"
)

// FrameVersion is the version of the stream framing.
const FrameVersion = 1

// DefaultMaxFrame bounds a frame's payload (64 MiB).
const DefaultMaxFrame = 64 << 20

// ErrFrame marks a malformed frame.
var ErrFrame = errors.New("p2p: bad frame")

// ErrBroken marks a stream that ended or failed in the middle of a frame
// (a reset, a dead connection, a deadline): a network fault, not
// malformed input, so it is not counted against the peer.
var ErrBroken = errors.New("p2p: stream broke mid-frame")

// errOversized marks a frame over the size limit (wrapped with ErrFrame).
var errOversized = errors.New("oversized")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// A frame on a stream:
//
//	u32 payload length | u8 version | u8 kind | [32]byte job | u32 crc32c(length..job) | payload
//
// The length comes first so a reader can refuse an oversized frame before
// reading it. The checksum covers the header. The payload is a gossip wire
// message, whose CRC-32C trailer gossipd writes as zero here: every byte
// on a libp2p stream is authenticated by Noise or TLS (AEADs) and every
// gossipsub message by its author's signature (StrictSign), so receivers
// decode with SkipChecksum (Inbound.Authenticated) and computing the CRC
// would cost the sender a pass over the model for nothing.
const frameHeader = 4 + 1 + 1 + 32 + 4

// WriteFrame writes f to w: the header, then the payload, without copying
// the payload.
func WriteFrame(w io.Writer, f transport.Frame) error {
	n := len(f.Payload)
	if uint64(n) > math.MaxUint32 {
		return fmt.Errorf("%w: %d-byte payload", ErrFrame, n)
	}
	var hdr [frameHeader]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(n))
	hdr[4], hdr[5] = FrameVersion, byte(f.Kind)
	copy(hdr[6:], f.Job[:])
	binary.LittleEndian.PutUint32(hdr[38:], crc32.Checksum(hdr[:38], castagnoli))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(f.Payload)
	return err
}

// ReadFrame reads one frame of at most max payload bytes into a new buffer.
func ReadFrame(r io.Reader, max int) (transport.Frame, error) {
	return readFrame(r, max, func(n int) ([]byte, error) { return make([]byte, n), nil })
}

// readFrame reads one frame into a buffer from alloc, which sees the
// payload's length once the header checked out and may refuse the frame.
func readFrame(r io.Reader, max int, alloc func(int) ([]byte, error)) (transport.Frame, error) {
	var hdr [frameHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return transport.Frame{}, fmt.Errorf("%w: header: %w", ErrBroken, err)
	}
	if got, want := crc32.Checksum(hdr[:38], castagnoli), binary.LittleEndian.Uint32(hdr[38:]); got != want {
		return transport.Frame{}, fmt.Errorf("%w: header checksum mismatch", ErrFrame)
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if uint64(n) > uint64(max) {
		return transport.Frame{}, fmt.Errorf("%w: %w: %d-byte payload exceeds the %d-byte limit", ErrFrame, errOversized, n, max)
	}
	if hdr[4] != FrameVersion {
		return transport.Frame{}, fmt.Errorf("%w: version %d, this node speaks %d", ErrFrame, hdr[4], FrameVersion)
	}
	payload, err := alloc(int(n))
	if err != nil {
		return transport.Frame{}, fmt.Errorf("%w: %w", ErrFrame, err)
	}
	if _, err := io.ReadFull(r, payload); err != nil {
		return transport.Frame{}, fmt.Errorf("%w: payload: %w", ErrBroken, err)
	}
	f := transport.Frame{Kind: hdr[5], Payload: payload}
	copy(f.Job[:], hdr[6:])
	return f, nil
}

// minPooled is the smallest payload whose buffer is recycled: smaller ones
// cost little to allocate.
const minPooled = 64 << 10

// bufferPool recycles receive buffers. Landing every model in fresh memory
// costs the receiver page faults and zeroing, as much as a fifth of the
// goodput of a fast link; a daemon receives models of one size again and
// again, so a returned buffer almost always fits the next frame.
type bufferPool struct{ p sync.Pool }

// get returns an n-byte buffer, recycled when one of a fitting size (at
// most twice n) is at hand. Its contents are arbitrary.
func (bp *bufferPool) get(n int) []byte {
	if n >= minPooled {
		if v, _ := bp.p.Get().(*[]byte); v != nil && cap(*v) >= n && cap(*v) <= 2*n {
			return (*v)[:n]
		}
	}
	return make([]byte, n)
}

// put returns b for reuse; the caller must not touch it afterwards.
func (bp *bufferPool) put(b []byte) {
	if cap(b) >= minPooled {
		bp.p.Put(&b)
	}
}
