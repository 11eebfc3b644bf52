package main

import (
	"context"
	"io"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/simulation"
)

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("simulate", "simulate [flags]\n\nRuns many peers of a protocol in one process on virtual time and writes\nmetrics.csv, summary.json and accuracy plots (PNG) to --out.", stderr)
	var f simulation.Flags
	f.Register(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := cli.ApplySettings(fs, "scenario", ""); err != nil {
		return err // a usage error naming the file
	}
	c, err := f.Config(fs)
	if err != nil {
		return err
	}
	return simulation.Execute(ctx, c, &f, stdout, stderr)
}
