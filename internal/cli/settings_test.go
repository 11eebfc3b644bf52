package cli

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Settings that restate a flag's default leave it unset (so a file of
// every default, as `gossipd init` writes, chooses nothing), whatever
// their spelling; the others set it, with flags > environment > file.
func TestApplySettingsRestatedDefaults(t *testing.T) {
	fs := NewFlagSet("t", "t", io.Discard)
	batch := fs.Int("batch", 32, "")
	delta := fs.Duration("delta", time.Second, "")
	lr := fs.Float64("lr", 0.1, "")
	clip := fs.Float64("dp-clip", 0, "")
	name := fs.String("name", "x", "")
	keep := fs.Int("keep", 3, "")
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte("batch: 32\ndelta: 1000ms\nlr: 0.10\ndp-clip: 0\nname: y\nkeep: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("T_KEEP", "3") // restates the default, and wins over the file's 5
	t.Setenv("T_NAME", "z")
	if err := fs.Parse([]string{"--lr", "0.1"}); err != nil {
		t.Fatal(err)
	}
	if err := ApplySettings(fs, path, "T_"); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]bool{"batch": false, "delta": false, "dp-clip": false, "keep": false, "lr": true, "name": true} {
		if got := FlagSet(fs, flag); got != want {
			t.Errorf("--%s set: %v, want %v", flag, got, want)
		}
	}
	if *batch != 32 || *delta != time.Second || *lr != 0.1 || *clip != 0 || *name != "z" || *keep != 3 {
		t.Errorf("values: batch %d, delta %v, lr %v, clip %v, name %q, keep %d", *batch, *delta, *lr, *clip, *name, *keep)
	}
}
