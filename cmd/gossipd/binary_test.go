package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// daemonBinary is the gossipd binary the tests run as real processes,
// built once for the whole test binary: each test linking its own took
// about 2 s of a core apiece.
var daemonBinary struct {
	once sync.Once
	dir  string // removed by TestMain
	path string
	err  error
}

// TestMain removes the shared binary once every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	if daemonBinary.dir != "" {
		os.RemoveAll(daemonBinary.dir)
	}
	os.Exit(code)
}

// buildBinary returns the path of gossipd built from this package
// (pure Go, as make build builds it), building it on the first call.
// Tests must not write beside it: they share it.
func buildBinary(tb testing.TB) string {
	tb.Helper()
	b := &daemonBinary
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "gossipd-test-bin-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "gossipd")
		cmd := exec.Command("go", "build", "-o", b.path, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}
