package simulation

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
)

// The commands that simulate a grid of runs and write a Markdown table:
// `gossipd commtable` (CommTable), `gossipd turnover` (TurnoverTable) and
// `gossipd robustness` (Robustness). Each has its flags (Register), their
// checks (Config; refusals wrap cli.ErrUsage and name the flag) and its
// run (Execute…), which tells stderr as each run is done and writes the
// table with the lines that say how it was made.

// CommTableFlags are `gossipd commtable`'s settings as flags give them.
type CommTableFlags struct {
	c            CommTableConfig
	hidden, runs string
	// Update names a file whose <!-- Section:begin/end --> section gets
	// the table instead of stdout.
	Update, Section string
}

// CommTableBounds are the values commtable's numeric flags take.
var CommTableBounds = cli.Bounds{"peers": "[1,inf)", "rounds": "[1,inf)", "target": "(0,1]", "seed": "[0,inf)"}

// Register declares commtable's flags on fs.
func (f *CommTableFlags) Register(fs *flag.FlagSet) {
	c := &f.c
	fs.StringVar(&f.Update, "update", "", "write the table into this file's <!-- SECTION:begin/end --> section instead of stdout")
	fs.StringVar(&f.Section, "section", "commtable", "the section of --update")
	fs.StringVar(&c.Dataset, "dataset", "fashion-mnist", "dataset")
	fs.StringVar(&c.Model, "model", "softmax", "model: softmax, svm or mlp")
	fs.StringVar(&f.hidden, "hidden", "", "MLP hidden widths, comma-separated (with --model mlp)")
	fs.IntVar(&c.Peers, "peers", 100, "peers")
	fs.IntVar(&c.Rounds, "rounds", 100, "rounds")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed")
	fs.Float64Var(&c.Target, "target", 0.7, "the mean accuracy to reach")
	fs.StringVar(&f.runs, "runs", "dpsgd/none/0.5,dpsgd/int8/0.5,dpsgd/topk:0.01/0.5,randomwalk/none/0.1,randomwalk/int8/0.1,randomwalk/subsample:0.1/0.1", "runs PROTOCOL/COMPRESSION/LR, comma-separated")
}

// Config checks the flags of fs (parsed) and returns the table's config.
func (f *CommTableFlags) Config(fs *flag.FlagSet) (CommTableConfig, error) {
	c := f.c
	if err := cli.CheckNumbers(fs, CommTableBounds); err != nil {
		return c, err
	}
	if f.Update == "" && cli.FlagSet(fs, "section") {
		return c, fmt.Errorf("%w: --section needs --update", cli.ErrUsage)
	}
	if f.Update != "" {
		if err := cli.CheckSection("update", f.Update, f.Section); err != nil {
			return c, err
		}
	}
	var err error
	if f.hidden != "" {
		if c.Model != "mlp" {
			return c, fmt.Errorf("%w: --hidden applies to --model mlp", cli.ErrUsage)
		}
		if c.Hidden, err = model.ParseHidden(f.hidden); err != nil {
			return c, fmt.Errorf("%w: --hidden: %v", cli.ErrUsage, err)
		}
	}
	if c.Runs, err = ParseCommRuns(f.runs); err != nil {
		return c, fmt.Errorf("%w: --runs: %v", cli.ErrUsage, err)
	}
	if !(c.Target > 0 && c.Target < 1) {
		return c, fmt.Errorf("%w: --target %v, want an accuracy in (0,1)", cli.ErrUsage, c.Target)
	}
	return c, nil
}

// ExecuteCommTable runs CommTable(c) as `gossipd commtable args` does.
func ExecuteCommTable(ctx context.Context, c CommTableConfig, f *CommTableFlags, args []string, stdout, stderr io.Writer) error {
	defer cli.CollectSooner()()
	start := time.Now()
	table, err := CommTable(ctx, c, doneLine(stderr, start))
	if err != nil {
		return err
	}
	text := fmt.Sprintf("%d peers, %s, %s, %d rounds, seed %d, target %.2f; produced by\n`gossipd commtable %s` (%s on %s).\n\n%s",
		c.Peers, c.Dataset, c.Model, c.Rounds, c.Seed, c.Target, strings.Join(args, " "), time.Since(start).Round(time.Second), compute.CPUModel(), table)
	return writeSection(stdout, f.Update, f.Section, text)
}

// TurnoverFlags are `gossipd turnover`'s settings as flags give them.
type TurnoverFlags struct {
	c                    TurnoverTableConfig
	protocols, turnovers string
	// Update names a file whose <!-- turnover:begin/end --> section gets
	// the table instead of stdout.
	Update string
}

// TurnoverBounds are the values turnover's numeric flags take.
var TurnoverBounds = cli.Bounds{"peers": "[1,inf)", "rounds": "[1,inf)", "lr": "(0,inf)", "seed": "[0,inf)"}

// Register declares turnover's flags on fs.
func (f *TurnoverFlags) Register(fs *flag.FlagSet) {
	c := &f.c
	fs.StringVar(&f.Update, "update", "", "write the table into this file's <!-- turnover:begin/end --> section instead of stdout")
	fs.StringVar(&c.Dataset, "dataset", "fashion-mnist", "dataset")
	fs.IntVar(&c.Peers, "peers", 100, "peers")
	fs.IntVar(&c.Rounds, "rounds", 100, "rounds")
	fs.Float64Var(&c.LR, "lr", 0.1, "learning rate")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed")
	fs.StringVar(&f.protocols, "protocols", "dpsgd,pushsum,randomwalk", "protocols, comma-separated")
	fs.StringVar(&f.turnovers, "turnovers", "0.2,0.5", "fractions of the members replaced, comma-separated")
}

// Config checks the flags of fs (parsed) and returns the table's config.
func (f *TurnoverFlags) Config(fs *flag.FlagSet) (TurnoverTableConfig, error) {
	c := f.c
	if err := cli.CheckNumbers(fs, TurnoverBounds); err != nil {
		return c, err
	}
	if f.Update != "" {
		if err := cli.CheckSection("update", f.Update, "turnover"); err != nil {
			return c, err
		}
	}
	c.Protocols = cli.SplitList(f.protocols)
	for _, s := range cli.SplitList(f.turnovers) {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v > 0 && v <= 1) {
			return c, fmt.Errorf("%w: --turnovers: %q is not a fraction in (0, 1]", cli.ErrUsage, s)
		}
		c.Turnovers = append(c.Turnovers, v)
	}
	return c, nil
}

// ExecuteTurnover runs TurnoverTable(c) as `gossipd turnover` does.
func ExecuteTurnover(ctx context.Context, c TurnoverTableConfig, f *TurnoverFlags, stdout, stderr io.Writer) error {
	defer cli.CollectSooner()()
	start := time.Now()
	table, err := TurnoverTable(ctx, c, doneLine(stderr, start))
	if err != nil {
		return err
	}
	text := fmt.Sprintf("%d peers, %s, softmax, IID, %d rounds, lr %g, seed %d; produced by\n`gossipd turnover --dataset %s --peers %d --rounds %d --lr %g --seed %d --protocols %s --turnovers %s` (%s).\n\n%s",
		c.Peers, c.Dataset, c.Rounds, c.LR, c.Seed, c.Dataset, c.Peers, c.Rounds, c.LR, c.Seed, f.protocols, f.turnovers, time.Since(start).Round(time.Second), table)
	return writeSection(stdout, f.Update, "turnover", text)
}

// RobustnessFlags are `gossipd robustness`'s settings as flags give them.
type RobustnessFlags struct {
	c         RobustnessConfig
	protocols string
	// Out is the Markdown file to write ("-": stdout).
	Out string
}

// RobustnessBounds are the values robustness's numeric flags take.
var RobustnessBounds = cli.Bounds{"peers": "[1,inf)", "rounds": "[1,inf)", "lr": "(0,inf)", "seed": "[0,inf)"}

// Register declares robustness's flags on fs.
func (f *RobustnessFlags) Register(fs *flag.FlagSet) {
	c := &f.c
	fs.StringVar(&f.Out, "out", "-", "Markdown file to write ('-' for stdout)")
	fs.StringVar(&c.Dataset, "dataset", "digits", "dataset")
	fs.IntVar(&c.Peers, "peers", 20, "peers")
	fs.IntVar(&c.Rounds, "rounds", 100, "rounds")
	fs.StringVar(&c.Topology, "topology", "complete", "D-PSGD topology")
	fs.StringVar(&f.protocols, "protocols", "dpsgd,randomwalk,pushsum", "protocols, comma-separated")
	fs.Float64Var(&c.LR, "lr", 0.5, "learning rate")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed")
}

// Config checks the flags of fs (parsed) and returns the grid's config.
func (f *RobustnessFlags) Config(fs *flag.FlagSet) (RobustnessConfig, error) {
	c := f.c
	if err := cli.CheckNumbers(fs, RobustnessBounds); err != nil {
		return c, err
	}
	if f.Out != "-" {
		if err := cli.CheckOutput("out", f.Out); err != nil {
			return c, err
		}
	}
	c.Protocols = cli.SplitList(f.protocols)
	return c, nil
}

// ExecuteRobustness runs Robustness(c) as `gossipd robustness` does.
func ExecuteRobustness(ctx context.Context, c RobustnessConfig, f *RobustnessFlags, stdout, stderr io.Writer) error {
	defer cli.CollectSooner()()
	start := time.Now()
	tables, err := Robustness(ctx, c, doneLine(stderr, start))
	if err != nil {
		return err
	}
	cmd := fmt.Sprintf("gossipd robustness --dataset %s --peers %d --rounds %d --topology %s --protocols %s --lr %g --seed %d", c.Dataset, c.Peers, c.Rounds, c.Topology, f.protocols, c.LR, c.Seed)
	text := "# Robustness\n\n" + RobustnessLegend + fmt.Sprintf("Honest peers' mean final test accuracy, %d peers, %s, %d rounds, lr %g, seed %d;\ntrimmed mean and Krum tolerate %d attackers. Produced by `%s` (%s).\n\n%s",
		c.Peers, c.Dataset, c.Rounds, c.LR, c.Seed, c.Tolerated(), cmd, time.Since(start).Round(time.Second), tables)
	if f.Out == "-" {
		_, err := io.WriteString(stdout, text)
		return err
	}
	return os.WriteFile(f.Out, []byte(text), 0o644)
}

// doneLine tells stderr that a run is done, with the time since start.
func doneLine(stderr io.Writer, start time.Time) func(string) {
	return func(run string) {
		fmt.Fprintf(stderr, "%s done (%s)\n", run, time.Since(start).Round(time.Second))
	}
}

// writeSection writes text into file's section (cli.ReplaceSection), or
// to stdout where file is "".
func writeSection(stdout io.Writer, file, section, text string) error {
	if file != "" {
		return cli.ReplaceSection(file, section, text)
	}
	_, err := io.WriteString(stdout, text)
	return err
}
