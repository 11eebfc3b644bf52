// Package central trains one model on all the data of one machine:
// `gossipd train`, the training half of `gossipd bench`, what one peer
// reaches alone in `gossipd demo`, and the baseline every decentralized
// run is held against.
package central

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/device"
)

// ErrConfig marks invalid settings of a centralized run.
var ErrConfig = errors.New("central: invalid config")

// Config is a centralized training run: one model trained on all
// the data on one machine (`gossipd train`, and the training half of
// `gossipd bench`), the baseline every decentralized run is held against.
// Zero values take the documented defaults.
type Config struct {
	// Dataset is a dataset name or path (dataset.Open), with LabelColumn
	// for CSV and TestFraction for sources without a test split.
	Dataset      string
	LabelColumn  string
	TestFraction float64
	// Scale is the feature scaling (dataset.FitScaler).
	Scale string
	// Shard ("i/n") and Partition (dataset.LoadOptions) train on one
	// peer's part of the data only: what a peer reaches alone.
	Shard, Partition string
	// Model is the model kind; Hidden the MLP widths ("128,64"); Lambda
	// the SVM's regularisation.
	Model  string
	Hidden string
	Lambda float64
	// InputShape is the examples' shape for a layered model ("C×H×W"),
	// where the data gives none.
	InputShape string
	// InitFrom is a safetensors file of initial weights (PyTorch's
	// state_dict of the same layers); "" draws them from Seed.
	InitFrom string
	// Epochs, Batch (model.TrainConfig defaults) and the optimizer (default
	// pegasos for svm, else sgd) with its settings.
	Epochs      int
	Batch       int
	LR          float64
	Optimizer   string
	Momentum    float64
	WeightDecay float64
	// Seed drives initialisation, the split and shuffling.
	Seed uint64
	// Threads for the compute backend (0: all cores); PureGo uses the
	// portable GEMM kernel.
	Threads int
	PureGo  bool
	// Device is where training runs: auto (default), cpu or cuda[:N]
	// (model/device).
	Device string
	// NoGraphs runs every step's kernels one by one on a device that
	// replays recorded steps (CUDA graphs; model.TrainConfig.NoGraphs);
	// elsewhere it is a configuration error.
	NoGraphs bool
}

// Report is the outcome of a centralized run.
type Report struct {
	Model         string     `json:"model"`
	Spec          model.Spec `json:"spec"`
	Params        int        `json:"params"`
	Dataset       string     `json:"dataset"`
	TrainExamples int        `json:"train_examples"`
	TestExamples  int        `json:"test_examples"`
	Epochs        int        `json:"epochs"`
	Batch         int        `json:"batch"`
	Optimizer     string     `json:"optimizer"`
	Seed          uint64     `json:"seed"`
	Backend       string     `json:"backend"`
	// Device is where training ran and why (--device).
	Device       device.Choice `json:"device"`
	TrainLoss    float64       `json:"train_loss"`
	TestAccuracy float64       `json:"test_accuracy"`
	TestLoss     float64       `json:"test_loss"`
	// TrainSeconds is the training's time, with the data already where
	// the backend computes (PyTorch's reference times the same).
	TrainSeconds     float64 `json:"train_seconds"`
	SamplesPerSecond float64 `json:"samples_per_second"`
	// Graphs is how many steps were replays of recorded ones (CUDA
	// graphs), on a device that records them.
	Graphs *model.GraphStats `json:"graphs,omitempty"`
	// DevicePeakBytes is the most device memory the backend held at once
	// (compute.MemoryCounter), on a device that counts it.
	DevicePeakBytes int64    `json:"device_peak_bytes,omitempty"`
	Confusion       [][]int  `json:"confusion"`
	Classes         []string `json:"class_names,omitempty"`
}

// Train loads the data, builds the model, trains and evaluates it.
// progress, if not nil, hears of every step. Invalid settings wrap
// ErrConfig.
func Train(ctx context.Context, c Config, progress func(model.Progress)) (rep *Report, err error) {
	hidden, err := model.ParseHidden(c.Hidden)
	if err != nil {
		return nil, fmt.Errorf("%w: hidden: %v", ErrConfig, err)
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
	if err := dataset.CheckScaling(c.Scale); err != nil {
		return nil, fmt.Errorf("%w: scale: %v", ErrConfig, err)
	}
	trainSet, testSet, _, err := dataset.Load(c.Dataset, dataset.LoadOptions{Scale: c.Scale, Shard: c.Shard, Partition: c.Partition, OpenOptions: dataset.OpenOptions{
		CSV: dataset.CSVOptions{LabelColumn: c.LabelColumn}, TestFraction: c.TestFraction, Seed: c.Seed}})
	if err != nil {
		return nil, err
	}
	shape, err := job.Data{InputShape: c.InputShape}.ShapeOf(trainSet)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	spec := model.SpecFor(c.Model, hidden, trainSet.D, trainSet.Classes, shape)
	if c.Model == model.SVM {
		spec.Lambda = c.Lambda
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	copts := []compute.CPUOption{compute.WithThreads(c.Threads)}
	if c.PureGo {
		copts = append(copts, compute.WithPureGo())
	}
	dev, err := device.Parse(c.Device)
	if err != nil {
		return nil, fmt.Errorf("%w: --device: %v", ErrConfig, err)
	}
	var backend compute.Backend
	var choice device.Choice
	if testDevice != nil && dev.Kind != "cpu" {
		backend, choice = testDevice, device.Describe(testDevice)
	} else if backend, choice, err = device.Open(dev, copts...); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if _, ok := backend.(compute.Graphs); c.NoGraphs && !ok {
		return nil, fmt.Errorf("%w: --no-graphs: training runs on %s, which replays no recorded steps (CUDA graphs are for --device cuda)", ErrConfig, choice.Device)
	}
	var gpu compute.Backend // a failure on it is an error, not a crash
	if choice.Device != "cpu" {
		gpu = backend
	}
	defer deviceFailure(gpu, "training", &err)
	m, err := model.New(spec, model.WithSeed(c.Seed), model.WithBackend(backend))
	if err != nil {
		return nil, err
	}
	if c.InitFrom != "" {
		p, err := model.InitFromFile(c.InitFrom, spec)
		if err != nil {
			return nil, fmt.Errorf("%w: --init-from: %v", ErrConfig, err)
		}
		if err := m.SetParams(p); err != nil {
			return nil, err
		}
	}
	opt, err := model.NewOptimizer(model.OptimizerConfig{Name: c.Optimizer, LR: c.LR, Momentum: c.Momentum, WeightDecay: c.WeightDecay, Lambda: spec.Lambda})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	tcfg := model.TrainConfig{Epochs: c.Epochs, Batch: c.Batch, Seed: c.Seed, NoGraphs: c.NoGraphs}
	if err := tcfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	// The clock starts with the data where the backend computes, as the
	// PyTorch reference's does with its data on the device.
	xt := backend.Load(trainSet.X)
	if gpu != nil {
		// A few steps of a throwaway model first, as the reference warms
		// up on the GPU: the first call of each kernel and GEMM loads it.
		if err := warmUp(ctx, spec, backend, xt, trainSet.Y, min(trainSet.N, 4*tcfg.Batch), tcfg.Batch); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	res, err := model.TrainOn(ctx, m, opt, xt, trainSet.Y, trainSet.N, tcfg, progress)
	elapsed := time.Since(start).Seconds()
	if err != nil {
		return nil, err
	}
	if !xt.OnHost() {
		backend.Free(xt)
	}
	met := m.Evaluate(testSet.X, testSet.Y, testSet.N)
	m.Close()
	var peak int64
	if mc, ok := backend.(compute.MemoryCounter); ok && gpu != nil {
		_, peak = mc.DeviceMemory()
	}
	return &Report{
		Model: spec.Kind, Spec: spec, Params: m.NumParams(), Dataset: c.Dataset,
		TrainExamples: trainSet.N, TestExamples: testSet.N,
		Epochs: res.Epochs, Batch: tcfg.Batch, Optimizer: opt.Name(), Seed: c.Seed, Backend: backend.Name(), Device: choice,
		TrainLoss: res.Loss, TestAccuracy: met.Accuracy, TestLoss: met.Loss,
		TrainSeconds: elapsed, SamplesPerSecond: float64(res.Samples) / elapsed, Graphs: res.Graphs, DevicePeakBytes: peak,
		Confusion: met.Confusion, Classes: trainSet.ClassNames,
	}, nil
}

// warmUp trains a throwaway model of spec on the first n examples of xt,
// plain SGD in minibatches of batch, each step queued by itself.
func warmUp(ctx context.Context, spec model.Spec, be compute.Backend, xt compute.Tensor, y []int32, n, batch int) error {
	m, err := model.New(spec, model.WithBackend(be))
	if err != nil {
		return err
	}
	defer m.Close()
	_, err = model.TrainOn(ctx, m, &model.SGD{LR: 0.01}, xt, y, n, model.TrainConfig{Epochs: 1, Batch: batch, NoGraphs: true}, nil)
	return err
}

// testDevice, set by tests, is the device --device cuda opens.
var testDevice compute.Backend

// deviceFailure turns a device backend's panic (a CUDA failure, such as
// running out of device memory) into *err, so that the run ends with a
// message instead of a crash. The CPU's panics are programming errors
// and stay panics.
func deviceFailure(gpu compute.Backend, what string, err *error) {
	if gpu == nil {
		return
	}
	if r := recover(); r != nil {
		*err = fmt.Errorf("central: %s on %s failed: %v", what, gpu.Name(), r)
	}
}
