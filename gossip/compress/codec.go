package compress

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gossipd/gossipd/model/compute"
)

// The encoding, little-endian:
//
//	kind u8 | n u32
//	none:  n f32
//	fp16:  n u16
//	int8:  ⌈n/Int8Chunk⌉ scales f32, then n i8
//	topk:  k u32, k indices as uvarint gaps (the first index, then each
//	       index minus the previous one minus 1), k f32
//	randk: seed u64 | k u32 | k f32
//	randk-int8: seed u64 | k u32 | ⌈k/Int8Chunk⌉ scales f32 | k i8

// EncodedSize is the length of p's encoding: the bytes on the wire (of
// a deferred top-k payload, its indices' bytes once known: IndexBytes).
func EncodedSize(p *Payload) int {
	n, later := EncodedSizeLater(p)
	if later != nil {
		b, _ := later(true)
		n += b
	}
	return n
}

// LateBytesAtLeast is the least that EncodedSizeLater's function can
// give for p: a byte for each kept index of a deferred top-k vector
// (each gap a uvarint of at least one byte), else 0.
func LateBytesAtLeast(p *Payload) int {
	if p.Kind == TopK && p.Deferred != nil {
		return p.Keep
	}
	return 0
}

// EncodedSizeLater is EncodedSize without waiting for a deferred top-k
// payload's vector: the bytes known now and, for such a payload, the
// function that gives the rest (its indices' bytes; nil for any other).
func EncodedSizeLater(p *Payload) (int, func(wait bool) (int, bool)) {
	n := 5
	switch p.Kind {
	case None:
		n += 4 * p.N
	case FP16:
		n += 2 * p.N
	case Int8:
		scales := len(p.Scales)
		if p.Deferred != nil {
			scales = (p.N + Int8Chunk - 1) / Int8Chunk
		}
		n += 4*scales + p.N
	case TopK:
		if p.Deferred != nil {
			return n + 4 + 4*p.Keep, p.IndexBytes
		}
		n += 4 + 4*len(p.Values)
		prev := -1
		for _, i := range p.Indices {
			n += compute.UvarintLen(uint64(int(i) - prev - 1))
			prev = int(i)
		}
	case RandK:
		k := len(p.Values)
		if p.Deferred != nil {
			k = len(p.Indices)
		}
		n += 12 + 4*k
	case RandKInt8:
		n += 12 + 4*len(p.Scales) + len(p.Bytes)
	}
	return n, nil
}

// AppendEncode appends p's encoding to dst.
func AppendEncode(dst []byte, p *Payload) []byte {
	if p.Deferred != nil {
		panic("compress: AppendEncode of a deferred payload")
	}
	le := binary.LittleEndian
	dst = append(dst, byte(p.Kind))
	dst = le.AppendUint32(dst, uint32(p.N))
	f32s := func(v []float32) {
		for _, x := range v {
			dst = le.AppendUint32(dst, math.Float32bits(x))
		}
	}
	switch p.Kind {
	case None:
		f32s(p.Values)
	case FP16:
		for _, h := range p.Half {
			dst = le.AppendUint16(dst, h)
		}
	case Int8:
		f32s(p.Scales)
		for _, q := range p.Bytes {
			dst = append(dst, byte(q))
		}
	case TopK:
		dst = le.AppendUint32(dst, uint32(len(p.Indices)))
		prev := -1
		for _, i := range p.Indices {
			dst = binary.AppendUvarint(dst, uint64(int(i)-prev-1))
			prev = int(i)
		}
		f32s(p.Values)
	case RandK:
		dst = le.AppendUint64(dst, p.Seed)
		dst = le.AppendUint32(dst, uint32(len(p.Values)))
		f32s(p.Values)
	case RandKInt8:
		dst = le.AppendUint64(dst, p.Seed)
		dst = le.AppendUint32(dst, uint32(len(p.Bytes)))
		f32s(p.Scales)
		for _, q := range p.Bytes {
			dst = append(dst, byte(q))
		}
	}
	return dst
}

// Decode reads a payload of at most maxN values from b, which must hold
// exactly one. Everything is checked: the kind, the lengths against the
// bytes there are, topk's indices (ascending, below n), and that every
// value and scale is finite (scales also not negative). Errors wrap
// ErrPayload and say what is wrong and where.
func Decode(b []byte, maxN int) (*Payload, error) {
	bad := func(format string, args ...any) (*Payload, error) {
		return nil, fmt.Errorf("%w: %s", ErrPayload, fmt.Sprintf(format, args...))
	}
	if len(b) < 5 {
		return bad("%d bytes, shorter than the 5-byte header", len(b))
	}
	le := binary.LittleEndian
	p := &Payload{Kind: Kind(b[0]), N: int(le.Uint32(b[1:5]))}
	if p.Kind > RandKInt8 {
		return bad("unknown kind %d", b[0])
	}
	if p.N > maxN {
		return bad("%d values, more than the %d allowed", p.N, maxN)
	}
	r := b[5:]
	need := func(n int) bool { return len(r) >= n }
	f32s := func(k int, what string) ([]float32, error) {
		if !need(4 * k) {
			return nil, fmt.Errorf("%w: %s: %d values need %d bytes, %d left", ErrPayload, what, k, 4*k, len(r))
		}
		out := make([]float32, k)
		for i := range out {
			v := math.Float32frombits(le.Uint32(r[4*i:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("%w: %s: value %d is %v", ErrPayload, what, i, v)
			}
			out[i] = v
		}
		r = r[4*k:]
		return out, nil
	}
	var err error
	switch p.Kind {
	case None:
		if p.Values, err = f32s(p.N, "values"); err != nil {
			return nil, err
		}
	case FP16:
		if !need(2 * p.N) {
			return bad("fp16: %d values need %d bytes, %d left", p.N, 2*p.N, len(r))
		}
		p.Half = make([]uint16, p.N)
		for i := range p.Half {
			h := le.Uint16(r[2*i:])
			if h&0x7c00 == 0x7c00 {
				return bad("fp16: value %d is not finite (%#04x)", i, h)
			}
			p.Half[i] = h
		}
		r = r[2*p.N:]
	case Int8:
		chunks := (p.N + Int8Chunk - 1) / Int8Chunk
		if p.Scales, err = f32s(chunks, "int8 scales"); err != nil {
			return nil, err
		}
		for i, s := range p.Scales {
			if s < 0 {
				return bad("int8: scale %d is negative (%v)", i, s)
			}
		}
		if !need(p.N) {
			return bad("int8: %d values need %d bytes, %d left", p.N, p.N, len(r))
		}
		p.Bytes = make([]int8, p.N)
		for i := range p.Bytes {
			p.Bytes[i] = int8(r[i])
		}
		r = r[p.N:]
	case TopK:
		if len(r) < 4 {
			return bad("topk: no count")
		}
		k := int(le.Uint32(r))
		r = r[4:]
		if k > p.N {
			return bad("topk: %d indices for %d values", k, p.N)
		}
		if k > len(r) { // each index takes at least a byte
			return bad("topk: %d indices, %d bytes left", k, len(r))
		}
		p.Indices = make([]uint32, k)
		next := 0
		for j := range k {
			gap, n := binary.Uvarint(r)
			if n <= 0 || n != compute.UvarintLen(gap) {
				return bad("topk: index %d is not a minimal varint", j)
			}
			r = r[n:]
			if gap >= uint64(p.N) || next+int(gap) >= p.N {
				return bad("topk: index %d lies past %d values", j, p.N)
			}
			i := next + int(gap)
			p.Indices[j] = uint32(i)
			next = i + 1
		}
		if p.Values, err = f32s(k, "topk values"); err != nil {
			return nil, err
		}
	case RandK, RandKInt8:
		if len(r) < 12 {
			return bad("%s: %d bytes, need 12 for seed and count", p.Kind, len(r))
		}
		p.Seed = le.Uint64(r)
		k := int(le.Uint32(r[8:]))
		r = r[12:]
		if k > p.N {
			return bad("%s: %d values kept of %d", p.Kind, k, p.N)
		}
		if p.Kind == RandK {
			if p.Values, err = f32s(k, "randk values"); err != nil {
				return nil, err
			}
			break
		}
		if p.Scales, err = f32s((k+Int8Chunk-1)/Int8Chunk, "randk-int8 scales"); err != nil {
			return nil, err
		}
		for i, s := range p.Scales {
			if s < 0 {
				return bad("randk-int8: scale %d is negative (%v)", i, s)
			}
		}
		if !need(k) {
			return bad("randk-int8: %d values need %d bytes, %d left", k, k, len(r))
		}
		p.Bytes = make([]int8, k)
		for i := range p.Bytes {
			p.Bytes[i] = int8(r[i])
		}
		r = r[k:]
	}
	if len(r) != 0 {
		return bad("%d bytes after the %s payload", len(r), p.Kind)
	}
	return p, nil
}
