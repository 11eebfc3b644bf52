package model

import (
	"fmt"
	"strings"
)

// Tensor names one parameter tensor inside a flat parameter vector.
type Tensor struct {
	// Name is the tensor's name, e.g. "fc1.weight".
	Name string
	// Shape is row-major; a weight is [out, in] as in PyTorch's nn.Linear.
	Shape []int
	// Offset is where the tensor starts in the flat vector.
	Offset int
}

// Size is the number of elements of t.
func (t Tensor) Size() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Layout lists the tensors of a flat parameter vector in order. Merging,
// codecs and privacy mechanisms work on the flat vector and use the layout
// only to name or reshape parts of it.
type Layout struct {
	Tensors []Tensor
	// Size is the total number of parameters.
	Size int
}

// add appends a tensor and returns its offset.
func (l *Layout) add(name string, shape ...int) int {
	t := Tensor{Name: name, Shape: shape, Offset: l.Size}
	l.Tensors = append(l.Tensors, t)
	l.Size += t.Size()
	return t.Offset
}

// Lookup returns the tensor called name.
func (l *Layout) Lookup(name string) (Tensor, bool) {
	for _, t := range l.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

// View returns the part of params that holds tensor name. It panics if the
// layout has no such tensor or params is too short.
func (l *Layout) View(params []float32, name string) []float32 {
	t, ok := l.Lookup(name)
	if !ok {
		panic(fmt.Sprintf("model: no tensor %q in layout", name))
	}
	return params[t.Offset : t.Offset+t.Size()]
}

// Equal reports whether two layouts name the same tensors with the same
// shapes in the same order.
func (l *Layout) Equal(o *Layout) bool {
	if l.Size != o.Size || len(l.Tensors) != len(o.Tensors) {
		return false
	}
	for i, t := range l.Tensors {
		u := o.Tensors[i]
		if t.Name != u.Name || t.Offset != u.Offset || len(t.Shape) != len(u.Shape) {
			return false
		}
		for k := range t.Shape {
			if t.Shape[k] != u.Shape[k] {
				return false
			}
		}
	}
	return true
}

// String describes the layout, e.g. "fc1.weight[128 784] fc1.bias[128] …".
func (l *Layout) String() string {
	parts := make([]string, len(l.Tensors))
	for i, t := range l.Tensors {
		parts[i] = fmt.Sprintf("%s%v", t.Name, t.Shape)
	}
	return strings.Join(parts, " ")
}
