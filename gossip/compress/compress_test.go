package compress

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/model/compute"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Spec{"none": {}, "fp16": {Kind: FP16}, "int8": {Kind: Int8}, "topk:0.01": {Kind: TopK, Fraction: 0.01}, "randk:1": {Kind: RandK, Fraction: 1}} {
		got, err := Parse(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("Parse(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "topk", "topk:0", "topk:1.5", "topk:x", "randk:-1", "fp16:2", "zip", "int8:", "topk:NaN"} {
		if _, err := Parse(in); !errors.Is(err, ErrSpec) {
			t.Errorf("Parse(%q): err %v, want ErrSpec", in, err)
		}
	}
}

// TestHalf: every binary16 value widens and narrows back to itself, and
// narrowing rounds to the nearest half (ties to even).
func TestHalf(t *testing.T) {
	for h := range 1 << 16 {
		f := compute.FromHalf(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := compute.ToHalf(f); back != uint16(h) {
			t.Fatalf("half %#04x → %v → %#04x", h, f, back)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		f := math.Float32frombits(rng.Uint32())
		if math.IsNaN(float64(f)) {
			if h := compute.ToHalf(f); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
				t.Fatalf("NaN → %#04x", h)
			}
			continue
		}
		if rng.IntN(2) == 0 { // mostly values in fp16's range
			f = float32(math.Ldexp(float64(f)/math.Pow(2, float64(math.Ilogb(float64(f)))), rng.IntN(40)-26))
		}
		h := compute.ToHalf(f)
		got := float64(compute.FromHalf(h))
		if math.IsInf(got, 0) != (math.Abs(float64(f)) >= 65520) {
			t.Fatalf("compute.ToHalf(%v) = %v: overflow starts at 65520", f, got)
		}
		if math.IsInf(got, 0) {
			continue
		}
		for _, nb := range []uint16{h - 1, h + 1} {
			if nb&0x7c00 == 0x7c00 || (nb^h)&0x8000 != 0 {
				continue
			}
			alt := float64(compute.FromHalf(nb))
			d, da := math.Abs(got-float64(f)), math.Abs(alt-float64(f))
			if da < d || (da == d && h&1 == 1) {
				t.Fatalf("compute.ToHalf(%v) = %v, but %v is nearer (or even)", f, got, alt)
			}
		}
	}
}

func randVec(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
	}
	return x
}

// TestRoundTrip compresses, encodes, decodes and decompresses vectors of
// several lengths with every kind, and checks each kind's error bound and
// the byte count.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range []string{"none", "fp16", "int8", "topk:0.01", "topk:0.3", "randk:0.05", "randk:1"} {
		spec, _ := Parse(s)
		for _, n := range []int{0, 1, 2, 255, 256, 257, 1000, 7850} {
			x := randVec(rng, n)
			var p Payload
			Compress(&p, x, spec, rng)
			b := AppendEncode(nil, &p)
			if len(b) != EncodedSize(&p) {
				t.Fatalf("%s n=%d: %d bytes, EncodedSize says %d", s, n, len(b), EncodedSize(&p))
			}
			q, err := Decode(b, n)
			if err != nil {
				t.Fatalf("%s n=%d: %v", s, n, err)
			}
			got := make([]float32, n)
			Decompress(got, q)
			switch spec.Kind {
			case None:
				if !slices.Equal(got, x) {
					t.Fatalf("none changed the vector")
				}
			case FP16:
				for i, v := range x {
					if math.Abs(float64(got[i]-v)) > math.Abs(float64(v))/2048+6e-8 && math.Abs(float64(v)) < 65504 {
						t.Fatalf("fp16: %v → %v", v, got[i])
					}
				}
			case Int8:
				for i, v := range x {
					if d := math.Abs(float64(got[i] - v)); d > float64(q.Scales[i/Int8Chunk])/2*1.0001 {
						t.Fatalf("int8: %v → %v, scale %v", v, got[i], q.Scales[i/Int8Chunk])
					}
				}
			case TopK, RandK:
				k := spec.Keep(n)
				kept := 0
				var minKept, maxDropped float64 = math.Inf(1), 0
				for i, v := range x {
					if got[i] != 0 || (v == 0 && slices.Contains(q.Indices, uint32(i))) {
						kept++
						if got[i] != v {
							t.Fatalf("%s: kept coordinate %d changed: %v → %v", s, i, v, got[i])
						}
						minKept = min(minKept, math.Abs(float64(v)))
					} else {
						maxDropped = max(maxDropped, math.Abs(float64(v)))
					}
				}
				if kept != k {
					t.Fatalf("%s n=%d: kept %d, want %d", s, n, kept, k)
				}
				if spec.Kind == TopK && kept > 0 && kept < n && minKept < maxDropped {
					t.Fatalf("topk kept %v but dropped %v", minKept, maxDropped)
				}
			}
		}
	}
}

// TestFeedbackLosesNothing: what error feedback sends over many rounds,
// plus its final residual, adds up to what it was given.
func TestFeedbackLosesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range []string{"topk:0.01", "randk:0.1", "int8", "fp16"} {
		spec, _ := Parse(s)
		const n = 3000
		var f Feedback
		var p Payload
		in, out := make([]float64, n), make([]float64, n)
		sent := make([]float32, n)
		for range 50 {
			x := randVec(rng, n)
			for i, v := range x {
				in[i] += float64(v)
			}
			f.Compress(&p, x, spec, rng)
			Decompress(sent, &p)
			for i, v := range sent {
				out[i] += float64(v)
			}
		}
		for i, r := range f.Residual() {
			if d := math.Abs(out[i] + float64(r) - in[i]); d > 1e-3*(1+math.Abs(in[i])) {
				t.Fatalf("%s: coordinate %d: sent %v + residual %v ≠ given %v", s, i, out[i], r, in[i])
			}
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	le := func(b ...byte) []byte { return b }
	good := AppendEncode(nil, &Payload{Kind: TopK, N: 10, Indices: []uint32{2, 7}, Values: []float32{1, -2}})
	if _, err := Decode(good, 10); err != nil {
		t.Fatal(err)
	}
	nan := AppendEncode(nil, &Payload{Kind: None, N: 2, Values: []float32{1, float32(math.NaN())}})
	neg := AppendEncode(nil, &Payload{Kind: Int8, N: 2, Scales: []float32{-1}, Bytes: []int8{1, 2}})
	past := AppendEncode(nil, &Payload{Kind: TopK, N: 10, Indices: []uint32{2, 12}, Values: []float32{1, 2}})
	inf16 := AppendEncode(nil, &Payload{Kind: FP16, N: 1, Half: []uint16{0x7c00}})
	for _, c := range []struct {
		b    []byte
		max  int
		want string
	}{
		{le(1, 2), 10, "shorter than"},
		{le(9, 0, 0, 0, 0), 10, "unknown kind 9"},
		{le(0, 100, 0, 0, 0), 10, "more than the 10 allowed"},
		{good[:len(good)-1], 10, "topk values"},
		{append(slices.Clone(good), 0), 10, "1 bytes after"},
		{nan, 10, "value 1 is NaN"},
		{neg, 10, "scale 0 is negative"},
		{past, 10, "index 1 lies past 10"},
		{inf16, 10, "not finite"},
		{le(4, 5, 0, 0, 0, 1, 2, 3), 10, "need 12"},
	} {
		_, err := Decode(c.b, c.max)
		if !errors.Is(err, ErrPayload) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(% x): %v, want %q", c.b, err, c.want)
		}
	}
}

// FuzzDecode: no input panics Decode or Decompress, and what decodes
// encodes back to a payload that decodes the same.
func FuzzDecode(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range []string{"none", "fp16", "int8", "topk:0.2", "randk:0.2"} {
		spec, _ := Parse(s)
		var p Payload
		Compress(&p, randVec(rng, 300), spec, rng)
		f.Add(AppendEncode(nil, &p))
	}
	var p8 Payload
	Compress(&p8, randVec(rng, 300), Spec{Kind: RandKInt8, Fraction: 0.2}, rng)
	f.Add(AppendEncode(nil, &p8))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b, 1<<16)
		if err != nil {
			if !errors.Is(err, ErrPayload) {
				t.Fatalf("error %v does not wrap ErrPayload", err)
			}
			return
		}
		out := make([]float32, p.N)
		Decompress(out, p)
		again, err := Decode(AppendEncode(nil, p), 1<<16)
		if err != nil {
			t.Fatalf("re-encoded payload: %v", err)
		}
		if !bytes.Equal(AppendEncode(nil, again), AppendEncode(nil, p)) {
			t.Fatal("re-encoding changed the payload")
		}
	})
}

// TestTopKTies: top-k by selection keeps exactly what a stable sort by
// decreasing magnitude keeps (ties to the lower index), on vectors with
// many equal magnitudes.
func TestTopKTies(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for trial := range 300 {
		n := 1 + rng.IntN(200)
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.IntN(7) - 3) // magnitudes 0..3, signs
		}
		spec := Spec{Kind: TopK, Fraction: rng.Float64()}
		k := spec.Keep(n)
		idx := make([]uint32, n)
		for i := range idx {
			idx[i] = uint32(i)
		}
		slices.SortStableFunc(idx, func(a, b uint32) int {
			return cmpDesc(math.Abs(float64(x[a])), math.Abs(float64(x[b])))
		})
		want := slices.Clone(idx[:k])
		slices.Sort(want)
		var p Payload
		Compress(&p, x, spec, nil)
		if !slices.Equal(p.Indices, want) {
			t.Fatalf("trial %d, n %d, k %d: kept %v, want %v", trial, n, k, p.Indices, want)
		}
	}
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// TestRandKInt8: rand-k with int8 values carries the coordinates its seed
// draws, each within half a scale step, in 1 byte a value (plus a scale
// per 256); malformed ones are refused.
func TestRandKInt8(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	x := randVec(rng, 1000)
	var p Payload
	Compress(&p, x, Spec{Kind: RandKInt8, Fraction: 0.1}, rng)
	b := AppendEncode(nil, &p)
	if len(b) != EncodedSize(&p) || len(b) != 5+12+4+100 {
		t.Fatalf("%d bytes (EncodedSize %d), want %d", len(b), EncodedSize(&p), 5+12+4+100)
	}
	q, err := Decode(b, 1000)
	if err != nil {
		t.Fatal(err)
	}
	idx, vals := Sparse(q)
	if want := RandIndices(nil, 1000, 100, p.Seed); !slices.Equal(idx, want) {
		t.Fatalf("indices %v, want %v", idx, want)
	}
	dense := make([]float32, 1000)
	Decompress(dense, q)
	for j, i := range idx {
		if d := math.Abs(float64(vals[j] - x[i])); d > float64(q.Scales[0])/2*1.0001 || dense[i] != vals[j] {
			t.Fatalf("coordinate %d: %v → %v (dense %v), scale %v", i, x[i], vals[j], dense[i], q.Scales[0])
		}
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(slices.Clone(b), 0)} {
		if _, err := Decode(bad, 1000); !errors.Is(err, ErrPayload) {
			t.Errorf("%d bytes: %v", len(bad), err)
		}
	}
	neg := slices.Clone(b)
	neg[5+12+3] |= 0x80 // the scale's sign bit
	if _, err := Decode(neg, 1000); !errors.Is(err, ErrPayload) || !strings.Contains(err.Error(), "negative") {
		t.Errorf("negative scale: %v", err)
	}
	if _, err := Decode(b, 999); !errors.Is(err, ErrPayload) {
		t.Errorf("more values than allowed: %v", err)
	}
}

// TestSettleTopK: a deferred top-k payload, its vector already cut to
// the kept values (compute.TopKInto), settles to the payload Compress
// makes of the whole vector: the same indices (zeros among the kept
// ones too), values and encoded size, which EncodedSizeLater gives as
// its known part plus the index bytes to come.
func TestSettleTopK(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, frac := range []float64{0.01, 0.1, 0.5, 1} {
		x := make([]float32, 1000)
		for i := range x {
			if rng.IntN(3) > 0 { // many zeros: some are kept where k exceeds the non-zeros
				x[i] = float32(rng.NormFloat64())
			}
		}
		spec := Spec{Kind: TopK, Fraction: frac}
		var want Payload
		Compress(&want, x, spec, nil)
		k := spec.Keep(len(x))
		d := make([]float32, len(x))
		nb := compute.TopKInto(d, x, k)
		p := Payload{Kind: TopK, N: len(x), Keep: k, IndexBytes: func(bool) (int, bool) { return nb, true }, Deferred: d}
		known, later := EncodedSizeLater(&p)
		if b, ok := later(false); !ok || known+b != EncodedSize(&want) || EncodedSize(&p) != EncodedSize(&want) {
			t.Fatalf("top %d: deferred size %d + later, want %d", k, known, EncodedSize(&want))
		}
		Settle(&p)
		if p.Deferred != nil || !slices.Equal(p.Indices, want.Indices) || !slices.Equal(p.Values, want.Values) || EncodedSize(&p) != EncodedSize(&want) {
			t.Fatalf("top %d: settled to %d indices, want %d", k, len(p.Indices), len(want.Indices))
		}
	}
}
