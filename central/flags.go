package central

import (
	"flag"
	"fmt"
	"strings"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/device"
)

// Flags are `gossipd train`'s settings as flags give them.
type Flags struct {
	c           Config
	data        job.Data
	JSON, Quiet bool
}

// Bounds are the values train's numeric flags take.
var Bounds = cli.Bounds{"epochs": "[1,inf)", "batch": "[1,inf)", "lambda": "(0,inf)", "lr": "(0,inf)",
	"momentum": "[0,1)", "weight-decay": "[0,inf)", "test-fraction": "(0,1)", "threads": "[0,inf)", "seed": "[0,inf)"}

// Register declares train's flags on fs, in groups; the data flags are
// the same as simulate's and run's (job.Data).
func (f *Flags) Register(fs *flag.FlagSet) {
	c := &f.c
	cli.Group(fs, "Data", func() {
		f.data.Register(fs)
		fs.StringVar(&c.Scale, "scale", "minmax", "feature scaling fitted on the training split: minmax|standard|none")
		fs.StringVar(&c.Shard, "shard", "", "train on shard i/n of the training split only (e.g. 0/8): what one peer reaches alone")
	})
	cli.Group(fs, "Model and training", func() {
		fs.StringVar(&c.Model, "model", job.DefaultModel, model.Help)
		fs.StringVar(&c.Hidden, "hidden", job.DefaultHidden, "MLP hidden widths, comma-separated (mlp only)")
		fs.StringVar(&c.InitFrom, "init-from", "", model.InitFromHelp)
		fs.Float64Var(&c.Lambda, "lambda", model.DefaultLambda, "SVM L2 regularisation λ (svm only)")
		fs.IntVar(&c.Epochs, "epochs", 20, "epochs over the training data")
		fs.IntVar(&c.Batch, "batch", 32, "minibatch size")
		fs.Float64Var(&c.LR, "lr", 0, "learning rate (default: 0.1 for sgd, 0.001 for adam; pegasos uses 1/(λt))")
		fs.StringVar(&c.Optimizer, "optimizer", "", "optimizer: "+strings.Join(model.Optimizers, "|")+" (default: pegasos for svm, else sgd)")
		fs.Float64Var(&c.Momentum, "momentum", 0, "SGD momentum")
		fs.Float64Var(&c.WeightDecay, "weight-decay", 0, "L2 weight decay added to the gradient")
		fs.Uint64Var(&c.Seed, "seed", 1, "seed for initialisation, split and shuffling")
	})
	cli.Group(fs, "Process and output", func() {
		fs.IntVar(&c.Threads, "threads", 0, "compute threads (default: all cores)")
		fs.BoolVar(&c.PureGo, "purego", false, "use the portable Go GEMM kernel instead of assembly")
		fs.StringVar(&c.Device, "device", "auto", "where training runs: "+device.Values+" (auto: a GPU gossipd can use, else the CPU)")
		fs.BoolVar(&c.NoGraphs, "no-graphs", false, "on a GPU, queue each step's kernels one by one instead of replaying CUDA graphs")
		fs.BoolVar(&f.JSON, "json", false, "print the summary as one JSON object")
		fs.BoolVar(&f.Quiet, "quiet", false, "no progress bar")
	})
}

// Config resolves the flags of fs (parsed) into a checked Config.
// Errors wrap cli.ErrUsage and name the flag.
func (f *Flags) Config(fs *flag.FlagSet) (Config, error) {
	usage := func(name string, err error) (Config, error) {
		return Config{}, fmt.Errorf("%w: --%s: %v", cli.ErrUsage, name, err)
	}
	if err := cli.CheckNumbers(fs, Bounds); err != nil {
		return Config{}, err
	}
	c := f.c
	c.Dataset, c.LabelColumn, c.InputShape = f.data.Dataset, f.data.LabelColumn, f.data.InputShape
	if cli.FlagSet(fs, "test-fraction") {
		c.TestFraction = f.data.TestFraction // else the loader's default, and no error for a source with a test split
	}
	if cli.FlagSet(fs, "partition") {
		c.Partition = f.data.Partition
	}
	var set []string
	fs.Visit(func(fl *flag.Flag) { set = append(set, fl.Name) })
	if err := c.CheckOptions(set); err != nil {
		return Config{}, cli.ConfigUsage(err, ErrConfig)
	}
	if _, err := model.ParseHidden(c.Hidden); err != nil {
		return usage("hidden", err)
	}
	if err := dataset.CheckScaling(c.Scale); err != nil {
		return usage("scale", err)
	}
	if c.Shard != "" {
		if _, _, err := dataset.ParseShard(c.Shard); err != nil {
			return usage("shard", err)
		}
	}
	if c.Partition != "" {
		if _, err := dataset.ParsePartitioner(c.Partition); err != nil {
			return usage("partition", err)
		}
	}
	return c, nil
}
