package main

import (
	"context"
	"io"

	"github.com/gossipd/gossipd/bench"
	"github.com/gossipd/gossipd/internal/cli"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench", "bench [flags]\n\nMeasures float32 GEMM (GFLOP/s; against gonum's pure-Go GEMM and gossipd's own\npure-Go kernel) and one epoch of training on a dataset (samples/s and test\naccuracy). With --against torch, runs the PyTorch reference in the same run\n(on the same device) and prints ratios.", stderr)
	var c bench.Config
	c.Register(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := c.Check(fs); err != nil {
		return err
	}
	return bench.Run(ctx, stdout, stderr, c)
}
