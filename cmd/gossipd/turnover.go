package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/simulation"
)

// runTurnover runs simulation.TurnoverTable and prints its table, or puts
// it in a document's turnover section (--update).
func runTurnover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("turnover", "turnover [flags]\n\nSimulates D-PSGD, push-sum and random walk with a static roster and with\n20% and 50% of the members replaced during the run (by goodbyes and by\ndeaths), and prints a Markdown table: final accuracy, the largest gap to\nthe static run, rounds to recover after the last change.", stderr)
	update := fs.String("update", "", "write the table into this file's <!-- turnover:begin/end --> section instead of stdout")
	var c simulation.TurnoverTableConfig
	fs.StringVar(&c.Dataset, "dataset", "fashion-mnist", "dataset")
	fs.IntVar(&c.Peers, "peers", 100, "peers")
	fs.IntVar(&c.Rounds, "rounds", 100, "rounds")
	fs.Float64Var(&c.LR, "lr", 0.1, "learning rate")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed")
	protocols := fs.String("protocols", "dpsgd,pushsum,randomwalk", "protocols, comma-separated")
	turnovers := fs.String("turnovers", "0.2,0.5", "fractions of the members replaced, comma-separated")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := cli.CheckNumbers(fs, cli.Bounds{"peers": "[1,inf)", "rounds": "[1,inf)", "lr": "(0,inf)", "seed": "[0,inf)"}); err != nil {
		return err
	}
	if *update != "" {
		if err := cli.CheckSection("update", *update, "turnover"); err != nil {
			return err
		}
	}
	c.Protocols = cli.SplitList(*protocols)
	for _, s := range cli.SplitList(*turnovers) {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v > 0 && v <= 1) {
			return fmt.Errorf("%w: --turnovers: %q is not a fraction in (0, 1]", errUsage, s)
		}
		c.Turnovers = append(c.Turnovers, v)
	}
	start := time.Now()
	table, err := simulation.TurnoverTable(ctx, c, func(run string) {
		fmt.Fprintf(stderr, "%s done (%s)\n", run, time.Since(start).Round(time.Second))
	})
	if err != nil {
		return err
	}
	text := fmt.Sprintf("%d peers, %s, softmax, IID, %d rounds, lr %g, seed %d; produced by\n`gossipd turnover --dataset %s --peers %d --rounds %d --lr %g --seed %d --protocols %s --turnovers %s` (%s).\n\n%s",
		c.Peers, c.Dataset, c.Rounds, c.LR, c.Seed, c.Dataset, c.Peers, c.Rounds, c.LR, c.Seed, *protocols, *turnovers, time.Since(start).Round(time.Second), table)
	if *update != "" {
		return cli.ReplaceSection(*update, "turnover", text)
	}
	_, err = io.WriteString(stdout, text)
	return err
}
