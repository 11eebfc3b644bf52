package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/model/compute/cuda"
)

// TestDeviceFlag: on a machine or build without a usable GPU (CI's), every
// command that trains takes --device auto to the CPU and says why, and
// refuses --device cuda with exit 2 and a message naming what is missing;
// a malformed value is refused the same way.
func TestDeviceFlag(t *testing.T) {
	if info, err := cuda.Probe(); err == nil {
		t.Logf("this machine has a GPU (%s): the refusal of --device cuda is checked for the missing backend", info.Devices[0])
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"train", "--epochs", "1", "--quiet"},
		{"simulate", "--peers", "4", "--rounds", "1", "--quiet", "--out", dir},
		{"bench", "--what", "train", "--dataset", "digits"},
		{"run", "--store", dir, "--api", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0"},
		{"demo", "--json", "--png", filepath.Join(dir, "demo.png")},
	} {
		for _, bad := range []struct{ dev, want string }{{"cuda", "--device cuda:0"}, {"cuda:1", "--device cuda:1"}, {"gpu", "want auto|cpu|cuda[:N]"}} {
			code, _, errs := run(t, append(args, "--device", bad.dev)...)
			if code != 2 || !strings.Contains(errs, bad.want) {
				t.Errorf("%s --device %s: exit %d, %q; want 2 naming %q", args[0], bad.dev, code, errs, bad.want)
			}
			if bad.dev == "cuda" && !strings.Contains(errs, "cuda:") {
				t.Errorf("%s --device cuda: %q does not say what is missing", args[0], errs)
			}
		}
	}
	// --no-graphs applies to a device that replays recorded steps only.
	code, _, errs := run(t, "train", "--epochs", "1", "--quiet", "--no-graphs")
	if code != 2 || !strings.Contains(errs, "--no-graphs: training runs on cpu") {
		t.Errorf("train --no-graphs on the CPU: exit %d, %q; want 2 naming the flag and the device", code, errs)
	}
	code, out, errs := run(t, "train", "--epochs", "1", "--json", "--quiet")
	var rep struct {
		Device struct{ Requested, Device, Backend, Note string }
		Graphs *struct{}
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %s", code, err, errs)
	}
	if rep.Graphs != nil {
		t.Errorf("train --json on the CPU reports graphs: %s", out)
	}
	if rep.Device.Requested != "auto" || rep.Device.Device != "cpu" || !strings.HasPrefix(rep.Device.Backend, "cpu/") || rep.Device.Note == "" {
		t.Fatalf("train --json device: %+v", rep.Device)
	}
	code, out, errs = run(t, "simulate", "--peers", "4", "--rounds", "1", "--quiet", "--out", dir, "--device", "cpu", "--json")
	var sum struct {
		Device struct{ Requested, Device string }
	}
	if err := json.Unmarshal([]byte(out), &sum); code != 0 || err != nil || sum.Device.Requested != "cpu" || sum.Device.Device != "cpu" {
		t.Fatalf("simulate --device cpu --json: exit %d, %v, %+v: %s", code, err, sum.Device, errs)
	}
	code, out, errs = run(t, "devices", "--json")
	var devs struct {
		Kernels   []string
		CUDAError string `json:"cuda_error"`
		Auto      struct{ Device string }
	}
	if err := json.Unmarshal([]byte(out), &devs); code != 0 || err != nil || len(devs.Kernels) == 0 || devs.Auto.Device != "cpu" {
		t.Fatalf("devices --json: exit %d, %v, %+v: %s", code, err, devs, errs)
	}
}
