package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
)

// trainConfig is everything `gossipd train` needs.
type trainConfig struct {
	Dataset      string
	LabelColumn  string
	Scale        string
	TestFraction float64
	Model        string
	Hidden       string
	Lambda       float64
	Epochs       int
	Batch        int
	LR           float64
	Optimizer    string
	Momentum     float64
	WeightDecay  float64
	Seed         uint64
	Threads      int
	PureGo       bool
}

// trainReport is the summary `gossipd train --json` prints.
type trainReport struct {
	Model            string     `json:"model"`
	Spec             model.Spec `json:"spec"`
	Params           int        `json:"params"`
	Dataset          string     `json:"dataset"`
	TrainExamples    int        `json:"train_examples"`
	TestExamples     int        `json:"test_examples"`
	Epochs           int        `json:"epochs"`
	Batch            int        `json:"batch"`
	Optimizer        string     `json:"optimizer"`
	Seed             uint64     `json:"seed"`
	Backend          string     `json:"backend"`
	TrainLoss        float64    `json:"train_loss"`
	TestAccuracy     float64    `json:"test_accuracy"`
	TestLoss         float64    `json:"test_loss"`
	TrainSeconds     float64    `json:"train_seconds"`
	SamplesPerSecond float64    `json:"samples_per_second"`
	Confusion        [][]int    `json:"confusion"`
	Classes          []string   `json:"class_names,omitempty"`
	metrics          model.Metrics
}

func runTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("train", "train [flags]\n\nTrains one model centrally on one machine and reports its test accuracy.", stderr)
	var c trainConfig
	var jsonOut, quiet bool
	fs.StringVar(&c.Dataset, "dataset", "digits", "dataset: digits (embedded), fashion-mnist, or a path (.csv[.gz], .libsvm, or a directory of IDX files)")
	fs.StringVar(&c.LabelColumn, "label-column", "", "CSV label column: a header name or 0-based index (default: last column)")
	fs.StringVar(&c.Scale, "scale", "minmax", "feature scaling fitted on the training split: minmax|standard|none")
	fs.Float64Var(&c.TestFraction, "test-fraction", 0.2, "fraction held out for testing when the dataset has no test split")
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
	fs.BoolVar(&jsonOut, "json", false, "print the summary as one JSON object")
	fs.BoolVar(&quiet, "quiet", false, "no progress bar")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	bar := newProgressBar(stderr, !quiet)
	rep, err := train(ctx, c, func(p model.Progress) {
		bar.update(fmt.Sprintf("epoch %d/%d", p.Epoch, p.Epochs), p.Step, p.Steps, fmt.Sprintf("loss %.4f", p.Loss))
		if p.Step == p.Steps {
			bar.finish()
		}
	})
	if err != nil {
		return err
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		return enc.Encode(rep)
	}
	printTrainReport(stdout, rep)
	return nil
}

// train loads the data, builds the model and trains it.
func train(ctx context.Context, c trainConfig, progress func(model.Progress)) (*trainReport, error) {
	hidden, err := model.ParseHidden(c.Hidden)
	if err != nil {
		return nil, fmt.Errorf("%w: --hidden: %v", errUsage, err)
	}
	if c.Model != model.MLP {
		hidden = nil
	}
	if c.Optimizer == "" {
		c.Optimizer = "sgd"
		if c.Model == model.SVM {
			c.Optimizer = "pegasos"
		}
	}
	trainSet, testSet, err := dataset.Open(c.Dataset, dataset.OpenOptions{
		CSV:          dataset.CSVOptions{LabelColumn: c.LabelColumn},
		TestFraction: c.TestFraction,
		Seed:         c.Seed,
	})
	if err != nil {
		return nil, err
	}
	scaler, err := dataset.FitScaler(c.Scale, trainSet)
	if err != nil {
		return nil, fmt.Errorf("%w: --scale: %v", errUsage, err)
	}
	scaler.Transform(trainSet)
	scaler.Transform(testSet)

	spec := model.Spec{Kind: c.Model, Inputs: trainSet.D, Hidden: hidden, Classes: trainSet.Classes}
	if c.Model == model.SVM {
		spec.Lambda = c.Lambda
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	copts := []compute.CPUOption{compute.WithThreads(c.Threads)}
	if c.PureGo {
		copts = append(copts, compute.WithPureGo())
	}
	backend := compute.NewCPU(copts...)
	m, err := model.New(spec, model.WithSeed(c.Seed), model.WithBackend(backend))
	if err != nil {
		return nil, err
	}
	opt, err := model.NewOptimizer(model.OptimizerConfig{Name: c.Optimizer, LR: c.LR, Momentum: c.Momentum, WeightDecay: c.WeightDecay, Lambda: spec.Lambda})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	tcfg := model.TrainConfig{Epochs: c.Epochs, Batch: c.Batch, Seed: c.Seed}
	if err := tcfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	start := time.Now()
	res, err := model.Train(ctx, m, opt, trainSet.X, trainSet.Y, trainSet.N, tcfg, progress)
	elapsed := time.Since(start).Seconds()
	if err != nil {
		return nil, err
	}
	met := m.Evaluate(testSet.X, testSet.Y, testSet.N)
	return &trainReport{
		Model: spec.Kind, Spec: spec, Params: m.NumParams(), Dataset: c.Dataset,
		TrainExamples: trainSet.N, TestExamples: testSet.N,
		Epochs: res.Epochs, Batch: tcfg.Batch, Optimizer: opt.Name(), Seed: c.Seed, Backend: backend.Name(),
		TrainLoss: res.Loss, TestAccuracy: met.Accuracy, TestLoss: met.Loss,
		TrainSeconds: elapsed, SamplesPerSecond: float64(res.Samples) / elapsed,
		Confusion: met.Confusion, Classes: trainSet.ClassNames,
	}, nil
}

func printTrainReport(w io.Writer, r *trainReport) {
	fmt.Fprintf(w, "model       %s (%d parameters)\n", r.Spec, r.Params)
	fmt.Fprintf(w, "dataset     %s: %d train, %d test examples\n", r.Dataset, r.TrainExamples, r.TestExamples)
	fmt.Fprintf(w, "training    %d epochs, batch %d, %s, seed %d on %s\n", r.Epochs, r.Batch, r.Optimizer, r.Seed, r.Backend)
	fmt.Fprintf(w, "speed       %.0f samples/s (%.2f s)\n", r.SamplesPerSecond, r.TrainSeconds)
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
