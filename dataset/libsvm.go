package dataset

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// LIBSVMOptions configures ReadLIBSVM.
type LIBSVMOptions struct {
	// ZeroBased says how feature indices are numbered: "auto" (default, also
	// ""; 0-based if any index is 0, else 1-based), "0" or "1".
	ZeroBased string
	// Features, if > 0, fixes the number of features; otherwise it is the
	// largest index seen.
	Features int
}

// maxLIBSVMFeatures bounds the dense width a LIBSVM file may ask for.
const maxLIBSVMFeatures = 1 << 24

// ReadLIBSVMFile reads a LIBSVM/svmlight file, gzip-compressed or plain.
func ReadLIBSVMFile(path string, opts LIBSVMOptions) (*Dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	return ReadLIBSVM(f, path, opts)
}

type sparseRow struct {
	idx []int
	val []float32
}

// ReadLIBSVM parses sparse "label index:value …" lines into a dense dataset.
// Labels are numbers: class indices 0..K-1 as they are; otherwise (say
// -1/+1) each distinct value becomes a class in numeric order. "qid:" tokens and '#' comments are ignored.
func ReadLIBSVM(r io.Reader, name string, opts LIBSVMOptions) (*Dataset, error) {
	br, err := openText(r, name, "LIBSVM")
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 1<<16), 1<<26)
	var rows []sparseRow
	var labels []string
	var lines []int
	lineNo, maxIdx, sawZero := 0, -1, false
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		lab := fields[0]
		if v, err := strconv.ParseFloat(lab, 64); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s: line %d: %w: label %q is not a finite number", name, lineNo, ErrFormat, lab)
		}
		var row sparseRow
		last := -1
		for _, tok := range fields[1:] {
			k, v, ok := strings.Cut(tok, ":")
			if !ok {
				return nil, fmt.Errorf("%s: line %d: %w: token %q is not index:value", name, lineNo, ErrFormat, tok)
			}
			if k == "qid" {
				continue
			}
			idx, err := strconv.Atoi(k)
			if err != nil || idx < 0 || idx >= maxLIBSVMFeatures {
				return nil, fmt.Errorf("%s: line %d: %w: feature index %q is not an integer in [0,%d)", name, lineNo, ErrFormat, k, maxLIBSVMFeatures)
			}
			if idx <= last {
				return nil, fmt.Errorf("%s: line %d: %w: feature index %d after %d; indices must increase", name, lineNo, ErrFormat, idx, last)
			}
			last = idx
			val, err := strconv.ParseFloat(v, 32)
			if err != nil || math.IsNaN(val) || math.IsInf(val, 0) {
				return nil, fmt.Errorf("%s: line %d: %w: value %q of feature %d is not a finite number", name, lineNo, ErrFormat, v, idx)
			}
			if idx == 0 {
				sawZero = true
			}
			maxIdx = max(maxIdx, idx)
			row.idx = append(row.idx, idx)
			row.val = append(row.val, float32(val))
		}
		rows = append(rows, row)
		labels = append(labels, lab)
		lines = append(lines, lineNo)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: line %d: %w: %v", name, lineNo+1, ErrFormat, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: %w", name, ErrEmpty)
	}
	var base int
	switch opts.ZeroBased {
	case "", "auto":
		if !sawZero {
			base = 1
		}
	case "0":
	case "1":
		if sawZero {
			return nil, fmt.Errorf("%s: %w: index 0 in a file read as 1-based", name, ErrFormat)
		}
		base = 1
	default:
		return nil, fmt.Errorf("%s: %w: index base %q, want auto|0|1", name, ErrFormat, opts.ZeroBased)
	}
	d := maxIdx + 1 - base
	if opts.Features > 0 {
		if d > opts.Features {
			return nil, fmt.Errorf("%s: %w: feature index %d exceeds the %d features asked for", name, ErrShape, maxIdx, opts.Features)
		}
		d = opts.Features
	}
	if d <= 0 {
		return nil, fmt.Errorf("%s: %w: no features", name, ErrShape)
	}
	if int64(d)*int64(len(rows))*4 > maxIDXBytes {
		return nil, fmt.Errorf("%s: %w: %d rows × %d features is too large to hold densely", name, ErrShape, len(rows), d)
	}
	ds := &Dataset{Name: name, N: len(rows), D: d, X: make([]float32, len(rows)*d)}
	for i, row := range rows {
		x := ds.Row(i)
		for k, idx := range row.idx {
			x[idx-base] = row.val[k]
		}
	}
	if err := ds.setLabels(labels, lines, 0, true); err != nil {
		return nil, err
	}
	return ds, nil
}
