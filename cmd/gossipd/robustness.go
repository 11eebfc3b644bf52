package main

import (
	"context"
	"io"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/simulation"
)

// runRobustness runs simulation.Robustness and writes its tables.
func runRobustness(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("robustness", "robustness [flags]\n\nSimulates D-PSGD, random walk and push-sum with each aggregator (mean,\nmedian, trimmed mean, Krum, clipped gossip), clean and under every attack\nwith 10% and 20% Byzantine peers, and writes Markdown tables of the honest\npeers' final accuracy.", stderr)
	var f simulation.RobustnessFlags
	f.Register(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	c, err := f.Config(fs)
	if err != nil {
		return err
	}
	return simulation.ExecuteRobustness(ctx, c, &f, stdout, stderr)
}
