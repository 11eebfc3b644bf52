package device

import (
	"fmt"
	"io"

	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/cuda"
)

// Inventory is where training can run on this machine (`gossipd devices
// --json`): the CPU and its kernel sets, the CUDA GPUs the driver reports
// (or why there are none), and what "auto" picks.
type Inventory struct {
	CPU        string     `json:"cpu"`
	Kernels    []string   `json:"kernels"`
	CUDABuilt  bool       `json:"cuda_loader"`
	CUDA       *cuda.Info `json:"cuda,omitempty"`
	CUDAError  string     `json:"cuda_error,omitempty"`
	AutoChoice Choice     `json:"auto"`
}

// Survey probes the machine for its Inventory, opening "auto" as a run
// would.
func Survey() (Inventory, error) {
	inv := Inventory{CPU: compute.CPUModel(), Kernels: compute.Kernels(), CUDABuilt: cuda.Built}
	info, err := cuda.Probe()
	if err != nil {
		inv.CUDAError = err.Error()
	} else {
		inv.CUDA = info
	}
	if _, inv.AutoChoice, err = Open(Spec{Kind: "auto"}); err != nil {
		return inv, err
	}
	return inv, nil
}

// WriteText prints the inventory as `gossipd devices` does.
func (inv Inventory) WriteText(w io.Writer) {
	fmt.Fprintf(w, "cpu     %s; kernels %v\n", inv.CPU, inv.Kernels)
	if inv.CUDA != nil {
		v := inv.CUDA.DriverVersion
		fmt.Fprintf(w, "cuda    driver %s (CUDA %d.%d)\n", inv.CUDA.Library, v/1000, v%1000/10)
		for _, d := range inv.CUDA.Devices {
			fmt.Fprintf(w, "        %s\n", d)
		}
		if why := inv.CUDA.NoGraphs; why != "" {
			fmt.Fprintf(w, "        graphs: no, training steps are queued call by call (%s)\n", why)
		} else {
			fmt.Fprintf(w, "        graphs: yes, training steps are recorded and replayed (CUDA graphs)\n")
		}
	} else {
		fmt.Fprintf(w, "cuda    none: %s\n", inv.CUDAError)
	}
	auto := inv.AutoChoice
	fmt.Fprintf(w, "auto    %s (%s)", auto.Device, auto.Backend)
	if auto.Note != "" {
		fmt.Fprintf(w, ": %s", auto.Note)
	}
	fmt.Fprintln(w)
	if auto.Libraries != "" {
		fmt.Fprintf(w, "        %s\n", auto.Libraries)
	}
}
