package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/model/compute"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("version", "version", stderr)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = " " + s.Value
			}
		}
	}
	fmt.Fprintf(stdout, "gossipd %s%s (%s, %s/%s, compute %s)\n", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH, compute.NewCPU().Name())
	return nil
}
