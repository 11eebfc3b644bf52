package compute

// An interpreter for the amd64 assembly this package generates
// (small_amd64.s, exp_amd64.s, kernel_amd64.s, pool_amd64.s,
// interp_amd64.s, combine_amd64.s), so that every kernel set's
// code runs in the tests on any CPU: a CPU cannot execute AVX-512 (or AVX2)
// instructions it lacks, and qemu-user does not emulate AVX-512. It reads
// the .s files as text and executes the instructions they use, lane by
// lane, with the semantics of Intel's manual. Memory is what the caller
// lends it: every load and store must fall inside a lent region (the rows
// a kernel may touch), so the interpreter also checks that nothing past a
// row is read or written. Where the CPU has the instructions,
// TestEmulatorMatchesHardware checks the interpreter against them.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"unsafe"
)

type opKind uint8

const (
	opImm opKind = iota
	opGP
	opVec
	opK
	opMem
)

type operand struct {
	kind  opKind
	imm   int64
	reg   int // GP, vector or K register
	lanes int // vector operands: 4 (X), 8 (Y) or 16 (Z)
	// Memory: disp + base + index·scale, or a symbol (SB) or an argument (FP).
	base, index, scale int
	disp               int64
	sym                string
	fp                 bool
}

type insn struct {
	op    string
	zero  bool // .Z suffix: masked-off lanes are zeroed
	args  []operand
	line  int
	label string // jump target
}

// asmProgram is the parsed text of some .s files.
type asmProgram struct {
	funcs map[string][]insn
	data  map[string][]byte
}

var gpNames = map[string]int{"AX": 0, "CX": 1, "DX": 2, "BX": 3, "SP": 4, "BP": 5, "SI": 6, "DI": 7,
	"R8": 8, "R9": 9, "R10": 10, "R11": 11, "R12": 12, "R13": 13, "R14": 14, "R15": 15}

func parseOperand(s string) (operand, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "$") {
		v, err := strconv.ParseInt(s[1:], 0, 64)
		if err != nil {
			u, err2 := strconv.ParseUint(s[1:], 0, 32)
			if err2 != nil {
				return operand{}, fmt.Errorf("immediate %q", s)
			}
			v = int64(u)
		}
		return operand{kind: opImm, imm: v}, nil
	}
	if r, ok := gpNames[s]; ok {
		return operand{kind: opGP, reg: r}, nil
	}
	if len(s) >= 2 && (s[0] == 'X' || s[0] == 'Y' || s[0] == 'Z' || s[0] == 'K') {
		if n, err := strconv.Atoi(s[1:]); err == nil {
			switch s[0] {
			case 'K':
				return operand{kind: opK, reg: n}, nil
			case 'X':
				return operand{kind: opVec, reg: n, lanes: 4}, nil
			case 'Y':
				return operand{kind: opVec, reg: n, lanes: 8}, nil
			default:
				return operand{kind: opVec, reg: n, lanes: 16}, nil
			}
		}
	}
	// Memory: [sym<>][+off](SB) | name+off(FP) | [off](BASE)[(IDX*S)]
	m := operand{kind: opMem, base: -1, index: -1}
	open := strings.IndexByte(s, '(')
	if open < 0 {
		return operand{}, fmt.Errorf("operand %q", s)
	}
	head, rest := s[:open], s[open:]
	switch {
	case rest == "(SB)":
		sym, off, _ := strings.Cut(head, "+")
		m.sym = sym
		if off != "" {
			v, err := strconv.ParseInt(off, 0, 64)
			if err != nil {
				return operand{}, fmt.Errorf("offset in %q", s)
			}
			m.disp = v
		}
		return m, nil
	case rest == "(FP)":
		_, off, ok := strings.Cut(head, "+")
		v, err := strconv.ParseInt(off, 0, 64)
		if !ok || err != nil {
			return operand{}, fmt.Errorf("argument %q", s)
		}
		m.fp, m.disp = true, v
		return m, nil
	}
	if head != "" {
		v, err := strconv.ParseInt(head, 0, 64)
		if err != nil {
			return operand{}, fmt.Errorf("displacement in %q", s)
		}
		m.disp = v
	}
	close := strings.IndexByte(rest, ')')
	r, ok := gpNames[rest[1:close]]
	if !ok {
		return operand{}, fmt.Errorf("base register in %q", s)
	}
	m.base = r
	if idx := rest[close+1:]; idx != "" {
		reg, sc, ok := strings.Cut(strings.Trim(idx, "()"), "*")
		r, ok2 := gpNames[reg]
		v, err := strconv.Atoi(sc)
		if !ok || !ok2 || err != nil {
			return operand{}, fmt.Errorf("index in %q", s)
		}
		m.index, m.scale = r, v
	}
	return m, nil
}

// loadAsm parses the named .s files of this directory.
func loadAsm(files ...string) (*asmProgram, error) {
	p := &asmProgram{funcs: map[string][]insn{}, data: map[string][]byte{}}
	type pendingData struct {
		sym        string
		off, width int
		val        int64
	}
	var datas []pendingData
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var fn string
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for line := 1; sc.Scan(); line++ {
			t := sc.Text()
			if i := strings.Index(t, "//"); i >= 0 {
				t = t[:i]
			}
			t = strings.TrimSpace(t)
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			bad := func(what string) error { return fmt.Errorf("%s:%d: %s: %q", f, line, what, t) }
			op, rest, _ := strings.Cut(t, " ")
			var args []string
			if rest = strings.TrimSpace(rest); rest != "" {
				args = strings.Split(rest, ",")
			}
			switch {
			case op == "TEXT":
				name := strings.TrimPrefix(strings.TrimSpace(args[0]), "·")
				fn = strings.TrimSuffix(name, "(SB)")
				p.funcs[fn] = nil
			case op == "GLOBL":
				sym := strings.TrimSuffix(strings.TrimSpace(args[0]), "(SB)")
				size, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(args[len(args)-1]), "$"))
				if err != nil {
					return nil, bad("size")
				}
				if _, dup := p.data[sym]; dup {
					return nil, bad("symbol defined twice")
				}
				p.data[sym] = make([]byte, size)
			case op == "DATA":
				addr, width, ok := strings.Cut(strings.TrimSpace(args[0]), "/")
				w, err := strconv.Atoi(width)
				m, err2 := parseOperand(addr)
				val, err3 := parseOperand(args[1])
				if !ok || err != nil || err2 != nil || err3 != nil {
					return nil, bad("data")
				}
				datas = append(datas, pendingData{m.sym, int(m.disp), w, val.imm})
			case strings.HasSuffix(op, ":") && rest == "":
				p.funcs[fn] = append(p.funcs[fn], insn{op: "LABEL", label: strings.TrimSuffix(op, ":"), line: line})
			default:
				in := insn{op: op, line: line}
				if base, ok := strings.CutSuffix(op, ".Z"); ok {
					in.op, in.zero = base, true
				}
				if strings.HasPrefix(op, "J") {
					in.label = strings.TrimSpace(rest)
				} else {
					for _, a := range args {
						o, err := parseOperand(a)
						if err != nil {
							return nil, fmt.Errorf("%s:%d: %w", f, line, err)
						}
						in.args = append(in.args, o)
					}
				}
				p.funcs[fn] = append(p.funcs[fn], in)
			}
		}
	}
	for _, d := range datas {
		buf, ok := p.data[d.sym]
		if !ok || d.off+d.width > len(buf) {
			return nil, fmt.Errorf("DATA %s+%d outside its GLOBL", d.sym, d.off)
		}
		switch d.width {
		case 4:
			binary.LittleEndian.PutUint32(buf[d.off:], uint32(d.val))
		case 8:
			binary.LittleEndian.PutUint64(buf[d.off:], uint64(d.val))
		default:
			return nil, fmt.Errorf("DATA %s: width %d", d.sym, d.width)
		}
	}
	return p, nil
}

// region is memory lent to the interpreter.
type region struct {
	addr uint64
	mem  []byte
}

// bytesOf lends n bytes at p.
func bytesOf[T any](p *T, n int) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(p)), n) }

// machine is one call's state.
type machine struct {
	p       *asmProgram
	gp      [16]uint64
	v       [32][16]uint32
	k       [8]uint16
	zf, lt  bool
	frame   []byte // the arguments, 8 bytes each, where name+off(FP) reads them
	regions []region
}

func (m *machine) find(addr uint64, n int, at insn) []byte {
	for _, r := range m.regions {
		if addr >= r.addr && addr+uint64(n) <= r.addr+uint64(len(r.mem)) {
			return r.mem[addr-r.addr : addr-r.addr+uint64(n)]
		}
	}
	panic(fmt.Sprintf("line %d %s: %d bytes at %#x lie outside the memory lent to the kernel", at.line, at.op, n, addr))
}

func (m *machine) addr(o operand) uint64 {
	if o.fp {
		return uint64(uintptr(unsafe.Pointer(&m.frame[0]))) + uint64(o.disp)
	}
	if o.sym != "" {
		return m.regions[m.symRegion(o.sym)].addr + uint64(o.disp)
	}
	a := uint64(o.disp)
	if o.base >= 0 {
		a += m.gp[o.base]
	}
	if o.index >= 0 {
		a += m.gp[o.index] * uint64(o.scale)
	}
	return a
}

func (m *machine) symRegion(sym string) int {
	buf := m.p.data[sym]
	for i, r := range m.regions {
		if len(r.mem) > 0 && len(buf) > 0 && &r.mem[0] == &buf[0] {
			return i
		}
	}
	panic("unknown symbol " + sym)
}

// load64 reads a GP operand's value.
func (m *machine) load64(o operand, at insn) uint64 {
	switch o.kind {
	case opImm:
		return uint64(o.imm)
	case opGP:
		return m.gp[o.reg]
	case opMem:
		return binary.LittleEndian.Uint64(m.find(m.addr(o), 8, at))
	}
	panic(fmt.Sprintf("line %d: bad operand", at.line))
}

// vec reads lanes of a vector operand, or of memory (all lanes, or those
// in mask when mask is not nil).
func (m *machine) vec(o operand, lanes int, mask []bool, at insn) [16]uint32 {
	var out [16]uint32
	if o.kind == opVec {
		copy(out[:lanes], m.v[o.reg][:lanes])
		return out
	}
	base := m.addr(o)
	for i := 0; i < lanes; i++ {
		if mask == nil || mask[i] {
			out[i] = binary.LittleEndian.Uint32(m.find(base+4*uint64(i), 4, at))
		}
	}
	return out
}

// setVec writes lanes of a register (zeroing the rest, as VEX and EVEX
// encodings do) or, for memory, the lanes in mask.
func (m *machine) setVec(o operand, val [16]uint32, lanes int, mask []bool, at insn) {
	if o.kind == opVec {
		for i := range 16 {
			if i >= lanes {
				val[i] = 0
			}
		}
		m.v[o.reg] = val
		return
	}
	base := m.addr(o)
	for i := 0; i < lanes; i++ {
		if mask == nil || mask[i] {
			binary.LittleEndian.PutUint32(m.find(base+4*uint64(i), 4, at), val[i])
		}
	}
}

func f32(u uint32) float32  { return math.Float32frombits(u) }
func bits(f float32) uint32 { return math.Float32bits(f) }

// fma32 is a·b + c rounded once to float32 (the product is exact in
// float64; the sum is rounded twice, which differs from one rounding only
// in rare ties: the tests allow for it).
func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

// lanesOf is the width of an instruction: its widest vector operand.
func lanesOf(in insn) int {
	n := 0
	for _, a := range in.args {
		if a.kind == opVec && a.lanes > n {
			n = a.lanes
		}
	}
	return n
}

// call runs fn with the given arguments (8-byte slots) on the lent memory.
// It returns an error if the function does not return within limit
// instructions.
func (p *asmProgram) call(fn string, args []uint64, lent ...[]byte) {
	code, ok := p.funcs[fn]
	if !ok {
		panic("no function " + fn)
	}
	m := &machine{p: p, frame: make([]byte, 8*max(1, len(args)))}
	for i, a := range args {
		binary.LittleEndian.PutUint64(m.frame[8*i:], a)
	}
	m.regions = append(m.regions, region{uint64(uintptr(unsafe.Pointer(&m.frame[0]))), m.frame})
	for _, b := range lent {
		if len(b) > 0 {
			m.regions = append(m.regions, region{uint64(uintptr(unsafe.Pointer(&b[0]))), b})
		}
	}
	for _, buf := range p.data {
		m.regions = append(m.regions, region{uint64(uintptr(unsafe.Pointer(&buf[0]))), buf})
	}
	labels := map[string]int{}
	for i, in := range code {
		if in.op == "LABEL" {
			labels[in.label] = i
		}
	}
	for pc, steps := 0, 0; ; pc++ {
		if steps++; steps > 1<<26 {
			panic(fn + ": no RET after 2^26 instructions")
		}
		in := code[pc]
		if in.op == "RET" {
			return
		}
		if jump, ok := m.exec(in); ok {
			pc = labels[jump]
		}
	}
}
