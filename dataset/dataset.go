// Package dataset loads, scales, splits and partitions the labelled data that
// gossipd trains on.
//
// A Dataset is a dense, row-major float32 feature matrix with one integer
// class label per row. Loaders exist for IDX (the MNIST family, gzip or raw),
// CSV and LIBSVM/svmlight; Open resolves the named datasets ("digits", which
// is embedded in the binary, and "fashion-mnist") or a path. Every loader
// reports bad input as an error naming the file and the line or byte offset;
// none panics on any input.
//
// Partitioners (IID, Dirichlet label skew, shards, quantity skew) split a
// dataset among simulated or real peers deterministically from a seed.
package dataset

import (
	"errors"
	"fmt"
)

// MaxClasses bounds the number of classes a dataset may have. Labels at or
// above it are rejected as out of range.
const MaxClasses = 1 << 16

// Sentinel errors. Loader errors wrap one of these, so callers can test with
// errors.Is while users read the file and position in the message.
var (
	ErrFormat       = errors.New("dataset: malformed input")
	ErrLabelRange   = errors.New("dataset: label out of range")
	ErrUnknown      = errors.New("dataset: unknown dataset")
	ErrShape        = errors.New("dataset: shape mismatch")
	ErrEmpty        = errors.New("dataset: no examples")
	ErrBadPartition = errors.New("dataset: bad partition spec")
	// ErrOwnTestSplit: a test fraction was given for a source with a test
	// split of its own (it would be ignored).
	ErrOwnTestSplit = errors.New("dataset: a test fraction applies to sources without a test split")
	// ErrNotCSV: a CSV label column was given for a source that is not CSV.
	ErrNotCSV = errors.New("dataset: a label column applies to CSV sources")
)

// Dataset is a labelled, dense dataset. X holds N rows of D features,
// row-major; Y holds N labels in [0, Classes).
type Dataset struct {
	// Name says where the data came from (a dataset name or a path).
	Name string
	// X is the N×D feature matrix, row-major.
	X []float32
	// Y holds the class label of each row.
	Y []int32
	// N is the number of examples, D the number of features.
	N, D int
	// Classes is the number of classes; labels lie in [0, Classes).
	Classes int
	// ClassNames optionally names each class (from CSV or LIBSVM label text).
	ClassNames []string
	// Fingerprint is the content hash of the raw examples (Fingerprint),
	// set by Load when asked; empty otherwise.
	Fingerprint string
	// Shape is each example's shape [C, H, W] where the data gives one
	// (IDX images: [1, H, W]; the embedded digits: [1, 8, 8]); nil for
	// flat features (CSV, LIBSVM), which --input-shape can shape.
	Shape []int
}

// Row returns the features of example i (a view, not a copy).
func (d *Dataset) Row(i int) []float32 { return d.X[i*d.D : (i+1)*d.D] }

// Validate checks the internal consistency of d: sizes agree and every label
// lies in [0, Classes).
func (d *Dataset) Validate() error {
	if d.N <= 0 {
		return fmt.Errorf("%s: %w", d.Name, ErrEmpty)
	}
	if d.D <= 0 || len(d.X) != d.N*d.D || len(d.Y) != d.N {
		return fmt.Errorf("%s: %w: N=%d D=%d len(X)=%d len(Y)=%d", d.Name, ErrShape, d.N, d.D, len(d.X), len(d.Y))
	}
	if d.Classes <= 0 || d.Classes > MaxClasses {
		return fmt.Errorf("%s: %w: %d classes", d.Name, ErrLabelRange, d.Classes)
	}
	for i, y := range d.Y {
		if y < 0 || int(y) >= d.Classes {
			return fmt.Errorf("%s: example %d: %w: label %d not in [0,%d)", d.Name, i, ErrLabelRange, y, d.Classes)
		}
	}
	return nil
}

// Subset returns a new dataset holding copies of the rows at idx, in order.
func (d *Dataset) Subset(idx []int) *Dataset {
	s := &Dataset{Name: d.Name, N: len(idx), D: d.D, Classes: d.Classes, ClassNames: d.ClassNames, Shape: d.Shape,
		X: make([]float32, len(idx)*d.D), Y: make([]int32, len(idx))}
	for k, i := range idx {
		copy(s.X[k*d.D:(k+1)*d.D], d.Row(i))
		s.Y[k] = d.Y[i]
	}
	return s
}

// Spread returns k rows spread evenly over d (rows ⌊i·N/k⌋, so every
// part of d is drawn from, whatever its order), or d itself when k is 0
// or not below N.
func (d *Dataset) Spread(k int) *Dataset {
	if k <= 0 || k >= d.N {
		return d
	}
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i * d.N / k
	}
	return d.Subset(idx)
}

// ClassCounts returns how many examples carry each label.
func (d *Dataset) ClassCounts() []int {
	c := make([]int, d.Classes)
	for _, y := range d.Y {
		c[y]++
	}
	return c
}

// classCount returns the number of classes that labels y imply: the largest
// label + 1, and at least minClasses.
func classCount(y []int32, minClasses int) int {
	k := minClasses
	for _, v := range y {
		if int(v)+1 > k {
			k = int(v) + 1
		}
	}
	return k
}
