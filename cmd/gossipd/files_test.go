package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/daemon"
)

// badFile names a kind of bad input for a flag that reads a file or a
// directory, made fresh for each run.
type badFile string

const (
	badMissing  badFile = "missing" // no such path
	badEmpty    badFile = "empty"   // an empty file
	badDir      badFile = "dir"     // an empty directory where a file is wanted
	badBinary   badFile = "binary"  // random bytes
	badText     badFile = "text"    // text of the wrong kind (a CSV line)
	badFileKind badFile = "file"    // a file where a directory is wanted
	badFull     badFile = "full"    // a directory that is not empty
	badNoDir    badFile = "nodir"   // a path in a directory that does not exist
)

func makeBad(t *testing.T, kind badFile) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), string(kind))
	var err error
	switch kind {
	case badMissing:
	case badNoDir:
		path = filepath.Join(path, "file")
	case badDir:
		err = os.Mkdir(path, 0o700)
	case badFull:
		if err = os.Mkdir(path, 0o700); err == nil {
			err = os.WriteFile(filepath.Join(path, "x"), []byte("x"), 0o600)
		}
	case badBinary:
		b := make([]byte, 3000)
		rand.Read(b)
		err = os.WriteFile(path, b, 0o600)
	case badText, badFileKind:
		err = os.WriteFile(path, []byte("a,b\n1,2\n"), 0o600)
	case badEmpty:
		err = os.WriteFile(path, nil, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFileFlagsRefuseBadFiles: every flag that names a file or a
// directory, given a missing path, an empty file, a directory for a file
// (or a file for a directory), random bytes or text of the wrong kind,
// makes its command fail with an error naming the path, before any work
// and without a panic; where the command only reads, nothing is created
// at a missing path. A bad file that a command accepted would run it
// with a cancelled context, and fail the test for naming no path.
func TestFileFlagsRefuseBadFiles(t *testing.T) {
	store := t.TempDir() // run's: it must stay empty (run checks everything before it writes)
	stopped := t.TempDir()
	st, err := daemon.OpenStore(filepath.Join(stopped, "checkpoints"), daemon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	reads := []badFile{badMissing, badEmpty, badDir, badBinary, badText}
	secret := []badFile{badEmpty, badDir, badBinary, badText} // created where badMissing
	dirs := []badFile{badMissing, badFileKind, badDir}        // a daemon's store, read
	for _, tc := range []struct {
		cmd   string
		flag  string
		kinds []badFile
		base  []string
	}{
		{"train", "dataset", reads, []string{"--epochs", "1"}},
		{"simulate", "dataset", reads, []string{"--peers", "2", "--rounds", "1", "--quiet"}},
		{"simulate", "scenario", reads, []string{"--quiet"}},
		{"simulate", "churn-trace", reads, []string{"--peers", "2", "--rounds", "1", "--quiet"}},
		{"simulate", "compute-trace", reads, []string{"--peers", "2", "--rounds", "1", "--quiet"}},
		{"simulate", "topology", []badFile{badEmpty, badBinary, badText}, []string{"--protocol", "dpsgd", "--peers", "2", "--rounds", "1", "--quiet"}},
		{"simulate", "out", []badFile{badFileKind}, []string{"--peers", "2", "--rounds", "1", "--quiet"}},
		{"run", "config", reads, []string{"--store", store}},
		{"run", "dataset", reads, []string{"--store", store}},
		{"run", "key", secret, []string{"--store", store}},
		{"run", "api-token", secret, []string{"--store", store}},
		{"run", "consortium", reads, []string{"--store", store}},
		{"run", "members", []badFile{badMissing, badEmpty, badDir, badBinary, badText}, []string{"--store", store}},
		{"run", "bootstrap", []badFile{badMissing, badEmpty, badDir, badBinary, badText}, []string{"--store", store}},
		{"run", "api-tls-cert", reads, []string{"--store", store, "--api-tls-key", makeBad(t, badText)}},
		{"run", "api-tls-key", reads, []string{"--store", store, "--api-tls-cert", makeBad(t, badText)}},
		{"run", "store", []badFile{badFileKind}, nil},
		{"status", "api-token", reads, []string{"--api", "127.0.0.1:1"}},
		{"status", "api-ca", reads, []string{"--api", "https://127.0.0.1:1"}},
		{"jobs", "consortium", reads, []string{"--bootstrap", "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWN9b6B9ukkSTJGC5ZkeJs8tmuncQmqmi6jQQyc47opZ99"}},
		{"export", "store", dirs, []string{"--out", filepath.Join(t.TempDir(), "m.safetensors")}},
		{"export", "out", []badFile{badDir}, []string{"--store", stopped}},
		{"privacy ledger", "store", dirs, nil},
		{"status", "store", dirs, nil},
		{"keygen", "out", []badFile{badEmpty, badDir, badText}, nil},
		{"token", "out", []badFile{badEmpty, badDir, badText}, nil},
		{"init", "out", []badFile{badEmpty, badDir, badText}, nil},
		{"demo", "dir", []badFile{badFileKind, badFull}, []string{"--json"}},
		{"robustness", "out", []badFile{badDir, badNoDir}, nil},
		{"turnover", "update", reads, nil},
		{"commtable", "update", reads, nil},
		{"demo", "png", []badFile{badDir}, []string{"--json"}},
		{"bench", "torch", []badFile{badMissing, badDir, badEmpty}, []string{"--what", "train", "--against", "torch", "--dataset", "digits"}},
	} {
		for _, kind := range tc.kinds {
			path := makeBad(t, kind)
			arg := path
			if tc.flag == "members" || tc.flag == "bootstrap" {
				arg = "@" + path
			}
			args := append(append(strings.Fields(tc.cmd), tc.base...), "--"+tc.flag, arg)
			if strings.HasPrefix(tc.cmd, "run") {
				args = append(args, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0", "--mdns=false")
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var out, errb bytes.Buffer
			code := mainExit(ctx, args, &out, &errb)
			msg := errb.String()
			if code == 0 || !strings.Contains(msg, path) || strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine ") {
				t.Errorf("gossipd %s --%s %s: exit %d, want a failure naming %s; stderr: %.400s", tc.cmd, tc.flag, kind, code, path, msg)
			}
			if kind == badMissing {
				if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("gossipd %s --%s %s created %s", tc.cmd, tc.flag, kind, path)
				}
			}
		}
	}
	if ents, _ := os.ReadDir(store); len(ents) != 0 {
		t.Errorf("run wrote %d entries (%s, …) into its --store before failing on a bad flag", len(ents), ents[0].Name())
	}
}
