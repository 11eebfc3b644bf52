// Package onnx writes gossipd's models as ONNX files (opset 13, IR
// version 7), pure Go: the protobuf messages of onnx.proto encoded with
// protowire. Every model kind is written: softmax, SVM and MLP as Gemm
// layers, layered networks with Conv, MaxPool, AveragePool, Flatten,
// Gemm, Relu and Tanh, and what opset 13 lacks (GELU, layer and group
// normalisation) composed of its operators. The graph takes one input,
// "input" [N, features] of raw features (scaled inside the graph when
// the model was trained on scaled ones), and gives "logits" [N, classes]
// and, for the models trained with softmax cross-entropy,
// "probabilities".
package onnx

import (
	"fmt"
	"io"
	"math"

	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/nn"
)

// Opset is the ONNX operator set the files use; IRVersion its IR version.
const (
	Opset     = 13
	IRVersion = 7
)

// Options are what Write adds around the model.
type Options struct {
	// Shift and Mul, when set (one per feature), scale raw features as
	// the model was trained on them: x' = (x − Shift)·Mul.
	Shift, Mul []float32
	// Producer names the writer (producer_version: "gossipd").
	Producer string
	// Doc is the model's doc string (the job, say).
	Doc string
}

// Write writes the model of spec with parameters params as ONNX.
func Write(w io.Writer, spec model.Spec, params []float32, o Options) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	l, err := model.LayoutOf(spec)
	if err != nil {
		return err
	}
	if len(params) != l.Size {
		return fmt.Errorf("onnx: %d parameters for a model of %d", len(params), l.Size)
	}
	if (o.Shift != nil || o.Mul != nil) && (len(o.Shift) != spec.Inputs || len(o.Mul) != spec.Inputs) {
		return fmt.Errorf("onnx: scaler of %d shifts and %d factors for %d features", len(o.Shift), len(o.Mul), spec.Inputs)
	}
	g := &graph{params: params, layout: l}
	x := "input"
	if o.Shift != nil {
		g.floats("scaler.shift", []int64{int64(spec.Inputs)}, o.Shift)
		g.floats("scaler.mul", []int64{int64(spec.Inputs)}, o.Mul)
		x = g.op("Mul", g.op("Sub", x, "scaler.shift"), "scaler.mul")
	}
	if spec.Kind == model.Net {
		x, err = g.net(spec, x)
		if err != nil {
			return err
		}
	} else {
		for i := 0; i < len(l.Tensors); i += 2 {
			if i > 0 {
				x = g.op("Relu", x)
			}
			x = g.op("Gemm", x, l.Tensors[i].Name, l.Tensors[i+1].Name, attrInt("transB", 1))
		}
		for _, t := range l.Tensors {
			g.param(t.Name)
		}
	}
	outputs := [][]byte{valueInfo("logits", "N", spec.Classes)}
	if spec.Kind != model.SVM {
		// Both outputs from the last layer's (neither feeds the other:
		// some runtimes hand back only outputs no node reads).
		g.nodes = append(g.nodes, nodeOf{"Softmax", []string{x}, "probabilities", [][]byte{attrInt("axis", 1)}})
		outputs = append(outputs, valueInfo("probabilities", "N", spec.Classes))
		g.nodes = append(g.nodes, nodeOf{"Identity", []string{x}, "logits", nil})
	} else {
		g.rename(x, "logits")
	}
	producer := o.Producer
	if producer == "" {
		producer = "gossipd"
	}
	var gr []byte
	for _, n := range g.nodes {
		gr = appendBytes(gr, 1, node(n.op, n.in, n.out, n.attrs...))
	}
	gr = appendString(gr, 2, "gossipd "+spec.String())
	for _, t := range g.inits {
		gr = appendBytes(gr, 5, t)
	}
	gr = appendBytes(gr, 11, valueInfo("input", "N", spec.Inputs))
	for _, v := range outputs {
		gr = appendBytes(gr, 12, v)
	}
	var m []byte
	m = appendVarint(m, 1, IRVersion)
	m = appendString(m, 2, producer)
	m = appendString(m, 3, "gossipd")
	if o.Doc != "" {
		m = appendString(m, 6, o.Doc)
	}
	m = appendBytes(m, 7, gr)
	m = appendBytes(m, 8, appendVarint(appendString(nil, 1, ""), 2, Opset))
	_, err = w.Write(m)
	return err
}

// graph collects a graph's nodes and initializers.
type graph struct {
	nodes  []nodeOf
	inits  [][]byte
	params []float32
	layout *model.Layout
	n      int
}

// op adds a node of one output, named afresh, and returns the name.
func (g *graph) op(kind string, in ...any) string {
	var inputs []string
	var attrs [][]byte
	for _, v := range in {
		switch v := v.(type) {
		case string:
			inputs = append(inputs, v)
		case []byte:
			attrs = append(attrs, v)
		}
	}
	g.n++
	out := fmt.Sprintf("t%d", g.n)
	g.nodes = append(g.nodes, nodeOf{kind, inputs, out, attrs})
	return out
}

// nodeOf is a node before it is encoded.
type nodeOf struct {
	op    string
	in    []string
	out   string
	attrs [][]byte
}

// rename calls x, the last node's output, name (or, where x is the
// graph's input, adds an Identity).
func (g *graph) rename(x, name string) {
	if k := len(g.nodes) - 1; k >= 0 && g.nodes[k].out == x {
		g.nodes[k].out = name
		return
	}
	g.nodes = append(g.nodes, nodeOf{"Identity", []string{x}, name, nil})
}

// param adds the layout's tensor name as an initializer.
func (g *graph) param(name string) {
	t, _ := g.layout.Lookup(name)
	dims := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		dims[i] = int64(d)
	}
	g.floats(name, dims, g.params[t.Offset:t.Offset+t.Size()])
}

// floats adds a float initializer; ints an int64 one.
func (g *graph) floats(name string, dims []int64, v []float32) {
	raw := make([]byte, 0, 4*len(v))
	for _, f := range v {
		b := math.Float32bits(f)
		raw = append(raw, byte(b), byte(b>>8), byte(b>>16), byte(b>>24))
	}
	g.inits = append(g.inits, tensor(name, 1, dims, raw))
}

func (g *graph) ints(name string, v ...int64) {
	raw := make([]byte, 0, 8*len(v))
	for _, x := range v {
		u := uint64(x)
		for k := range 8 {
			raw = append(raw, byte(u>>(8*k)))
		}
	}
	g.inits = append(g.inits, tensor(name, 7, []int64{int64(len(v))}, raw))
}

// scalar adds a one-value float initializer and returns its name.
func (g *graph) scalar(v float32) string {
	g.n++
	name := fmt.Sprintf("c%d", g.n)
	g.floats(name, nil, []float32{v})
	return name
}

// net adds a layered network's layers after x.
func (g *graph) net(spec model.Spec, x string) (string, error) {
	layers, err := nn.Parse(spec.Layers)
	if err != nil {
		return "", err
	}
	s := nn.Shape{C: spec.Inputs, H: 1, W: 1}
	if len(spec.Shape) == 3 {
		s = nn.Shape{C: spec.Shape[0], H: spec.Shape[1], W: spec.Shape[2]}
	}
	if s.Spatial() {
		g.ints("input.shape", 0, int64(s.C), int64(s.H), int64(s.W)) // 0: the input's N
		x = g.op("Reshape", x, "input.shape")
	}
	shapes, err := shapesOf(layers, s, spec.Classes)
	if err != nil {
		return "", err
	}
	for i, l := range layers {
		in := s
		if i > 0 {
			in = shapes[i-1]
		}
		weight, bias := fmt.Sprintf("%d.weight", i), fmt.Sprintf("%d.bias", i)
		switch l.Kind {
		case nn.Dense:
			g.param(weight)
			g.param(bias)
			x = g.op("Gemm", x, weight, bias, attrInt("transB", 1))
		case nn.Conv:
			g.param(weight)
			g.param(bias)
			x = g.op("Conv", x, weight, bias, attrInts("kernel_shape", l.Kernel, l.Kernel), attrInts("strides", l.Stride, l.Stride),
				attrInts("pads", l.Pad, l.Pad, l.Pad, l.Pad))
		case nn.MaxPool:
			x = g.op("MaxPool", x, attrInts("kernel_shape", l.Kernel, l.Kernel), attrInts("strides", l.Stride, l.Stride))
		case nn.AvgPool:
			x = g.op("AveragePool", x, attrInts("kernel_shape", l.Kernel, l.Kernel), attrInts("strides", l.Stride, l.Stride))
		case nn.Flatten:
			x = g.op("Flatten", x, attrInt("axis", 1))
		case nn.ReLU:
			x = g.op("Relu", x)
		case nn.Tanh:
			x = g.op("Tanh", x)
		case nn.GELU: // x·½(1 + erf(x/√2)): GELU is an operator from opset 20
			e := g.op("Erf", g.op("Div", x, g.scalar(math.Sqrt2)))
			x = g.op("Mul", g.op("Mul", x, g.op("Add", e, g.scalar(1))), g.scalar(0.5))
		case nn.Dropout:
			x = g.op("Identity", x)
		case nn.LayerNorm:
			g.param(weight)
			g.param(bias)
			axes := []int{1}
			if in.Spatial() {
				axes = []int{1, 2, 3}
			}
			x = g.op("Add", g.op("Mul", g.normalize(x, axes), weight), bias)
		case nn.GroupNorm:
			// Normalised over each group's channels and positions:
			// [N, C, H, W] as [N, G, C/G·H·W], then back; the weight and
			// bias per channel as [C, 1, 1].
			t, _ := g.layout.Lookup(weight)
			g.n++
			grouped, back := fmt.Sprintf("g%d.shape", g.n), fmt.Sprintf("g%d.back", g.n)
			g.ints(grouped, 0, int64(l.Groups), -1)
			g.ints(back, 0, int64(in.C), int64(in.H), int64(in.W))
			y := g.op("Reshape", g.normalize(g.op("Reshape", x, grouped), []int{2}), back)
			w, b := weight+".chw", bias+".chw"
			g.floats(w, []int64{int64(t.Shape[0]), 1, 1}, g.params[t.Offset:t.Offset+t.Size()])
			tb, _ := g.layout.Lookup(bias)
			g.floats(b, []int64{int64(tb.Shape[0]), 1, 1}, g.params[tb.Offset:tb.Offset+tb.Size()])
			x = g.op("Add", g.op("Mul", y, w), b)
		default:
			return "", fmt.Errorf("onnx: layer %d: kind %q has no ONNX form", i+1, l.Kind)
		}
	}
	return x, nil
}

// normalize is (x − mean)/√(var + 1e-5) over axes, as gossipd's layer
// and group normalisation compute it.
func (g *graph) normalize(x string, axes []int) string {
	mean := g.op("ReduceMean", x, attrInts("axes", axes...), attrInt("keepdims", 1))
	d := g.op("Sub", x, mean)
	v := g.op("ReduceMean", g.op("Mul", d, d), attrInts("axes", axes...), attrInt("keepdims", 1))
	return g.op("Div", d, g.op("Sqrt", g.op("Add", v, g.scalar(1e-5))))
}

// shapesOf is each layer's output shape.
func shapesOf(layers nn.Spec, in nn.Shape, classes int) ([]nn.Shape, error) {
	n, err := nn.Build(layers, in, classes, nil)
	if err != nil {
		return nil, err
	}
	return n.Shapes(), nil
}
