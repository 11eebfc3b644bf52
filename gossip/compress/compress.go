// Package compress shrinks the parameter vectors peers exchange: float16
// (fp16), 8-bit integers with a scale per chunk (int8), the largest
// fraction F of the coordinates by magnitude (topk:F) or a random fraction
// F (randk:F). It is pure and deterministic, like the protocol core that
// uses it: randomness comes from the caller's *rand.Rand.
//
// Compression loses information; Feedback keeps what was not sent (error
// feedback, as in CHOCO-SGD, DeMo and SparseLoCo) and adds it to the next
// vector sent to the same place, so that nothing is lost for good.
//
// A Payload is a compressed vector; AppendEncode and Decode give its
// bytes, and Decode validates everything (kinds, lengths, indices, finite
// values and scales) and says what is wrong.
package compress

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/gossipd/gossipd/model/compute"
)

// Kind is a compression method.
type Kind uint8

// Compression kinds.
const (
	None Kind = iota
	FP16
	Int8
	TopK
	RandK
	// RandKInt8 is rand-k with its values as int8 (a scale per
	// Int8Chunk kept values). Not a --compression name: random walk's
	// subsampling sends it under int8.
	RandKInt8
)

var kindNames = [...]string{None: "none", FP16: "fp16", Int8: "int8", TopK: "topk", RandK: "randk", RandKInt8: "randk-int8"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// ErrSpec marks a bad compression setting; ErrPayload a malformed
// compressed vector.
var (
	ErrSpec    = errors.New("compress: bad setting")
	ErrPayload = errors.New("compress: bad payload")
)

// Int8Chunk is how many values share one scale in int8 payloads.
const Int8Chunk = 256

// Spec is a compression setting.
type Spec struct {
	Kind Kind
	// Fraction is the share of coordinates topk and randk keep, in (0, 1].
	Fraction float64
}

func (s Spec) String() string {
	if s.Kind == TopK || s.Kind == RandK {
		return s.Kind.String() + ":" + strconv.FormatFloat(s.Fraction, 'g', -1, 64)
	}
	return s.Kind.String()
}

// Values lists the accepted settings, for flag help.
const Values = "none|fp16|int8|topk:F|randk:F"

// Parse reads a setting: none, fp16, int8, topk:F or randk:F with F in
// (0, 1].
func Parse(s string) (Spec, error) {
	name, arg, hasArg := strings.Cut(s, ":")
	for k, n := range kindNames {
		if n != name {
			continue
		}
		kind := Kind(k)
		if kind == TopK || kind == RandK {
			f, err := strconv.ParseFloat(arg, 64)
			if err != nil || !(f > 0 && f <= 1) {
				return Spec{}, fmt.Errorf("%w: %q: the fraction F of %s:F must be in (0, 1]", ErrSpec, s, name)
			}
			return Spec{Kind: kind, Fraction: f}, nil
		}
		if hasArg {
			return Spec{}, fmt.Errorf("%w: %q: %s takes no argument", ErrSpec, s, name)
		}
		return Spec{Kind: kind}, nil
	}
	return Spec{}, fmt.Errorf("%w: %q, want %s", ErrSpec, s, Values)
}

// Keep is how many of n coordinates topk and randk keep: ⌈F·n⌉, at least
// one of a non-empty vector.
func (s Spec) Keep(n int) int {
	if n == 0 {
		return 0
	}
	return min(n, max(1, int(math.Ceil(s.Fraction*float64(n)))))
}

// Payload is a compressed vector of N float32s. Which fields are set
// depends on Kind.
type Payload struct {
	Kind Kind
	N    int
	// Half holds fp16 values (FP16).
	Half []uint16
	// Scales holds one scale per Int8Chunk values and Bytes the values
	// (Int8): value i is Bytes[i]·Scales[i/Int8Chunk].
	Scales []float32
	Bytes  []int8
	// Indices (ascending) and Values are the kept coordinates (TopK,
	// RandK). RandK sends Seed instead of the indices: the receiver draws
	// the same ones (RandIndices).
	Indices []uint32
	Values  []float32
	Seed    uint64
	// Keep and IndexBytes, of a deferred TopK payload, are the number of
	// values kept and a function that gives the bytes of their indices'
	// encoding and true once the vector is made, or, with wait, after
	// making it (gossip.Mixer.Top).
	Keep       int
	IndexBytes func(wait bool) (int, bool)
	// Deferred, in a simulator only, is the vector the payload carries
	// before it is compressed: the receiver's mixer rounds it as the
	// payload would (gossip.Mixer.Quantize; FP16 and Int8), or, for
	// RandK, the vector already as its receivers decompress it (zero but
	// at the Indices drawn from Seed: gossip.Mixer.Mask). Half, Scales,
	// Bytes and Values stay empty, EncodedSize counts its bytes from N
	// (RandK: from the Indices), and it is never encoded nor
	// decompressed.
	Deferred []float32
}

// Compress writes x compressed under spec into p (reusing its slices).
// rng draws randk's seed; the other kinds do not use it.
func Compress(p *Payload, x []float32, spec Spec, rng *rand.Rand) {
	*p = Payload{Kind: spec.Kind, N: len(x), Half: p.Half[:0], Scales: p.Scales[:0], Bytes: p.Bytes[:0], Indices: p.Indices[:0], Values: p.Values[:0]}
	switch spec.Kind {
	case None:
		p.Values = append(p.Values, x...)
	case FP16:
		for _, v := range x {
			p.Half = append(p.Half, compute.ToHalf(v))
		}
	case Int8:
		p.Scales, p.Bytes = quantize8(p.Scales, p.Bytes, x)
	case TopK:
		topK(p, x, spec.Keep(len(x)))
	case RandK, RandKInt8:
		p.Seed = rng.Uint64()
		p.Indices = RandIndices(p.Indices, len(x), spec.Keep(len(x)), p.Seed)
		for _, i := range p.Indices {
			p.Values = append(p.Values, x[i])
		}
		p.Indices = p.Indices[:0] // not sent: the receiver draws them
		if spec.Kind == RandKInt8 {
			p.Scales, p.Bytes = quantize8(p.Scales, p.Bytes, p.Values)
			p.Values = p.Values[:0]
		}
	}
}

// topK keeps x's k largest magnitudes, ties to the lower index
// (compute.TopK: magnitudes by their bits, a NaN above +Inf).
func topK(p *Payload, x []float32, k int) {
	for i := range compute.TopK(x, k) {
		p.Indices = append(p.Indices, uint32(i))
		p.Values = append(p.Values, x[i])
	}
}

// quantize8 appends x as int8 with a scale per Int8Chunk values (the
// chunk's largest magnitude / 127: compute.Int8Scale, compute.ToInt8).
func quantize8(scales []float32, bytes []int8, x []float32) ([]float32, []int8) {
	for lo := 0; lo < len(x); lo += Int8Chunk {
		chunk := x[lo:min(lo+Int8Chunk, len(x))]
		scale := compute.Int8Scale(chunk)
		scales = append(scales, scale)
		for _, v := range chunk {
			bytes = append(bytes, compute.ToInt8(v, scale))
		}
	}
	return scales, bytes
}

// Sparse returns the coordinates a rand-k payload carries and their
// values (RandK, RandKInt8), drawn from its seed as the sender drew them.
// p must be valid (Decode checks).
func Sparse(p *Payload) ([]uint32, []float32) {
	k := len(p.Values)
	if p.Kind == RandKInt8 {
		k = len(p.Bytes)
	}
	idx := RandIndices(nil, p.N, k, p.Seed)
	if p.Kind == RandK {
		return idx, slices.Clone(p.Values)
	}
	vals := make([]float32, k)
	for j, q := range p.Bytes {
		vals[j] = float32(q) * p.Scales[j/Int8Chunk]
	}
	return idx, vals
}

// RandIndices appends to dst k distinct indices below n, ascending, drawn
// from seed (Floyd's algorithm on a PCG stream): sender and receiver of a
// randk payload get the same ones.
func RandIndices(dst []uint32, n, k int, seed uint64) []uint32 {
	rng := rand.New(rand.NewPCG(seed, 0x72616e646b))
	// The chosen set as a bitmap (n bits), read out in order: no map
	// and no sort (a CHOCO step of 10,000 indices drawn many times a
	// round).
	chosen := make([]uint64, (n+63)/64)
	for j := n - k; j < n; j++ {
		t := rng.IntN(j + 1)
		if chosen[t/64]&(1<<(t%64)) != 0 {
			t = j
		}
		chosen[t/64] |= 1 << (t % 64)
	}
	dst = slices.Grow(dst, k)
	for w, bitsOf := range chosen {
		for bitsOf != 0 {
			b := bits.TrailingZeros64(bitsOf)
			dst = append(dst, uint32(w*64+b))
			bitsOf &= bitsOf - 1
		}
	}
	return dst
}

// Settle makes a deferred payload (Deferred) one that can be encoded:
// fp16 and int8 compressed from its vector (they draw no randomness),
// rand-k's kept values read at its indices, which the receiver draws
// again from Seed. A payload that is not deferred is left as it is.
func Settle(p *Payload) {
	switch d := p.Deferred; {
	case d == nil:
	case p.Kind == RandK:
		vals := make([]float32, len(p.Indices))
		for k, i := range p.Indices {
			vals[k] = d[i]
		}
		p.Values, p.Indices, p.Deferred = vals, nil, nil
	case p.Kind == TopK: // d keeps the same coordinates as the vector it was cut from
		k := min(len(d), max(1, p.Keep))
		*p = Payload{Kind: TopK, N: p.N}
		topK(p, d, k)
	default:
		Compress(p, d, Spec{Kind: p.Kind}, nil)
	}
}

// Decompress writes p's vector into dst (len p.N): coordinates a sparse
// payload does not carry are 0. p must be valid (Decode checks).
func Decompress(dst []float32, p *Payload) {
	if p.Deferred != nil {
		panic("compress: Decompress of a deferred payload")
	}
	if len(dst) != p.N {
		panic(fmt.Sprintf("compress: destination holds %d values, payload %d", len(dst), p.N))
	}
	switch p.Kind {
	case None:
		copy(dst, p.Values)
	case FP16:
		for i, h := range p.Half {
			dst[i] = compute.FromHalf(h)
		}
	case Int8:
		for i, q := range p.Bytes {
			dst[i] = float32(q) * p.Scales[i/Int8Chunk]
		}
	case TopK, RandK:
		clear(dst)
		idx := p.Indices
		if p.Kind == RandK {
			idx = RandIndices(nil, p.N, len(p.Values), p.Seed)
		}
		for j, i := range idx {
			dst[i] = p.Values[j]
		}
	case RandKInt8:
		clear(dst)
		idx, vals := Sparse(p)
		for j, i := range idx {
			dst[i] = vals[j]
		}
	}
}
