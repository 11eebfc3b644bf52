package compute

import (
	"encoding/binary"
	"fmt"
	"math"
)

// exec runs one instruction (x86emu_test.go); it returns the label to jump
// to, if the instruction jumps.
func (m *machine) exec(in insn) (string, bool) {
	a := in.args
	gp := func(i int) *uint64 { return &m.gp[a[i].reg] }
	switch in.op {
	case "LABEL", "PREFETCHT0":
		return "", false
	case "JMP":
		return in.label, true
	case "JL":
		return in.label, m.lt
	case "JGE":
		return in.label, !m.lt
	case "JE":
		return in.label, m.zf
	case "JNE":
		return in.label, !m.zf
	case "MOVQ":
		*gp(1) = m.load64(a[0], in)
	case "MOVL":
		*gp(1) = uint64(uint32(m.load64(a[0], in)))
	case "XORQ":
		*gp(1) ^= m.load64(a[0], in)
		m.zf, m.lt = *gp(1) == 0, int64(*gp(1)) < 0
	case "ADDQ":
		*gp(1) += m.load64(a[0], in)
		m.zf, m.lt = *gp(1) == 0, int64(*gp(1)) < 0
	case "SUBQ":
		x := m.load64(a[0], in)
		old := *gp(1)
		*gp(1) -= x
		m.zf, m.lt = *gp(1) == 0, int64(old) < int64(x)
	case "CMPQ":
		x, y := m.load64(a[0], in), m.load64(a[1], in)
		m.zf, m.lt = x == y, int64(x) < int64(y)
	case "TESTQ":
		r := m.load64(a[0], in) & m.load64(a[1], in)
		m.zf, m.lt = r == 0, int64(r) < 0
	case "SHLQ":
		*gp(1) <<= m.load64(a[0], in) & 63
	case "SHRQ":
		*gp(1) >>= m.load64(a[0], in) & 63
	case "SHLL":
		*gp(1) = uint64(uint32(*gp(1)) << (m.load64(a[0], in) & 31))
	case "DECL":
		r := uint32(*gp(0)) - 1
		*gp(0) = uint64(r)
		m.zf, m.lt = r == 0, int32(r) < 0
	case "DECQ":
		*gp(0)--
		m.zf, m.lt = *gp(0) == 0, int64(*gp(0)) < 0
	case "LEAQ":
		*gp(1) = m.addr(a[0])
	case "KMOVW":
		m.k[a[1].reg] = uint16(m.load64(a[0], in))
	case "VZEROUPPER":
		for r := range 16 {
			clear(m.v[r][4:])
		}
	default:
		m.execVec(in)
	}
	return "", false
}

// maskOf returns the lanes of K register r.
func (m *machine) maskOf(r, lanes int) []bool {
	out := make([]bool, lanes)
	for i := range out {
		out[i] = m.k[r]>>i&1 == 1
	}
	return out
}

// binary applies f lane by lane to (src1, src2) of a three-operand
// instruction written "OP src2, src1, dst" (Go's order), with an optional
// K mask before dst (zeroing with .Z, merging otherwise).
func (m *machine) binary(in insn, f func(x, y uint32) uint32) {
	a := in.args
	n := lanesOf(in)
	s2, s1, dst := a[0], a[1], a[len(a)-1]
	x, y := m.vec(s1, n, nil, in), m.vec(s2, n, nil, in)
	old := m.v[dst.reg]
	var out [16]uint32
	for i := 0; i < n; i++ {
		out[i] = f(x[i], y[i])
	}
	if len(a) == 4 {
		for i, on := range m.maskOf(a[2].reg, n) {
			if !on {
				out[i] = old[i]
				if in.zero {
					out[i] = 0
				}
			}
		}
	}
	m.setVec(dst, out, n, nil, in)
}

func (m *machine) unary(in insn, f func(x uint32) uint32) {
	a := in.args
	n := lanesOf(in)
	x := m.vec(a[len(a)-2], n, nil, in)
	var out [16]uint32
	for i := 0; i < n; i++ {
		out[i] = f(x[i])
	}
	m.setVec(a[len(a)-1], out, n, nil, in)
}

func roundMode(imm int64, x float32) float32 {
	switch imm & 3 {
	case 1:
		return float32(math.Floor(float64(x)))
	case 2:
		return float32(math.Ceil(float64(x)))
	case 3:
		return float32(math.Trunc(float64(x)))
	}
	return float32(math.RoundToEven(float64(x)))
}

func (m *machine) execVec(in insn) {
	a := in.args
	n := lanesOf(in)
	fl := func(f func(x, y float32) float32) func(x, y uint32) uint32 {
		return func(x, y uint32) uint32 { return bits(f(f32(x), f32(y))) }
	}
	switch in.op {
	case "VMOVUPS", "VMOVAPS", "VMOVDQU":
		src, dst := a[0], a[len(a)-1]
		var mask []bool
		if len(a) == 3 {
			mask = m.maskOf(a[1].reg, n)
		}
		if dst.kind == opMem {
			m.setVec(dst, m.vec(src, n, nil, in), n, mask, in)
			return
		}
		val := m.vec(src, n, mask, in)
		if mask != nil && !in.zero {
			panic(fmt.Sprintf("line %d: merging masked load not emulated", in.line))
		}
		for i := range mask {
			if !mask[i] {
				val[i] = 0
			}
		}
		m.setVec(dst, val, n, nil, in)
	case "VMASKMOVPS":
		ctl := m.v[a[1].reg]
		lanes := make([]bool, n)
		for i := range lanes {
			lanes[i] = ctl[i]>>31 == 1
		}
		if a[2].kind == opMem {
			m.setVec(a[2], m.vec(a[0], n, nil, in), n, lanes, in)
			return
		}
		m.setVec(a[2], m.vec(a[0], n, lanes, in), n, nil, in)
	case "VBROADCASTSS":
		w := binary.LittleEndian.Uint32(m.find(m.addr(a[0]), 4, in))
		var out [16]uint32
		for i := range n {
			out[i] = w
		}
		m.setVec(a[1], out, n, nil, in)
	case "VMOVQ":
		v := m.v[a[0].reg]
		dst := m.find(m.addr(a[1]), 8, in)
		binary.LittleEndian.PutUint32(dst, v[0])
		binary.LittleEndian.PutUint32(dst[4:], v[1])
	case "VEXTRACTF128", "VEXTRACTF64X4":
		w := a[2].lanes
		src := m.v[a[1].reg]
		var out [16]uint32
		copy(out[:w], src[w*int(a[0].imm):])
		m.setVec(a[2], out, w, nil, in)
	case "VXORPS", "VPXORD", "VPXOR":
		m.binary(in, func(x, y uint32) uint32 { return x ^ y })
	case "VANDNPS":
		m.binary(in, func(x, y uint32) uint32 { return ^x & y })
	case "VADDPS":
		m.binary(in, fl(func(x, y float32) float32 { return x + y }))
	case "VSUBPS":
		m.binary(in, fl(func(x, y float32) float32 { return x - y }))
	case "VMULPS":
		m.binary(in, fl(func(x, y float32) float32 { return x * y }))
	case "VMAXPS":
		m.binary(in, fl(func(x, y float32) float32 {
			if x > y {
				return x
			}
			return y
		}))
	case "VMINPS":
		m.binary(in, fl(func(x, y float32) float32 {
			if x < y {
				return x
			}
			return y
		}))
	case "VPADDD":
		m.binary(in, func(x, y uint32) uint32 { return x + y })
	case "VPSUBD":
		m.binary(in, func(x, y uint32) uint32 { return x - y })
	case "VHADDPS":
		x, y := m.vec(a[1], n, nil, in), m.vec(a[0], n, nil, in)
		var out [16]uint32
		for g := 0; g < n; g += 4 {
			out[g] = bits(f32(x[g]) + f32(x[g+1]))
			out[g+1] = bits(f32(x[g+2]) + f32(x[g+3]))
			out[g+2] = bits(f32(y[g]) + f32(y[g+1]))
			out[g+3] = bits(f32(y[g+2]) + f32(y[g+3]))
		}
		m.setVec(a[2], out, n, nil, in)
	case "VPERM2F128":
		imm := a[0].imm
		s1, s2 := m.vec(a[2], 8, nil, in), m.vec(a[1], 8, nil, in)
		halves := [4][]uint32{s1[0:4], s1[4:8], s2[0:4], s2[4:8]}
		var out [16]uint32
		for h := range 2 {
			sel := imm >> (4 * h)
			if sel&8 == 0 {
				copy(out[4*h:4*h+4], halves[sel&3])
			}
		}
		m.setVec(a[3], out, 8, nil, in)
	case "VFMADD231PS", "VFMADD213PS", "VFNMADD231PS":
		s3, s2, d := m.vec(a[0], n, nil, in), m.vec(a[1], n, nil, in), m.vec(a[2], n, nil, in)
		var out [16]uint32
		for i := 0; i < n; i++ {
			x, y, z := f32(s2[i]), f32(s3[i]), f32(d[i])
			switch in.op {
			case "VFMADD231PS":
				out[i] = bits(fma32(x, y, z))
			case "VFMADD213PS":
				out[i] = bits(fma32(x, z, y))
			default:
				out[i] = bits(fma32(-x, y, z))
			}
		}
		m.setVec(a[2], out, n, nil, in)
	case "VROUNDPS", "VRNDSCALEPS":
		imm := a[0].imm
		m.unary(in, func(x uint32) uint32 { return bits(roundMode(imm, f32(x))) })
	case "VCVTTPS2DQ":
		m.unary(in, func(x uint32) uint32 {
			v := float64(f32(x))
			if math.IsNaN(v) || v >= 1<<31 || v < -(1<<31) {
				return 0x80000000
			}
			return uint32(int32(math.Trunc(v)))
		})
	case "VPSRAD":
		s := min(a[0].imm, 31)
		m.unary(in, func(x uint32) uint32 { return uint32(int32(x) >> s) })
	case "VPSRLD":
		s := a[0].imm
		m.unary(in, func(x uint32) uint32 {
			if s > 31 {
				return 0
			}
			return x >> s
		})
	case "VPCMPEQD":
		m.binary(in, func(x, y uint32) uint32 {
			if x == y {
				return 0xffffffff
			}
			return 0
		})
	case "VPAND":
		m.binary(in, func(x, y uint32) uint32 { return x & y })
	case "VPANDN":
		m.binary(in, func(x, y uint32) uint32 { return ^x & y })
	case "VPOR":
		m.binary(in, func(x, y uint32) uint32 { return x | y })
	case "VUNPCKLPS", "VUNPCKHPS":
		// Within each 128-bit half: the low (high) two lanes of src1 and
		// src2, interleaved.
		s2, s1 := m.vec(a[0], n, nil, in), m.vec(a[1], n, nil, in)
		h := 0
		if in.op == "VUNPCKHPS" {
			h = 2
		}
		var out [16]uint32
		for g := 0; g < n; g += 4 {
			out[g], out[g+1], out[g+2], out[g+3] = s1[g+h], s2[g+h], s1[g+h+1], s2[g+h+1]
		}
		m.setVec(a[2], out, n, nil, in)
	case "VPMAXSD":
		m.binary(in, func(x, y uint32) uint32 { return uint32(max(int32(x), int32(y))) })
	case "VSHUFPS":
		// Within each 128-bit half: two lanes of src1, then two of src2,
		// chosen by the immediate's 2-bit fields.
		imm := a[0].imm
		s2, s1 := m.vec(a[1], n, nil, in), m.vec(a[2], n, nil, in)
		var out [16]uint32
		for g := 0; g < n; g += 4 {
			out[g] = s1[g+int(imm&3)]
			out[g+1] = s1[g+int(imm>>2&3)]
			out[g+2] = s2[g+int(imm>>4&3)]
			out[g+3] = s2[g+int(imm>>6&3)]
		}
		m.setVec(a[3], out, n, nil, in)
	case "VPERMQ":
		// The four 64-bit lanes of a Y register, chosen by the immediate.
		if n != 8 {
			panic(fmt.Sprintf("line %d: VPERMQ on %d lanes not emulated", in.line, n))
		}
		imm := a[0].imm
		src := m.vec(a[1], n, nil, in)
		var out [16]uint32
		for q := range 4 {
			sel := int(imm >> (2 * q) & 3)
			out[2*q], out[2*q+1] = src[2*sel], src[2*sel+1]
		}
		m.setVec(a[2], out, n, nil, in)
	case "VPSLLD":
		s := a[0].imm
		m.unary(in, func(x uint32) uint32 {
			if s > 31 {
				return 0
			}
			return x << s
		})
	case "VCMPPS":
		pred := a[0].imm
		x, y := m.vec(a[2], n, nil, in), m.vec(a[1], n, nil, in)
		var out [16]uint32
		var k uint16
		for i := 0; i < n; i++ {
			lt := f32(x[i]) < f32(y[i])
			var r bool
			switch pred {
			case 1:
				r = lt
			case 5:
				r = !lt
			default:
				panic(fmt.Sprintf("line %d: VCMPPS predicate %d not emulated", in.line, pred))
			}
			if r {
				out[i], k = 0xffffffff, k|1<<i
			}
		}
		if a[3].kind == opK {
			m.k[a[3].reg] = k
			return
		}
		m.setVec(a[3], out, n, nil, in)
	default:
		panic(fmt.Sprintf("line %d: %s not emulated", in.line, in.op))
	}
}
