package main

import (
	"context"
	"io"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/simulation"
)

// runTurnover runs simulation.TurnoverTable and prints its table, or puts
// it in a document's turnover section (--update).
func runTurnover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("turnover", "turnover [flags]\n\nSimulates D-PSGD, push-sum and random walk with a static roster and with\n20% and 50% of the members replaced during the run (by goodbyes and by\ndeaths), and prints a Markdown table: final accuracy, the largest gap to\nthe static run, rounds to recover after the last change.", stderr)
	var f simulation.TurnoverFlags
	f.Register(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	c, err := f.Config(fs)
	if err != nil {
		return err
	}
	return simulation.ExecuteTurnover(ctx, c, &f, stdout, stderr)
}
