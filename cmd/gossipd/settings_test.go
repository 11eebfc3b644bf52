package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/internal/cli"
)

// FuzzConfigFile: any config file is applied to `gossipd run`'s flags or
// refused with an error naming the file, never a panic.
func FuzzConfigFile(f *testing.F) {
	f.Add([]byte("# gossipd\nlisten: /ip4/127.0.0.1/tcp/4001\nprotocol: dpsgd\nlr: 0.5\nmdns: false\n"))
	f.Add([]byte("bootstrap: [a, b]\n"))
	f.Add([]byte("nosuchkey: 1\n"))
	f.Add([]byte("lr: {a: b}\n"))
	path := filepath.Join(f.TempDir(), "gossipd.yaml")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var r runFlags
		r.declare(fs)
		if err := cli.ApplySettings(fs, path, ""); err != nil && !strings.Contains(err.Error(), path) {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}
