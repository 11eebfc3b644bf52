package p2p

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/node"
)

// FrameVersion is the version of the stream framing.
const FrameVersion = 1

// DefaultMaxFrame bounds a frame's payload (64 MiB).
const DefaultMaxFrame = 64 << 20

// ErrFrame marks a malformed frame.
var ErrFrame = errors.New("p2p: bad frame")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// A frame on a stream:
//
//	u32 payload length | u8 version | u8 kind | [32]byte job | u32 crc32c(length..job) | payload
//
// The length comes first so a reader can refuse an oversized frame before
// reading it. The checksum covers the header; the payload is a gossip wire
// message, which carries a CRC-32C of its own (checked when it is decoded),
// so every byte is checksummed once — and Noise/TLS authenticate them all.
const frameHeader = 4 + 1 + 1 + 32 + 4

// WriteFrame writes f to w: the header, then the payload, without copying
// the payload (or, for a frame carrying a message, while encoding it).
func WriteFrame(w io.Writer, f node.Frame) error {
	n := f.Len()
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
	return f.WritePayload(w)
}

// ReadFrame reads one frame of at most max payload bytes.
func ReadFrame(r io.Reader, max int) (node.Frame, error) {
	var hdr [frameHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return node.Frame{}, fmt.Errorf("%w: header: %v", ErrFrame, err)
	}
	if got, want := crc32.Checksum(hdr[:38], castagnoli), binary.LittleEndian.Uint32(hdr[38:]); got != want {
		return node.Frame{}, fmt.Errorf("%w: header checksum mismatch", ErrFrame)
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if uint64(n) > uint64(max) {
		return node.Frame{}, fmt.Errorf("%w: %d-byte payload exceeds the %d-byte limit", ErrFrame, n, max)
	}
	if hdr[4] != FrameVersion {
		return node.Frame{}, fmt.Errorf("%w: version %d, this node speaks %d", ErrFrame, hdr[4], FrameVersion)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return node.Frame{}, fmt.Errorf("%w: payload truncated: %v", ErrFrame, err)
	}
	f := node.Frame{Kind: gossip.Kind(hdr[5]), Payload: payload}
	copy(f.Job[:], hdr[6:])
	return f, nil
}
