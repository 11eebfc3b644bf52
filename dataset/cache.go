package dataset

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"unsafe"
)

// CacheDirEnv names the environment variable that sets where decoded
// datasets are cached (default: gossipd under the user's cache directory,
// $XDG_CACHE_HOME or ~/.cache). "off" turns the cache off.
const CacheDirEnv = "GOSSIPD_CACHE_DIR"

// The cache. Decoding Fashion-MNIST (gunzip, 55 million bytes to float32,
// scaling) takes about a second; a simulation of a hundred peers takes about
// as long again. Load therefore keeps each IDX directory it decodes whole,
// as one file of its unscaled features (bytes where every value is one, as
// IDX pixels are; float32 otherwise), int32 labels and the fitted scaler,
// and reads and scales that file in parallel on later loads. A cache file is named by a
// hash of what its contents depend on: the absolute paths, sizes and
// modification times of the four IDX files and the scaling. A changed
// source gets a new name; a cache file whose header or length does not
// match is rebuilt. Only whole IDX directories are cached (the simulator's
// and `train`'s loads); a daemon's shard is decoded alone, as before.

const cacheMagic = "gossipd dataset cache v3\n"

// cacheHeader is the JSON header of a cache file; the arrays follow at
// page-aligned offsets.
type cacheHeader struct {
	Key       string `json:"key"`
	TrainN    int    `json:"train_n"`
	TestN     int    `json:"test_n"`
	D         int    `json:"d"`
	Classes   int    `json:"classes"`
	TrainName string `json:"train_name"`
	TestName  string `json:"test_name"`
	Scale     string `json:"scale"`
	// Elem is how features are stored: "u8" (every value an integer in
	// 0..255, like IDX pixels) or "f32"; either way unscaled.
	Elem    string    `json:"elem"`
	Shift   []float32 `json:"shift"`
	Mul     []float32 `json:"mul"`
	XTrain  int64     `json:"x_train"`
	YTrain  int64     `json:"y_train"`
	XTest   int64     `json:"x_test"`
	YTest   int64     `json:"y_test"`
	FileLen int64     `json:"file_len"`
	// Shape is the examples' [C, H, W] (nil: flat).
	Shape []int `json:"shape,omitempty"`
}

// cacheDir returns the cache directory, or "" when caching is off or no
// directory can be found.
func cacheDir() string {
	if d := os.Getenv(CacheDirEnv); d != "" {
		if d == "off" {
			return ""
		}
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(base, "gossipd")
}

// idxCacheKey names what a decoded, scaled IDX directory depends on.
func idxCacheKey(dir, scale string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s%s\x00%s\x00", cacheMagic, abs, scale)
	for _, base := range []string{"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"} {
		p, err := idxFile(dir, base)
		if err != nil {
			return "", err
		}
		st, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", filepath.Base(p), st.Size(), st.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// idxSource returns the IDX directory a Load of source reads whole, if it
// reads one.
func idxSource(source string, o LoadOptions) (string, bool) {
	if o.Shard != "" || o.Fingerprint || o.KeepTrain != nil {
		return "", false
	}
	switch {
	case isFashionMNIST(source):
		dir, err := findFashionMNIST(o.DataDir)
		return dir, err == nil
	case source == "digits":
		return "", false
	}
	st, err := os.Stat(source)
	if err != nil || !st.IsDir() || (o.Format != "" && o.Format != "idx") {
		return "", false
	}
	return source, true
}

// littleEndian: the cache stores native floats, so it is used only where
// native order is little-endian (amd64, arm64, arm).
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// cachePath is the file holding key under dir.
func cachePath(dir, key string) string { return filepath.Join(dir, key+".f32") }

// readCache reads the cache file for key, or reports why it cannot. The
// arrays are read straight into heap slices: mapping the file instead
// would save the copy but leave the rows on 4 KiB pages, and training's
// random row accesses then ran 2–3× slower (TLB misses) than on the heap's
// huge pages.
func readCache(dir, key string) (train, test *Dataset, sc *Scaler, err error) {
	f, err := os.Open(cachePath(dir, key))
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, nil, err
	}
	bad := func(why string) error { return fmt.Errorf("%s: %s", f.Name(), why) }
	head := make([]byte, min(st.Size(), 1<<20))
	if _, err := io.ReadFull(f, head); err != nil {
		return nil, nil, nil, bad(err.Error())
	}
	if !bytes.HasPrefix(head, []byte(cacheMagic)) {
		return nil, nil, nil, bad("not a gossipd dataset cache")
	}
	end := bytes.IndexByte(head[len(cacheMagic):], '\n')
	if end < 0 {
		return nil, nil, nil, bad("no header")
	}
	var h cacheHeader
	if err := json.Unmarshal(head[len(cacheMagic):len(cacheMagic)+end], &h); err != nil {
		return nil, nil, nil, bad("header: " + err.Error())
	}
	if h.Key != key || h.FileLen != st.Size() || !h.layoutOK() {
		return nil, nil, nil, bad("header does not match its length or key")
	}
	sc = &Scaler{Kind: h.Scale, Shift: h.Shift, Mul: h.Mul}
	train = &Dataset{Name: h.TrainName, N: h.TrainN, D: h.D, Classes: h.Classes, Y: make([]int32, h.TrainN), Shape: h.Shape}
	test = &Dataset{Name: h.TestName, N: h.TestN, D: h.D, Classes: h.Classes, Y: make([]int32, h.TestN), Shape: h.Shape}
	for _, part := range []struct {
		d      *Dataset
		xo, yo int64
	}{{train, h.XTrain, h.YTrain}, {test, h.XTest, h.YTest}} {
		if _, err := f.ReadAt(intBytes(part.d.Y), part.yo); err != nil {
			return nil, nil, nil, bad(err.Error())
		}
		if part.d.X, err = readFeatures(f, part.xo, part.d.N*part.d.D, h.Elem, sc); err != nil {
			return nil, nil, nil, bad(err.Error())
		}
	}
	for _, d := range []*Dataset{train, test} {
		if err := d.Validate(); err != nil {
			return nil, nil, nil, bad(err.Error())
		}
	}
	return train, test, sc, nil
}

// readFeatures reads n stored feature values at off and scales them, on
// every core: reading and converting a large set dominates a warm start.
// Each value gets the arithmetic Scaler.Transform gives it, so a cached
// load equals a decoded one bit for bit.
func readFeatures(f *os.File, off int64, n int, elem string, sc *Scaler) ([]float32, error) {
	return frozenFloats(n, func(x []float32) error { return fillFeatures(x, f, off, elem, sc) })
}

func fillFeatures(x []float32, f *os.File, off int64, elem string, sc *Scaler) error {
	n := len(x)
	d := len(sc.Shift)
	rows := n / d
	workers := min(runtime.GOMAXPROCS(0), max(1, rows/1024))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*rows/workers, (w+1)*rows/workers
		wg.Go(func() {
			dst := x[lo*d : hi*d]
			if elem == "f32" {
				_, errs[w] = f.ReadAt(floatBytes(dst), off+4*int64(lo*d))
				if errs[w] == nil {
					sc.Transform(&Dataset{X: dst, N: hi - lo, D: d})
				}
				return
			}
			const chunk = 256 // rows per read
			buf := make([]byte, chunk*d)
			for r := lo; r < hi; r += chunk {
				k := min(chunk, hi-r)
				if _, err := f.ReadAt(buf[:k*d], off+int64(r*d)); err != nil {
					errs[w] = err
					return
				}
				out := x[r*d : (r+k)*d]
				if sc.Kind == "none" {
					for i, c := range buf[:k*d] {
						out[i] = float32(c)
					}
					continue
				}
				for i := 0; i < k; i++ {
					row, in := out[i*d:(i+1)*d], buf[i*d:(i+1)*d]
					for j, c := range in {
						row[j] = (float32(c) - sc.Shift[j]) * sc.Mul[j]
					}
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// elemSize is the bytes per stored feature of an Elem ("u8", "f32"); 0
// for an unknown one.
func elemSize(elem string) int64 { return map[string]int64{"u8": 1, "f32": 4}[elem] }

// layoutOK checks that the arrays lie in order, aligned, inside the file.
func (h *cacheHeader) layoutOK() bool {
	if h.TrainN <= 0 || h.TestN <= 0 || h.D <= 0 || h.Classes <= 0 || len(h.Shift) != h.D || len(h.Mul) != h.D {
		return false
	}
	if len(h.Shape) > 0 && (len(h.Shape) != 3 || h.Shape[0]*h.Shape[1]*h.Shape[2] != h.D) {
		return false
	}
	es := elemSize(h.Elem)
	if es == 0 || int64(h.D) > h.FileLen || int64(h.TrainN) > h.FileLen/int64(h.D) || int64(h.TestN) > h.FileLen/int64(h.D) {
		return false // also keeps the products below from overflowing
	}
	want := []struct{ off, size int64 }{
		{h.XTrain, es * int64(h.TrainN) * int64(h.D)}, {h.YTrain, 4 * int64(h.TrainN)},
		{h.XTest, es * int64(h.TestN) * int64(h.D)}, {h.YTest, 4 * int64(h.TestN)},
	}
	at := int64(len(cacheMagic))
	for _, w := range want {
		if w.off < at || w.off%4 != 0 {
			return false
		}
		at = w.off + w.size
	}
	return at <= h.FileLen
}

func floatBytes(s []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}
func intBytes(s []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}

// bytesOnly reports whether every value is an integer in 0..255.
func bytesOnly(x []float32) bool {
	for _, v := range x {
		if v != float32(byte(v)) || v < 0 || v > 255 {
			return false
		}
	}
	return true
}

// writeCache stores a decoded directory, unscaled, with its scaler: written aside, then
// renamed into place, so readers see a whole file or none.
func writeCache(dir, key string, train, test *Dataset, sc *Scaler) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	const page = 4096
	align := func(n int64) int64 { return (n + page - 1) / page * page }
	h := cacheHeader{Key: key, TrainN: train.N, TestN: test.N, D: train.D, Classes: max(train.Classes, test.Classes),
		TrainName: train.Name, TestName: test.Name, Scale: sc.Kind, Shift: sc.Shift, Mul: sc.Mul, Elem: "f32", Shape: train.Shape}
	if bytesOnly(train.X) && bytesOnly(test.X) {
		h.Elem = "u8"
	}
	features := func(x []float32) []byte {
		if h.Elem == "f32" {
			return floatBytes(x)
		}
		b := make([]byte, len(x))
		for i, v := range x {
			b[i] = byte(v)
		}
		return b
	}
	es := elemSize(h.Elem)
	hdr, err := json.Marshal(h)
	if err != nil {
		return err
	}
	// The header's length grows little with the offsets' digits: reserve
	// room for them, then place the arrays.
	h.XTrain = align(int64(len(cacheMagic)+len(hdr)+128) + 1)
	h.YTrain = align(h.XTrain + es*int64(len(train.X)))
	h.XTest = align(h.YTrain + 4*int64(len(train.Y)))
	h.YTest = align(h.XTest + es*int64(len(test.X)))
	h.FileLen = h.YTest + 4*int64(len(test.Y))
	if hdr, err = json.Marshal(h); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, key+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	write := func(off int64, b []byte) {
		if err == nil {
			_, err = f.WriteAt(b, off)
		}
	}
	write(0, append([]byte(cacheMagic), append(hdr, '\n')...))
	write(h.XTrain, features(train.X))
	write(h.YTrain, intBytes(train.Y))
	write(h.XTest, features(test.X))
	write(h.YTest, intBytes(test.Y))
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), cachePath(dir, key))
}

// loadCachedIDX serves a whole-directory IDX load from the cache, filling
// it on a miss. ok is false when the cache does not apply (caching off, not
// an IDX directory); errors of the cache itself are logged and the load
// goes on without it.
func loadCachedIDX(source string, o LoadOptions) (train, test *Dataset, sc *Scaler, ok bool, err error) {
	dir := cacheDir()
	src, isIDX := idxSource(source, o)
	if dir == "" || !isIDX || !littleEndian {
		return nil, nil, nil, false, nil
	}
	key, err := idxCacheKey(src, o.Scale)
	if err != nil {
		return nil, nil, nil, false, nil // Open reports the missing file
	}
	if train, test, sc, err = readCacheOnce(dir, key); err == nil {
		return train, test, sc, true, nil
	} else if !os.IsNotExist(err) {
		slog.Warn("dataset cache unreadable; decoding the source again", "err", err)
	}
	train, test, err = Open(source, o.OpenOptions)
	if err != nil {
		return nil, nil, nil, true, err
	}
	if sc, err = FitScaler(o.Scale, train); err != nil {
		return nil, nil, nil, true, err
	}
	if werr := writeCache(dir, key, train, test, sc); werr != nil {
		slog.Debug("dataset cache not written", "dir", dir, "err", werr)
	}
	sc.Transform(train)
	sc.Transform(test)
	return train, test, sc, true, nil
}

// loaded keeps each cache file read in this process: its feature arrays
// are frozen (read-only), so every later load shares them.
var loaded struct {
	sync.Mutex
	m map[string]*cachedSets
}

type cachedSets struct {
	train, test *Dataset
	sc          *Scaler
}

// readCacheOnce is readCache, once per file and process; each call gets
// its own Dataset values and labels, over the shared features.
func readCacheOnce(dir, key string) (train, test *Dataset, sc *Scaler, err error) {
	loaded.Lock()
	defer loaded.Unlock()
	path := cachePath(dir, key)
	c := loaded.m[path]
	if c == nil {
		c = &cachedSets{}
		if c.train, c.test, c.sc, err = readCache(dir, key); err != nil {
			return nil, nil, nil, err
		}
		if loaded.m == nil {
			loaded.m = map[string]*cachedSets{}
		}
		loaded.m[path] = c
	}
	own := func(d *Dataset) *Dataset {
		o := *d
		o.Y = slices.Clone(d.Y)
		return &o
	}
	s := *c.sc
	s.Shift, s.Mul = slices.Clone(s.Shift), slices.Clone(s.Mul)
	return own(c.train), own(c.test), &s, nil
}
