package secagg

import (
	"errors"
	"fmt"
	"math"
)

// ErrParams marks ring parameters that cannot encode a sum safely.
var ErrParams = errors.New("secagg: invalid parameters")

// Ring is the fixed-point encoding: a value v, clipped to [−Clip, Clip],
// becomes round(v·Scale) modulo 2³². A sum of up to MaxTerms encoded
// values decodes exactly to the sum of the rounded values: the error of
// a sum of k terms is at most k/(2·Scale) per coordinate, beside the
// clipping.
type Ring struct {
	// Scale is the fixed-point scale (default 2²⁰: steps of about 1e-6).
	Scale float64
	// Clip bounds each encoded value (default 64).
	Clip float64
}

// Defaults for Ring's zero fields.
const (
	DefaultScale = 1 << 20
	DefaultClip  = 64
)

// WithDefaults returns r with its zero fields set to the defaults.
func (r Ring) WithDefaults() Ring {
	if r.Scale == 0 {
		r.Scale = DefaultScale
	}
	if r.Clip == 0 {
		r.Clip = DefaultClip
	}
	return r
}

// MaxTerms is how many encoded values may be summed before the sum
// could leave the signed range of 32 bits.
func (r Ring) MaxTerms() int {
	per := math.Round(r.Clip * r.Scale)
	if per < 1 {
		return math.MaxInt32
	}
	return int(math.Floor((math.MaxInt32 - 1) / per))
}

// Validate checks that the ring can encode a sum of terms values.
func (r Ring) Validate(terms int) error {
	switch {
	case !(r.Scale > 0) || math.IsInf(r.Scale, 0):
		return fmt.Errorf("%w: scale %v, want > 0", ErrParams, r.Scale)
	case !(r.Clip > 0) || math.IsInf(r.Clip, 0):
		return fmt.Errorf("%w: clip %v, want > 0", ErrParams, r.Clip)
	case r.Clip*r.Scale < 1:
		return fmt.Errorf("%w: clip %v × scale %v < 1: every value would encode as 0", ErrParams, r.Clip, r.Scale)
	case terms > r.MaxTerms():
		return fmt.Errorf("%w: a sum of %d values clipped to %v at scale %v can overflow 32 bits (at most %d)", ErrParams, terms, r.Clip, r.Scale, r.MaxTerms())
	}
	return nil
}

// Encode sets dst to the encoding of w·x (w a mixing weight): each value
// clipped to [−Clip, Clip], then rounded to the nearest step. It returns
// how many values were clipped.
func (r Ring) Encode(dst []uint32, x []float32, w float64) int {
	if len(dst) != len(x) {
		panic(fmt.Sprintf("secagg: Encode of %d values into %d", len(x), len(dst)))
	}
	clipped := 0
	for i, v := range x {
		f := w * float64(v)
		if f > r.Clip || f < -r.Clip || math.IsNaN(f) {
			clipped++
			switch {
			case math.IsNaN(f):
				f = 0
			case f > 0:
				f = r.Clip
			default:
				f = -r.Clip
			}
		}
		q := math.RoundToEven(f * r.Scale)
		q = max(math.MinInt32, min(math.MaxInt32, q)) // only reached with Clip·Scale ≥ 2³¹, which Validate refuses
		dst[i] = uint32(int32(q))
	}
	return clipped
}

// Decode sets dst to the values a sum of encodings stands for (its
// words read as signed 32-bit integers, over Scale).
func (r Ring) Decode(dst []float32, sum []uint32) {
	if len(dst) != len(sum) {
		panic(fmt.Sprintf("secagg: Decode of %d values into %d", len(sum), len(dst)))
	}
	for i, v := range sum {
		dst[i] = float32(float64(int32(v)) / r.Scale)
	}
}

// Add sets dst to dst + v modulo 2³².
func Add(dst, v []uint32) {
	if len(dst) != len(v) {
		panic(fmt.Sprintf("secagg: Add of %d values to %d", len(v), len(dst)))
	}
	for i, x := range v {
		dst[i] += x
	}
}

// MinUnmaskedCheck is the least length of a contribution LooksUnmasked
// judges: below it a masked vector falls in the clipping band too often
// by chance.
const MinUnmaskedCheck = 32

// LooksUnmasked reports whether a contribution of at least
// MinUnmaskedCheck values was sent without its masks: more than half of
// them encode values within the clipping bound. A masked value is
// uniform on the ring and lands in that band with probability
// 2·Clip·Scale/2³² (1/32 at the defaults), so a masked vector of 32
// values passes as unmasked with probability below 10⁻¹⁵; an encoded,
// unmasked one is all in the band.
func (r Ring) LooksUnmasked(v []uint32) bool {
	if len(v) < MinUnmaskedCheck {
		return false
	}
	band := uint32(min(math.Round(r.Clip*r.Scale), math.MaxInt32))
	in := 0
	for _, x := range v {
		if x <= band || x >= -band {
			in++
		}
	}
	return 2*in > len(v)
}
