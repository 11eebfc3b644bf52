//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strings"
	"testing"
)

// The emulator's own checks, on kernels written to fail
// (testdata/emucheck.cu), with each of cudaemu.h's fiber switches: its
// own (x86-64) and glibc's ucontext (elsewhere, or with EMU_UCONTEXT).

// fiberSwitches are the helper's builds the checks run on, by name: the
// default and the ucontext one (the same on other than x86-64).
var fiberSwitches = []struct {
	name  string
	flags []string
}{{"default", nil}, {"ucontext", []string{"-DEMU_UCONTEXT"}}}

// eachSwitch runs check as a subtest on emucheck.cu's helper built with
// each fiber switch.
func eachSwitch(t *testing.T, check func(t *testing.T, bin string)) {
	for _, sw := range fiberSwitches {
		t.Run(sw.name, func(t *testing.T) {
			bin, _ := buildHelper(t, "testdata/emucheck.cu", sw.flags...)
			check(t, bin)
		})
	}
}

// shiftLaunch is a launch of one of emucheck.cu's shift kernels: out[j] =
// in[j + d] (-1 past the ends) for 64 values, one per thread of one block,
// or one per block.
type shiftLaunch struct {
	kernel string
	d      int32
	blocks bool
}

const shiftLen = 64

// runShifts runs the launches in order in one helper bin, launch i on the
// input in[j] = 100i + j, and returns how many outputs of each are wrong.
func runShifts(t *testing.T, bin string, ls ...shiftLaunch) []int {
	t.Helper()
	const n = shiftLen
	var req bytes.Buffer
	w := bufio.NewWriter(&req)
	for i, l := range ls {
		in := make([]byte, 4*n)
		for j := range n {
			binary.LittleEndian.PutUint32(in[4*j:], math.Float32bits(float32(100*i+j)))
		}
		var args []byte
		for buf := range uint32(2) { // out, in
			args = binary.LittleEndian.AppendUint32(args, buf)
			args = binary.LittleEndian.AppendUint64(args, 0)
		}
		args = binary.LittleEndian.AppendUint32(args, uint32(l.d))
		grid, block := uint32(1), uint32(n)
		if l.blocks {
			grid, block = n, 1
		}
		writeLaunch(w, l.kernel, grid, block, [][]byte{make([]byte, 4*n), in}, args)
	}
	w.Flush()
	cmd := exec.Command(bin)
	cmd.Stdin = &req
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	r := bytes.NewReader(out)
	wrong := make([]int, len(ls))
	for i, l := range ls {
		got := make([]float32, n)
		if err := binary.Read(r, binary.LittleEndian, got); err != nil {
			t.Fatalf("helper output, launch %d: %v", i, err)
		}
		io.CopyN(io.Discard, r, 4*n) // in
		for j, v := range got {
			want := float32(-1)
			if s := j + int(l.d); s >= 0 && s < n {
				want = float32(100*i + s)
			}
			if v != want {
				wrong[i]++
			}
		}
	}
	return wrong
}

// TestEmulatorBarriers: a block's threads take turns between barriers in
// an order that alternates from launch to launch, so a kernel whose
// threads read their neighbours' shared-memory writes without a barrier
// between them goes wrong in one launch of any two in a row, whichever
// neighbour it reads (a fixed order would miss one of the two), while
// with the barrier it is right in every launch; and a barrier that only
// part of a block reaches stops the helper with an error that names it.
func TestEmulatorBarriers(t *testing.T) {
	eachSwitch(t, func(t *testing.T, bin string) {
		for _, d := range []int32{1, -1} {
			ls := []shiftLaunch{{"shift", d, false}, {"shift_racy", d, false}, {"shift_racy", d, false}, {"shift", d, false},
				{"shift_racy", d, false}, {"shift_racy", d, false}, {"shift", d, false}}
			wrong := runShifts(t, bin, ls...)
			for i, l := range ls {
				if l.kernel == "shift" && wrong[i] != 0 {
					t.Errorf("launch %d, shift by %d with its barrier: %d of %d outputs wrong", i, d, wrong[i], shiftLen)
				}
				if l.kernel == "shift_racy" && ls[i-1].kernel == "shift_racy" && wrong[i-1]+wrong[i] == 0 {
					t.Errorf("launches %d and %d, shift by %d without its barrier: every output right, want the missing barrier to show in one of them", i-1, i, d)
				}
			}
		}
		if out, err := stops(bin, "divergent", 2, 64); !strings.Contains(out, "ended while the others wait at __syncthreads") {
			t.Errorf("a barrier half the block reaches: helper exit %v, stderr %q; want it stopped with an error naming the barrier", err, out)
		}
	})
}

// TestEmulatorBlocks: a launch's blocks run first to last in two
// launches, last to first in the next two, so a kernel whose blocks read
// what other blocks of the launch write goes wrong in one launch of any
// four in a row, whichever neighbour it reads, and one whose blocks are
// independent is right in every launch.
func TestEmulatorBlocks(t *testing.T) {
	eachSwitch(t, func(t *testing.T, bin string) {
		for _, d := range []int32{1, -1} {
			ls := []shiftLaunch{{"blocks_shift", d, true}}
			for range 4 {
				ls = append(ls, shiftLaunch{"blocks_racy", d, true})
			}
			ls = append(ls, shiftLaunch{"blocks_shift", d, true}, shiftLaunch{"blocks_shift", d, true})
			wrong := runShifts(t, bin, ls...)
			racy := 0
			for i, l := range ls {
				if l.kernel == "blocks_shift" && wrong[i] != 0 {
					t.Errorf("launch %d, blocks_shift by %d: %d of %d outputs wrong", i, d, wrong[i], shiftLen)
				}
				if l.kernel == "blocks_racy" {
					racy += wrong[i]
				}
			}
			if racy == 0 {
				t.Errorf("four launches of blocks_racy by %d, each block overwriting what another reads: every output right, want the race to show in one of them", d)
			}
		}
	})
}

// TestEmulatorBounds: the helper, built with AddressSanitizer, stops with
// a report naming the kernel when one writes past the end of a buffer
// (which on a GPU may go unnoticed, or corrupt another buffer).
func TestEmulatorBounds(t *testing.T) {
	eachSwitch(t, func(t *testing.T, bin string) {
		out, err := stops(bin, "overrun", 1, 64)
		if !strings.Contains(out, "heap-buffer-overflow") || !strings.Contains(out, "overrun") {
			t.Errorf("a write one past the end: helper exit %v, stderr %q; want it stopped with AddressSanitizer's report", err, out)
		}
	})
}

// stops runs the kernel (whose one argument is a buffer of 4·block bytes)
// as grid blocks of block threads in the helper bin, and returns the
// helper's standard error and its error, or "" and an error saying that
// it did not stop with an error of its own.
func stops(bin, kernel string, grid, block uint32) (string, error) {
	var req bytes.Buffer
	w := bufio.NewWriter(&req)
	writeLaunch(w, kernel, grid, block, [][]byte{make([]byte, 4*block)}, binary.LittleEndian.AppendUint64(make([]byte, 4), 0))
	w.Flush()
	cmd := exec.Command(bin)
	cmd.Stdin = &req
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); !ok {
		return "", fmt.Errorf("%v, not a failure of the helper's", err)
	}
	return stderr.String(), err
}
