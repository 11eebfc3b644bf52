package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/daemon"
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
		var r daemon.Settings
		r.Register(fs)
		fs.Set("config", path)
		if err := cli.ApplySettings(fs, "config", ""); err != nil && !strings.Contains(err.Error(), path) {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}

// TestInitProfiles: each profile's file reads back into `gossipd run`'s
// flags with the profile's values, the API token init created beside it,
// and the rest at their defaults.
func TestInitProfiles(t *testing.T) {
	for name, settings := range daemon.Profiles {
		path := filepath.Join(t.TempDir(), name+".yaml")
		if code, _, stderr := run(t, "init", "--profile", name, "--out", path); code != 0 {
			t.Fatalf("init --profile %s: %d %s", name, code, stderr)
		}
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		var r daemon.Settings
		r.Register(fs)
		fs.Set("config", path)
		if err := cli.ApplySettings(fs, "config", ""); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// What the flags hold when set from the profile directly.
		ref := flag.NewFlagSet("run", flag.ContinueOnError)
		var rr daemon.Settings
		rr.Register(ref)
		for _, x := range settings {
			if err := ref.Set(x.Flag, x.Value); err != nil {
				t.Fatalf("profile %s: %s: %v", name, x.Flag, err)
			}
		}
		token := filepath.Join(filepath.Dir(path), "api.token")
		ref.Set("api-token", token)
		if st, err := os.Stat(token); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("profile %s: the API token beside the config: %v", name, err)
		}
		fs.VisitAll(func(f *flag.Flag) {
			if want := ref.Lookup(f.Name).Value.String(); f.Name != "config" && f.Value.String() != want {
				t.Errorf("profile %s: %s = %q, want %q", name, f.Name, f.Value.String(), want)
			}
		})
	}
	if code, _, _ := run(t, "init", "--profile", "tiny", "--out", "-"); code != 2 {
		t.Fatalf("an unknown profile: exit %d, want 2", code)
	}
	// --api-token "" writes no token and names none.
	path := filepath.Join(t.TempDir(), "plain.yaml")
	if code, _, stderr := run(t, "init", "--out", path, "--api-token", ""); code != 0 {
		t.Fatalf("init --api-token '': %d %s", code, stderr)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "\napi-token: \"\"\n") {
		t.Errorf("init --api-token '': the config names a token")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "api.token")); err == nil {
		t.Errorf("init --api-token '' created a token")
	}
	// Run again over an existing config: refused before touching anything.
	if code, _, _ := run(t, "init", "--out", path); code != 2 {
		t.Errorf("init over an existing file: exit %d, want 2", code)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "api.token")); err == nil {
		t.Errorf("a refused init created a token")
	}
}
