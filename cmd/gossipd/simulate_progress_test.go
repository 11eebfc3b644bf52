package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// withoutWall is simulate's human output less the line of wall-clock
// figures (which differ run to run) and with the output folder named dir.
func withoutWall(out, dir string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "wall ") {
			keep = append(keep, strings.ReplaceAll(l, dir, "DIR"))
		}
	}
	return strings.Join(keep, "\n")
}

// TestSimulateProgressLines: with stderr a buffer (not a terminal) and a
// tiny --progress, simulate writes a plain progress line per round (round,
// virtual time, latest accuracy, ETA) and a done line to stderr; stdout and
// metrics.csv are the same as with --quiet, and --json keeps stdout one
// JSON object while progress goes to stderr.
func TestSimulateProgressLines(t *testing.T) {
	args := []string{"simulate", "--peers", "6", "--rounds", "3", "--eval-peers", "3", "--final-eval-peers", "3", "--seed", "7"}
	dirA, dirB := t.TempDir(), t.TempDir()
	code, outA, errA := run(t, append(args, "--out", dirA, "--progress", "1ns")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errA)
	}
	line := regexp.MustCompile(`^simulate: round (\d)/3 \(\d+%\), virtual \ds, accuracy (-|\d\.\d{4} \(round \d\)), elapsed [0-9.ms]+, eta [0-9.ms]+$`)
	var rounds []string
	var done bool
	for _, l := range strings.Split(strings.TrimSuffix(errA, "\n"), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			rounds = append(rounds, m[1])
			continue
		}
		if strings.HasPrefix(l, "simulate: done, 3 rounds in ") && strings.Contains(l, "accuracy 0.") {
			done = true
			continue
		}
		t.Errorf("stderr line %q is no progress line", l)
	}
	if strings.Join(rounds, ",") != "1,2,3" || !done {
		t.Fatalf("progress lines for rounds %v, done %v; stderr:\n%s", rounds, done, errA)
	}
	if strings.Contains(errA, "\r") || strings.Contains(errA, "\033") {
		t.Fatalf("terminal control characters in a non-terminal's progress: %q", errA)
	}

	code, outB, errB := run(t, append(args, "--out", dirB, "--quiet")...)
	if code != 0 || errB != "" {
		t.Fatalf("--quiet: exit %d, stderr %q", code, errB)
	}
	if a, b := withoutWall(outA, dirA), withoutWall(outB, dirB); a != b {
		t.Fatalf("stdout with progress:\n%s\nwith --quiet:\n%s", a, b)
	}
	csvA, errRA := os.ReadFile(filepath.Join(dirA, "metrics.csv"))
	csvB, errRB := os.ReadFile(filepath.Join(dirB, "metrics.csv"))
	if errRA != nil || errRB != nil || string(csvA) != string(csvB) {
		t.Fatalf("metrics.csv with and without progress differ (%v, %v):\n%s\n%s", errRA, errRB, csvA, csvB)
	}

	code, outJ, errJ := run(t, append(args, "--out", t.TempDir(), "--progress", "1ns", "--json")...)
	var sum map[string]any
	if code != 0 || json.Unmarshal([]byte(outJ), &sum) != nil || !strings.Contains(errJ, "simulate: round 3/3") {
		t.Fatalf("--json: exit %d, stdout %q, stderr %q", code, outJ, errJ)
	}

	// The default (5 s) prints nothing for so short a run.
	if code, _, errs := run(t, append(args, "--out", t.TempDir())...); code != 0 || errs != "" {
		t.Fatalf("default --progress: exit %d, stderr %q", code, errs)
	}
}

// TestSimulateProgressFlagErrors: a negative interval, and --progress with
// --quiet (which would ignore it), are usage errors.
func TestSimulateProgressFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--progress", "-1s"}, "--progress"},
		{[]string{"--progress", "10s", "--quiet"}, "--progress with --quiet"},
		{[]string{"--progress", "0", "--quiet"}, "--progress with --quiet"},
	} {
		args := append([]string{"simulate", "--peers", "2", "--rounds", "1", "--out", t.TempDir()}, c.args...)
		if code, _, errs := run(t, args...); code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 mentioning %q", c.args, code, errs, c.want)
		}
	}
}
