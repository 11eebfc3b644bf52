package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/internal/cli"
)

// helpOf is a command's flags as its --help lists them.
func helpOf(t *testing.T, cmd string) (string, map[string]cli.HelpFlag) {
	t.Helper()
	code, _, help := run(t, cmd, "--help")
	if code != 0 {
		t.Fatalf("%s --help: exit %d", cmd, code)
	}
	fl := map[string]cli.HelpFlag{}
	for _, f := range cli.ParseHelp(help) {
		fl[f.Name] = f
	}
	if len(fl) == 0 {
		t.Fatalf("%s --help lists no flags:\n%s", cmd, help)
	}
	return help, fl
}

// TestSharedFlagsAgree: a flag that run, simulate and train share is one
// flag: the same type, help and default (which the help states) in each,
// declared once (job.Settings, job.Data). Flags that mean something else
// for centralized training (train's --lr, --batch, --scale, …) are the
// exceptions, listed.
func TestSharedFlagsAgree(t *testing.T) {
	_, runFl := helpOf(t, "run")
	_, simFl := helpOf(t, "simulate")
	_, trainFl := helpOf(t, "train")
	shared := 0
	// --device is the process's, not the job's: auto takes a GPU that
	// opens in a daemon, and the faster of the GPU and the CPU in a
	// simulation (its trial).
	for name, r := range runFl {
		s, ok := simFl[name]
		if !ok || name == "device" {
			continue
		}
		shared++
		if r.Kind != s.Kind || r.Help != s.Help {
			t.Errorf("--%s: run says %s %q, simulate %s %q", name, r.Kind, r.Help, s.Kind, s.Help)
		}
	}
	if shared < 25 {
		t.Errorf("run and simulate share %d flags, want the job's, training's, DP-SGD's and the data's (25 or more)", shared)
	}
	trainOwn := []string{"lr", "batch", "scale", "model", "hidden", "device", "seed", "json", "quiet", "shard"}
	for _, name := range []string{"dataset", "label-column", "test-fraction", "partition"} {
		tr, ok := trainFl[name]
		if !ok {
			t.Errorf("train has no --%s", name)
			continue
		}
		if s := simFl[name]; tr.Help != s.Help || tr.Kind != s.Kind {
			t.Errorf("--%s: train says %q, simulate %q", name, tr.Help, s.Help)
		}
	}
	for name, tr := range trainFl {
		if s, ok := simFl[name]; ok && !slices.Contains(trainOwn, name) && (tr.Help != s.Help || tr.Kind != s.Kind) {
			t.Errorf("--%s: train says %q, simulate %q", name, tr.Help, s.Help)
		}
	}
}

// TestHelpIsGrouped: every command's --help lists its flags under
// headings, no line of 100 characters or more; run and simulate have the
// groups a user looks for.
func TestHelpIsGrouped(t *testing.T) {
	for _, c := range commands() {
		code, _, help := run(t, c.name, "--help")
		if code != 0 {
			continue // a command with verbs answers with its verbs
		}
		for i, l := range strings.Split(help, "\n") {
			if n := len([]rune(l)); n >= cli.HelpWidth {
				t.Errorf("%s --help line %d has %d characters: %q", c.name, i+1, n, l)
			}
		}
	}
	for cmd, groups := range map[string][]string{
		"run":      {"Job", "Training", "Privacy", "Data", "Network", "API and store"},
		"simulate": {"Job", "Training", "Privacy", "Data", "Simulation", "Evaluation and output"},
	} {
		_, fl := helpOf(t, cmd)
		seen := map[string]bool{}
		for _, f := range fl {
			seen[strings.SplitN(f.Group, " (", 2)[0]] = true
			if f.Group == "Other" {
				t.Errorf("%s --%s is under no group", cmd, f.Name)
			}
		}
		for _, g := range groups {
			if !seen[g] {
				t.Errorf("%s --help has no %q group", cmd, g)
			}
		}
	}
}

// TestBadFlagIsOneLine: an unknown flag or a bad value is one line naming
// it (with the closest flag for a misspelt one), not the help.
func TestBadFlagIsOneLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"simulate", "--lrr", "0.1"}, "unknown flag --lrr (did you mean --lr?)"},
		{[]string{"run", "--protocl", "dpsgd"}, "did you mean --protocol?"},
		{[]string{"simulate", "--lr", "abc"}, `--lr "abc": want a number`},
		{[]string{"train", "--epochs", "x"}, `--epochs "x": want an integer`},
	} {
		code, _, errs := run(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", c.args, code, errs, c.want)
		}
	}
}
