package p2p

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

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
//	u32 payload length | u8 version | u8 kind | [32]byte job | payload | u32 crc32c(version..payload)
//
// The length comes first so a reader can refuse an oversized frame before
// reading it.
const frameHeader = 4 + 1 + 1 + 32

// WriteFrame writes f to w.
func WriteFrame(w io.Writer, f node.Frame) error {
	hdr := make([]byte, frameHeader, frameHeader+len(f.Payload)+4)
	binary.LittleEndian.PutUint32(hdr, uint32(len(f.Payload)))
	hdr[4], hdr[5] = FrameVersion, byte(f.Kind)
	copy(hdr[6:], f.Job[:])
	crc := crc32.Update(crc32.Checksum(hdr[4:], castagnoli), castagnoli, f.Payload)
	buf := append(hdr, f.Payload...)
	buf = binary.LittleEndian.AppendUint32(buf, crc)
	_, err := w.Write(buf)
	return err
}

// ReadFrame reads one frame of at most max payload bytes.
func ReadFrame(r io.Reader, max int) (node.Frame, error) {
	var hdr [frameHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return node.Frame{}, fmt.Errorf("%w: header: %v", ErrFrame, err)
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if uint64(n) > uint64(max) {
		return node.Frame{}, fmt.Errorf("%w: %d-byte payload exceeds the %d-byte limit", ErrFrame, n, max)
	}
	if hdr[4] != FrameVersion {
		return node.Frame{}, fmt.Errorf("%w: version %d, this node speaks %d", ErrFrame, hdr[4], FrameVersion)
	}
	body := make([]byte, int(n)+4)
	if _, err := io.ReadFull(r, body); err != nil {
		return node.Frame{}, fmt.Errorf("%w: payload truncated: %v", ErrFrame, err)
	}
	payload := body[:n]
	want := binary.LittleEndian.Uint32(body[n:])
	if got := crc32.Update(crc32.Checksum(hdr[4:], castagnoli), castagnoli, payload); got != want {
		return node.Frame{}, fmt.Errorf("%w: checksum mismatch", ErrFrame)
	}
	f := node.Frame{Kind: gossip.Kind(hdr[5]), Payload: payload}
	copy(f.Job[:], hdr[6:])
	return f, nil
}
