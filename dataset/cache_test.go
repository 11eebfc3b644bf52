package dataset

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeIDXDir writes a small IDX directory of n training and 5 test images
// of d byte pixels.
func writeIDXDir(t testing.TB, n, d int) string {
	t.Helper()
	dir := t.TempDir()
	img := make([]byte, n*d)
	lab := make([]byte, n)
	for i := range n {
		lab[i] = byte((i * 7) % 5)
		for j := range d {
			img[i*d+j] = byte(i*d + j*13)
		}
	}
	for name, b := range map[string][]byte{
		"train-images-idx3-ubyte.gz": gz(idxBytes([]int{n, 1, d}, img)),
		"train-labels-idx1-ubyte":    idxBytes([]int{n}, lab),
		"t10k-images-idx3-ubyte":     idxBytes([]int{5, 1, d}, img[:5*d]),
		"t10k-labels-idx1-ubyte":     idxBytes([]int{5}, lab[:5]),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func sameSets(t *testing.T, what string, a, b *Dataset) {
	t.Helper()
	if a.N != b.N || a.D != b.D || a.Classes != b.Classes || !slices.Equal(a.X, b.X) || !slices.Equal(a.Y, b.Y) {
		t.Fatalf("%s: %d×%d (%d classes) vs %d×%d (%d classes); X equal %v, Y equal %v", what, a.N, a.D, a.Classes,
			b.N, b.D, b.Classes, slices.Equal(a.X, b.X), slices.Equal(a.Y, b.Y))
	}
}

// TestCache: a cached load gives, bit for bit, what decoding gives, for
// every scaling; a changed source and a damaged cache file are noticed;
// "off" turns the cache off.
func TestCache(t *testing.T) {
	src := writeIDXDir(t, 64, 40)
	cache := t.TempDir()
	for _, scale := range Scalings {
		t.Setenv(CacheDirEnv, "off")
		wantTr, wantTe, wantSc, err := Load(src, LoadOptions{Scale: scale})
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(CacheDirEnv, cache)
		for round := range 2 { // the first fills the cache, the second reads it
			tr, te, sc, err := Load(src, LoadOptions{Scale: scale})
			if err != nil {
				t.Fatal(err)
			}
			sameSets(t, scale+" train", tr, wantTr)
			sameSets(t, scale+" test", te, wantTe)
			if !slices.Equal(sc.Shift, wantSc.Shift) || !slices.Equal(sc.Mul, wantSc.Mul) || sc.Kind != wantSc.Kind {
				t.Fatalf("%s round %d: scaler %+v, want %+v", scale, round, sc, wantSc)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(cache, "*.f32"))
	if len(files) != len(Scalings) {
		t.Fatalf("cache holds %d files, want one per scaling (%d)", len(files), len(Scalings))
	}

	// Labels are each load's own: changing them does not reach the next.
	tr, _, _, _ := Load(src, LoadOptions{Scale: "minmax"})
	tr.Y[0] = 99
	again, _, _, _ := Load(src, LoadOptions{Scale: "minmax"})
	if again.Y[0] == 99 {
		t.Fatal("a load's labels are shared with the next")
	}

	// A changed source gets a new cache file.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(src, "train-labels-idx1-ubyte"), later, later); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Load(src, LoadOptions{Scale: "minmax"}); err != nil {
		t.Fatal(err)
	}
	if files2, _ := filepath.Glob(filepath.Join(cache, "*.f32")); len(files2) != len(files)+1 {
		t.Fatalf("after the source changed the cache holds %d files, want %d", len(files2), len(files)+1)
	}

	// A damaged file (in a fresh cache dir, so no process-wide copy) is
	// rebuilt: the load still gives the decoded data.
	cache2 := t.TempDir()
	t.Setenv(CacheDirEnv, cache2)
	want, _, _, _ := Load(src, LoadOptions{Scale: "global"})
	files, _ = filepath.Glob(filepath.Join(cache2, "*.f32"))
	if len(files) != 1 {
		t.Fatalf("fresh cache holds %d files", len(files))
	}
	for _, damage := range []func(b []byte) []byte{
		func(b []byte) []byte { return b[:len(b)-3] },                                              // truncated
		func(b []byte) []byte { return append([]byte("junk"), b...) },                              // not a cache
		func(b []byte) []byte { return []byte(strings.Replace(string(b), `"d":40`, `"d":41`, 1)) }, // header lies
	} {
		b, _ := os.ReadFile(files[0])
		if err := os.WriteFile(files[0], damage(b), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := readCache(cache2, strings.TrimSuffix(filepath.Base(files[0]), ".f32")); err == nil {
			t.Fatal("a damaged cache file was read")
		}
		loaded.Lock()
		clear(loaded.m)
		loaded.Unlock()
		got, _, _, err := Load(src, LoadOptions{Scale: "global"})
		if err != nil {
			t.Fatal(err)
		}
		sameSets(t, "after damage", got, want)
	}

	t.Setenv(CacheDirEnv, "off")
	if d := cacheDir(); d != "" {
		t.Fatalf("cache dir %q with %s=off", d, CacheDirEnv)
	}
}
