package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/gossipd/gossipd/internal/apiclient"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/node"
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
	store, err := openExistingStore("export", *storeDir)
	if err != nil {
		return err
	}
	defer store.Close()
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	c, err := node.Export(store, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(*out)
		return fmt.Errorf("export %s: %w", *storeDir, err)
	}
	fmt.Fprintf(stdout, "wrote %s: %s, checkpoint %d (age %g, %s)\n", *out, c.Spec.Model, c.Seq, c.State.Age, c.Time.Format(time.RFC3339))
	return nil
}

// exportFromAPI writes a running daemon's /model to out, after checking
// that it is a safetensors file.
func exportFromAPI(ctx context.Context, af apiclient.Flags, out string, stdout io.Writer) error {
	b, base, err := af.Request(ctx, "export", http.MethodGet, "/model", time.Minute)
	if err != nil {
		return err
	}
	_, vals, meta, err := model.ReadSafetensors(b)
	if err != nil {
		return fmt.Errorf("export: %s/model: %w", base, err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d tensors of job %.12s (age %s) from %s\n", out, len(vals), meta["job_id"], meta["age"], base)
	return nil
}
