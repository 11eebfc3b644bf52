package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/device"
	"github.com/gossipd/gossipd/simulation"
)

// Parts are what Config.What may measure, and Scopes the parts each
// flag applies to: one given for none of the parts measured would be
// silently ignored, so Check refuses it.
var (
	Parts  = []string{"gemm", "train", "sim"}
	Scopes = map[string][]string{
		"min-time": {"gemm"}, "threads": {"gemm", "train"}, "dataset": {"train", "sim"},
		"device": {"train"}, "batch": {"train"}, "seeds": {"train"}, "against": {"train"}, "torch": {"train"}, "python": {"train"},
	}
)

// Bounds are the values bench's numeric flags take.
var Bounds = cli.Bounds{"threads": "[0,inf)", "min-time": "(0,inf)", "seeds": "[1,inf)"}

// Config is one `gossipd bench`, as its flags (Register) give it.
type Config struct {
	// What lists the parts to measure, in order, comma-separated (--what).
	What string
	// Dataset for the train and sim parts (--dataset).
	Dataset string
	// Threads for the CPU kernels (--threads; 0: all cores).
	Threads int
	// MinTime is the least measuring time per GEMM size (--min-time).
	MinTime time.Duration
	// Device is where training is measured (--device).
	Device string
	// Batch lists the training minibatch sizes, comma-separated (--batch).
	Batch string
	// Seeds trains each configuration this many times (--seeds).
	Seeds int
	// Models lists the models the training benchmark trains,
	// comma-separated (--models).
	Models string
	// NoPureGo skips the pure-Go kernels' training run (--skip-purego).
	NoPureGo bool
	// Against names a reference run beside gossipd: "", torch or
	// torch-graphs (--against).
	Against string
	// Torch is another PyTorch reference script (--torch), run with
	// Python (--python).
	Torch, Python string
	// Self is the gossipd binary whose `simulate --json` the sim part
	// times ("": this process's executable).
	Self string
}

// Register declares bench's flags on fs, into c.
func (c *Config) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.What, "what", "gemm,train", "what to measure, comma-separated: gemm, train, sim (the simulator's reference runs as whole processes, against the pure-Go kernels)")
	fs.StringVar(&c.Dataset, "dataset", "fashion-mnist", "dataset for the training benchmark")
	fs.StringVar(&c.Against, "against", "", "a reference to run in the same run, with ratios: torch (PyTorch: the reference built into gossipd, or --torch's; needs python3-torch), or torch-graphs (the built-in reference with each step replayed as a CUDA graph; a GPU only)")
	fs.StringVar(&c.Torch, "torch", "", "path of another PyTorch reference script (e.g. shared/reference/torch_baseline.py); implies --against torch")
	fs.StringVar(&c.Python, "python", "/usr/bin/python3", "python interpreter for the PyTorch reference")
	fs.IntVar(&c.Threads, "threads", 0, "compute threads (default: all cores)")
	fs.DurationVar(&c.MinTime, "min-time", time.Second, "minimum measuring time per GEMM size")
	fs.StringVar(&c.Device, "device", "auto", "where training is measured: "+device.Values+" (gemm and sim measure the CPU kernels; --against torch runs PyTorch on the same device)")
	fs.StringVar(&c.Batch, "batch", "32", "minibatch sizes for the training benchmark, comma-separated (e.g. 32,512)")
	fs.BoolVar(&c.NoPureGo, "skip-purego", false, "leave out the training run on the pure-Go kernels (the CPU's same-run reference; an epoch of leaf-cnn takes many minutes on them)")
	fs.StringVar(&c.Models, "models", "softmax,mlp", "models for the training benchmark, comma-separated: softmax, mlp (784-128-10), lenet5, leaf-cnn")
	fs.IntVar(&c.Seeds, "seeds", 1, "train each configuration from this many seeds (gossipd and PyTorch) and report the median speed and the mean accuracy with its spread")
}

// Check refuses, as usage errors (cli.ErrUsage), a number out of Bounds,
// an unknown part and a flag of fs set for none of the parts measured;
// --python needs a PyTorch reference to run.
func (c *Config) Check(fs *flag.FlagSet) error {
	if err := cli.CheckNumbers(fs, Bounds); err != nil {
		return err
	}
	what := cli.SplitList(c.What)
	if len(what) == 0 {
		return usage("--what is empty, want some of %s", strings.Join(Parts, ","))
	}
	for _, p := range what {
		if !slices.Contains(Parts, p) {
			return usage("--what %q, want %s", p, strings.Join(Parts, "|"))
		}
	}
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		parts, ok := Scopes[f.Name]
		if ok && !slices.ContainsFunc(parts, func(p string) bool { return slices.Contains(what, p) }) {
			bad = append(bad, fmt.Sprintf("--%s applies to --what %s, not to --what %s", f.Name, strings.Join(parts, " or "), strings.Join(what, ",")))
		}
	})
	if cli.FlagSet(fs, "python") && !cli.FlagSet(fs, "against") && !cli.FlagSet(fs, "torch") {
		bad = append(bad, "--python runs the PyTorch reference, which runs with --against torch (or --torch)")
	}
	if len(bad) > 0 {
		return usage("%s", strings.Join(bad, "; "))
	}
	return nil
}

// usage is a usage error of `gossipd bench`.
func usage(format string, a ...any) error {
	return fmt.Errorf("%w: bench: %s", cli.ErrUsage, fmt.Sprintf(format, a...))
}

// Run measures c's parts (after Check), printing a table for each to w;
// diagnostics go to stderr. A device that cannot be had, a --torch that
// is no script and a reference or batch sizes it cannot run are usage
// errors (cli.ErrUsage).
func Run(ctx context.Context, w, stderr io.Writer, c Config) error {
	what := cli.SplitList(c.What)
	spec, err := device.Parse(c.Device)
	var choice device.Choice
	if err == nil {
		_, choice, err = device.Open(spec)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if c.Torch != "" {
		// Its contents are Python's to judge, when it runs after the Go
		// side's measurements; a path that is no script fails now.
		st, err := os.Stat(c.Torch)
		switch {
		case err != nil:
			return usage("--torch: %v", err)
		case !st.Mode().IsRegular() || st.Size() == 0:
			return usage("--torch %s is not a script (a directory, or empty)", c.Torch)
		}
	}
	switch c.Against {
	case "":
	case "torch-graphs":
		if c.Torch != "" {
			return usage("--against torch-graphs runs the built-in reference, and --torch names another script; use --against torch with it")
		}
		if choice.Device == "cpu" {
			return usage("--against torch-graphs: PyTorch's CUDA graphs need a GPU, and training runs on cpu here (--device %s); use --against torch", cmp.Or(c.Device, "auto"))
		}
		fallthrough
	case "torch":
		if c.Torch == "" {
			path, remove, err := writeTorchReference()
			if err != nil {
				return err
			}
			defer remove()
			c.Torch = path
		}
	default:
		return usage("--against %q: want torch or torch-graphs", c.Against)
	}
	var batches []int
	for _, b := range strings.Split(c.Batch, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(b))
		if err != nil || n <= 0 {
			return usage("--batch %q: want positive sizes, comma-separated", c.Batch)
		}
		batches = append(batches, n)
	}
	models := cli.SplitList(c.Models)
	for _, m := range models {
		if !slices.Contains(benchModels, m) {
			return usage("--models: %q, want some of %s", m, strings.Join(benchModels, ", "))
		}
	}
	if spec.Kind == "cuda" {
		for _, p := range what {
			if p != "train" {
				return usage("--what %s measures the CPU kernels; with --device %s use --what train", p, spec)
			}
		}
	}
	fmt.Fprintf(w, "machine: %s\ncompute: %s\n\n", compute.CPUModel(), compute.NewCPU(compute.WithThreads(c.Threads)).Name())
	for _, p := range what {
		switch p {
		case "gemm":
			GEMM(w, c.Threads, c.MinTime)
		case "train":
			if err := Train(ctx, w, stderr, TrainConfig{Dataset: c.Dataset, Threads: c.Threads, Torch: c.Torch, Python: c.Python,
				TorchGraphs: c.Against == "torch-graphs", Batches: batches, Device: c.Device, Seeds: c.Seeds, Models: models, NoPureGo: c.NoPureGo}); err != nil {
				return err
			}
		case "sim":
			if err := Sim(ctx, w, stderr, c.Self, c.Dataset); err != nil {
				return err
			}
		}
	}
	return nil
}

// GEMM measures float32 GEMM at two sizes (compute.MeasureGEMM) and
// prints GFLOP/s against gonum's pure-Go GEMM and gossipd's own pure-Go
// kernel.
func GEMM(w io.Writer, threads int, minTime time.Duration) {
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
	if err := os.WriteFile(path, TorchReference, 0o644); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// Sim times the simulator's reference runs (docs/SIMULATION.md) as whole
// processes of the gossipd binary self ("": this process's executable),
// once with the kernels in use and once with the pure-Go ones as the
// same-run reference, and prints each run's seconds and final accuracy,
// read from its `simulate --json` summary (simulation.Summary). The
// dataset cache is warmed first, as a user's second run finds it.
func Sim(ctx context.Context, w, stderr io.Writer, self, ds string) error {
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return err
		}
	}
	out, err := os.MkdirTemp("", "gossipd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)
	run := func(kernel string, args ...string) (time.Duration, float64, error) {
		cmd := exec.CommandContext(ctx, self, append([]string{"simulate", "--dataset", ds, "--out", out, "--json"}, args...)...)
		cmd.Env = os.Environ()
		if kernel != "" {
			cmd.Env = append(cmd.Env, compute.KernelEnv+"="+kernel)
		}
		cmd.Stderr = stderr
		start := time.Now()
		b, err := cmd.Output()
		took := time.Since(start)
		if err != nil {
			return 0, 0, fmt.Errorf("bench: simulate %s: %w", strings.Join(args, " "), err)
		}
		var sum simulation.Summary
		if err := json.Unmarshal(b, &sum); err != nil || sum.Result == nil {
			return 0, 0, fmt.Errorf("bench: simulate %s: reading its --json summary: %v", strings.Join(args, " "), cmp.Or(err, errors.New("no result")))
		}
		return took, sum.FinalAccuracy, nil
	}
	if _, _, err := run("", "--peers", "2", "--rounds", "1"); err != nil { // warm the dataset cache
		return err
	}
	fmt.Fprintf(w, "simulate randomwalk on %s, whole process (seconds, lower is better)\n", ds)
	fmt.Fprintf(w, "%-14s %10s %9s %12s %9s %8s\n", "peers×rounds", "gossipd", "acc", "pure-Go", "acc", "speedup")
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
		fmt.Fprintf(w, "%-14s %10.2f %9.4f %12.2f %9.4f %7.1f×\n", pr[0]+"×"+pr[1], fast.Seconds(), acc, slow.Seconds(), accGo, slow.Seconds()/fast.Seconds())
	}
	fmt.Fprintln(w)
	return nil
}
