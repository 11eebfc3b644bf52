package main

import (
	"context"
	"encoding/json"
	"io"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/model/device"
)

func runDevices(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("devices", "devices [--json]\n\nLists where training can run: the CPU and the kernel sets it runs, and the\nCUDA GPUs the driver reports (or why there are none), and what --device auto\npicks here.", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	inv, err := device.Survey()
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(inv)
	}
	inv.WriteText(stdout)
	return nil
}
