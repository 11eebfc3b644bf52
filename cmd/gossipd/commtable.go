package main

import (
	"context"
	"io"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/simulation"
)

// runCommTable runs simulation.CommTable and prints its table, or puts it
// in a document's section (--update FILE --section NAME).
func runCommTable(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("commtable", "commtable [flags]\n\nSimulates each run (protocol, compression, learning rate) on one job and\nprints a Markdown table: the bytes sent until the mean accuracy first\nreaches --target, how many times fewer than the protocol uncompressed,\nthe final accuracy and the command behind each row.", stderr)
	var f simulation.CommTableFlags
	f.Register(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	c, err := f.Config(fs)
	if err != nil {
		return err
	}
	return simulation.ExecuteCommTable(ctx, c, &f, args, stdout, stderr)
}
