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

// TestRate: a rate reads bytes per second as people write them and prints
// in the largest binary unit that holds it whole; bounds apply to it.
func TestRate(t *testing.T) {
	fs, help := testFlags(t)
	var r float64
	RateVar(fs, &r, "send-rate", 256<<20, "pace to `RATE`")
	for _, c := range []struct {
		in   string
		want float64
	}{{"1MiB/s", 1 << 20}, {"262144", 262144}, {"1.5KiB", 1536}, {"2MB/s", 2e6}, {"-1", -1}} {
		if err := fs.Set("send-rate", c.in); err != nil || r != c.want {
			t.Errorf("--send-rate %s: %v, %v; want %v", c.in, r, err, c.want)
		}
	}
	if err := fs.Set("send-rate", "fast"); err == nil || !strings.Contains(err.Error(), "bytes per second") {
		t.Errorf("--send-rate fast: %v", err)
	}
	if got := fs.Lookup("send-rate").Value.String(); got != "-1" {
		t.Errorf("-1 prints as %q", got)
	}
	fs.Set("send-rate", "3145728")
	if got := fs.Lookup("send-rate").Value.String(); got != "3MiB/s" {
		t.Errorf("3145728 prints as %q, want 3MiB/s", got)
	}
	if _, err := ParseArgs(fs, []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	if !strings.Contains(help.String(), "--send-rate RATE") || !strings.Contains(help.String(), "(default 256MiB/s)") {
		t.Errorf("help:\n%s", help.String())
	}
	fs2, _ := testFlags(t)
	RateVar(fs2, &r, "send-rate", 0, "pace")
	if err := fs2.Parse([]string{"--send-rate=-1"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckNumbers(fs2, Bounds{"lr": "(0,inf)", "peer-rate": "(0,inf)", "delta": "(0,inf)", "send-rate": "[0,inf)"}); err == nil {
		t.Error("a negative rate passed the bound [0,inf)")
	}
}
