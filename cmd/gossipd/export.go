package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/internal/apiclient"
	"github.com/gossipd/gossipd/internal/cli"
)

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("export", "export (--store DIR | --api ADDR [--api-token FILE]) --out FILE\n\nWrites a model as safetensors, with the job spec and the feature scaler in\nits metadata: the newest checkpoint of a stopped daemon's store (--store),\nor a running daemon's current model (--api: its GET /model).", stderr)
	storeDir := fs.String("store", "gossipd-data", "the daemon's --store directory")
	out := fs.String("out", "model.safetensors", "file to write")
	var af apiclient.Flags
	af.Declare(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	fromAPI := cli.FlagSet(fs, "api") || cli.FlagSet(fs, "api-token") || cli.FlagSet(fs, "api-ca")
	if fromAPI && cli.FlagSet(fs, "store") {
		return fmt.Errorf("%w: export: --store reads a stopped daemon's store, --api asks a running one: give one or the other", errUsage)
	}
	if fromAPI {
		return exportFromAPI(ctx, af, *out, stdout)
	}
	c, err := daemon.ExportFile(*storeDir, *out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s, checkpoint %d (age %g, %s)\n", *out, c.Spec.Model, c.Seq, c.State.Age, c.Time.Format(time.RFC3339))
	return nil
}

// exportFromAPI writes a running daemon's /model to out.
func exportFromAPI(ctx context.Context, af apiclient.Flags, out string, stdout io.Writer) error {
	n, meta, base, err := af.ExportModel(ctx, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d tensors of job %.12s (age %s) from %s\n", out, n, meta["job_id"], meta["age"], base)
	return nil
}
