package dataset

import (
	"bytes"
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

//go:embed embedded/digits.csv.gz
var digitsCSV []byte

// DefaultFashionMNISTDir is where Debian's dataset-fashion-mnist package puts
// the Fashion-MNIST IDX files.
const DefaultFashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// DataDirEnv names the environment variable that, when set, is where
// named datasets are looked for ($GOSSIPD_DATA_DIR/fashion-mnist or the
// directory itself) instead of the system's directory.
const DataDirEnv = "GOSSIPD_DATA_DIR"

// DefaultTestFraction is the held-out fraction of a source without a
// test split.
const DefaultTestFraction = 0.2

// isFashionMNIST reports whether spec names Fashion-MNIST (in any of the
// spellings Open takes).
func isFashionMNIST(spec string) bool {
	return slices.Contains([]string{"fashion-mnist", "fashion_mnist", "fashionmnist"}, spec)
}

// Names lists the named datasets Open knows.
var Names = []string{"digits", "fashion-mnist"}

// OpenOptions configures Open. The zero value is valid.
type OpenOptions struct {
	// Format forces the file format of a path: "csv", "libsvm" or "idx"
	// (a directory with MNIST-style IDX files). Empty: by extension.
	Format string
	// CSV and LIBSVM options for paths of those formats.
	CSV    CSVOptions
	LIBSVM LIBSVMOptions
	// TestFraction is the fraction held out as the test set when the source
	// has no test split of its own. Default 0.2; a fraction given for a
	// source with a split of its own is an error (ErrOwnTestSplit), as is
	// a CSV label column for a source that is not CSV (ErrNotCSV).
	TestFraction float64
	// Seed drives the held-out split. Same seed, same split.
	Seed uint64
	// DataDir overrides $GOSSIPD_DATA_DIR.
	DataDir string
	// KeepTrain, when set, picks the training examples to keep from their
	// labels (and the number of classes); Open returns only those, in its
	// order. From IDX files only the kept images are decoded, so a shard
	// of a large set costs the shard's memory.
	KeepTrain func(y []int32, classes int) ([]int, error)
}

// Open loads a named dataset ("digits", "fashion-mnist") or a path and
// returns its training and test sets. Sources without a test split of their
// own (digits, a single CSV or LIBSVM file) are split, stratified by class,
// with opts.TestFraction and opts.Seed. A path may also name a directory of
// MNIST-style IDX files (train-images-idx3-ubyte[.gz] and friends).
func Open(spec string, opts OpenOptions) (train, test *Dataset, err error) {
	if err := vetOptions(spec, opts); err != nil {
		return nil, nil, err
	}
	if opts.TestFraction == 0 {
		opts.TestFraction = DefaultTestFraction
	}
	if !(opts.TestFraction > 0 && opts.TestFraction < 1) {
		return nil, nil, fmt.Errorf("dataset: test fraction %v not in (0,1)", opts.TestFraction)
	}
	var all *Dataset
	switch {
	case spec == "digits":
		opts.CSV.Classes = 10
		all, err = ReadCSV(bytes.NewReader(digitsCSV), "digits", opts.CSV)
		if err != nil {
			return nil, nil, err
		}
		all.Name, all.Shape = "digits", []int{1, 8, 8}
	case isFashionMNIST(spec):
		dir, err := findFashionMNIST(opts.DataDir)
		if err != nil {
			return nil, nil, err
		}
		train, test, err = loadIDXDir(dir, opts.KeepTrain)
		if err != nil {
			return nil, nil, err
		}
		train.Name, test.Name = "fashion-mnist", "fashion-mnist/test"
		return train, test, nil
	default:
		all, train, test, err = openPath(spec, opts)
		if err != nil {
			return nil, nil, err
		}
		if train != nil {
			return train, test, nil
		}
	}
	if err := all.Validate(); err != nil {
		return nil, nil, err
	}
	train, test = StratifiedSplit(all, opts.TestFraction, opts.Seed)
	if train.N == 0 || test.N == 0 {
		side := "test"
		if train.N == 0 {
			side = "training"
		}
		return nil, nil, fmt.Errorf("%w: %s: %d example(s) split with test fraction %v leave no %s examples", ErrEmpty, all.Name, all.N, opts.TestFraction, side)
	}
	if opts.KeepTrain != nil {
		keep, err := opts.KeepTrain(train.Y, train.Classes)
		if err != nil {
			return nil, nil, err
		}
		train = train.Subset(keep)
	}
	return train, test, nil
}

func openPath(path string, opts OpenOptions) (all, train, test *Dataset, err error) {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !strings.ContainsAny(path, "/.") {
			return nil, nil, nil, fmt.Errorf("%w %q: not a named dataset (%s) nor an existing path", ErrUnknown, path, strings.Join(Names, ", "))
		}
		return nil, nil, nil, fmt.Errorf("dataset: %w", err)
	}
	format := opts.Format
	if format == "" {
		format = formatOf(path, st.IsDir())
	}
	switch format {
	case "idx":
		train, test, err = loadIDXDir(path, opts.KeepTrain)
		return nil, train, test, err
	case "csv":
		all, err = ReadCSVFile(path, opts.CSV)
	case "libsvm":
		all, err = ReadLIBSVMFile(path, opts.LIBSVM)
	default:
		return nil, nil, nil, fmt.Errorf("%s: %w: format %q, want csv|libsvm|idx", path, ErrFormat, format)
	}
	return all, nil, nil, err
}

// vetOptions refuses options that spec's source has no use for, which
// would otherwise be silently ignored: a test fraction (as given, before
// its default) for IDX files, which have a test split of their own, and a
// CSV label column for a source that is not CSV. A path that cannot be
// read passes: Open reports it.
func vetOptions(spec string, opts OpenOptions) error {
	format := "csv" // digits
	switch {
	case spec == "digits":
	case isFashionMNIST(spec):
		format = "idx"
	default:
		st, err := os.Stat(spec)
		if err != nil {
			return nil
		}
		format = cmp.Or(opts.Format, formatOf(spec, st.IsDir()))
	}
	switch {
	case format == "idx" && opts.TestFraction != 0:
		return fmt.Errorf("%w: %s has its own (test fraction %v)", ErrOwnTestSplit, spec, opts.TestFraction)
	case format != "csv" && opts.CSV.LabelColumn != "":
		return fmt.Errorf("%w: %s is %s (label column %q)", ErrNotCSV, spec, strings.ToUpper(format), opts.CSV.LabelColumn)
	}
	return nil
}

func formatOf(path string, dir bool) string {
	if dir {
		return "idx"
	}
	p := strings.TrimSuffix(strings.ToLower(path), ".gz")
	switch filepath.Ext(p) {
	case ".libsvm", ".svm", ".svmlight", ".txt":
		return "libsvm"
	}
	return "csv"
}

// findFashionMNIST finds the IDX directory: in override or
// $GOSSIPD_DATA_DIR where either is set (and nowhere else), else in
// Debian's DefaultFashionMNISTDir.
func findFashionMNIST(override string) (string, error) {
	var tried []string
	for _, base := range []string{override, os.Getenv(DataDirEnv)} {
		if base == "" {
			continue
		}
		for _, d := range []string{filepath.Join(base, "fashion-mnist"), base} {
			tried = append(tried, d)
			if hasIDX(d) {
				return d, nil
			}
		}
	}
	if len(tried) > 0 {
		// A directory that was named and lacks it is an error: falling
		// back to the system's copy would silently read other files.
		return "", fmt.Errorf("%w: fashion-mnist not found where $%s (or the data directory given) says (looked in %s)",
			ErrUnknown, DataDirEnv, strings.Join(tried, ", "))
	}
	if hasIDX(DefaultFashionMNISTDir) {
		return DefaultFashionMNISTDir, nil
	}
	return "", fmt.Errorf("%w: fashion-mnist not found (looked in %s); install Debian's dataset-fashion-mnist or set $%s",
		ErrUnknown, DefaultFashionMNISTDir, DataDirEnv)
}

func hasIDX(dir string) bool {
	_, err := idxFile(dir, "train-images-idx3-ubyte")
	return err == nil
}

// idxFile finds base or base.gz in dir.
func idxFile(dir, base string) (string, error) {
	for _, name := range []string{base + ".gz", base, strings.Replace(base, "-idx", ".idx", 1)} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w: no %s[.gz]", dir, fs.ErrNotExist, base)
}

// LoadIDXDir loads the MNIST-style train and test sets from a directory
// holding train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (each raw or .gz).
func LoadIDXDir(dir string) (train, test *Dataset, err error) { return loadIDXDir(dir, nil) }

// loadIDXDir loads an IDX directory, keeping only the training examples
// keep picks (nil: all), whose images alone are decoded.
func loadIDXDir(dir string, keep func(y []int32, classes int) ([]int, error)) (train, test *Dataset, err error) {
	paths := func(images, labels string) (string, string, error) {
		ip, err := idxFile(dir, images)
		if err != nil {
			return "", "", fmt.Errorf("dataset: %w", err)
		}
		lp, err := idxFile(dir, labels)
		if err != nil {
			return "", "", fmt.Errorf("dataset: %w", err)
		}
		return ip, lp, nil
	}
	ip, lp, err := paths("train-images-idx3-ubyte", "train-labels-idx1-ubyte")
	if err != nil {
		return nil, nil, err
	}
	if keep == nil {
		train, err = LoadIDX(ip, lp)
	} else {
		train, err = loadIDXRows(ip, lp, keep)
	}
	if err != nil {
		return nil, nil, err
	}
	if ip, lp, err = paths("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"); err != nil {
		return nil, nil, err
	}
	if test, err = LoadIDX(ip, lp); err != nil {
		return nil, nil, err
	}
	if train.D != test.D {
		return nil, nil, fmt.Errorf("%s: %w: train has %d features, test %d", dir, ErrShape, train.D, test.D)
	}
	k := max(train.Classes, test.Classes)
	train.Classes, test.Classes = k, k
	return train, test, nil
}
