package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"unsafe"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/model"
)

// WireVersion is the version of the message encoding.
const WireVersion = 4

var wireMagic = [4]byte{'G', 'S', 'P', 'D'}

// ErrWire marks undecodable input.
var ErrWire = errors.New("gossip: bad wire message")

// DecodeLimits bounds what Decode accepts. Zero fields take the defaults.
type DecodeLimits struct {
	// MaxBytes is the largest encoded message (default 256 MiB).
	MaxBytes int
	// SkipChecksum skips verifying the CRC-32C trailer, for input whose
	// integrity the transport already verified (an AEAD channel); it is
	// still read, and framing and sizes are still checked.
	SkipChecksum bool
	// Borrow lets the decoded float vectors share b's memory where it is
	// suitably aligned (little-endian hosts), saving a copy of the model;
	// the caller must then neither modify nor reuse b.
	Borrow bool
}

const defaultMaxBytes = 256 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// The encoding, little-endian:
//
//	magic "GSPD" | version u8 | kind u8 | round u64 | age f64 | weight f64 | sent f64
//	from: u16 len + bytes
//	params: u32 count + f32s
//	indices: u32 count + u32s
//	partition u32
//	factors: u16 count + each { name: u16 len + bytes; K, J, D u32; U f32s (K·J); V f32s (K·D) }
//	view: u16 count + each { id: u16 len + bytes; age i64 }
//	packed: u32 len + a compressed vector (gossip/compress's encoding), len 0 for none
//	secure: u32 len + a secure-aggregation payload (securewire.go), len 0 for none
//	crc32c of everything before it, u32
//
// To is not encoded: the transport knows where a message goes.

// EncodedSize returns the length of Encode(m) without encoding.
func EncodedSize(m *Message) int {
	n, later := EncodedSizeLater(m)
	if later != nil {
		b, _ := later(true)
		n += b
	}
	return n
}

// EncodedSizeLater is EncodedSize without waiting for a deferred top-k
// vector (compress.EncodedSizeLater): the bytes known now and the
// function that gives the rest, nil where none are to come.
func EncodedSizeLater(m *Message) (int, func(wait bool) (int, bool)) {
	n, later := unpackedSize(m), (func(bool) (int, bool))(nil)
	if m.Packed != nil {
		var k int
		k, later = compress.EncodedSizeLater(m.Packed)
		n += k
	}
	return n, later
}

// LateBytesAtLeast is the least that EncodedSizeLater's function can
// give for m (compress.LateBytesAtLeast of its packed vector).
func LateBytesAtLeast(m *Message) int {
	if m.Packed == nil {
		return 0
	}
	return compress.LateBytesAtLeast(m.Packed)
}

// UncompressedSize is EncodedSize(m) + CompressionSaved(m), m's size
// with its packed vector as plain float32, without waiting for a
// deferred one.
func UncompressedSize(m *Message) int {
	n := unpackedSize(m)
	if m.Packed != nil {
		n += 4 * m.Packed.N
	}
	return n
}

// unpackedSize is EncodedSize of m but its packed vector.
func unpackedSize(m *Message) int {
	n := 4 + 1 + 1 + 8 + 8 + 8 + 8 + 2 + len(m.From) + 4 + 4*len(m.Params) + 4 + 4*len(m.Indices) + 4 + 2
	for _, f := range m.Factors {
		n += 2 + len(f.Weight) + 12 + 4*(len(f.U)+len(f.V))
	}
	n += 2
	for _, d := range m.View {
		n += 2 + len(d.ID) + 8
	}
	return n + 4 + 4 + secureSize(m) + 4
}

// CompressionSaved is how many bytes m's encoding saves by sending its
// vector packed (Config.Quantize) rather than as plain float32: add it to
// EncodedSize(m) for the yardstick of compression. 0 for a plain message.
func CompressionSaved(m *Message) int {
	if m.Packed == nil {
		return 0
	}
	return 4*m.Packed.N - compress.EncodedSize(m.Packed)
}

// ParamsOffset is where m's parameter vector starts in its encoding. A
// buffer that places it at a multiple of 4 lets Decode with Borrow use
// the vector in place.
func ParamsOffset(m *Message) int { return 4 + 1 + 1 + 8 + 8 + 8 + 8 + 2 + len(m.From) + 4 }

// Encode serialises m.
func Encode(m *Message) ([]byte, error) {
	return AppendEncode(make([]byte, 0, EncodedSize(m)), m)
}

// AppendEncode appends m's encoding to dst, so that a caller may reuse one
// buffer for many messages.
func AppendEncode(dst []byte, m *Message) ([]byte, error) {
	start := len(dst)
	e := &encoder{buf: slices.Grow(dst, EncodedSize(m))}
	if err := e.message(m); err != nil {
		return nil, err
	}
	return binary.LittleEndian.AppendUint32(e.buf, crc32.Checksum(e.buf[start:], castagnoli)), nil
}

// WriteMessage writes m's encoding (EncodedSize(m) bytes) to w without
// building it in memory: on little-endian hosts the float vectors go from m
// to w as they are, so sending a model costs no copy of it.
func WriteMessage(w io.Writer, m *Message) error {
	return writeMessage(&encoder{buf: make([]byte, 0, 256), w: w}, m)
}

// WriteMessageUnchecked is WriteMessage for a channel that authenticates
// every byte itself (libp2p's Noise and TLS are AEADs): it skips computing
// the CRC-32C and writes a zero trailer, so the receiver must decode with
// DecodeLimits.SkipChecksum.
func WriteMessageUnchecked(w io.Writer, m *Message) error {
	return writeMessage(&encoder{buf: make([]byte, 0, 256), w: w, nocrc: true}, m)
}

func writeMessage(e *encoder, m *Message) error {
	if err := e.message(m); err != nil {
		return err
	}
	e.flush()
	e.buf = binary.LittleEndian.AppendUint32(e.buf, e.crc)
	e.flush()
	return e.err
}

// encoder builds an encoding: small fields accumulate in buf; with w set,
// float vectors are written straight through and the checksum is kept
// running, otherwise everything is appended to buf.
type encoder struct {
	buf   []byte
	w     io.Writer
	crc   uint32
	nocrc bool // leave crc zero (WriteMessageUnchecked)
	err   error
}

// flush writes out buf (streaming only).
func (e *encoder) flush() {
	if e.w == nil || len(e.buf) == 0 {
		return
	}
	e.write(e.buf)
	e.buf = e.buf[:0]
}

// write writes p, then adds it to the checksum: the checksum of one
// chunk is computed while the transport sends it.
func (e *encoder) write(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
	}
	if !e.nocrc {
		e.crc = crc32.Update(e.crc, castagnoli, p)
	}
}

// writeChunk is how much of a float vector the streaming encoder writes at
// once.
const writeChunk = 256 << 10

func (e *encoder) floats(v []float32) {
	if e.w == nil {
		e.buf = appendFloats(e.buf, v)
		return
	}
	if len(v) < 64 {
		e.buf = appendFloats(e.buf, v)
		return
	}
	e.flush()
	if littleEndian {
		for b := unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)); len(b) > 0; {
			k := min(len(b), writeChunk)
			e.write(b[:k])
			b = b[k:]
		}
		return
	}
	for len(v) > 0 { // big-endian: convert a chunk at a time
		k := min(len(v), 4096)
		e.buf = appendFloats(e.buf, v[:k])
		e.flush()
		v = v[k:]
	}
}

func (e *encoder) message(m *Message) error {
	if len(m.From) > math.MaxUint16 || len(m.Factors) > math.MaxUint16 || len(m.View) > math.MaxUint16 || uint64(len(m.Params)) > math.MaxUint32 || uint64(len(m.Indices)) > math.MaxUint32 {
		return fmt.Errorf("%w: message too large to encode", ErrWire)
	}
	for _, f := range m.Factors {
		if len(f.Weight) > math.MaxUint16 || len(f.U) != f.K*f.J || len(f.V) != f.K*f.D {
			return fmt.Errorf("%w: inconsistent factors for %q", ErrWire, f.Weight)
		}
	}
	for _, d := range m.View {
		if len(d.ID) > math.MaxUint16 {
			return fmt.Errorf("%w: peer ID too long", ErrWire)
		}
	}
	if err := checkSecure(m); err != nil {
		return err
	}
	b := append(e.buf, wireMagic[:]...)
	b = append(b, WireVersion, byte(m.Kind))
	b = binary.LittleEndian.AppendUint64(b, m.Round)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(m.Age))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(m.Weight))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(m.Sent))
	b = appendString(b, string(m.From))
	e.buf = binary.LittleEndian.AppendUint32(b, uint32(len(m.Params)))
	e.floats(m.Params)
	b = binary.LittleEndian.AppendUint32(e.buf, uint32(len(m.Indices)))
	for _, i := range m.Indices {
		b = binary.LittleEndian.AppendUint32(b, i)
	}
	b = binary.LittleEndian.AppendUint32(b, m.Partition)
	e.buf = binary.LittleEndian.AppendUint16(b, uint16(len(m.Factors)))
	for _, f := range m.Factors {
		b = appendString(e.buf, f.Weight)
		b = binary.LittleEndian.AppendUint32(b, uint32(f.K))
		b = binary.LittleEndian.AppendUint32(b, uint32(f.J))
		e.buf = binary.LittleEndian.AppendUint32(b, uint32(f.D))
		e.floats(f.U)
		e.floats(f.V)
	}
	b = binary.LittleEndian.AppendUint16(e.buf, uint16(len(m.View)))
	for _, d := range m.View {
		b = appendString(b, string(d.ID))
		b = binary.LittleEndian.AppendUint64(b, uint64(d.Age))
	}
	if m.Packed == nil {
		b = binary.LittleEndian.AppendUint32(b, 0)
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(compress.EncodedSize(m.Packed)))
		b = compress.AppendEncode(b, m.Packed)
	}
	e.buf = appendSecure(b, m)
	return nil
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// decoder reads fields and remembers the first error with its offset.
type decoder struct {
	b      []byte
	off    int
	err    error
	borrow bool
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: byte %d: truncated or malformed %s", ErrWire, d.off, what)
	}
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil || n < 0 || n > len(d.b)-d.off {
		d.fail(what)
		return nil
	}
	s := d.b[d.off : d.off+n]
	d.off += n
	return s
}

func (d *decoder) u16(what string) int {
	s := d.take(2, what)
	if s == nil {
		return 0
	}
	return int(binary.LittleEndian.Uint16(s))
}

func (d *decoder) u32(what string) int {
	s := d.take(4, what)
	if s == nil {
		return 0
	}
	return int(binary.LittleEndian.Uint32(s))
}

func (d *decoder) u64(what string) uint64 {
	s := d.take(8, what)
	if s == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(s)
}

func (d *decoder) str(what string) string { return string(d.take(d.u16(what), what)) }

// words4 takes the bytes of n 32-bit words (nil for 0 or on failure).
func (d *decoder) words4(n int, what string) []byte {
	if d.err != nil || n < 0 || n > (len(d.b)-d.off)/4 {
		d.fail(what)
		return nil
	}
	if s := d.take(4*n, what); n > 0 {
		return s
	}
	return nil
}

// words reads n little-endian 32-bit words, converted by conv; nil for 0.
func words[T any](d *decoder, n int, what string, conv func(uint32) T) []T {
	s := d.words4(n, what)
	if s == nil {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = conv(binary.LittleEndian.Uint32(s[4*i:]))
	}
	return out
}

func (d *decoder) floats(n int, what string) []float32 {
	s := d.words4(n, what)
	if s == nil {
		return nil
	}
	if d.borrow {
		if v := borrowFloats(s); v != nil {
			return v
		}
	}
	return decodeFloats(s)
}

func (d *decoder) u32s(n int, what string) []uint32 {
	return words(d, n, what, func(v uint32) uint32 { return v })
}

// Decode parses a message. It checks framing, version, checksum and sizes;
// the core's Step checks the contents against the job.
func Decode(b []byte, lim DecodeLimits) (*Message, error) {
	maxBytes := lim.MaxBytes
	if maxBytes == 0 {
		maxBytes = defaultMaxBytes
	}
	if len(b) > maxBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds the %d-byte limit", ErrWire, len(b), maxBytes)
	}
	if len(b) < 4+2+4 {
		return nil, fmt.Errorf("%w: %d bytes is too short", ErrWire, len(b))
	}
	if [4]byte(b[:4]) != wireMagic {
		return nil, fmt.Errorf("%w: byte 0: bad magic %q", ErrWire, b[:4])
	}
	if b[4] != WireVersion {
		return nil, fmt.Errorf("%w: byte 4: version %d, this node speaks %d", ErrWire, b[4], WireVersion)
	}
	body := b[:len(b)-4]
	if !lim.SkipChecksum {
		if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
			return nil, fmt.Errorf("%w: checksum mismatch (%08x, trailer says %08x)", ErrWire, got, want)
		}
	}
	d := &decoder{b: body, off: 5, borrow: lim.Borrow}
	m := &Message{}
	m.Kind = Kind(d.take(1, "kind")[0])
	if _, ok := kindNames[m.Kind]; !ok {
		return nil, fmt.Errorf("%w: byte 5: unknown kind %d", ErrWire, m.Kind)
	}
	m.Round = d.u64("round")
	m.Age = math.Float64frombits(d.u64("age"))
	m.Weight = math.Float64frombits(d.u64("weight"))
	m.Sent = math.Float64frombits(d.u64("sent"))
	m.From = PeerID(d.str("sender"))
	m.Params = d.floats(d.u32("parameter count"), "parameters")
	m.Indices = d.u32s(d.u32("index count"), "indices")
	m.Partition = uint32(d.u32("partition"))
	nf := d.u16("factor count")
	for i := 0; i < nf && d.err == nil; i++ {
		f := model.Factors{Weight: d.str("factor name")}
		f.K, f.J, f.D = d.u32("factor K"), d.u32("factor J"), d.u32("factor D")
		if int64(f.K)*int64(f.J+f.D)*4 > int64(len(d.b)) {
			d.fail("factor shape")
			break
		}
		f.U = d.floats(f.K*f.J, "factor U")
		f.V = d.floats(f.K*f.D, "factor V")
		m.Factors = append(m.Factors, f)
	}
	nv := d.u16("view count")
	for i := 0; i < nv && d.err == nil; i++ {
		id := PeerID(d.str("view entry"))
		m.View = append(m.View, Descriptor{ID: id, Age: int64(d.u64("view entry age"))})
	}
	if np := d.u32("packed length"); np > 0 && d.err == nil {
		raw := d.take(np, "packed vector")
		if d.err == nil {
			p, err := compress.Decode(raw, 1<<30) // allocations are bounded by the bytes; the core checks the length
			if err != nil {
				return nil, fmt.Errorf("%w: byte %d: %w", ErrWire, d.off-np, err)
			}
			m.Packed = p
		}
	}
	if ns := d.u32("secure length"); d.err == nil {
		if ns > len(d.b)-d.off {
			d.fail("secure section")
		} else {
			d.secure(m, ns)
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.off != len(body) {
		return nil, fmt.Errorf("%w: byte %d: %d bytes of trailing data", ErrWire, d.off, len(body)-d.off)
	}
	return m, nil
}
