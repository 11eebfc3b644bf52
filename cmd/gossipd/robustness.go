package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/simulation"
)

// runRobustness runs simulation.Robustness and writes its tables.
func runRobustness(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("robustness", "robustness [flags]\n\nSimulates D-PSGD, random walk and push-sum with each aggregator (mean,\nmedian, trimmed mean, Krum, clipped gossip), clean and under every attack\nwith 10% and 20% Byzantine peers, and writes Markdown tables of the honest\npeers' final accuracy.", stderr)
	out := fs.String("out", "-", "Markdown file to write ('-' for stdout)")
	var c simulation.RobustnessConfig
	fs.StringVar(&c.Dataset, "dataset", "digits", "dataset")
	fs.IntVar(&c.Peers, "peers", 20, "peers")
	fs.IntVar(&c.Rounds, "rounds", 100, "rounds")
	fs.StringVar(&c.Topology, "topology", "complete", "D-PSGD topology")
	protocols := fs.String("protocols", "dpsgd,randomwalk,pushsum", "protocols, comma-separated")
	fs.Float64Var(&c.LR, "lr", 0.5, "learning rate")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := cli.CheckNumbers(fs, cli.Bounds{"peers": "[1,inf)", "rounds": "[1,inf)", "lr": "(0,inf)", "seed": "[0,inf)"}); err != nil {
		return err
	}
	if *out != "-" {
		if err := cli.CheckOutput("out", *out); err != nil {
			return err
		}
	}
	c.Protocols = cli.SplitList(*protocols)
	start := time.Now()
	tables, err := simulation.Robustness(ctx, c, func(row string) {
		fmt.Fprintf(stderr, "%s done (%s)\n", row, time.Since(start).Round(time.Second))
	})
	if err != nil {
		return err
	}
	cmd := fmt.Sprintf("gossipd robustness --dataset %s --peers %d --rounds %d --topology %s --protocols %s --lr %g --seed %d", c.Dataset, c.Peers, c.Rounds, c.Topology, *protocols, c.LR, c.Seed)
	text := "# Robustness\n\n" + simulation.RobustnessLegend + fmt.Sprintf("Honest peers' mean final test accuracy, %d peers, %s, %d rounds, lr %g, seed %d;\ntrimmed mean and Krum tolerate %d attackers. Produced by `%s` (%s).\n\n%s",
		c.Peers, c.Dataset, c.Rounds, c.LR, c.Seed, c.Tolerated(), cmd, time.Since(start).Round(time.Second), tables)
	if *out == "-" {
		_, err := io.WriteString(stdout, text)
		return err
	}
	return os.WriteFile(*out, []byte(text), 0o644)
}
