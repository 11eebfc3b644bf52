package cli

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testFlags(t *testing.T) (*flag.FlagSet, *bytes.Buffer) {
	t.Helper()
	var help bytes.Buffer
	fs := NewFlagSet("x", "x [flags]", &help)
	Group(fs, "Job", func() {
		fs.String("protocol", "randomwalk", "protocol: "+strings.Repeat("long words ", 20))
		fs.Float64("lr", 0.1, "learning rate")
	})
	Group(fs, "Network", func() {
		fs.Float64("peer-rate", 256<<20, "bytes per second")
		fs.Duration("delta", time.Second, "period")
	})
	fs.Bool("json", false, "print JSON")
	return fs, &help
}

// TestGroupedHelp: --help lists the flags under their groups (the rest
// under Other), each line under HelpWidth, defaults as people write them,
// and ParseHelp reads back every flag with its whole help.
func TestGroupedHelp(t *testing.T) {
	fs, help := testFlags(t)
	if _, err := ParseArgs(fs, []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	text := help.String()
	for _, l := range strings.Split(text, "\n") {
		if len([]rune(l)) >= HelpWidth {
			t.Errorf("line of %d characters: %q", len([]rune(l)), l)
		}
	}
	got := ParseHelp(text)
	want := map[string]string{"protocol": "Job", "lr": "Job", "peer-rate": "Network", "delta": "Network", "json": "Other"}
	if len(got) != len(want) {
		t.Fatalf("parsed %d flags, want %d:\n%s", len(got), len(want), text)
	}
	for _, f := range got {
		if want[f.Name] != f.Group {
			t.Errorf("--%s under %q, want %q", f.Name, f.Group, want[f.Name])
		}
		if f.Name == "protocol" && (!strings.HasSuffix(f.Help, `(default "randomwalk")`) || strings.Count(f.Help, "long words") != 20) {
			t.Errorf("--protocol's help read back as %q", f.Help)
		}
		if f.Name == "peer-rate" && !strings.Contains(f.Help, "(default 268435456)") {
			t.Errorf("--peer-rate's default shown as %q, want 268435456", f.Help)
		}
	}
}

// TestParseErrorsAreOneLine: an unknown flag names the closest one; a bad
// value says the type wanted; neither prints the help.
func TestParseErrorsAreOneLine(t *testing.T) {
	for args, want := range map[string]string{
		"--lrr 1":      "unknown flag --lrr (did you mean --lr?)",
		"--zzzzzz 1":   "unknown flag --zzzzzz (--help lists them)",
		"--lr abc":     `--lr "abc": want a number`,
		"--delta 5":    `--delta "5": want a duration`,
		"--json=maybe": `--json "maybe": want true or false`,
		"--protocol":   "--protocol needs a value",
	} {
		fs, help := testFlags(t)
		_, err := ParseArgs(fs, strings.Fields(args))
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a one-line usage error with %q", args, err, want)
		}
		if help.Len() > 0 {
			t.Errorf("%s: printed the help", args)
		}
	}
}

// TestSettingsFileErrorsNameTheLine: a value of the wrong type in a
// settings file names the file, the line, the key and the type wanted.
func TestSettingsFileErrorsNameTheLine(t *testing.T) {
	fs, _ := testFlags(t)
	fs.String("config", "", "file")
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("# a comment\nprotocol: dpsgd\n\nlr: fast\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs.Set("config", path)
	err := ApplySettings(fs, "config", "")
	if want := path + `:4: lr: "fast": want a number`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
}

// TestSettingsTemplateGroups: the template lists the flags by group, each
// value as people write it, and reads back unchanged.
func TestSettingsTemplateGroups(t *testing.T) {
	fs, _ := testFlags(t)
	text := SettingsTemplate(fs, "# header\n")
	job, net := strings.Index(text, "# ---- Job ----"), strings.Index(text, "# ---- Network ----")
	if job < 0 || net < job || !strings.Contains(text, `peer-rate: "268435456"`) {
		t.Errorf("template:\n%s", text)
	}
}
