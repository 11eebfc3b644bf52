package gossip

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gossipd/gossipd/gossip/compress"
)

// Compression is a job's --compression: random walk's subsampling or
// partitioning, a compression of the values every protocol sends, or
// D-PSGD's sparse steps.
type Compression struct {
	Subsample  float64
	Partitions int
	Quantize   compress.Spec
	Sparse     compress.Spec
	// ConsensusStep is CHOCO's γ for Sparse (0: DefaultConsensusStep).
	ConsensusStep float64
}

// Apply sets the compression in a node's config.
func (c Compression) Apply(gc *Config) {
	gc.Subsample, gc.Partitions, gc.Quantize, gc.Sparse = c.Subsample, c.Partitions, c.Quantize, c.Sparse
	gc.ConsensusStep = c.ConsensusStep
}

// Enabled says whether anything is compressed.
func (c Compression) Enabled() bool {
	return c.Subsample != 0 || c.Partitions != 0 || c.Quantize.Kind != compress.None || c.Sparse.Kind != compress.None
}

// CompressionValues lists --compression's forms, for flag help.
const CompressionValues = "none|fp16|int8|topk:F[:γ]|randk:F[:γ]|subsample:S[+int8]|partition:P"

// ParseCompression reads "none", "fp16", "int8" (every protocol's vectors
// as float16, or as 8-bit integers with a scale per 256 values),
// "subsample:S+int8" (the subsampled values as int8),
// "topk:F" or "randk:F" (D-PSGD's CHOCO steps or SFB's updates with error
// feedback, a fraction F kept; for D-PSGD a
// third field sets the consensus step γ, "topk:0.01:0.05"),
// "subsample:S" (0 < S < 1) or "partition:P" (P ≥ 2; random walk).
func ParseCompression(spec string) (Compression, error) {
	name, arg, _ := strings.Cut(spec, ":")
	switch name {
	case "", "none":
		return Compression{}, nil
	case "fp16", "int8":
		q, err := compress.Parse(spec)
		if err != nil {
			return Compression{}, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		return Compression{Quantize: q}, nil
	case "topk", "randk":
		frac, step, hasStep := strings.Cut(arg, ":")
		q, err := compress.Parse(name + ":" + frac)
		if err != nil {
			return Compression{}, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		c := Compression{Sparse: q}
		if hasStep {
			g, err := strconv.ParseFloat(step, 64)
			if err != nil || !(g > 0 && g <= 1) {
				return Compression{}, fmt.Errorf("%w: compression %q: consensus step %q, want a number in (0,1]", ErrConfig, spec, step)
			}
			c.ConsensusStep = g
		}
		return c, nil
	case "subsample":
		frac, values, quantized := strings.Cut(arg, "+")
		v, err := strconv.ParseFloat(frac, 64)
		if err != nil || !(v > 0 && v < 1) {
			return Compression{}, fmt.Errorf("%w: compression %q: fraction must be in (0,1)", ErrConfig, spec)
		}
		c := Compression{Subsample: v}
		if quantized {
			if values != "int8" {
				return Compression{}, fmt.Errorf("%w: compression %q: subsampled values go as float32 or, with +int8, int8", ErrConfig, spec)
			}
			c.Quantize = compress.Spec{Kind: compress.Int8}
		}
		return c, nil
	case "partition":
		v, err := strconv.Atoi(arg)
		if err != nil || v < 2 {
			return Compression{}, fmt.Errorf("%w: compression %q: partitions must be an integer ≥ 2", ErrConfig, spec)
		}
		return Compression{Partitions: v}, nil
	}
	return Compression{}, fmt.Errorf("%w: compression %q, want %s", ErrConfig, spec, CompressionValues)
}
