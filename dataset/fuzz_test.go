package dataset

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Each decoder must return a dataset that validates or an error; never panic.

func FuzzReadIDX(f *testing.F) {
	f.Add(idxBytes([]int{2, 2}, []byte{1, 2, 3, 4}))
	f.Add(gz(idxBytes([]int{3}, []byte{0, 1, 2})))
	f.Add([]byte{0, 0, 0x0D, 1, 0, 0, 0, 1, 0x7f, 0xc0, 0, 0})
	f.Add([]byte{0, 0, 0x0E, 2, 0, 0, 0, 1, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ReadIDX(bytes.NewReader(b), "fuzz")
		// The last row alone, read past the others: the same values, and
		// the same verdict on a stream that ends early.
		last, rerr := ReadIDXRows(bytes.NewReader(b), "fuzz", []int{0})
		if err != nil {
			return
		}
		total := 1
		for _, d := range a.Dims {
			total *= d
		}
		if total != len(a.Data) {
			t.Fatalf("dims %v but %d values", a.Dims, len(a.Data))
		}
		if rerr != nil {
			t.Fatalf("ReadIDX read it, ReadIDXRows refused its first row: %v", rerr)
		}
		row := len(a.Data) / a.Dims[0]
		if !slices.Equal(last.Data, a.Data[:row]) {
			t.Fatalf("first row %v, ReadIDX has %v", last.Data, a.Data[:row])
		}
	})
}

func FuzzReadCSV(f *testing.F) {
	f.Add("a,b,y\n1,2,0\n3,4,1\n", "")
	f.Add("1,2,cat\n3,4,dog\n", "0")
	f.Add("y;x\n1;2\n", "y")
	f.Add("1,\"2\n", "")
	f.Fuzz(func(t *testing.T, in, label string) {
		ds, err := ReadCSV(strings.NewReader(in), "fuzz", CSVOptions{LabelColumn: label})
		if err != nil {
			return
		}
		if err := ds.Validate(); err != nil {
			t.Fatalf("accepted an invalid dataset: %v", err)
		}
	})
}

func FuzzReadLIBSVM(f *testing.F) {
	f.Add("+1 1:0.5 3:2\n-1 2:1\n")
	f.Add("2 0:1 4:2 # c\n0 qid:1 1:3\n")
	f.Add("1 16777215:1\n")
	f.Fuzz(func(t *testing.T, in string) {
		if len(in) > 1<<12 {
			return // keep dense outputs small
		}
		ds, err := ReadLIBSVM(strings.NewReader(in), "fuzz", LIBSVMOptions{})
		if err != nil {
			return
		}
		if err := ds.Validate(); err != nil {
			t.Fatalf("accepted an invalid dataset: %v", err)
		}
	})
}

// FuzzReadCache: a cache file of any content is read or refused with an
// error, never a panic, and what is read is a valid dataset.
func FuzzReadCache(f *testing.F) {
	src := writeIDXDir(f, 8, 5)
	dir := f.TempDir()
	f.Setenv(CacheDirEnv, dir)
	if _, _, _, err := Load(src, LoadOptions{Scale: "minmax"}); err != nil {
		f.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.f32"))
	if len(files) != 1 {
		f.Fatalf("%d cache files", len(files))
	}
	key := strings.TrimSuffix(filepath.Base(files[0]), ".f32")
	b, _ := os.ReadFile(files[0])
	f.Add(b)
	f.Add([]byte(cacheMagic + "{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := t.TempDir()
		if err := os.WriteFile(cachePath(d, key), b, 0o644); err != nil {
			t.Fatal(err)
		}
		tr, te, _, err := readCache(d, key)
		if err != nil {
			return
		}
		for _, s := range []*Dataset{tr, te} {
			if err := s.Validate(); err != nil {
				t.Fatalf("read an invalid dataset: %v", err)
			}
		}
	})
}
