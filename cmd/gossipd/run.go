package main

import (
	"context"
	"io"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/internal/cli"
)

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("run", "run [flags]\n\nRuns the daemon: joins peers over libp2p, trains on local data, exchanges\nmodels, checkpoints to --store and serves the API on --api.", stderr)
	var s daemon.Settings
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
	return daemon.Launch(ctx, &s, fs, stderr)
}
