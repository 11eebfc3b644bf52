// Package device chooses where a run trains: --device auto|cpu|cuda[:N].
//
// "cpu" is the CPU backend (model/compute). "cuda" or "cuda:N" asks for
// GPU N (0 by default) through the CUDA driver (model/compute/cuda) and is
// an error, naming what is missing, where it cannot be had: a binary
// without the CUDA loader, no driver library, no device, or (today) no
// CUDA compute backend. "auto", the default, takes a usable GPU when there
// is one and the CPU otherwise, and says why in Choice.Note.
package device

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/cuda"
)

// ErrDevice wraps every error of this package: a bad --device value or a
// device that cannot be used here.
var ErrDevice = errors.New("device")

// Spec is a parsed --device value.
type Spec struct {
	// Kind is "auto", "cpu" or "cuda".
	Kind string
	// Index is the GPU's ordinal for "cuda".
	Index int
}

func (s Spec) String() string {
	if s.Kind == "cuda" {
		return fmt.Sprintf("cuda:%d", s.Index)
	}
	return s.Kind
}

// Values lists the accepted forms, for flag help.
const Values = "auto|cpu|cuda[:N]"

// Parse reads a --device value; "" is "auto".
func Parse(s string) (Spec, error) {
	switch s {
	case "", "auto":
		return Spec{Kind: "auto"}, nil
	case "cpu":
		return Spec{Kind: "cpu"}, nil
	case "cuda":
		return Spec{Kind: "cuda"}, nil
	}
	if n, ok := strings.CutPrefix(s, "cuda:"); ok {
		i, err := strconv.Atoi(n)
		if err == nil && i >= 0 && n == strconv.Itoa(i) {
			return Spec{Kind: "cuda", Index: i}, nil
		}
	}
	return Spec{}, fmt.Errorf("%w: %q: want %s (N a GPU's ordinal: 0, 1, …)", ErrDevice, s, Values)
}

// Choice is the device a run uses, and why.
type Choice struct {
	// Requested is the --device value as parsed ("auto", "cpu", "cuda:0").
	Requested string `json:"requested"`
	// Device is where training runs: "cpu" or "cuda:N".
	Device string `json:"device"`
	// Backend names the backend and its kernels ("cpu/avx512×2").
	Backend string `json:"backend"`
	// Libraries says, for a GPU, which CUDA libraries the backend loaded
	// and how its kernels were built ("cubin sm_90", "PTX compute_90").
	Libraries string `json:"libraries,omitempty"`
	// Note says, for "auto", why it runs where it does.
	Note string `json:"note,omitempty"`
}

// gpu fills in the choice of the GPU backend be, opened for device i.
func (ch *Choice) gpu(i int, be compute.Backend) {
	ch.Device, ch.Backend = fmt.Sprintf("cuda:%d", i), be.Name()
	if l, ok := be.(interface{ Libraries() string }); ok {
		ch.Libraries = l.Libraries()
	}
}

// Describe is the choice a backend given directly (not through Open)
// stands for.
func Describe(be compute.Backend) Choice {
	d := "cpu"
	if !strings.HasPrefix(be.Name(), "cpu") {
		d = be.Name()
	}
	return Choice{Requested: "backend", Device: d, Backend: be.Name()}
}

// probe is cuda.Probe and openCUDA opens the CUDA backend and runs its
// self-check; tests replace them.
var (
	probe    = cuda.Probe
	openCUDA = openCUDAOnce
)

// cudaOpened holds, per device index, the result of opening its backend:
// a device is opened (its kernels compiled, its context made) once per
// process, however many times Open is asked for it (a command checks its
// --device flag, then opens it to train).
var cudaOpened sync.Map // int → func() (compute.Backend, error)

func openCUDAOnce(i int) (compute.Backend, error) {
	f, _ := cudaOpened.LoadOrStore(i, sync.OnceValues(func() (compute.Backend, error) {
		b, err := cuda.Open(i)
		if err != nil {
			return nil, err
		}
		if err := b.SelfCheck(); err != nil {
			return nil, err
		}
		return b, nil
	}))
	return f.(func() (compute.Backend, error))()
}

// Open returns the backend spec asks for, and the choice made. The CPU
// backend is built with opts.
func Open(spec Spec, opts ...compute.CPUOption) (compute.Backend, Choice, error) {
	ch := Choice{Requested: spec.String()}
	cpu := func() (compute.Backend, Choice, error) {
		be := compute.NewCPU(opts...)
		ch.Device, ch.Backend = "cpu", be.Name()
		return be, ch, nil
	}
	switch spec.Kind {
	case "cpu":
		return cpu()
	case "auto":
		info, err := probe()
		if err != nil {
			ch.Note = "no GPU used: " + err.Error()
			return cpu()
		}
		be, err := openCUDA(0)
		if err != nil {
			ch.Note = fmt.Sprintf("no GPU used: found %s, but its compute backend did not open: %v", info.Devices[0], err)
			return cpu()
		}
		ch.gpu(0, be)
		return be, ch, nil
	case "cuda":
		info, err := probe()
		if err != nil {
			return nil, ch, fmt.Errorf("%w: --device %s: %w", ErrDevice, spec, err)
		}
		if spec.Index >= len(info.Devices) {
			names := make([]string, len(info.Devices))
			for i, d := range info.Devices {
				names[i] = d.String()
			}
			return nil, ch, fmt.Errorf("%w: --device %s: the driver (%s) has %d device(s): %s", ErrDevice, spec, info.Library, len(info.Devices), strings.Join(names, "; "))
		}
		be, err := openCUDA(spec.Index)
		if err != nil {
			return nil, ch, fmt.Errorf("%w: --device %s: found %s, but its compute backend did not open: %w", ErrDevice, spec, info.Devices[spec.Index], err)
		}
		ch.gpu(spec.Index, be)
		return be, ch, nil
	}
	return nil, ch, fmt.Errorf("%w: unknown kind %q", ErrDevice, spec.Kind)
}
