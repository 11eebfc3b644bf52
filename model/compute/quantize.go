package compute

import (
	"fmt"
	"math"
)

// The arithmetic of the quantized vectors gossip sends
// (gossip/compress's fp16 and int8), here so that QuantizeRows computes a
// vector's round trip on any backend with the host's bits.

// Quantization is what QuantizeRows rounds a row to.
type Quantization int

const (
	// QuantFP16 rounds each value to the nearest binary16 (ToHalf) and
	// back.
	QuantFP16 Quantization = iota + 1
	// QuantInt8 rounds each value to an 8-bit integer times its chunk's
	// scale (Int8Scale, ToInt8) and back.
	QuantInt8
)

// ToHalf rounds a float32 to the nearest IEEE 754 binary16 (ties to even):
// magnitudes past 65504 become ±Inf, tiny ones subnormal or ±0, NaN stays
// NaN.
func ToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b >> 23) & 0xff)
	mant := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15: // overflow
		return sign | 0x7c00
	case exp-127 >= -14: // normal
		h := uint32(exp-127+15)<<10 | mant>>13
		rest := mant & 0x1fff
		if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++ // may carry into the exponent, up to Inf: still right
		}
		return sign | uint16(h)
	case exp-127 >= -25: // subnormal half
		m := mant | 0x800000 // the implicit bit
		shift := uint(-14-(exp-127)) + 13
		h := m >> shift
		rest := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	return sign // underflow to ±0
}

// FromHalf widens a binary16 to float32 exactly.
func FromHalf(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: mant·2^-24.
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// Int8Scale is the scale of a chunk of values quantized to int8: its
// largest magnitude / 127, in float32 (NaN if a value is NaN, as Go's
// max gives).
func Int8Scale(chunk []float32) float32 {
	var mx float32
	for _, v := range chunk {
		mx = max(mx, abs32(v))
	}
	return mx / 127
}

// ToInt8 is v quantized at scale: v/scale in float32, rounded half away
// from zero (0 where scale is 0).
func ToInt8(v, scale float32) int8 {
	if scale > 0 {
		return int8(math.Round(float64(v / scale)))
	}
	return 0
}

// abs32 is |v|, by clearing the sign bit.
func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// RoundTrip sets dst to x rounded as q rounds it and widened back, chunk
// values sharing an int8 scale: what a receiver of x sent quantized
// decompresses.
func RoundTrip(dst, x []float32, q Quantization, chunk int) {
	switch q {
	case QuantFP16:
		for i, v := range x {
			dst[i] = FromHalf(ToHalf(v))
		}
	case QuantInt8:
		for lo := 0; lo < len(x); lo += chunk {
			c := x[lo:min(lo+chunk, len(x))]
			scale := Int8Scale(c)
			for i, v := range c {
				dst[lo+i] = float32(ToInt8(v, scale)) * scale
			}
		}
	default:
		panic(fmt.Sprintf("compute: RoundTrip to quantization %d", q))
	}
}

// CheckQuantize panics unless a QuantizeRows call's lists agree and lie
// in its matrices, and q and chunk are valid.
func CheckQuantize(dst, src Tensor, n int, rows, from []int32, q Quantization, chunk int) {
	CheckRows("QuantizeRows", dst, n, rows)
	CheckRows("QuantizeRows", src, n, from)
	if len(rows) != len(from) || (q != QuantFP16 && q != QuantInt8) || chunk <= 0 {
		panic(fmt.Sprintf("compute: QuantizeRows: %d rows, %d sources, quantization %d, chunks of %d", len(rows), len(from), q, chunk))
	}
}

// QuantizeRows implements Rows.
func (c *CPU) QuantizeRows(dt, st Tensor, n int, rows, from []int32, q Quantization, chunk int) {
	CheckQuantize(dt, st, n, rows, from, q, chunk)
	x, s := host(dt), host(st)
	ForEach(len(rows), c.rowWorkers(len(rows), n), func(i int) {
		RoundTrip(x[int(rows[i])*n:][:n], s[int(from[i])*n:][:n], q, chunk)
	})
}

// CheckMask panics unless a MaskRows call's lists agree and lie in its
// matrices, and each row's indices ascend below n.
func CheckMask(dst, src Tensor, n int, rows, start, from, keep []int32) {
	CheckRows("MaskRows", dst, n, rows)
	CheckRows("MaskRows", src, n, from)
	if len(rows) != len(from) || len(start) != len(rows)+1 || start[0] != 0 || int(start[len(rows)]) != len(keep) {
		panic(fmt.Sprintf("compute: MaskRows: %d rows, %d sources, %d starts, %d indices", len(rows), len(from), len(start), len(keep)))
	}
	for i := range rows {
		lo, hi := start[i], start[i+1]
		if lo > hi || int(hi) > len(keep) {
			panic(fmt.Sprintf("compute: MaskRows: row %d's indices %d to %d of %d", i, lo, hi, len(keep)))
		}
		for k := lo; k < hi; k++ {
			if keep[k] < 0 || int(keep[k]) >= n || (k > lo && keep[k] <= keep[k-1]) {
				panic(fmt.Sprintf("compute: MaskRows: row %d keeps index %d, not ascending below %d", i, keep[k], n))
			}
		}
	}
}

// MaskRows implements Rows.
func (c *CPU) MaskRows(dt, st Tensor, n int, rows, start, from, keep []int32) {
	CheckMask(dt, st, n, rows, start, from, keep)
	x, s := host(dt), host(st)
	ForEach(len(rows), c.rowWorkers(len(rows), n), func(i int) {
		d, v := x[int(rows[i])*n:][:n], s[int(from[i])*n:][:n]
		ks := keep[start[i]:start[i+1]]
		j := 0
		for _, k := range ks { // in place too: each value read before it is written
			clear(d[j:k])
			d[k] = v[k]
			j = int(k) + 1
		}
		clear(d[j:])
	})
}
