package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gossipd/gossipd/demo"
	"github.com/gossipd/gossipd/internal/cli"
)

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("demo", "demo [flags]\n\nStarts a handful of gossipd daemons on 127.0.0.1, each with a non-IID piece\nof the digits that no peer learns much from alone, and shows them learning\ntogether with no server; ends with a summary and a PNG of the curves.\nCtrl-C stops it (and every daemon) at once.", stderr)
	var f demo.Flags
	f.Register(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	c, err := f.Config(fs, stdout)
	if err != nil {
		return err
	}
	s, err := demo.Run(ctx, c)
	if s != nil {
		if f.JSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.Encode(s)
		} else {
			fmt.Fprintf(stdout, "\n%s\nCurves: %s. Peer 0's dashboard was at http://%s/ (its API: /status, /metrics, /model).\n", s, s.PNG, s.API)
		}
	}
	return err
}
