package cli

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseArgsInterspersed: flags may follow positional arguments (the
// standard parser would take "--out" for a positional one); "--" ends
// the flags; a bad flag anywhere is a usage error.
func TestParseArgsInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		out  string
		rest []string
	}{
		{[]string{"a=x", "--out", "p.png", "b=y"}, "p.png", []string{"a=x", "b=y"}},
		{[]string{"--out", "p.png", "a=x"}, "p.png", []string{"a=x"}},
		{[]string{"a=x", "b=y", "-out=q.png"}, "q.png", []string{"a=x", "b=y"}},
		{[]string{"a=x", "--", "--out", "b"}, "d.png", []string{"a=x", "--out", "b"}},
		{[]string{"--", "-x"}, "d.png", []string{"-x"}},
		{[]string{"-", "a"}, "d.png", []string{"-", "a"}},
		{nil, "d.png", nil},
	} {
		fs := NewFlagSet("t", "t", io.Discard)
		out := fs.String("out", "d.png", "")
		rest, err := ParseArgs(fs, tc.args)
		if err != nil || *out != tc.out || !slices.Equal(rest, tc.rest) {
			t.Errorf("%q: out %q, rest %q, %v; want %q, %q", tc.args, *out, rest, err, tc.out, tc.rest)
		}
	}
	for _, args := range [][]string{{"a=x", "--nope"}, {"a=x", "--out"}, {"a=x", "--out", ""}} {
		fs := NewFlagSet("t", "t", io.Discard)
		fs.String("out", "d.png", "")
		if _, err := ParseArgs(fs, args); !errors.Is(err, ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	fs := NewFlagSet("t", "t", io.Discard)
	if _, err := ParseArgs(fs, []string{"a", "--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help after an argument: %v, want flag.ErrHelp", err)
	}
	if err := ParseFlags(NewFlagSet("t", "t", io.Discard), []string{"x"}); !errors.Is(err, ErrUsage) {
		t.Errorf("ParseFlags with an argument: %v, want a usage error", err)
	}
}

// TestReadList: a list flag's values from the command line or @FILE,
// each checked, errors naming the flag and the file's line or the item;
// a list that holds nothing where something was given is an error.
func TestReadList(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# peers\nA1\n\n  B2 # the second\n")
	bad := write("bad", "A1\nB2\nc3\n")
	none := write("none", "# nothing yet\n\n")
	upper := func(s string) error {
		if strings.ToUpper(s) != s {
			return errors.New("not upper case")
		}
		return nil
	}
	if got, err := ReadList("members", "@"+good, upper); err != nil || !slices.Equal(got, []string{"A1", "B2"}) {
		t.Errorf("@good: %q, %v", got, err)
	}
	if got, err := ReadList("members", " A1, B2 ,", upper); err != nil || !slices.Equal(got, []string{"A1", "B2"}) {
		t.Errorf("a list: %q, %v", got, err)
	}
	if got, err := ReadList("members", "", upper); err != nil || len(got) != 0 {
		t.Errorf("empty: %q, %v", got, err)
	}
	for s, want := range map[string]string{
		"@" + bad:                     "--members: " + bad + " line 3: not upper case",
		"A1,b2":                       "--members: item 2: not upper case",
		"@" + none:                    "--members: " + none + " lists nothing",
		" , ":                         `--members " , " lists nothing`,
		"@" + filepath.Join(dir, "x"): "--members: open " + filepath.Join(dir, "x"),
		"@" + dir:                     "is a directory",
	} {
		if _, err := ReadList("members", s, upper); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want a usage error with %q", s, err, want)
		}
	}
}

// TestCheckEnv: a variable with the prefix that names no flag and is not
// one of the program's others is refused, with the flag it most likely
// meant; the flags' own variables and the others pass.
func TestCheckEnv(t *testing.T) {
	fs := NewFlagSet("run", "run", io.Discard)
	fs.String("listen", "", "")
	fs.Int("checkpoint-every", 10, "")
	t.Setenv("TGOSSIPD_LISTEN", "x")
	t.Setenv("TGOSSIPD_CHECKPOINT_EVERY", "5")
	t.Setenv("TGOSSIPD_KERNEL", "go")
	if err := CheckEnv(fs, "TGOSSIPD_", "TGOSSIPD_KERNEL"); err != nil {
		t.Fatalf("known variables: %v", err)
	}
	for name, want := range map[string]string{
		"TGOSSIPD_LISTNE":          "$TGOSSIPD_LISTNE is set, but gossipd run has no flag --listne; did you mean $TGOSSIPD_LISTEN (--listen)?",
		"TGOSSIPD_CHECKPOINTEVERY": "did you mean $TGOSSIPD_CHECKPOINT_EVERY",
		"TGOSSIPD_EPOCHS":          "has no flag --epochs",
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, "1")
			err := CheckEnv(fs, "TGOSSIPD_", "TGOSSIPD_KERNEL")
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), want) {
				t.Errorf("%v, want a usage error with %q", err, want)
			}
			if name == "TGOSSIPD_EPOCHS" && strings.Contains(err.Error(), "did you mean") {
				t.Errorf("a suggestion for a name near no flag: %v", err)
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"listen", "listne", 2}, {"kitten", "sitting", 3}, {"store", "store", 0}} {
		if d := editDistance(tc.a, tc.b); d != tc.d || editDistance(tc.b, tc.a) != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
}
