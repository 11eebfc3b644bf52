package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/blas"
	gonumblas "gonum.org/v1/gonum/blas/gonum"

	"github.com/gossipd/gossipd/model/compute"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", "bench [flags]\n\nMeasures float32 GEMM (GFLOP/s; against gonum's pure-Go GEMM and gossipd's own\npure-Go kernel) and one epoch of training on a dataset (samples/s and test\naccuracy). With --torch, runs the PyTorch reference in the same run and prints\nratios.", stderr)
	what := fs.String("what", "gemm,train", "what to measure: gemm, train or both (comma-separated)")
	ds := fs.String("dataset", "fashion-mnist", "dataset for the training benchmark")
	torch := fs.String("torch", "", "path of shared/reference/torch_baseline.py to run as the reference (needs python3-torch)")
	python := fs.String("python", "/usr/bin/python3", "python interpreter for --torch")
	threads := fs.Int("threads", 0, "compute threads (default: all cores)")
	minTime := fs.Duration("min-time", time.Second, "minimum measuring time per GEMM size")
	if err := parseFlags(fs, args); err != nil {
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

// timeGFLOPS runs f until minTime has passed and returns the rate.
func timeGFLOPS(flops float64, minTime time.Duration, f func()) float64 {
	f() // warm up caches and pools
	n := 0
	start := time.Now()
	for time.Since(start) < minTime || n < 3 {
		f()
		n++
	}
	return flops * float64(n) / time.Since(start).Seconds() / 1e9
}

func benchGEMM(w io.Writer, threads int, minTime time.Duration) {
	fmt.Fprintf(w, "float32 GEMM C = A·B (GFLOP/s, higher is better)\n")
	fmt.Fprintf(w, "%-16s %14s %14s %14s %10s\n", "m×k×n", "gossipd", "gossipd/purego", "gonum", "vs gonum")
	fast := compute.NewCPU(compute.WithThreads(threads))
	slow := compute.NewCPU(compute.WithThreads(threads), compute.WithPureGo())
	for _, sz := range [][3]int{{256, 784, 256}, {1024, 1024, 1024}} {
		m, k, n := sz[0], sz[1], sz[2]
		a, b, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
		for i := range a {
			a[i] = float32(i%7) - 3
		}
		for i := range b {
			b[i] = float32(i%5) - 2
		}
		flops := 2 * float64(m*n*k)
		g1 := timeGFLOPS(flops, minTime, func() { fast.Gemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n) })
		g2 := timeGFLOPS(flops, minTime, func() { slow.Gemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n) })
		var impl gonumblas.Implementation
		g3 := timeGFLOPS(flops, minTime, func() { impl.Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, k, b, n, 0, c, n) })
		fmt.Fprintf(w, "%-16s %14.1f %14.1f %14.1f %9.1f×\n", fmt.Sprintf("%d×%d×%d", m, k, n), g1, g2, g3, g1/g3)
	}
	fmt.Fprintf(w, "backend %s\n\n", fast.Name())
}

var torchLine = regexp.MustCompile(`(\d+) samples/s, test acc ([0-9.]+)`)

func benchTrain(ctx context.Context, stdout, stderr io.Writer, ds string, threads int, torch, python string) error {
	fmt.Fprintf(stdout, "training, 1 epoch of %s, batch 32, SGD lr 0.1 (samples/s, higher is better)\n", ds)
	fmt.Fprintf(stdout, "%-14s %12s %9s %14s %12s %9s %8s\n", "model", "gossipd", "acc", "gossipd/purego", "pytorch", "acc", "ratio")
	for _, mdl := range []struct{ name, kind, hidden, torch string }{
		{"softmax", "softmax", "", "softmax"},
		{"mlp 784-128-10", "mlp", "128", "mlp"},
	} {
		cfg := trainConfig{Dataset: ds, Scale: "minmax", TestFraction: 0.2, Model: mdl.kind, Hidden: mdl.hidden,
			Epochs: 1, Batch: 32, LR: 0.1, Optimizer: "sgd", Seed: 1, Threads: threads}
		rep, err := train(ctx, cfg, nil)
		if err != nil {
			return err
		}
		cfg.PureGo = true
		slow, err := train(ctx, cfg, nil)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%-14s %12.0f %9.4f %14.0f", mdl.name, rep.SamplesPerSecond, rep.TestAccuracy, slow.SamplesPerSecond)
		if torch != "" {
			sps, acc, err := runTorch(ctx, stderr, python, torch, mdl.torch, threads)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %12.0f %9.4f %7.2f×", sps, acc, rep.SamplesPerSecond/sps)
		}
		fmt.Fprintln(stdout, line)
	}
	return nil
}

// runTorch runs the PyTorch reference script for one epoch at batch 32 and
// parses its samples/s and test accuracy.
func runTorch(ctx context.Context, stderr io.Writer, python, script, kind string, threads int) (float64, float64, error) {
	if threads <= 0 {
		threads = compute.NewCPU().Threads()
	}
	cmd := exec.CommandContext(ctx, python, script, kind, "1", "32", strconv.Itoa(threads))
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("bench: PyTorch reference %s %s: %w", script, kind, err)
	}
	mm := torchLine.FindSubmatch(out)
	if mm == nil {
		return 0, 0, fmt.Errorf("bench: could not read samples/s from the PyTorch reference's output %q", out)
	}
	sps, _ := strconv.ParseFloat(string(mm[1]), 64)
	acc, _ := strconv.ParseFloat(string(mm[2]), 64)
	return sps, acc, nil
}
