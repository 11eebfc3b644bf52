package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/gossipd/gossipd/central"
	"github.com/gossipd/gossipd/model/compute"
)

// TrainConfig is what Train measures.
type TrainConfig struct {
	// Dataset is the training set (central.Config.Dataset).
	Dataset string
	// Threads for the CPU backend and PyTorch (0: all cores).
	Threads int
	// Device is where gossipd trains: auto, cpu or cuda[:N].
	Device string
	// Batches are the minibatch sizes to measure.
	Batches []int
	// Seeds trains each configuration from seeds 1 … Seeds (PyTorch's
	// reference from 0 … Seeds−1) and reports the median speed and the
	// mean accuracy with its spread (default 1): one epoch's accuracy
	// varies by a few points from seed to seed at large batches.
	Seeds int
	// Torch is a PyTorch reference script to run beside gossipd on the
	// same device, with Python; "" runs none.
	Torch, Python string
	// TorchGraphs runs the built-in reference with each step replayed
	// as a CUDA graph (GraphsEnv; a GPU only).
	TorchGraphs bool
	// Models are the models trained (benchModels; default softmax and
	// mlp).
	Models []string
	// NoPureGo leaves out the pure-Go kernels' run on the CPU (an epoch
	// of leaf-cnn on them takes many minutes).
	NoPureGo bool
}

// benchModels are the models the training benchmark knows, by the
// names the PyTorch reference takes: its --model and --hidden.
var benchModels = []string{"softmax", "mlp", "lenet5", "leaf-cnn"}

// benchModel is a model's label in the table and its --model and --hidden.
type benchModel struct{ name, kind, hidden string }

func benchModelOf(name string) benchModel {
	if name == "mlp" {
		return benchModel{"mlp 784-128-10", "mlp", "128"}
	}
	return benchModel{name, name, ""}
}

// Train measures one epoch of training of each model at each batch size
// (samples/s and test accuracy) and prints a table to w: on the CPU
// against the pure-Go kernels, and with Torch against PyTorch on the
// same device, in the same run; on a device that replays recorded steps
// (CUDA graphs), each row again without them. Diagnostics go to stderr.
func Train(ctx context.Context, w, stderr io.Writer, c TrainConfig) error {
	seeds := max(c.Seeds, 1)
	threads := c.Threads
	if threads <= 0 {
		threads = compute.NewCPU().Threads()
	}
	fmt.Fprintf(w, "training, 1 epoch of %s, SGD lr 0.1 (samples/s, higher is better)", c.Dataset)
	if seeds > 1 {
		fmt.Fprintf(w, "; median speed and mean accuracy of %d seeds", seeds)
	}
	ref := "pytorch"
	if c.TorchGraphs {
		ref = "torch+graphs"
		fmt.Fprintf(w, "; PyTorch's steps captured once as CUDA graphs and replayed")
	}
	fmt.Fprintf(w, "\n%-14s %6s %12s %9s %14s %12s %9s %8s\n", "model", "batch", "gossipd", "acc", "gossipd/purego", ref, "acc", "ratio")
	ran := ""
	models := c.Models
	if len(models) == 0 {
		models = benchModels[:2]
	}
	for _, batch := range c.Batches {
		for _, name := range models {
			mdl := benchModelOf(name)
			cfg := central.Config{Dataset: c.Dataset, Scale: "minmax", Model: mdl.kind, Hidden: mdl.hidden,
				Epochs: 1, Batch: batch, LR: 0.1, Optimizer: "sgd", Threads: c.Threads, Device: c.Device}
			got, rep, err := gossipd(ctx, cfg, seeds)
			if err != nil {
				return err
			}
			ran = fmt.Sprintf("%s (%s)", rep.Device.Device, rep.Device.Backend)
			// The pure-Go kernels are the CPU's same-run reference; on a
			// GPU, PyTorch on the same GPU is.
			slow := "-"
			torchDevice := "cpu"
			switch {
			case rep.Device.Device != "cpu":
				torchDevice = rep.Device.Device
			case !c.NoPureGo:
				cfg.PureGo, cfg.Device = true, "cpu"
				s, _, err := gossipd(ctx, cfg, seeds)
				if err != nil {
					return err
				}
				slow = fmt.Sprintf("%.0f", s.speed())
			}
			line := fmt.Sprintf("%-14s %6d %12.0f %9.4f %14s", mdl.name, batch, got.speed(), got.accuracy(), slow)
			var ref runs
			if c.Torch != "" {
				if ref, err = RunTorch(ctx, stderr, c.Python, c.Torch, TorchRun{Model: mdl.kind, Threads: threads, Batch: batch, Device: torchDevice, Seeds: seeds, Graphs: c.TorchGraphs}); err != nil {
					return err
				}
				line += fmt.Sprintf(" %12.0f %9.4f %7.2f×", ref.speed(), ref.accuracy(), got.speed()/ref.speed())
			}
			fmt.Fprintln(w, line)
			if seeds > 1 {
				fmt.Fprintf(w, "%-14s %6s   accuracy: gossipd %s", "", "", got.spread())
				if ref != nil {
					fmt.Fprintf(w, "; pytorch %s", ref.spread())
				}
				fmt.Fprintln(w)
			}
			if rep.Graphs != nil {
				// The same without the recorded steps, for their gain.
				cfg.NoGraphs = true
				s, _, err := gossipd(ctx, cfg, seeds)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "%-14s %6s %12.0f %9.4f   without CUDA graphs (with them %.2f×; %s)\n", "", "", s.speed(), s.accuracy(),
					got.speed()/s.speed(), rep.Graphs)
			}
		}
	}
	fmt.Fprintf(w, "gossipd trained on %s\n", ran)
	return nil
}

// gossipd trains cfg from seeds 1 … n and returns each seed's result and
// the last report.
func gossipd(ctx context.Context, cfg central.Config, n int) (runs, *central.Report, error) {
	var rs runs
	var rep *central.Report
	for seed := 1; seed <= n; seed++ {
		cfg.Seed = uint64(seed)
		var err error
		if rep, err = central.Train(ctx, cfg, nil); err != nil {
			return nil, nil, err
		}
		rs = append(rs, Result{rep.SamplesPerSecond, rep.TestAccuracy})
	}
	return rs, rep, nil
}

// runs are the results of one configuration's seeds.
type runs []Result

// speed is the median samples/s.
func (r runs) speed() float64 {
	v := make([]float64, len(r))
	for i, x := range r {
		v[i] = x.SamplesPerSecond
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// accuracy is the mean test accuracy.
func (r runs) accuracy() float64 {
	var s float64
	for _, x := range r {
		s += x.Accuracy
	}
	return s / float64(len(r))
}

// spread says the accuracies' mean, sample standard deviation and range.
func (r runs) spread() string {
	m := r.accuracy()
	var ss float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range r {
		ss += (x.Accuracy - m) * (x.Accuracy - m)
		lo, hi = min(lo, x.Accuracy), max(hi, x.Accuracy)
	}
	sd := 0.0
	if len(r) > 1 {
		sd = math.Sqrt(ss / float64(len(r)-1))
	}
	return fmt.Sprintf("%.4f ± %.4f (%.4f to %.4f, %d seeds)", m, sd, lo, hi, len(r))
}
