package dataset

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// CSVOptions configures ReadCSV. The zero value reads comma-separated data,
// detects a header row, and takes the label from the last column.
type CSVOptions struct {
	// LabelColumn names the label column: a header name, or a 0-based index
	// (negative counts from the end). Empty means the last column.
	LabelColumn string
	// Header forces header detection: "auto" (default, also ""), "yes", "no".
	// Auto treats the first row as a header when some column holds text
	// there but a number in the second row.
	Header string
	// Comma is the field delimiter; 0 means ','.
	Comma rune
	// Classes, if > 0, is the required number of classes: integer labels must
	// lie in [0, Classes).
	Classes int
}

// ReadCSVFile reads a CSV file, gzip-compressed or plain.
func ReadCSVFile(path string, opts CSVOptions) (*Dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	return ReadCSV(f, path, opts)
}

// ReadCSV parses labelled CSV data. Labels that are all integers in
// [0, MaxClasses) are used as they are; otherwise each distinct label text
// becomes a class, numbered in sorted order (numeric order when all labels are
// numbers), and Dataset.ClassNames keeps the texts. Errors name the line and
// column.
func ReadCSV(r io.Reader, name string, opts CSVOptions) (*Dataset, error) {
	br, err := openText(r, name, "CSV")
	if err != nil {
		return nil, err
	}
	cr := csv.NewReader(br)
	if opts.Comma != 0 {
		cr.Comma = opts.Comma
	}
	cr.TrimLeadingSpace = true
	cr.Comment = '#'

	first, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: %w", name, ErrEmpty)
	}
	if err != nil {
		return nil, csvErr(name, err)
	}
	first = slices.Clone(first)
	cr.FieldsPerRecord = -1
	second, err := cr.Read()
	secondLine := 0
	switch {
	case err == nil:
		secondLine, _ = cr.FieldPos(0)
		second = slices.Clone(second)
	case err != io.EOF:
		return nil, csvErr(name, err)
	}
	hasHeader := false
	switch strings.ToLower(opts.Header) {
	case "", "auto":
		hasHeader = looksLikeHeader(first, second)
	case "yes", "true":
		hasHeader = true
	case "no", "false":
	default:
		return nil, fmt.Errorf("%s: %w: header option %q, want auto|yes|no", name, ErrFormat, opts.Header)
	}
	cols := len(first)
	if cols < 2 {
		return nil, fmt.Errorf("%s: line 1: %w: %d column(s); need at least one feature and a label", name, ErrFormat, cols)
	}
	labelCol, err := resolveLabelColumn(opts.LabelColumn, first, hasHeader, cols)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}

	d := cols - 1
	ds := &Dataset{Name: name, D: d}
	var labels []string
	var lines []int
	addRow := func(rec []string, line int) error {
		if len(rec) != cols {
			return fmt.Errorf("%s: line %d: %w: %d fields, want %d like the first row", name, line, ErrFormat, len(rec), cols)
		}
		for j, f := range rec {
			if j == labelCol {
				labels = append(labels, strings.TrimSpace(f))
				lines = append(lines, line)
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 32)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%s: line %d, column %d: %w: feature %q is not a finite number", name, line, j+1, ErrFormat, f)
			}
			ds.X = append(ds.X, float32(v))
		}
		return nil
	}
	if !hasHeader {
		if err := addRow(first, 1); err != nil {
			return nil, err
		}
	}
	if second != nil {
		if err := addRow(second, secondLine); err != nil {
			return nil, err
		}
		for {
			rec, err := cr.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, csvErr(name, err)
			}
			line, _ := cr.FieldPos(0)
			if err := addRow(rec, line); err != nil {
				return nil, err
			}
		}
	}
	ds.N = len(labels)
	if ds.N == 0 {
		return nil, fmt.Errorf("%s: %w: header only", name, ErrEmpty)
	}
	if err := ds.setLabels(labels, lines, opts.Classes, false); err != nil {
		return nil, err
	}
	return ds, nil
}

// looksLikeHeader guesses whether first is a header row: some column holds
// text in the first row but a number in the second (so a text label column
// alone does not make a header). With a single row, any text makes it one.
func looksLikeHeader(first, second []string) bool {
	isNum := func(f string) bool {
		_, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		return err == nil
	}
	for j, f := range first {
		if isNum(f) {
			continue
		}
		if second == nil || (j < len(second) && isNum(second[j])) {
			return true
		}
	}
	return false
}

// setLabels converts label texts to class indices. lines[i] is the line of
// label i, for errors. Labels that are all integers are class indices and must
// lie in [0, classes) (or [0, MaxClasses) when classes is 0) unless
// negativeIsCategory is set and one is negative (LIBSVM's -1/+1). Otherwise
// each distinct text is a class, numbered in sorted order (numeric order when
// all labels are numbers); ClassNames keeps the texts.
func (ds *Dataset) setLabels(labels []string, lines []int, classes int, negativeIsCategory bool) error {
	ds.Y = make([]int32, len(labels))
	limit := MaxClasses
	if classes > 0 {
		limit = classes
	}
	ints := make([]int64, len(labels))
	allInts, allNums, anyNeg := true, true, false
	for i, l := range labels {
		v, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			allInts = false
			if _, err := strconv.ParseFloat(l, 64); err != nil {
				allNums = false
			}
		}
		ints[i] = v
		anyNeg = anyNeg || v < 0
	}
	if allInts && !(negativeIsCategory && anyNeg) {
		for i, v := range ints {
			if v < 0 || v >= int64(limit) {
				return fmt.Errorf("%s: line %d: %w: label %d not in [0,%d)", ds.Name, lines[i], ErrLabelRange, v, limit)
			}
			ds.Y[i] = int32(v)
		}
		ds.Classes = max(classCount(ds.Y, 1), classes)
		return nil
	}
	if classes > 0 {
		for i, l := range labels {
			if _, err := strconv.ParseInt(l, 10, 64); err != nil {
				return fmt.Errorf("%s: line %d: %w: label %q is not an integer class in [0,%d)", ds.Name, lines[i], ErrLabelRange, l, classes)
			}
		}
	}
	key := func(l string) string { return l }
	if allNums { // "1", "1.0" and "+1" are one class
		key = func(l string) string {
			v, _ := strconv.ParseFloat(l, 64)
			return strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	seen := make(map[string]bool)
	var names []string
	for _, l := range labels {
		if k := key(l); !seen[k] {
			seen[k] = true
			names = append(names, k)
		}
	}
	if allNums {
		slices.SortFunc(names, func(a, b string) int {
			x, _ := strconv.ParseFloat(a, 64)
			y, _ := strconv.ParseFloat(b, 64)
			return cmpFloat(x, y)
		})
	} else {
		slices.Sort(names)
	}
	if len(names) > MaxClasses {
		return fmt.Errorf("%s: %w: %d distinct labels (at most %d)", ds.Name, ErrLabelRange, len(names), MaxClasses)
	}
	index := make(map[string]int32, len(names))
	for i, n := range names {
		index[n] = int32(i)
	}
	for i, l := range labels {
		ds.Y[i] = index[key(l)]
	}
	ds.Classes = len(names)
	ds.ClassNames = names
	return nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func resolveLabelColumn(spec string, header []string, hasHeader bool, cols int) (int, error) {
	if spec == "" {
		return cols - 1, nil
	}
	if hasHeader {
		for j, h := range header {
			if strings.TrimSpace(h) == spec {
				return j, nil
			}
		}
	}
	if v, err := strconv.Atoi(spec); err == nil {
		if v < 0 {
			v += cols
		}
		if v < 0 || v >= cols {
			return 0, fmt.Errorf("%w: label column %s out of range for %d columns", ErrFormat, spec, cols)
		}
		return v, nil
	}
	if !hasHeader {
		return 0, fmt.Errorf("%w: label column %q named, but the file has no header row", ErrFormat, spec)
	}
	return 0, fmt.Errorf("%w: no column named %q in header %q", ErrFormat, spec, strings.Join(header, ","))
}

func csvErr(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: line %d, column %d: %w: %v", name, pe.Line, pe.Column, ErrFormat, pe.Err)
	}
	return fmt.Errorf("%s: %w: %v", name, ErrFormat, err)
}
