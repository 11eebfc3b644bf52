package device

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/cuda"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{"": "auto", "auto": "auto", "cpu": "cpu", "cuda": "cuda:0", "cuda:0": "cuda:0", "cuda:3": "cuda:3"} {
		s, err := Parse(in)
		if err != nil || s.String() != want {
			t.Errorf("Parse(%q) = %v, %v; want %s", in, s, err, want)
		}
	}
	for _, in := range []string{"gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:01", "CPU", "cuda:1:2", "tpu"} {
		if _, err := Parse(in); !errors.Is(err, ErrDevice) || !strings.Contains(err.Error(), Values) {
			t.Errorf("Parse(%q) = %v, want an error listing %s", in, err, Values)
		}
	}
}

func withProbe(t *testing.T, f func() (*cuda.Info, error)) {
	old := probe
	probe = f
	t.Cleanup(func() { probe = old })
}

func TestOpen(t *testing.T) {
	gpu := &cuda.Info{Library: "/x/libcuda.so.1", DriverVersion: 12040, Devices: []cuda.Device{{Index: 0, Name: "Fake GPU", Memory: 80 << 30, Major: 9}}}
	noLib := fmt.Errorf("%w libcuda.so.1: tried …", cuda.ErrNoLibrary)
	// A stand-in for the opened GPU backend, and one that fails to open.
	opened := func(int) (compute.Backend, error) { return compute.NewCPU(compute.WithThreads(1)), nil }
	noNVRTC := func(int) (compute.Backend, error) {
		return nil, fmt.Errorf("%w: NVRTC (libnvrtc.so.12): tried …", cuda.ErrNoLibrary)
	}
	for _, tc := range []struct {
		spec    string
		probe   func() (*cuda.Info, error)
		open    func(int) (compute.Backend, error)
		device  string
		note    string // in Choice.Note, or in the error
		wantErr bool
	}{
		{"cpu", nil, nil, "cpu", "", false},
		{"auto", func() (*cuda.Info, error) { return nil, cuda.ErrNotBuilt }, nil, "cpu", "make build-cuda", false},
		{"auto", func() (*cuda.Info, error) { return nil, noLib }, nil, "cpu", "libcuda.so.1", false},
		{"auto", func() (*cuda.Info, error) { return gpu, nil }, noNVRTC, "cpu", "found cuda:0 Fake GPU (compute capability 9.0, 80.0 GiB), but its compute backend did not open: cuda: cannot load a CUDA library: NVRTC", false},
		{"auto", func() (*cuda.Info, error) { return gpu, nil }, opened, "cuda:0", "", false},
		{"cuda", func() (*cuda.Info, error) { return nil, noLib }, nil, "", "libcuda.so.1", true},
		{"cuda:0", func() (*cuda.Info, error) { return gpu, nil }, noNVRTC, "", "did not open: cuda: cannot load a CUDA library: NVRTC", true},
		{"cuda:0", func() (*cuda.Info, error) { return gpu, nil }, opened, "cuda:0", "", false},
		{"cuda:1", func() (*cuda.Info, error) { return gpu, nil }, nil, "", "has 1 device(s): cuda:0 Fake GPU", true},
	} {
		withProbe(t, tc.probe)
		oldOpen := openCUDA
		openCUDA = tc.open
		if tc.open == nil {
			openCUDA = func(int) (compute.Backend, error) { t.Fatalf("%s: opened the CUDA backend", tc.spec); return nil, nil }
		}
		t.Cleanup(func() { openCUDA = oldOpen })
		if tc.probe == nil {
			probe = func() (*cuda.Info, error) { t.Fatal("cpu probed the GPU"); return nil, nil }
		}
		spec, err := Parse(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		be, ch, err := Open(spec)
		if tc.wantErr {
			if !errors.Is(err, ErrDevice) || !strings.Contains(err.Error(), tc.note) || be != nil {
				t.Errorf("%s: err %v, want one saying %q", tc.spec, err, tc.note)
			}
			continue
		}
		if err != nil || ch.Device != tc.device || be == nil || ch.Backend != be.Name() || !strings.Contains(ch.Note, tc.note) {
			t.Errorf("%s: %+v, %v; want device %s with note %q", tc.spec, ch, err, tc.device, tc.note)
		}
	}
}
