package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/simulation"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench", "bench [flags]\n\nMeasures float32 GEMM (GFLOP/s; against gonum's pure-Go GEMM and gossipd's own\npure-Go kernel) and one epoch of training on a dataset (samples/s and test\naccuracy). With --torch, runs the PyTorch reference in the same run and prints\nratios.", stderr)
	what := fs.String("what", "gemm,train", "what to measure: gemm, train or both (comma-separated)")
	ds := fs.String("dataset", "fashion-mnist", "dataset for the training benchmark")
	torch := fs.String("torch", "", "path of shared/reference/torch_baseline.py to run as the reference (needs python3-torch)")
	python := fs.String("python", "/usr/bin/python3", "python interpreter for --torch")
	threads := fs.Int("threads", 0, "compute threads (default: all cores)")
	minTime := fs.Duration("min-time", time.Second, "minimum measuring time per GEMM size")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	for _, w := range strings.Split(*what, ",") {
		switch strings.TrimSpace(w) {
		case "gemm":
			benchGEMM(stdout, *threads, *minTime)
		case "train":
			if err := benchTrain(ctx, stdout, stderr, *ds, *threads, *torch, *python); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: bench: --what %q, want gemm|train", errUsage, w)
		}
	}
	return nil
}

func benchGEMM(w io.Writer, threads int, minTime time.Duration) {
	fmt.Fprintf(w, "float32 GEMM C = A·B (GFLOP/s, higher is better)\n")
	fmt.Fprintf(w, "%-16s %14s %14s %14s %10s\n", "m×k×n", "gossipd", "gossipd/purego", "gonum", "vs gonum")
	backend := ""
	for _, r := range compute.MeasureGEMM(threads, minTime, [][3]int{{256, 784, 256}, {1024, 1024, 1024}}) {
		fmt.Fprintf(w, "%-16s %14.1f %14.1f %14.1f %9.1f×\n", fmt.Sprintf("%d×%d×%d", r.M, r.K, r.N), r.Fast, r.PureGo, r.Gonum, r.Fast/r.Gonum)
		backend = r.Backend
	}
	fmt.Fprintf(w, "backend %s\n\n", backend)
}

func benchTrain(ctx context.Context, stdout, stderr io.Writer, ds string, threads int, torch, python string) error {
	fmt.Fprintf(stdout, "training, 1 epoch of %s, batch 32, SGD lr 0.1 (samples/s, higher is better)\n", ds)
	fmt.Fprintf(stdout, "%-14s %12s %9s %14s %12s %9s %8s\n", "model", "gossipd", "acc", "gossipd/purego", "pytorch", "acc", "ratio")
	for _, mdl := range []struct{ name, kind, hidden, torch string }{
		{"softmax", "softmax", "", "softmax"},
		{"mlp 784-128-10", "mlp", "128", "mlp"},
	} {
		cfg := simulation.CentralConfig{Dataset: ds, Scale: "minmax", TestFraction: 0.2, Model: mdl.kind, Hidden: mdl.hidden,
			Epochs: 1, Batch: 32, LR: 0.1, Optimizer: "sgd", Seed: 1, Threads: threads}
		rep, err := simulation.TrainCentral(ctx, cfg, nil)
		if err != nil {
			return err
		}
		cfg.PureGo = true
		slow, err := simulation.TrainCentral(ctx, cfg, nil)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%-14s %12.0f %9.4f %14.0f", mdl.name, rep.SamplesPerSecond, rep.TestAccuracy, slow.SamplesPerSecond)
		if torch != "" {
			if threads <= 0 {
				threads = compute.NewCPU().Threads()
			}
			sps, acc, err := simulation.TorchReference(ctx, stderr, python, torch, mdl.torch, threads)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %12.0f %9.4f %7.2f×", sps, acc, rep.SamplesPerSecond/sps)
		}
		fmt.Fprintln(stdout, line)
	}
	return nil
}
