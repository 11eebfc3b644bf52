package model

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Model kinds.
const (
	// Softmax is multinomial logistic regression: one linear layer and
	// softmax cross-entropy.
	Softmax = "softmax"
	// SVM is a linear support vector machine, one-vs-rest for more than two
	// classes, with hinge loss and L2 regularisation λ, trained by Pegasos.
	SVM = "svm"
	// MLP is a multi-layer perceptron: ReLU hidden layers and softmax
	// cross-entropy.
	MLP = "mlp"
	// Net is a layered network (package nn): convolutions, pooling,
	// normalisation, dense layers, described by Spec.Layers.
	Net = "net"
)

// Kinds lists the model kinds named by themselves; a layered network is
// named by its layers (or a preset such as lenet5).
var Kinds = []string{Softmax, SVM, MLP}

// DefaultLambda is the Pegasos regularisation λ (ALGORITHMS.md).
const DefaultLambda = 1e-4

// Sentinel errors.
var (
	ErrSpec  = errors.New("model: invalid spec")
	ErrShape = errors.New("model: shape mismatch")
)

// Spec describes a model's architecture. Two models with equal specs have
// equal layouts and can exchange parameters.
type Spec struct {
	// Kind is softmax, svm or mlp.
	Kind string `json:"kind"`
	// Inputs is the number of input features.
	Inputs int `json:"inputs"`
	// Hidden lists the widths of the MLP's hidden layers; empty for the
	// linear models. An MLP needs at least one.
	Hidden []int `json:"hidden,omitempty"`
	// Classes is the number of output classes (≥ 2).
	Classes int `json:"classes"`
	// Lambda is the SVM's L2 regularisation; 0 means DefaultLambda.
	Lambda float64 `json:"lambda,omitempty"`
	// Layers is a layered network's spec (kind net), in nn's canonical
	// form once validated, e.g. "conv:6:5:1:2,relu,maxpool:2,…,dense".
	Layers string `json:"layers,omitempty"`
	// Shape is a layered network's input shape [C, H, W] (C·H·W =
	// Inputs); empty: a flat vector of Inputs features.
	Shape []int `json:"shape,omitempty"`
}

// Validate checks the spec and fills defaults.
func (s *Spec) Validate() error {
	switch s.Kind {
	case Softmax, SVM:
		if len(s.Hidden) > 0 {
			return fmt.Errorf("%w: %s takes no hidden layers (got %v)", ErrSpec, s.Kind, s.Hidden)
		}
	case MLP:
		if len(s.Hidden) == 0 {
			return fmt.Errorf("%w: mlp needs at least one hidden layer", ErrSpec)
		}
	case Net:
		return s.validateNet()
	default:
		return fmt.Errorf("%w: kind %q, want %s", ErrSpec, s.Kind, strings.Join(Kinds, "|"))
	}
	if s.Inputs <= 0 {
		return fmt.Errorf("%w: %d inputs", ErrSpec, s.Inputs)
	}
	if s.Classes < 2 {
		return fmt.Errorf("%w: %d classes, need at least 2", ErrSpec, s.Classes)
	}
	for _, h := range s.Hidden {
		if h <= 0 {
			return fmt.Errorf("%w: hidden width %d", ErrSpec, h)
		}
	}
	if s.Layers != "" || len(s.Shape) > 0 {
		return fmt.Errorf("%w: layers and an input shape are for a layered network, not %s", ErrSpec, s.Kind)
	}
	if s.Kind == SVM {
		if s.Lambda == 0 {
			s.Lambda = DefaultLambda
		}
		if !(s.Lambda > 0) {
			return fmt.Errorf("%w: svm lambda %v must be positive", ErrSpec, s.Lambda)
		}
	} else if s.Lambda != 0 {
		return fmt.Errorf("%w: lambda is for svm only", ErrSpec)
	}
	return nil
}

// widths returns the layer widths from input to output.
func (s *Spec) widths() []int {
	w := append([]int{s.Inputs}, s.Hidden...)
	return append(w, s.Classes)
}

// String describes the spec, e.g. "mlp 784-128-10" or "net 1×28×28
// conv:6:5:1:2,…,dense 10".
func (s Spec) String() string {
	if s.Kind == Net {
		return fmt.Sprintf("net %s %s %d", s.inputShape(), s.Layers, s.Classes)
	}
	parts := make([]string, 0, len(s.Hidden)+2)
	for _, w := range s.widths() {
		parts = append(parts, strconv.Itoa(w))
	}
	return s.Kind + " " + strings.Join(parts, "-")
}

// ParseHidden reads hidden widths like "128" or "256,128".
func ParseHidden(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%w: hidden width %q is not a positive integer", ErrSpec, f)
		}
		out = append(out, v)
	}
	return out, nil
}
