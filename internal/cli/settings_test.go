package cli

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
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
	fs.String("config", "", "")
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte("batch: 32\ndelta: 1000ms\nlr: 0.10\ndp-clip: 0\nname: y\nkeep: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("T_KEEP", "3") // restates the default, and wins over the file's 5
	t.Setenv("T_NAME", "z")
	if err := fs.Parse([]string{"--lr", "0.1", "--config", path}); err != nil {
		t.Fatal(err)
	}
	if err := ApplySettings(fs, "config", "T_"); err != nil {
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

// TestEmptyStrings: a string flag given empty, on the command line, in the
// environment or in a file, is refused where its default is not empty
// (the empty value would silently become the default), unless its usage
// says what "" means; flags whose default is empty take it.
func TestEmptyStrings(t *testing.T) {
	newSet := func() *flag.FlagSet {
		fs := NewFlagSet("t", "t", io.Discard)
		fs.String("model", "softmax", "model")
		fs.String("token", "api.token", `token file ("" given: none)`)
		fs.String("shard", "", "shard")
		fs.String("config", "", "")
		return fs
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", ""}, `--model is empty: leave it out for its default ("softmax")`},
		{[]string{"--model=", "--shard", ""}, "--model is empty"},
		{[]string{"--token", "", "--shard", ""}, ""},
	} {
		err := ParseFlags(newSet(), tc.args)
		if tc.want == "" && err != nil || tc.want != "" && (!errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	t.Setenv("T_MODEL", "")
	if err := ApplySettings(newSet(), "config", "T_"); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "$T_MODEL") {
		t.Errorf("$T_MODEL empty: %v", err)
	}
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte("model: \"\"\ntoken: \"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withFile := newSet()
	withFile.Set("config", path)
	if err := ApplySettings(withFile, "config", ""); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "model") || strings.Contains(err.Error(), "token") {
		t.Errorf("a file with model: \"\": %v", err)
	}
}

// A settings file that sets nothing, or a key without a value or with a
// mapping, is refused naming the file: it would be silently ignored.
func TestApplySettingsEmpty(t *testing.T) {
	dir := t.TempDir()
	for text, want := range map[string]string{
		"":                    "holds no settings",
		"# all commented\n\n": "holds no settings",
		"---\n":               "holds no settings",
		"batch:\n":            "batch has no value",
		"batch: {a: 1}\n":     "batch is a mapping",
	} {
		path := filepath.Join(dir, "s.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		fs := NewFlagSet("t", "t", io.Discard)
		fs.Int("batch", 32, "")
		fs.String("config", path, "")
		if err := ApplySettings(fs, "config", ""); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want a usage error naming %s with %q", text, err, path, want)
		}
	}
}
