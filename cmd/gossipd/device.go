package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/cuda"
	"github.com/gossipd/gossipd/model/device"
)

// checkDevice refuses a --device value that is malformed or cannot be had
// on this machine, as a usage error naming what is missing.
func checkDevice(s string) error {
	_, err := deviceChoice(s)
	return err
}

// deviceChoice opens --device s as a run would (once a process) and
// returns what it chose; a malformed value or a device that cannot be had
// is a usage error.
func deviceChoice(s string) (device.Choice, error) {
	spec, err := device.Parse(s)
	var ch device.Choice
	if err == nil {
		_, ch, err = device.Open(spec)
	}
	if err != nil {
		return ch, fmt.Errorf("%w: %v", errUsage, err)
	}
	return ch, nil
}

// devicesReport is `gossipd devices --json`.
type devicesReport struct {
	CPU        string        `json:"cpu"`
	Kernels    []string      `json:"kernels"`
	CUDABuilt  bool          `json:"cuda_loader"`
	CUDA       *cuda.Info    `json:"cuda,omitempty"`
	CUDAError  string        `json:"cuda_error,omitempty"`
	AutoChoice device.Choice `json:"auto"`
}

func runDevices(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("devices", "devices [--json]\n\nLists where training can run: the CPU and the kernel sets it runs, and the\nCUDA GPUs the driver reports (or why there are none), and what --device auto\npicks here.", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	rep := devicesReport{CPU: compute.CPUModel(), Kernels: compute.Kernels(), CUDABuilt: cuda.Built}
	info, err := cuda.Probe()
	if err != nil {
		rep.CUDAError = err.Error()
	} else {
		rep.CUDA = info
	}
	if _, rep.AutoChoice, err = device.Open(device.Spec{Kind: "auto"}); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	fmt.Fprintf(stdout, "cpu     %s; kernels %v\n", rep.CPU, rep.Kernels)
	if rep.CUDA != nil {
		v := rep.CUDA.DriverVersion
		fmt.Fprintf(stdout, "cuda    driver %s (CUDA %d.%d)\n", rep.CUDA.Library, v/1000, v%1000/10)
		for _, d := range rep.CUDA.Devices {
			fmt.Fprintf(stdout, "        %s\n", d)
		}
		if why := rep.CUDA.NoGraphs; why != "" {
			fmt.Fprintf(stdout, "        graphs: no, training steps are queued call by call (%s)\n", why)
		} else {
			fmt.Fprintf(stdout, "        graphs: yes, training steps are recorded and replayed (CUDA graphs)\n")
		}
	} else {
		fmt.Fprintf(stdout, "cuda    none: %s\n", rep.CUDAError)
	}
	fmt.Fprintf(stdout, "auto    %s (%s)", rep.AutoChoice.Device, rep.AutoChoice.Backend)
	if rep.AutoChoice.Note != "" {
		fmt.Fprintf(stdout, ": %s", rep.AutoChoice.Note)
	}
	fmt.Fprintln(stdout)
	if rep.AutoChoice.Libraries != "" {
		fmt.Fprintf(stdout, "        %s\n", rep.AutoChoice.Libraries)
	}
	return nil
}
