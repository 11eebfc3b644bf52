package main

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/internal/cli"
)

// numericFlag is a numeric flag as a command's --help shows it.
type numericFlag struct {
	name, kind, help string
}

func numericFlags(t *testing.T, cmd []string) []numericFlag {
	t.Helper()
	var out, errb bytes.Buffer
	if code := mainExit(context.Background(), append(cmd, "--help"), &out, &errb); code != 0 {
		t.Fatalf("%v --help: exit %d: %s", cmd, code, errb.String())
	}
	var fl []numericFlag
	for _, f := range cli.ParseHelp(errb.String()) {
		switch f.Kind {
		case "int", "uint", "uint64", "int64", "float", "duration":
			fl = append(fl, numericFlag{f.Name, f.Kind, f.Help})
		}
	}
	return fl
}

// TestNumericFlagsRefuseBadValues: every numeric flag of every command
// refuses a negative value unless its help says what a negative one
// means, and 0 unless 0 is its default, its help says what 0 means or it
// is a seed, as
// a usage error naming the flag, before any work: nothing is silently
// clamped or turned into the default. Each command runs with a cancelled
// context and harmless settings, so a value wrongly accepted fails the
// test instead of starting a daemon or a long run.
func TestNumericFlagsRefuseBadValues(t *testing.T) {
	dir := t.TempDir()
	sweep := map[string][]string{
		"train":           {"--dataset", "digits", "--epochs", "1"},
		"simulate":        {"--peers", "2", "--rounds", "1", "--out", dir, "--quiet"},
		"bench":           {"--what", "gemm", "--min-time", "1ms"},
		"run":             {"--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0", "--store", dir, "--mdns=false"},
		"demo":            {"--dir", filepath.Join(dir, "demo"), "--json"},
		"jobs":            {"--bootstrap", "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWN9b6B9ukkSTJGC5ZkeJs8tmuncQmqmi6jQQyc47opZ99"},
		"robustness":      {"--out", dir + "/r.md", "--peers", "4", "--rounds", "1"},
		"turnover":        {"--peers", "4", "--rounds", "1"},
		"commtable":       {"--peers", "4", "--rounds", "1"},
		"privacy epsilon": {"--sampling-rate", "0.01", "--noise-multiplier", "1", "--steps", "10"},
		"privacy noise":   {"--sampling-rate", "0.01", "--target-epsilon", "1", "--steps", "10"},
		"privacy ledger":  {"--store", dir},
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	seen := 0
	for name, base := range sweep {
		cmd := strings.Fields(name)
		for _, f := range numericFlags(t, cmd) {
			seen++
			// 0 is a seed like any other.
			zeroDefault := !strings.Contains(f.help, "(default ") || strings.HasSuffix(f.name, "seed")
			for _, v := range []string{"-1", "0"} {
				if v == "-1" && strings.Contains(f.help, "negative:") ||
					v == "0" && (zeroDefault || strings.Contains(f.help, "0:") || strings.Contains(f.help, "0 automatic")) {
					continue
				}
				if f.kind == "duration" {
					v += "s"
				}
				args := append(append(append([]string{}, cmd...), base...), "--"+f.name, v)
				var out, errb bytes.Buffer
				code := mainExit(ctx, args, &out, &errb)
				if code != 2 || !strings.Contains(errb.String(), "-"+f.name) {
					t.Errorf("gossipd %s --%s %s: exit %d, want 2 with an error naming the flag; stderr: %.300s", name, f.name, v, code, errb.String())
				}
			}
		}
	}
	t.Logf("%d numeric flags swept", seen)
	if seen < 90 {
		t.Errorf("%d numeric flags seen, want every command's (about 100): is the help format parsed?", seen)
	}
	// A command with numeric flags that is not listed above fails, so
	// that a new one is swept too.
	for _, c := range commands() {
		if _, ok := sweep[c.name]; !ok && len(numericFlags(t, []string{c.name})) > 0 {
			t.Errorf("command %s has numeric flags and is not in the sweep", c.name)
		}
	}
}

// TestMemoryLimitFlag: run's and simulate's --memory-limit take a size
// and set the runtime's soft limit; a malformed, zero or negative size
// is a usage error naming the flag, before anything runs.
func TestMemoryLimitFlag(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	dir := t.TempDir()
	for _, cmd := range [][]string{
		{"simulate", "--peers", "2", "--rounds", "1", "--out", dir, "--quiet"},
		{"run", "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0", "--store", filepath.Join(dir, "s"), "--mdns=false", "--dataset", "nope"},
	} {
		for _, bad := range []string{"0", "-1MiB", "lots"} {
			code, _, errs := run(t, append(cmd, "--memory-limit", bad)...)
			if code != 2 || !strings.Contains(errs, "--memory-limit") {
				t.Errorf("%s --memory-limit %s: exit %d, %q; want 2 naming the flag", cmd[0], bad, code, errs)
			}
		}
	}
	code, _, errs := run(t, "simulate", "--peers", "2", "--rounds", "1", "--out", dir, "--quiet", "--memory-limit", "48GiB")
	if code != 0 {
		t.Fatalf("simulate --memory-limit 48GiB: exit %d: %s", code, errs)
	}
	if got := debug.SetMemoryLimit(-1); got != 48<<30 {
		t.Errorf("the runtime's memory limit is %d, want 48 GiB", got)
	}
}
