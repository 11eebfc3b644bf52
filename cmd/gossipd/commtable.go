package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/simulation"
)

// runCommTable runs simulation.CommTable and prints its table, or puts it
// in a document's section (--update FILE --section NAME).
func runCommTable(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("commtable", "commtable [flags]\n\nSimulates each run (protocol, compression, learning rate) on one job and\nprints a Markdown table: the bytes sent until the mean accuracy first\nreaches --target, how many times fewer than the protocol uncompressed,\nthe final accuracy and the command behind each row.", stderr)
	update := fs.String("update", "", "write the table into this file's <!-- SECTION:begin/end --> section instead of stdout")
	section := fs.String("section", "commtable", "the section of --update")
	var c simulation.CommTableConfig
	fs.StringVar(&c.Dataset, "dataset", "fashion-mnist", "dataset")
	fs.StringVar(&c.Model, "model", "softmax", "model: softmax, svm or mlp")
	hidden := fs.String("hidden", "", "MLP hidden widths, comma-separated (with --model mlp)")
	fs.IntVar(&c.Peers, "peers", 100, "peers")
	fs.IntVar(&c.Rounds, "rounds", 100, "rounds")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed")
	fs.Float64Var(&c.Target, "target", 0.7, "the mean accuracy to reach")
	runs := fs.String("runs", "dpsgd/none/0.5,dpsgd/int8/0.5,dpsgd/topk:0.01/0.5,randomwalk/none/0.1,randomwalk/int8/0.1,randomwalk/subsample:0.1/0.1", "runs PROTOCOL/COMPRESSION/LR, comma-separated")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := cli.CheckNumbers(fs, cli.Bounds{"peers": "[1,inf)", "rounds": "[1,inf)", "target": "(0,1]", "seed": "[0,inf)"}); err != nil {
		return err
	}
	if *update == "" && cli.FlagSet(fs, "section") {
		return fmt.Errorf("%w: --section needs --update", errUsage)
	}
	if *update != "" {
		if err := cli.CheckSection("update", *update, *section); err != nil {
			return err
		}
	}
	var err error
	if *hidden != "" {
		if c.Model != "mlp" {
			return fmt.Errorf("%w: --hidden applies to --model mlp", errUsage)
		}
		if c.Hidden, err = model.ParseHidden(*hidden); err != nil {
			return fmt.Errorf("%w: --hidden: %v", errUsage, err)
		}
	}
	if c.Runs, err = simulation.ParseCommRuns(*runs); err != nil {
		return fmt.Errorf("%w: --runs: %v", errUsage, err)
	}
	if !(c.Target > 0 && c.Target < 1) {
		return fmt.Errorf("%w: --target %v, want an accuracy in (0,1)", errUsage, c.Target)
	}
	start := time.Now()
	table, err := simulation.CommTable(ctx, c, func(run string) {
		fmt.Fprintf(stderr, "%s done (%s)\n", run, time.Since(start).Round(time.Second))
	})
	if err != nil {
		return err
	}
	text := fmt.Sprintf("%d peers, %s, %s, %d rounds, seed %d, target %.2f; produced by\n`gossipd commtable %s` (%s on %s).\n\n%s",
		c.Peers, c.Dataset, c.Model, c.Rounds, c.Seed, c.Target, strings.Join(args, " "), time.Since(start).Round(time.Second), compute.CPUModel(), table)
	if *update != "" {
		return cli.ReplaceSection(*update, *section, text)
	}
	_, err = io.WriteString(stdout, text)
	return err
}
