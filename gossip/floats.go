package gossip

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// littleEndian reports whether this machine stores float32 little-endian,
// as the wire does; then float vectors convert with one bulk copy.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// appendFloats appends v in little-endian order.
func appendFloats(b []byte, v []float32) []byte {
	if len(v) == 0 {
		return b
	}
	if littleEndian {
		return append(b, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))...)
	}
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// decodeFloats converts len(s)/4 little-endian floats.
func decodeFloats(s []byte) []float32 {
	out := make([]float32, len(s)/4)
	if len(out) == 0 {
		return out
	}
	if littleEndian {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(s)), s)
		return out
	}
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(s[4*i:]))
	}
	return out
}

// borrowFloats views s as little-endian floats without copying, or returns
// nil when it cannot (big-endian host, or s not 4-byte aligned).
func borrowFloats(s []byte) []float32 {
	if !littleEndian || len(s) < 4 || uintptr(unsafe.Pointer(&s[0]))%4 != 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&s[0])), len(s)/4)
}

// Borrows reports whether a message decoded from b with DecodeLimits.Borrow
// shares its parameter vector with b's memory (it does where the vector is
// 4-byte aligned on a little-endian host). A message without parameters
// borrows nothing.
func Borrows(m *Message, b []byte) bool {
	if len(m.Params) == 0 || len(b) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(&m.Params[0]))
	lo := uintptr(unsafe.Pointer(&b[0]))
	return p >= lo && p < lo+uintptr(len(b))
}
