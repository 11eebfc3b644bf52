package main

import (
	"context"
	"fmt"
	"io"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/simulation"
)

func runPlot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("plot", "plot [flags] LABEL=DIR ...\n\nDraws the mean test accuracy of several simulation runs (each DIR holding a\nmetrics.csv) on one PNG.", stderr)
	out := fs.String("out", "accuracy.png", "PNG file to write")
	x := fs.String("x", "time", "x axis: time|bytes")
	title := fs.String("title", "", "plot title")
	runs, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return fmt.Errorf("%w: plot: no runs given (LABEL=DIR ...)", errUsage)
	}
	if a := simulation.Axis(*x); a != simulation.ByTime && a != simulation.ByBytes {
		return fmt.Errorf("%w: plot: --x %q: want time or bytes", errUsage, *x)
	}
	if err := simulation.PlotRuns(*out, *title, simulation.Axis(*x), runs); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return nil
}
