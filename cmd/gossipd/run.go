package main

import (
	"context"
	"io"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/node"
)

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("run", "run [flags]\n\nRuns the daemon: joins peers over libp2p, trains on local data, exchanges\nmodels, checkpoints to --store and serves the API on --api.", stderr)
	var s node.Settings
	s.Register(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := cli.CheckEnv(fs, "GOSSIPD_", envNotFlags...); err != nil {
		return err
	}
	if err := cli.ApplySettings(fs, "config", "GOSSIPD_"); err != nil {
		return err
	}
	return node.Launch(ctx, &s, fs, stderr)
}
