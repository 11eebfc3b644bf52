package dataset

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Scaler is a per-feature affine map x' = (x − Shift)·Mul, fitted on training
// data only and then applied to every split (and, later, to inputs at
// prediction time).
type Scaler struct {
	// Kind is "none", "minmax" (each feature to [0,1]), "global" (all
	// features by one range to [0,1], like dividing pixels by 255) or
	// "standard" (each feature to zero mean, unit variance).
	Kind  string
	Shift []float32
	Mul   []float32
}

// FitScaler fits a scaler of the given kind on train. Features that are
// constant on train map to 0.
func FitScaler(kind string, train *Dataset) (*Scaler, error) {
	d := train.D
	s := &Scaler{Kind: kind, Shift: make([]float32, d), Mul: make([]float32, d)}
	switch kind {
	case "none", "":
		s.Kind = "none"
		for j := range s.Mul {
			s.Mul[j] = 1
		}
	case "minmax":
		lo := make([]float32, d)
		hi := make([]float32, d)
		copy(lo, train.Row(0))
		copy(hi, train.Row(0))
		for i := 1; i < train.N; i++ {
			for j, v := range train.Row(i) {
				lo[j] = min(lo[j], v)
				hi[j] = max(hi[j], v)
			}
		}
		for j := range s.Mul {
			s.Shift[j] = lo[j]
			if hi[j] > lo[j] {
				s.Mul[j] = 1 / (hi[j] - lo[j])
			}
		}
	case "global":
		lo, hi := train.X[0], train.X[0]
		for _, v := range train.X {
			lo, hi = min(lo, v), max(hi, v)
		}
		for j := range s.Mul {
			s.Shift[j] = lo
			if hi > lo {
				s.Mul[j] = 1 / (hi - lo)
			}
		}
	case "standard":
		mean := make([]float64, d)
		m2 := make([]float64, d)
		for i := 0; i < train.N; i++ {
			for j, v := range train.Row(i) {
				mean[j] += float64(v)
			}
		}
		for j := range mean {
			mean[j] /= float64(train.N)
		}
		for i := 0; i < train.N; i++ {
			for j, v := range train.Row(i) {
				dv := float64(v) - mean[j]
				m2[j] += dv * dv
			}
		}
		for j := range s.Mul {
			s.Shift[j] = float32(mean[j])
			if sd := math.Sqrt(m2[j] / float64(train.N)); sd > 1e-12 {
				s.Mul[j] = float32(1 / sd)
			}
		}
	default:
		return nil, CheckScaling(kind)
	}
	return s, nil
}

// Transform applies the scaler to ds in place.
func (s *Scaler) Transform(ds *Dataset) {
	if s.Kind == "none" {
		return
	}
	for i := 0; i < ds.N; i++ {
		s.TransformRow(ds.Row(i))
	}
}

// TransformRow applies the scaler to one feature vector in place.
func (s *Scaler) TransformRow(x []float32) {
	for j := range x {
		x[j] = (x[j] - s.Shift[j]) * s.Mul[j]
	}
}

// Scalings lists the feature scalings FitScaler knows ("" is none).
var Scalings = []string{"none", "minmax", "global", "standard"}

// CheckScaling reports whether FitScaler knows kind, before any data is
// read.
func CheckScaling(kind string) error {
	if kind == "" || slices.Contains(Scalings, kind) {
		return nil
	}
	return fmt.Errorf("dataset: scaling %q, want %s", kind, strings.Join(Scalings, "|"))
}
