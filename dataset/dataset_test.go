package dataset

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// idxBytes encodes an IDX array of uint8 values.
func idxBytes(dims []int, data []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, idxUint8, byte(len(dims))})
	for _, d := range dims {
		binary.Write(&b, binary.BigEndian, uint32(d))
	}
	b.Write(data)
	return b.Bytes()
}

func gz(b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

func TestIDXRoundTrip(t *testing.T) {
	img := idxBytes([]int{3, 2, 2}, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255})
	lab := idxBytes([]int{3}, []byte{2, 0, 1})
	for _, enc := range []func([]byte) []byte{func(b []byte) []byte { return b }, gz} {
		a, err := ReadIDX(bytes.NewReader(enc(img)), "img")
		if err != nil {
			t.Fatal(err)
		}
		l, err := ReadIDX(bytes.NewReader(enc(lab)), "lab")
		if err != nil {
			t.Fatal(err)
		}
		ds, err := FromIDX(a, l, "x")
		if err != nil {
			t.Fatal(err)
		}
		if ds.N != 3 || ds.D != 4 || ds.Classes != 3 || ds.X[11] != 255 || !slices.Equal(ds.Y, []int32{2, 0, 1}) {
			t.Fatalf("decoded %+v", ds)
		}
		if !slices.Equal(ds.Shape, []int{1, 2, 2}) || !slices.Equal(ds.Subset([]int{1}).Shape, ds.Shape) {
			t.Fatalf("shape %v (a subset's %v), want [1 2 2]", ds.Shape, ds.Subset([]int{1}).Shape)
		}
		if err := ds.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestIDXErrors(t *testing.T) {
	good := idxBytes([]int{2, 3}, []byte{1, 2, 3, 4, 5, 6})
	cases := map[string]struct {
		in   []byte
		want string
	}{
		"empty":        {nil, "byte 0"},
		"bad magic":    {append([]byte{1}, good[1:]...), "bad IDX magic"},
		"bad type":     {append([]byte{0, 0, 0x42}, good[3:]...), "byte 2"},
		"no dims":      {[]byte{0, 0, 8, 0}, "0 dimensions"},
		"short header": {good[:6], "byte 4: "},
		"zero dim":     {idxBytes([]int{0, 3}, nil), "dimension 0 is 0"},
		"truncated":    {good[:len(good)-2], "byte 16: "},
		"trailing":     {append(slices.Clone(good), 9), "trailing data"},
		"huge header":  {idxBytes([]int{1 << 20, 1 << 20}, nil), "more than"},
		"huge float64": {[]byte{0, 0, idxFloat64, 1, 0x10, 0, 0, 0}, "more than"},
		"corrupt gzip": {append(gz(good)[:20], 0xff, 0xff, 0xff), "gzip"},
	}
	for name, c := range cases {
		_, err := ReadIDX(bytes.NewReader(c.in), "f.idx")
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "f.idx: ") {
			t.Errorf("%s: error %v, want ErrFormat mentioning %q and the file", name, err, c.want)
		}
	}
	a, _ := ReadIDX(bytes.NewReader(good), "a")
	l, _ := ReadIDX(bytes.NewReader(idxBytes([]int{3}, []byte{0, 1, 2})), "l")
	if _, err := FromIDX(a, l, "pair"); !errors.Is(err, ErrShape) {
		t.Errorf("2 images, 3 labels: %v", err)
	}
}

func TestCSV(t *testing.T) {
	in := "a,b,label\n1,2,0\n3,4.5,2\n# comment\n5,6,1\n"
	ds, err := ReadCSV(strings.NewReader(in), "t.csv", CSVOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.N != 3 || ds.D != 2 || ds.Classes != 3 || ds.X[3] != 4.5 || !slices.Equal(ds.Y, []int32{0, 2, 1}) {
		t.Fatalf("%+v", ds)
	}
	// Label by name and by index, in the first column; no header.
	ds, err = ReadCSV(strings.NewReader("y,f\n1,0.5\n0,0.25\n"), "t.csv", CSVOptions{LabelColumn: "y"})
	if err != nil || ds.D != 1 || ds.X[1] != 0.25 || ds.Y[0] != 1 {
		t.Fatalf("by name: %+v %v", ds, err)
	}
	ds, err = ReadCSV(strings.NewReader("1,0.5\n0,0.25\n"), "t.csv", CSVOptions{LabelColumn: "0"})
	if err != nil || ds.N != 2 || ds.X[0] != 0.5 || ds.Y[0] != 1 {
		t.Fatalf("by index: %+v %v", ds, err)
	}
	// Text labels become classes in sorted order.
	ds, err = ReadCSV(strings.NewReader("1,2,setosa\n3,4,virginica\n5,6,setosa\n"), "iris.csv", CSVOptions{})
	if err != nil || ds.Classes != 2 || !slices.Equal(ds.ClassNames, []string{"setosa", "virginica"}) || !slices.Equal(ds.Y, []int32{0, 1, 0}) {
		t.Fatalf("text labels: %+v %v", ds, err)
	}
	// Semicolons.
	if ds, err := ReadCSV(strings.NewReader("1;2;0\n3;4;1\n"), "t.csv", CSVOptions{Comma: ';'}); err != nil || ds.N != 2 {
		t.Fatalf("semicolons: %v", err)
	}
}

func TestCSVErrors(t *testing.T) {
	cases := map[string]struct {
		in   string
		opts CSVOptions
		want string
		is   error
	}{
		"ragged":         {"1,2,0\n3,4\n", CSVOptions{}, "line 2: ", ErrFormat},
		"non-numeric":    {"a,b,y\n1,2,0\n1,x,1\n", CSVOptions{}, "line 3, column 2", ErrFormat},
		"nan":            {"1,NaN,0\n", CSVOptions{}, "line 1, column 2", ErrFormat},
		"negative label": {"1,2,0\n1,2,-1\n", CSVOptions{}, "line 2: dataset: label out of range: label -1", ErrLabelRange},
		"label >= k":     {"1,2,0\n1,2,10\n", CSVOptions{Classes: 10}, "line 2", ErrLabelRange},
		"text label k":   {"1,2,0\n1,2,cat\n", CSVOptions{Classes: 10}, "line 2", ErrLabelRange},
		"one column":     {"1\n2\n", CSVOptions{}, "1 column", ErrFormat},
		"empty":          {"", CSVOptions{}, "t.csv", ErrEmpty},
		"header only":    {"a,b\n", CSVOptions{}, "header only", ErrEmpty},
		"no such column": {"a,b\n1,2\n", CSVOptions{LabelColumn: "c"}, `no column named "c"`, ErrFormat},
		"bad index":      {"1,2\n", CSVOptions{LabelColumn: "5"}, "out of range", ErrFormat},
		"quote":          {"1,\"2,0\n", CSVOptions{}, "line 1", ErrFormat},
		"binary":         {"1,2,0\n3,\x004,1\n", CSVOptions{}, "binary data (a NUL byte at offset 8), not CSV text", ErrFormat},
		"an IDX file":    {"\x00\x00\x08\x03\x00\x00\x00\x01", CSVOptions{}, "an IDX file; give the directory", ErrFormat},
	}
	for name, c := range cases {
		_, err := ReadCSV(strings.NewReader(c.in), "t.csv", c.opts)
		if err == nil || !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "t.csv") {
			t.Errorf("%s: error %v, want %v mentioning %q", name, err, c.is, c.want)
		}
	}
}

func TestLIBSVM(t *testing.T) {
	in := "+1 1:0.5 3:2 # comment\n-1 2:1\n\n+1 qid:3 1:1\n"
	ds, err := ReadLIBSVM(strings.NewReader(in), "t.svm", LIBSVMOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.N != 3 || ds.D != 3 || ds.Classes != 2 || !slices.Equal(ds.Y, []int32{1, 0, 1}) || !slices.Equal(ds.X[:3], []float32{0.5, 0, 2}) {
		t.Fatalf("%+v", ds)
	}
	ds, err = ReadLIBSVM(strings.NewReader("2 0:1 4:2\n0 1:3\n1 0:1\n"), "t.svm", LIBSVMOptions{Features: 6})
	if err != nil || ds.D != 6 || ds.X[4] != 2 || ds.Classes != 3 || ds.Y[0] != 2 {
		t.Fatalf("0-based: %+v %v", ds, err)
	}
	for name, c := range map[string]struct{ in, want string }{
		"bad token":  {"1 1:2 x\n", "line 1"},
		"bad index":  {"1 1:2\n1 -3:1\n", "line 2"},
		"decreasing": {"1 3:2 2:1\n", "indices must increase"},
		"bad value":  {"1 1:nan\n", "line 1"},
		"bad label":  {"x 1:1\n", "label"},
		"empty":      {"\n\n", "no examples"},
		"binary":     {"1 1:2\n\x00", "not LIBSVM text"},
	} {
		if _, err := ReadLIBSVM(strings.NewReader(c.in), "t.svm", LIBSVMOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want mention of %q", name, err, c.want)
		}
	}
	if _, err := ReadLIBSVM(strings.NewReader("1 0:1\n"), "t.svm", LIBSVMOptions{ZeroBased: "1"}); err == nil {
		t.Error("index 0 accepted as 1-based")
	}
}

func TestOpenDigits(t *testing.T) {
	tr, te, err := Open("digits", OpenOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if tr.N+te.N != 1797 || tr.D != 64 || tr.Classes != 10 || te.Classes != 10 {
		t.Fatalf("digits: %d+%d rows, %d features, %d classes", tr.N, te.N, tr.D, tr.Classes)
	}
	if !slices.Equal(tr.Shape, []int{1, 8, 8}) || !slices.Equal(te.Shape, tr.Shape) {
		t.Fatalf("digits shaped %v and %v, want [1 8 8]", tr.Shape, te.Shape)
	}
	if math.Abs(float64(te.N)/1797-0.2) > 0.01 {
		t.Fatalf("test fraction %d/1797", te.N)
	}
	for _, c := range te.ClassCounts() { // stratified: every class is in the test set
		if c < 30 {
			t.Fatalf("test class counts %v", te.ClassCounts())
		}
	}
	tr2, _, _ := Open("digits", OpenOptions{Seed: 1})
	tr3, _, _ := Open("digits", OpenOptions{Seed: 2})
	if !slices.Equal(tr.Y, tr2.Y) || slices.Equal(tr.Y, tr3.Y) {
		t.Fatal("split is not a function of the seed")
	}
	if _, _, err := Open("no-such-dataset", OpenOptions{}); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "digits") {
		t.Fatalf("unknown name: %v", err)
	}
	if _, _, err := Open("/no/such/file.csv", OpenOptions{}); err == nil || !strings.Contains(err.Error(), "/no/such/file.csv") {
		t.Fatalf("missing path: %v", err)
	}
}

// TestOpenFashionMNIST needs Debian's dataset-fashion-mnist (installed by
// .ci/run) or $GOSSIPD_DATA_DIR.
func TestOpenFashionMNIST(t *testing.T) {
	tr, te, err := Open("fashion-mnist", OpenOptions{})
	if err != nil {
		t.Fatalf("%v (apt-get install dataset-fashion-mnist)", err)
	}
	if tr.N != 60000 || te.N != 10000 || tr.D != 784 || tr.Classes != 10 {
		t.Fatalf("fashion-mnist: %d/%d rows, %d features, %d classes", tr.N, te.N, tr.D, tr.Classes)
	}
	if !slices.Equal(tr.Shape, []int{1, 28, 28}) || !slices.Equal(te.Shape, tr.Shape) {
		t.Fatalf("fashion-mnist shaped %v and %v, want [1 28 28]", tr.Shape, te.Shape)
	}
	for _, c := range tr.ClassCounts() {
		if c != 6000 {
			t.Fatalf("class counts %v, want 6000 each", tr.ClassCounts())
		}
	}
	// The same files read through a directory path and $GOSSIPD_DATA_DIR.
	dir := t.TempDir()
	src, _ := findFashionMNIST("")
	for _, f := range []string{"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"} {
		b, err := os.ReadFile(filepath.Join(src, f+".gz"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f+".gz"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(DataDirEnv, dir)
	if got, err := findFashionMNIST(""); err != nil || got != dir {
		t.Fatalf("$%s: found %q, %v", DataDirEnv, got, err)
	}
	// A data directory without it is an error naming it, not the
	// system's copy read instead.
	t.Setenv(DataDirEnv, t.TempDir())
	if _, err := findFashionMNIST(""); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), os.Getenv(DataDirEnv)) {
		t.Fatalf("$%s without it: %v", DataDirEnv, err)
	}
	t.Setenv(DataDirEnv, dir)
	_, te2, err := Open(dir, OpenOptions{})
	if err != nil || !slices.Equal(te2.Y, te.Y) {
		t.Fatalf("as a directory: %v", err)
	}
}

func TestScaler(t *testing.T) {
	ds := &Dataset{N: 3, D: 2, Classes: 2, X: []float32{0, 5, 10, 5, 20, 5}, Y: []int32{0, 1, 0}}
	mm, _ := FitScaler("minmax", ds)
	c := *ds
	c.X = slices.Clone(ds.X)
	mm.Transform(&c)
	if !slices.Equal(c.X, []float32{0, 0, 0.5, 0, 1, 0}) {
		t.Fatalf("minmax: %v", c.X)
	}
	st, _ := FitScaler("standard", ds)
	c.X = slices.Clone(ds.X)
	st.Transform(&c)
	var mean, sq float64
	for i := 0; i < 3; i++ {
		mean += float64(c.X[2*i])
		sq += float64(c.X[2*i] * c.X[2*i])
	}
	if math.Abs(mean) > 1e-6 || math.Abs(sq/3-1) > 1e-5 || c.X[1] != 0 {
		t.Fatalf("standard: %v", c.X)
	}
	if _, err := FitScaler("log", ds); err == nil {
		t.Fatal("unknown scaling accepted")
	}
}

func synthetic(n, classes int) *Dataset {
	ds := &Dataset{Name: "synthetic", N: n, D: 1, Classes: classes, X: make([]float32, n), Y: make([]int32, n)}
	for i := range ds.Y {
		ds.Y[i] = int32(i % classes)
		ds.X[i] = float32(i)
	}
	return ds
}

func TestPartitioners(t *testing.T) {
	ds := synthetic(1000, 10)
	for _, spec := range []string{"iid", "dirichlet:0.1", "dirichlet:100", "shards:2", "quantity:0.5"} {
		p, err := ParsePartitioner(spec)
		if err != nil {
			t.Fatal(err)
		}
		if p.String() != spec {
			t.Errorf("%s prints as %s", spec, p)
		}
		parts, err := p.Partition(ds, 20, 7)
		if err != nil {
			t.Fatal(err)
		}
		seen := make([]int, ds.N)
		for k, part := range parts {
			if len(part) == 0 {
				t.Errorf("%s: node %d is empty", spec, k)
			}
			for _, i := range part {
				seen[i]++
			}
		}
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("%s: example %d assigned %d times", spec, i, c)
			}
		}
		again, _ := p.Partition(ds, 20, 7)
		other, _ := p.Partition(ds, 20, 8)
		if !equalParts(parts, again) || equalParts(parts, other) {
			t.Errorf("%s: partition is not a function of the seed", spec)
		}
	}
}

func equalParts(a, b [][]int) bool {
	return slices.EqualFunc(a, b, func(x, y []int) bool { return slices.Equal(x, y) })
}

// meanClassesPerNode counts distinct labels per node, averaged.
func meanClassesPerNode(ds *Dataset, parts [][]int) float64 {
	total := 0
	for _, p := range parts {
		seen := map[int32]bool{}
		for _, i := range p {
			seen[ds.Y[i]] = true
		}
		total += len(seen)
	}
	return float64(total) / float64(len(parts))
}

func TestPartitionSkew(t *testing.T) {
	ds := synthetic(5000, 10)
	iid, _ := IID{}.Partition(ds, 50, 1)
	dirLow, _ := Dirichlet{Alpha: 0.05}.Partition(ds, 50, 1)
	dirHigh, _ := Dirichlet{Alpha: 100}.Partition(ds, 50, 1)
	shards, _ := Shards{PerNode: 2}.Partition(ds, 50, 1)
	if c := meanClassesPerNode(ds, iid); c < 9.9 {
		t.Errorf("iid: %.2f classes per node", c)
	}
	if c := meanClassesPerNode(ds, dirHigh); c < 9.5 {
		t.Errorf("dirichlet:100: %.2f classes per node, want nearly all 10", c)
	}
	if c := meanClassesPerNode(ds, dirLow); c > 4 {
		t.Errorf("dirichlet:0.05: %.2f classes per node, want strong skew", c)
	}
	if c := meanClassesPerNode(ds, shards); c > 2.01 {
		t.Errorf("shards:2: %.2f classes per node, want at most 2", c)
	}
	for _, p := range iid {
		if len(p) != 100 {
			t.Fatalf("iid sizes differ: %d", len(p))
		}
	}
	q, _ := QuantitySkew{Alpha: 0.3}.Partition(ds, 50, 1)
	lo, hi := ds.N, 0
	for _, p := range q {
		lo, hi = min(lo, len(p)), max(hi, len(p))
	}
	if hi < 5*lo {
		t.Errorf("quantity:0.3: sizes %d..%d, want strong skew", lo, hi)
	}
}

func TestPartitionErrors(t *testing.T) {
	for _, s := range []string{"", "iid:3", "dirichlet", "dirichlet:-1", "dirichlet:x", "shards:1.5", "zipf:1", "quantity:inf"} {
		if _, err := ParsePartitioner(s); !errors.Is(err, ErrBadPartition) {
			t.Errorf("%q: %v", s, err)
		}
	}
	ds := synthetic(10, 2)
	if _, err := (IID{}).Partition(ds, 11, 1); !errors.Is(err, ErrBadPartition) {
		t.Errorf("11 nodes for 10 examples: %v", err)
	}
	if _, err := (Shards{PerNode: 2}).Partition(ds, 6, 1); !errors.Is(err, ErrBadPartition) {
		t.Errorf("12 shards of 10 examples: %v", err)
	}
}

// TestFingerprint: the same examples in another order give the same
// fingerprint; a changed feature, a changed label or a dropped example
// give another; Load's fingerprint ignores scaling and follows the shard.
func TestFingerprint(t *testing.T) {
	d := &Dataset{N: 3, D: 2, Classes: 2, X: []float32{1, 2, 3, 4, 5, 6}, Y: []int32{0, 1, 0}}
	fp := Fingerprint(d)
	if got := Fingerprint(d.Subset([]int{2, 0, 1})); got != fp {
		t.Fatalf("reordered rows: %s, want %s", got, fp)
	}
	for name, other := range map[string]*Dataset{
		"feature": {N: 3, D: 2, Classes: 2, X: []float32{1, 2, 3, 4, 5, 6.5}, Y: []int32{0, 1, 0}},
		"label":   {N: 3, D: 2, Classes: 2, X: []float32{1, 2, 3, 4, 5, 6}, Y: []int32{0, 1, 1}},
		"dropped": d.Subset([]int{0, 1}),
	} {
		if Fingerprint(other) == fp {
			t.Errorf("a changed %s keeps the fingerprint", name)
		}
	}
	load := func(shard, scale string) string {
		tr, _, _, err := Load("digits", LoadOptions{Shard: shard, Scale: scale, Fingerprint: true})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Fingerprint
	}
	if a, b := load("0/2", "standard"), load("0/2", "minmax"); a != b || a == "" {
		t.Fatalf("scaling changed the fingerprint: %q vs %q", a, b)
	}
	if load("0/2", "none") == load("1/2", "none") {
		t.Fatal("two shards share a fingerprint")
	}
}

// TestShardFromIDX: loading a shard of an IDX directory decodes only the
// shard's images, and gives exactly what loading it all and cutting the
// shard gives.
func TestShardFromIDX(t *testing.T) {
	dir := t.TempDir()
	const n, d = 60, 6
	img := make([]byte, n*d)
	lab := make([]byte, n)
	for i := range n {
		lab[i] = byte((i * 7) % 5)
		for j := range d {
			img[i*d+j] = byte(i*d + j)
		}
	}
	for name, b := range map[string][]byte{
		"train-images-idx3-ubyte.gz": gz(idxBytes([]int{n, 2, 3}, img)),
		"train-labels-idx1-ubyte":    idxBytes([]int{n}, lab),
		"t10k-images-idx3-ubyte":     idxBytes([]int{5, 2, 3}, img[:5*d]),
		"t10k-labels-idx1-ubyte":     idxBytes([]int{5}, lab[:5]),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, part := range []string{"iid", "shards:2", "dirichlet:0.5"} {
		got, _, _, err := Load(dir, LoadOptions{Shard: "1/3", Partition: part, Scale: "none", OpenOptions: OpenOptions{Seed: 7}})
		if err != nil {
			t.Fatal(err)
		}
		all, _, err := LoadIDXDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := ParsePartitioner(part)
		parts, err := p.Partition(all, 3, 7)
		if err != nil {
			t.Fatal(err)
		}
		want := all.Subset(parts[1])
		if got.N != want.N || got.D != want.D || got.Classes != want.Classes || !slices.Equal(got.X, want.X) || !slices.Equal(got.Y, want.Y) {
			t.Fatalf("%s: shard %d×%d (%d classes), want %d×%d (%d classes); X equal %v, Y equal %v", part, got.N, got.D, got.Classes,
				want.N, want.D, want.Classes, slices.Equal(got.X, want.X), slices.Equal(got.Y, want.Y))
		}
	}
	for _, keep := range [][]int{{0, 0}, {-1}, {n}} {
		if _, err := ReadIDXRows(bytes.NewReader(idxBytes([]int{n, 6}, img)), "rows", keep); !errors.Is(err, ErrShape) {
			t.Errorf("rows %v: %v, want a shape error", keep, err)
		}
	}
}

// TestSamplePartition: sample:K gives every node K examples, more nodes
// than the dataset has examples, about uniformly, as a function of the
// seed; bad specs are refused.
func TestSamplePartition(t *testing.T) {
	ds := synthetic(100, 10)
	p, err := ParsePartitioner("sample:8")
	if err != nil || p.String() != "sample:8" {
		t.Fatalf("%v %v", p, err)
	}
	parts, err := p.Partition(ds, 1000, 3)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]int, ds.N)
	for k, part := range parts {
		if len(part) != 8 || !slices.IsSorted(part) {
			t.Fatalf("node %d: %v", k, part)
		}
		for _, i := range part {
			seen[i]++
		}
	}
	for i, c := range seen { // 80 expected each; 40 is eight standard deviations off
		if c < 40 || c > 120 {
			t.Errorf("example %d drawn %d times of 8000, want about 80", i, c)
		}
	}
	again, _ := p.Partition(ds, 1000, 3)
	other, _ := p.Partition(ds, 1000, 4)
	if !equalParts(parts, again) || equalParts(parts, other) {
		t.Error("sample: not a function of the seed")
	}
	for _, bad := range []string{"sample", "sample:0", "sample:1.5", "sample:-2", "sample:9999999"} {
		if _, err := ParsePartitioner(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// Options a source has no use for are errors, not silently ignored: a
// test fraction for IDX files (a test split of their own), a CSV label
// column for IDX or LIBSVM files. The defaults pass.
func TestOpenInapplicableOptions(t *testing.T) {
	idx := writeIDXDir(t, 20, 4)
	svm := filepath.Join(t.TempDir(), "a.libsvm")
	if err := os.WriteFile(svm, []byte("1 1:0.5\n0 2:0.25\n1 1:1\n0 2:1\n1 1:0.7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec string
		opts OpenOptions
		want error
	}{
		{idx, OpenOptions{}, nil},
		{idx, OpenOptions{TestFraction: 0.3}, ErrOwnTestSplit},
		{idx, OpenOptions{CSV: CSVOptions{LabelColumn: "0"}}, ErrNotCSV},
		{svm, OpenOptions{TestFraction: 0.4}, nil},
		{svm, OpenOptions{CSV: CSVOptions{LabelColumn: "0"}}, ErrNotCSV},
		{"digits", OpenOptions{TestFraction: 0.3}, nil},
	} {
		_, _, err := Open(tc.spec, tc.opts)
		if !errors.Is(err, tc.want) || (err != nil && !strings.Contains(err.Error(), tc.spec)) {
			t.Errorf("%s %+v: got %v, want %v naming the source", tc.spec, tc.opts, err, tc.want)
		}
	}
	// Load refuses them too, cached or not (a cached IDX set skips Open).
	t.Setenv(CacheDirEnv, t.TempDir())
	for range 2 {
		if _, _, _, err := Load(idx, LoadOptions{Scale: "minmax"}); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := Load(idx, LoadOptions{Scale: "minmax", OpenOptions: OpenOptions{TestFraction: 0.3}}); !errors.Is(err, ErrOwnTestSplit) {
			t.Fatalf("Load with a test fraction: %v", err)
		}
	}
}

// TestOpenEmptySplit: a source too small for its split, which would leave
// the test set (or the training set) empty, is refused naming the source,
// instead of reporting a test accuracy measured on nothing.
func TestOpenEmptySplit(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		text     string
		fraction float64
		side     string
	}{
		{"a,b\n1,2\n", 0.2, "no test"},
		{"a,b\n1,2\n3,1\n", 0.2, "no test"},
		{"a,b\n1,2\n", 0.9, "no training"},
	} {
		path := filepath.Join(dir, "small.csv")
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := Open(path, OpenOptions{TestFraction: tc.fraction})
		if !errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.side) {
			t.Errorf("%q at test fraction %v: got %v, want ErrEmpty naming %s and %q", tc.text, tc.fraction, err, path, tc.side)
		}
	}
	// Two examples of one class split into one of each.
	if err := os.WriteFile(filepath.Join(dir, "two.csv"), []byte("a,b\n1,2\n3,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if train, test, err := Open(filepath.Join(dir, "two.csv"), OpenOptions{}); err != nil || train.N != 1 || test.N != 1 {
		t.Errorf("two examples: %v, %v, %v; want one each", train, test, err)
	}
}

func TestSpread(t *testing.T) {
	d := &Dataset{N: 10, D: 1, Classes: 10, X: make([]float32, 10), Y: make([]int32, 10)}
	for i := range 10 {
		d.X[i], d.Y[i] = float32(i), int32(i)
	}
	if d.Spread(0) != d || d.Spread(10) != d || d.Spread(11) != d {
		t.Error("Spread(0), Spread(N) and beyond should be the dataset itself")
	}
	s := d.Spread(4)
	if s.N != 4 || !slices.Equal(s.Y, []int32{0, 2, 5, 7}) || !slices.Equal(s.X, []float32{0, 2, 5, 7}) {
		t.Errorf("Spread(4) = rows %v (X %v), want 0 2 5 7 from both ends and the middle", s.Y, s.X)
	}
}
