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
	var c demo.Config
	var jsonOut bool
	fs.IntVar(&c.Peers, "peers", 8, "daemons to start (2 to 32)")
	fs.StringVar(&c.Protocol, "protocol", "randomwalk", "gossip protocol")
	fs.StringVar(&c.Partition, "partition", "shards:2", "how the digits are split among the peers: shards:k|dirichlet:α|iid")
	fs.DurationVar(&c.Delta, "delta", 0, "gossip period (default 200ms)")
	fs.Float64Var(&c.Target, "target", 0.9, "stop once the peers' mean accuracy holds at this")
	fs.DurationVar(&c.Duration, "duration", 0, "stop after this long at most (default 1m)")
	fs.StringVar(&c.PNG, "png", "demo-curves.png", "where to write the curves")
	fs.StringVar(&c.Dir, "dir", "", "keep the peers' stores and logs here (default: a temporary directory, removed)")
	fs.StringVar(&c.Device, "device", "auto", "where the daemons train: auto|cpu|cuda[:N] (their run --device)")
	fs.BoolVar(&jsonOut, "json", false, "print the summary as JSON (and no live view)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := cli.CheckNumbers(fs, cli.Bounds{"peers": "[2,32]", "delta": "(0,inf)", "target": "(0,1]", "duration": "(0,inf)"}); err != nil {
		return err
	}
	c.Out = stdout
	c.Live = !jsonOut && cli.IsTerminal(stdout)
	if jsonOut {
		c.Out = io.Discard
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := cli.CheckOutput("png", c.PNG); err != nil {
		return err
	}
	if err := checkDevice(c.Device); err != nil {
		return err
	}
	s, err := demo.Run(ctx, c)
	if s != nil {
		if jsonOut {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.Encode(s)
		} else {
			fmt.Fprintf(stdout, "\n%s\nCurves: %s. Peer 0's dashboard was at http://%s/ (its API: /status, /metrics, /model).\n", s, s.PNG, s.API)
		}
	}
	return err
}
