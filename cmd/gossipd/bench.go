package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gossipd/gossipd/bench"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/device"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench", "bench [flags]\n\nMeasures float32 GEMM (GFLOP/s; against gonum's pure-Go GEMM and gossipd's own\npure-Go kernel) and one epoch of training on a dataset (samples/s and test\naccuracy). With --against torch, runs the PyTorch reference in the same run\n(on the same device) and prints ratios.", stderr)
	what := fs.String("what", "gemm,train", "what to measure, comma-separated: gemm, train, sim (the simulator's reference runs as whole processes, against the pure-Go kernels)")
	ds := fs.String("dataset", "fashion-mnist", "dataset for the training benchmark")
	against := fs.String("against", "", "a reference to run in the same run, with ratios: torch (PyTorch: the reference built into gossipd, or --torch's; needs python3-torch), or torch-graphs (the built-in reference with each step replayed as a CUDA graph; a GPU only)")
	torch := fs.String("torch", "", "path of another PyTorch reference script (e.g. shared/reference/torch_baseline.py); implies --against torch")
	python := fs.String("python", "/usr/bin/python3", "python interpreter for the PyTorch reference")
	threads := fs.Int("threads", 0, "compute threads (default: all cores)")
	minTime := fs.Duration("min-time", time.Second, "minimum measuring time per GEMM size")
	dev := fs.String("device", "auto", "where training is measured: "+device.Values+" (gemm and sim measure the CPU kernels; --against torch runs PyTorch on the same device)")
	batchList := fs.String("batch", "32", "minibatch sizes for the training benchmark, comma-separated (e.g. 32,512)")
	seeds := fs.Int("seeds", 1, "train each configuration from this many seeds (gossipd and PyTorch) and report the median speed and the mean accuracy with its spread")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := cli.CheckNumbers(fs, cli.Bounds{"threads": "[0,inf)", "min-time": "(0,inf)", "seeds": "[1,inf)"}); err != nil {
		return err
	}
	whats := cli.SplitList(*what)
	if err := checkBenchScopes(fs, whats); err != nil {
		return err
	}
	choice, err := deviceChoice(*dev)
	if err != nil {
		return err
	}
	if *torch != "" {
		// Its contents are Python's to judge, when it runs after the Go
		// side's measurements; a path that is no script fails now.
		st, err := os.Stat(*torch)
		switch {
		case err != nil:
			return fmt.Errorf("%w: bench: --torch: %v", errUsage, err)
		case !st.Mode().IsRegular() || st.Size() == 0:
			return fmt.Errorf("%w: bench: --torch %s is not a script (a directory, or empty)", errUsage, *torch)
		}
	}
	switch *against {
	case "":
	case "torch-graphs":
		if err := checkTorchGraphs(*torch, *dev, choice); err != nil {
			return err
		}
		fallthrough
	case "torch":
		if *torch == "" {
			path, remove, err := writeTorchReference()
			if err != nil {
				return err
			}
			defer remove()
			*torch = path
		}
	default:
		return fmt.Errorf("%w: bench: --against %q: want torch or torch-graphs", errUsage, *against)
	}
	var batches []int
	for _, b := range strings.Split(*batchList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(b))
		if err != nil || n <= 0 {
			return fmt.Errorf("%w: bench: --batch %q: want positive sizes, comma-separated", errUsage, *batchList)
		}
		batches = append(batches, n)
	}
	if spec, _ := device.Parse(*dev); spec.Kind == "cuda" {
		for _, w := range whats {
			if w != "train" {
				return fmt.Errorf("%w: bench: --what %s measures the CPU kernels; with --device %s use --what train", errUsage, w, spec)
			}
		}
	}
	fmt.Fprintf(stdout, "machine: %s\ncompute: %s\n\n", compute.CPUModel(), compute.NewCPU(compute.WithThreads(*threads)).Name())
	for _, w := range whats {
		switch w {
		case "gemm":
			benchGEMM(stdout, *threads, *minTime)
		case "train":
			if err := bench.Train(ctx, stdout, stderr, bench.TrainConfig{Dataset: *ds, Threads: *threads, Torch: *torch, Python: *python, TorchGraphs: *against == "torch-graphs", Batches: batches, Device: *dev, Seeds: *seeds}); err != nil {
				return err
			}
		case "sim":
			if err := benchSim(ctx, stdout, stderr, *ds); err != nil {
				return err
			}
		}
	}
	return nil
}

// benchParts are what --what measures, and benchScopes the parts each
// flag applies to: one given for none of the parts measured would be
// silently ignored, so it is refused.
var (
	benchParts  = []string{"gemm", "train", "sim"}
	benchScopes = map[string][]string{
		"min-time": {"gemm"}, "threads": {"gemm", "train"}, "dataset": {"train", "sim"},
		"device": {"train"}, "batch": {"train"}, "seeds": {"train"}, "against": {"train"}, "torch": {"train"}, "python": {"train"},
	}
)

// checkBenchScopes refuses an unknown --what part, and a flag set for
// none of the parts measured; --python needs a PyTorch reference to run.
func checkBenchScopes(fs *flag.FlagSet, whats []string) error {
	if len(whats) == 0 {
		return fmt.Errorf("%w: bench: --what is empty, want some of %s", errUsage, strings.Join(benchParts, ","))
	}
	for _, w := range whats {
		if !slices.Contains(benchParts, w) {
			return fmt.Errorf("%w: bench: --what %q, want %s", errUsage, w, strings.Join(benchParts, "|"))
		}
	}
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		parts, ok := benchScopes[f.Name]
		if ok && !slices.ContainsFunc(parts, func(p string) bool { return slices.Contains(whats, p) }) {
			bad = append(bad, fmt.Sprintf("--%s applies to --what %s, not to --what %s", f.Name, strings.Join(parts, " or "), strings.Join(whats, ",")))
		}
	})
	if cli.FlagSet(fs, "python") && !cli.FlagSet(fs, "against") && !cli.FlagSet(fs, "torch") {
		bad = append(bad, "--python runs the PyTorch reference, which runs with --against torch (or --torch)")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: bench: %s", errUsage, strings.Join(bad, "; "))
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

// writeTorchReference writes the built-in PyTorch reference to a
// temporary file for python to run, and returns its path and a function
// that removes it.
func writeTorchReference() (string, func(), error) {
	dir, err := os.MkdirTemp("", "gossipd-torch-")
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "torch_reference.py")
	if err := os.WriteFile(path, bench.TorchReference, 0o644); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// benchSim times the simulator's reference runs (docs/SIMULATION.md) as
// whole processes of this binary, once with the kernels in use and once
// with the pure-Go ones as the same-run reference; the dataset cache is
// warmed first, as a user's second run finds it.
func benchSim(ctx context.Context, stdout, stderr io.Writer, ds string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	out, err := os.MkdirTemp("", "gossipd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)
	run := func(kernel string, args ...string) (time.Duration, string, error) {
		cmd := exec.CommandContext(ctx, self, append([]string{"simulate", "--dataset", ds, "--out", out}, args...)...)
		cmd.Env = os.Environ()
		if kernel != "" {
			cmd.Env = append(cmd.Env, compute.KernelEnv+"="+kernel)
		}
		cmd.Stderr = stderr
		start := time.Now()
		b, err := cmd.Output()
		took := time.Since(start)
		if err != nil {
			return 0, "", fmt.Errorf("bench: simulate %s: %w", strings.Join(args, " "), err)
		}
		acc := ""
		if m := finalAccuracy.FindSubmatch(b); m != nil {
			acc = string(m[1])
		}
		return took, acc, nil
	}
	if _, _, err := run("", "--peers", "2", "--rounds", "1"); err != nil { // warm the dataset cache
		return err
	}
	fmt.Fprintf(stdout, "simulate randomwalk on %s, whole process (seconds, lower is better)\n", ds)
	fmt.Fprintf(stdout, "%-14s %10s %9s %12s %9s %8s\n", "peers×rounds", "gossipd", "acc", "pure-Go", "acc", "speedup")
	for _, pr := range [][2]string{{"100", "10"}, {"1000", "20"}} {
		args := []string{"--peers", pr[0], "--rounds", pr[1]}
		fast, acc, err := run("", args...)
		if err != nil {
			return err
		}
		slow, accGo, err := run("go", args...)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%-14s %10.2f %9s %12.2f %9s %7.1f×\n", pr[0]+"×"+pr[1], fast.Seconds(), acc, slow.Seconds(), accGo, slow.Seconds()/fast.Seconds())
	}
	fmt.Fprintln(stdout)
	return nil
}

var finalAccuracy = regexp.MustCompile(`final accuracy ([0-9.]+)`)

// checkTorchGraphs refuses --against torch-graphs where it cannot mean
// what it says: with another script (--torch), which need not know the
// built-in reference's switch, and where training runs on the CPU
// (PyTorch's CUDA graphs need a GPU).
func checkTorchGraphs(script, dev string, ch device.Choice) error {
	if script != "" {
		return fmt.Errorf("%w: bench: --against torch-graphs runs the built-in reference, and --torch names another script; use --against torch with it", errUsage)
	}
	if ch.Device == "cpu" {
		return fmt.Errorf("%w: bench: --against torch-graphs: PyTorch's CUDA graphs need a GPU, and training runs on cpu here (--device %s); use --against torch", errUsage, cmp.Or(dev, "auto"))
	}
	return nil
}
