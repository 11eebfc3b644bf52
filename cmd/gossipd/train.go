package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/device"
	"github.com/gossipd/gossipd/simulation"
)

func runTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("train", "train [flags]\n\nTrains one model centrally on one machine and reports its test accuracy.", stderr)
	var c simulation.CentralConfig
	var jsonOut, quiet bool
	fs.StringVar(&c.Dataset, "dataset", "digits", "dataset: digits (embedded), fashion-mnist, or a path (.csv[.gz], .libsvm, or a directory of IDX files)")
	fs.StringVar(&c.LabelColumn, "label-column", "", "CSV label column: a header name or 0-based index (default: last column)")
	fs.StringVar(&c.Scale, "scale", "minmax", "feature scaling fitted on the training split: minmax|standard|none")
	fs.Float64Var(&c.TestFraction, "test-fraction", 0.2, "fraction held out for testing when the dataset has no test split")
	fs.StringVar(&c.Shard, "shard", "", "train on shard i/n of the training split only (e.g. 0/8): what one peer reaches alone")
	fs.StringVar(&c.Partition, "partition", "", "how --shard cuts the data: iid (default)|dirichlet:α|shards:k|quantity:α")
	fs.StringVar(&c.Model, "model", "softmax", "model: "+strings.Join(model.Kinds, "|"))
	fs.StringVar(&c.Hidden, "hidden", "128", "MLP hidden layer widths, comma-separated (mlp only)")
	fs.Float64Var(&c.Lambda, "lambda", model.DefaultLambda, "SVM L2 regularisation λ (svm only)")
	fs.IntVar(&c.Epochs, "epochs", 20, "epochs over the training data")
	fs.IntVar(&c.Batch, "batch", 32, "minibatch size")
	fs.Float64Var(&c.LR, "lr", 0, "learning rate (default: 0.1 for sgd, 0.001 for adam; pegasos uses 1/(λt))")
	fs.StringVar(&c.Optimizer, "optimizer", "", "optimizer: "+strings.Join(model.Optimizers, "|")+" (default: pegasos for svm, else sgd)")
	fs.Float64Var(&c.Momentum, "momentum", 0, "SGD momentum")
	fs.Float64Var(&c.WeightDecay, "weight-decay", 0, "L2 weight decay added to the gradient")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed for initialisation, split and shuffling")
	fs.IntVar(&c.Threads, "threads", 0, "compute threads (default: all cores)")
	fs.BoolVar(&c.PureGo, "purego", false, "use the portable Go GEMM kernel instead of assembly")
	fs.StringVar(&c.Device, "device", "auto", "where training runs: "+device.Values+" (auto: a GPU when gossipd can use one, else the CPU; the report says which and why)")
	fs.BoolVar(&c.NoGraphs, "no-graphs", false, "on a GPU, queue each step's kernels one by one instead of replaying a recorded step (CUDA graphs), e.g. to compare")
	fs.BoolVar(&jsonOut, "json", false, "print the summary as one JSON object")
	fs.BoolVar(&quiet, "quiet", false, "no progress bar")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := cli.CheckNumbers(fs, cli.Bounds{"epochs": "[1,inf)", "batch": "[1,inf)", "lambda": "(0,inf)", "lr": "(0,inf)",
		"momentum": "[0,1)", "weight-decay": "[0,inf)", "test-fraction": "(0,1)", "threads": "[0,inf)", "seed": "[0,inf)"}); err != nil {
		return err
	}
	if !cli.FlagSet(fs, "test-fraction") {
		c.TestFraction = 0 // the loader's default, and no error for a source with a test split
	}
	var set []string
	fs.Visit(func(f *flag.Flag) { set = append(set, f.Name) })
	if err := c.CheckOptions(set); err != nil {
		return configUsage(err, simulation.ErrConfig)
	}
	if _, err := model.ParseHidden(c.Hidden); err != nil {
		return fmt.Errorf("%w: --hidden: %v", errUsage, err)
	}
	if err := dataset.CheckScaling(c.Scale); err != nil {
		return fmt.Errorf("%w: --scale: %v", errUsage, err)
	}
	if c.Shard != "" {
		if _, _, err := dataset.ParseShard(c.Shard); err != nil {
			return fmt.Errorf("%w: --shard: %v", errUsage, err)
		}
	}
	if c.Partition != "" {
		if _, err := dataset.ParsePartitioner(c.Partition); err != nil {
			return fmt.Errorf("%w: --partition: %v", errUsage, err)
		}
	}
	bar := cli.NewProgressBar(stderr, !quiet)
	rep, err := simulation.TrainCentral(ctx, c, func(p model.Progress) {
		bar.Update(fmt.Sprintf("epoch %d/%d", p.Epoch, p.Epochs), p.Step, p.Steps, fmt.Sprintf("loss %.4f", p.Loss))
		if p.Step == p.Steps {
			bar.Finish()
		}
	})
	if errors.Is(err, simulation.ErrConfig) {
		return configUsage(err, simulation.ErrConfig)
	}
	if err != nil {
		return datasetUsage(err)
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		return enc.Encode(rep)
	}
	printTrainReport(stdout, rep)
	return nil
}

func printTrainReport(w io.Writer, r *simulation.CentralReport) {
	fmt.Fprintf(w, "model       %s (%d parameters)\n", r.Spec, r.Params)
	fmt.Fprintf(w, "dataset     %s: %d train, %d test examples\n", r.Dataset, r.TrainExamples, r.TestExamples)
	fmt.Fprintf(w, "training    %d epochs, batch %d, %s, seed %d on %s\n", r.Epochs, r.Batch, r.Optimizer, r.Seed, r.Backend)
	if r.Device.Note != "" {
		fmt.Fprintf(w, "device      %s (--device %s): %s\n", r.Device.Device, r.Device.Requested, r.Device.Note)
	}
	if r.Device.Libraries != "" {
		fmt.Fprintf(w, "libraries   %s\n", r.Device.Libraries)
	}
	fmt.Fprintf(w, "speed       %.0f samples/s (%.2f s)\n", r.SamplesPerSecond, r.TrainSeconds)
	if r.DevicePeakBytes > 0 {
		fmt.Fprintf(w, "device      memory peak %.1f MiB (the backend's tensors and buffers)\n", float64(r.DevicePeakBytes)/(1<<20))
	}
	if g := r.Graphs; g != nil {
		fmt.Fprintf(w, "graphs      %s\n", g)
	}
	fmt.Fprintf(w, "train loss  %.4f\n", r.TrainLoss)
	fmt.Fprintf(w, "test        accuracy %.4f, loss %.4f\n", r.TestAccuracy, r.TestLoss)
	if len(r.Confusion) <= 20 {
		fmt.Fprintf(w, "confusion   (rows: true class, columns: predicted)\n")
		fmt.Fprintf(w, "%8s", "")
		for j := range r.Confusion {
			fmt.Fprintf(w, "%6d", j)
		}
		fmt.Fprintln(w)
		for i, row := range r.Confusion {
			fmt.Fprintf(w, "%8d", i)
			for _, v := range row {
				fmt.Fprintf(w, "%6d", v)
			}
			fmt.Fprintln(w)
		}
	}
}
