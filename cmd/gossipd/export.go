package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/internal/apiclient"
	"github.com/gossipd/gossipd/internal/cli"
)

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("export", "export (--store DIR | --api ADDR [--api-token FILE]) --out FILE [--format F]\n\nWrites a model: the newest checkpoint of a stopped daemon's store (--store),\nor a running daemon's current model (--api: its GET /model). As safetensors,\nthe tensors under PyTorch's names with the job spec and the feature scaler in\nits metadata; as ONNX (opset 13), a graph any ONNX runtime runs on raw\nfeatures, giving logits and probabilities.", stderr)
	storeDir := fs.String("store", "gossipd-data", "the daemon's --store directory")
	out := fs.String("out", "model.safetensors", "file to write")
	format := fs.String("format", "", "safetensors or onnx (default: onnx for an --out ending in .onnx, else safetensors)")
	var af apiclient.Flags
	af.Declare(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	fromAPI := cli.FlagSet(fs, "api") || cli.FlagSet(fs, "api-token") || cli.FlagSet(fs, "api-ca")
	if fromAPI && cli.FlagSet(fs, "store") {
		return fmt.Errorf("%w: export: --store reads a stopped daemon's store, --api asks a running one: give one or the other", errUsage)
	}
	if *format == "" {
		*format = daemon.FormatSafetensors
		if strings.HasSuffix(*out, ".onnx") {
			*format = daemon.FormatONNX
		}
	}
	if !slices.Contains(daemon.Formats, *format) {
		return fmt.Errorf("%w: export: --format %q, want %s", errUsage, *format, strings.Join(daemon.Formats, " or "))
	}
	if fromAPI {
		return exportFromAPI(ctx, af, *out, *format, stdout)
	}
	c, err := daemon.ExportFile(*storeDir, *out, *format)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%s): %s, checkpoint %d (age %g, %s)\n", *out, *format, c.Spec.Model, c.Seq, c.State.Age, c.Time.Format(time.RFC3339))
	return nil
}

// exportFromAPI writes a running daemon's /model to out.
func exportFromAPI(ctx context.Context, af apiclient.Flags, out, format string, stdout io.Writer) error {
	if format == daemon.FormatONNX {
		size, base, err := af.ExportONNX(ctx, out)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s: an ONNX model of %d bytes from %s\n", out, size, base)
		return nil
	}
	n, meta, base, err := af.ExportModel(ctx, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d tensors of job %.12s (age %s) from %s\n", out, n, meta["job_id"], meta["age"], base)
	return nil
}
