// Package cuda finds NVIDIA GPUs through the CUDA driver API, loaded at run
// time: the gossipd binary is built without cgo and links no GPU library.
//
// The loader (driver_linux.go) is compiled only into the CUDA build of
// gossipd (build tag cuda, linux on amd64 or arm64: make build-cuda). It
// opens libcuda.so.1 with github.com/ebitengine/purego, which needs the
// system's dynamic loader, so that build is a dynamically linked
// executable. The default build stays a static binary that runs anywhere
// (FROM scratch containers, musl systems, 32-bit ARM boards); there Probe
// returns ErrNotBuilt.
//
// The CUDA compute backend (Open, Backend) keeps tensors in the GPU's
// memory, multiplies with cuBLAS and runs the other kernels from
// kernels.cu, compiled at run time with NVRTC; it loads libcublas and
// libnvrtc the way it loads the driver, and checks itself when it opens.
// It has not yet run on a GPU: docs/explanation/gpu.md says what is checked here and
// what is left.
package cuda

import (
	"errors"
	"fmt"
)

// DirEnv names an environment variable holding a directory searched for
// the CUDA libraries before the system's search path (for installs outside
// it, and for tests).
const DirEnv = "GOSSIPD_CUDA_DIR"

// Library is the CUDA driver library the loader opens.
const Library = "libcuda.so.1"

// Sentinel errors.
var (
	// ErrNotBuilt: this binary has no CUDA loader.
	ErrNotBuilt = errors.New("cuda: this gossipd is the static build, without the CUDA loader; build the CUDA one with make build-cuda (bin/gossipd-cuda)")
	// ErrNoLibrary: the driver, NVRTC or cuBLAS could not be loaded, or
	// lacks a function gossipd calls.
	ErrNoLibrary = errors.New("cuda: cannot load a CUDA library")
	// ErrNoDevice: the driver loaded but reports no usable device.
	ErrNoDevice = errors.New("cuda: no usable CUDA device")
)

// Device describes one GPU.
type Device struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	// Memory is the device's total memory in bytes.
	Memory uint64 `json:"memory_bytes"`
	// Major and Minor are the compute capability (9.0 for an H100).
	Major int `json:"cc_major"`
	Minor int `json:"cc_minor"`
}

func (d Device) String() string {
	return fmt.Sprintf("cuda:%d %s (compute capability %d.%d, %.1f GiB)", d.Index, d.Name, d.Major, d.Minor, float64(d.Memory)/(1<<30))
}

// Info is what the driver reports.
type Info struct {
	// Library is the path or name the driver was loaded from.
	Library string `json:"library"`
	// DriverVersion is the CUDA version the driver supports, as
	// 1000·major + 10·minor (12040 for 12.4).
	DriverVersion int      `json:"driver_version"`
	Devices       []Device `json:"devices"`
	// NoGraphs says why training steps cannot be recorded and replayed
	// (CUDA graphs: the driver lacks a function of that API); "" when
	// they can.
	NoGraphs string `json:"no_graphs,omitempty"`
}
