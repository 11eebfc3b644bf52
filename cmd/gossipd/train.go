package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/gossipd/gossipd/central"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/model"
)

func runTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("train", "train [flags]\n\nTrains one model centrally on one machine and reports its test accuracy.", stderr)
	var f central.Flags
	f.Register(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	c, err := f.Config(fs)
	if err != nil {
		return err
	}
	quiet, jsonOut := f.Quiet, f.JSON
	bar := cli.NewProgressBar(stderr, !quiet)
	rep, err := central.Train(ctx, c, func(p model.Progress) {
		bar.Update(fmt.Sprintf("epoch %d/%d", p.Epoch, p.Epochs), p.Step, p.Steps, fmt.Sprintf("loss %.4f", p.Loss))
		if p.Step == p.Steps {
			bar.Finish()
		}
	})
	if errors.Is(err, central.ErrConfig) {
		return cli.ConfigUsage(err, central.ErrConfig)
	}
	if err != nil {
		return cli.DatasetUsage(err)
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		return enc.Encode(rep)
	}
	rep.WriteText(stdout)
	return nil
}
