package gossip

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
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

// packedKind is the kind of compressed vector the job's messages carry
// (None: plain float32): D-PSGD's sparse steps, random walk's subsampled
// models (rand-k, with int8 values under int8), or every vector under
// Quantize.
func (n *Core) packedKind() compress.Kind {
	switch {
	case n.cfg.Sparse.Kind != compress.None:
		return n.cfg.Sparse.Kind
	case n.cfg.Subsample > 0 && n.cfg.Quantize.Kind == compress.Int8:
		return compress.RandKInt8
	case n.cfg.Subsample > 0:
		return compress.RandK
	}
	return n.cfg.Quantize.Kind
}

// unpack puts a compressed message's vector back in Params (a subsampled
// model's in Indices and Params), checking it against the job's
// compression first. Under sparse compression a plain vector is a
// keyframe.
func (n *Core) unpack(m *Message) error {
	want, subsampled := n.packedKind(), n.cfg.Subsample > 0
	if m.Packed == nil {
		switch {
		case n.cfg.Sparse.Kind != compress.None && m.Kind == KindFactors && len(m.Params) > 0:
			return invalid("compression", "a %s job received an uncompressed update", n.cfg.Sparse.Kind)
		case n.cfg.Sparse.Kind != compress.None:
			m.keyframe = len(m.Params) > 0
		case n.cfg.Quantize.Kind != compress.None && len(m.Params) > 0:
			return invalid("compression", "a %s job received an uncompressed vector", n.cfg.Quantize.Kind)
		}
		return nil
	}
	switch {
	case want == compress.None:
		return invalid("compression", "a job without compression received a %s vector", m.Packed.Kind)
	case m.Packed.Kind != want:
		return invalid("compression", "a job sending %s vectors received a %s vector", want, m.Packed.Kind)
	case len(m.Params) > 0 || subsampled && len(m.Indices) > 0:
		return invalid("compression", "a message with both a plain and a compressed vector")
	case m.Packed.N > n.layout.Size || subsampled && m.Packed.N != n.layout.Size:
		return invalid("shape", "a compressed vector of %d values, the model has %d", m.Packed.N, n.layout.Size)
	}
	if subsampled {
		m.Indices, m.Params = compress.Sparse(m.Packed)
	} else if d := m.Packed.Deferred; d != nil {
		if !n.cfg.HandsMixes() || len(d) != m.Packed.N {
			return invalid("compression", "a deferred vector, which only a simulator's cores that hand their mixes exchange")
		}
		if m.Packed.Kind == compress.RandK || m.Packed.Kind == compress.TopK { // already as decompressed (Mixer.Mask, Mixer.Top)
			m.Params, m.sum = d, n.laterSum(d)
		} else {
			x := n.cfg.Mixer.Vector(m.Packed.N)
			n.cfg.Mixer.Quantize(x, d, m.Packed.Kind)
			m.Params, m.sum = x, n.laterSum(x)
		}
	} else {
		m.Params = make([]float32, m.Packed.N)
		compress.Decompress(m.Params, m.Packed)
	}
	m.Packed = nil
	return nil
}

// sparseStep hands the Mixer the compression of x − ref under spec:
// rand-k's (maskedStep), or top-k's, its values kept by Mixer.Top, whose
// payload counts its indices' bytes once the step is made.
func (n *Core) sparseStep(x, ref []float32, spec compress.Spec) ([]float32, *compress.Payload) {
	if spec.Kind == compress.RandK {
		return n.maskedStep(x, ref, spec)
	}
	diff := n.mixed([][]float32{x, ref}, []float32{1, -1}, nil, 0)
	size := len(diff)
	k := spec.Keep(size)
	q := n.cfg.Mixer.Vector(size)
	bytes := n.cfg.Mixer.Top(q, diff, k)
	return q, &compress.Payload{Kind: compress.TopK, N: size, Keep: k, IndexBytes: bytes, Deferred: q}
}

// maskedStep hands the Mixer the rand-k compression of x − ref (spec):
// the indices drawn from the node's randomness as compress.Compress
// draws them, the values kept by Mixer.Mask. It returns the step as its
// receivers decompress it, and the payload that carries it
// (compress.Payload.Deferred), its bytes counted from the indices.
func (n *Core) maskedStep(x, ref []float32, spec compress.Spec) ([]float32, *compress.Payload) {
	diff := n.mixed([][]float32{x, ref}, []float32{1, -1}, nil, 0)
	size := len(diff)
	seed := n.rng.Uint64()
	keep := compress.RandIndices(nil, size, spec.Keep(size), seed)
	q := n.cfg.Mixer.Vector(size)
	n.cfg.Mixer.Mask(q, diff, slices.Clone(keep))
	return q, &compress.Payload{Kind: compress.RandK, N: size, Seed: seed, Indices: keep, Deferred: q}
}

// copyIn returns a public copy (CHOCO's) that holds v, a message's
// vector: v itself where the core hands its mixes (nobody writes it; the
// message is kept), else dst rewritten.
func (n *Core) copyIn(dst, v []float32) []float32 {
	if n.cfg.HandsMixes() {
		n.keep()
		return v
	}
	return append(dst[:0], v...)
}

// stepIn returns the public copy x moved by q, a message's step:
// x + q (merge.Axpy), x written in place, or a new vector the Mixer
// makes where the core hands its mixes (the message kept: the mix reads
// q later).
func (n *Core) stepIn(x, q []float32) []float32 {
	if n.cfg.HandsMixes() {
		n.keep()
		return n.mixed([][]float32{x, q}, []float32{1, 1}, nil, 0)
	}
	merge.Axpy(x, 1, q)
	return x
}
