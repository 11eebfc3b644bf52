// Package cli is the command-line plumbing shared by gossipd's
// subcommands: flag sets that report errors instead of exiting,
// subcommands with verbs, settings from the environment and YAML files,
// a progress bar and log set-up. The subcommands themselves, which parse
// their flags, call the packages that do the work and format the output,
// are in cmd/gossipd.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
)

// ErrUsage marks errors caused by bad command-line input (exit status 2).
var ErrUsage = errors.New("usage")

// NewFlagSet returns a flag set that reports errors instead of exiting.
// Its --help goes to stderr (PrintUsage: the flags by group); a bad or
// unknown flag is one line, returned by ParseFlags, without the help.
func NewFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	u := usageOf(fs)
	u.synopsis, u.out = synopsis, stderr
	fs.Usage = func() {}
	return fs
}

// ParseFlags parses args, turning a parse error into a usage error and
// rejecting stray positional arguments, and string flags given empty
// where the empty value would silently become the default (checkEmpty).
func ParseFlags(fs *flag.FlagSet, args []string) error {
	rest, err := ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%w: %s: unexpected argument %q", ErrUsage, fs.Name(), rest[0])
	}
	return nil
}

// ParseArgs is ParseFlags for a command that takes positional arguments,
// which it returns. Flags may come before, between or after them (plot
// a=DIR --out x.png); everything after "--" is positional. The standard
// library's parser stops at the first positional argument, which would
// turn a later flag into a positional one.
func ParseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				PrintUsage(fs, usageOf(fs).out)
				return nil, err
			}
			return nil, fmt.Errorf("%w: %s: %v", ErrUsage, fs.Name(), parseError(fs, err))
		}
		left := fs.Args()
		// Parse consumed a "--" when it is the argument before left.
		if len(left) == 0 || len(args) > len(left) && args[len(args)-len(left)-1] == "--" {
			rest = append(rest, left...)
			break
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil {
			err = checkEmpty(f, f.Value.String())
		}
	})
	return rest, err
}

// checkEmpty refuses v, given for string flag f, when it is empty and
// f's default is not: most such flags would take their default silently.
// A flag whose usage says what "" means (`"" given: none`) takes it.
func checkEmpty(f *flag.Flag, v string) error {
	g, ok := f.Value.(flag.Getter)
	if !ok || v != "" || f.DefValue == "" || strings.Contains(f.Usage, `""`) {
		return nil
	}
	if _, isString := g.Get().(string); !isString {
		return nil
	}
	return fmt.Errorf("%w: --%s is empty: leave it out for its default (%q)", ErrUsage, f.Name, f.DefValue)
}

// Subcommand is one verb of a command with verbs (gossipd privacy epsilon).
type Subcommand struct {
	Name, Summary string
	Run           func(args []string, stdout, stderr io.Writer) error
}

// DispatchSub runs the subcommand args[0] of command name.
func DispatchSub(name string, subs []Subcommand, args []string, stdout, stderr io.Writer) error {
	names := make([]string, len(subs))
	usage := ""
	for i, c := range subs {
		names[i] = c.Name
		lines := wrap(c.Summary, HelpWidth-1-13)
		usage += fmt.Sprintf("\n  %-10s %s", c.Name, lines[0])
		for _, l := range lines[1:] {
			usage += fmt.Sprintf("\n%13s%s", "", l)
		}
	}
	synopsis := fmt.Sprintf("%s %s [flags]\n%s", name, strings.Join(names, "|"), usage)
	if len(args) == 0 {
		return fmt.Errorf("%w: %s: want a subcommand\nUsage: gossipd %s", ErrUsage, name, synopsis)
	}
	for _, c := range subs {
		if c.Name == args[0] {
			return c.Run(args[1:], stdout, stderr)
		}
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		fmt.Fprintf(stderr, "Usage: gossipd %s\n", synopsis)
		return flag.ErrHelp
	}
	return fmt.Errorf("%w: %s: unknown subcommand %q, want %s", ErrUsage, name, args[0], strings.Join(names, "|"))
}

// SplitList splits a comma-separated list, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// FlagSet reports whether the flag name was set on the command line (or
// by a settings file or the environment, which set flags the same way).
func FlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// ReadList reads list flag name, given s: comma-separated values, or
// "@FILE" with one value per line ('#' starts a comment). check, if not
// nil, vets each value. Errors are usage errors naming the flag and the
// file and line (or the item's position): a missing file, a file that
// lists nothing and a non-empty value that holds none are errors too, as
// an empty list would quietly mean something else (no allowlist: every
// peer admitted). An empty s gives an empty list.
func ReadList(name, s string, check func(string) error) ([]string, error) {
	path, fromFile := strings.CutPrefix(s, "@")
	var vals, where []string
	if !fromFile {
		vals = SplitList(s)
		for i := range vals {
			where = append(where, fmt.Sprintf("item %d", i+1))
		}
		if len(vals) == 0 && strings.TrimSpace(s) != "" {
			return nil, fmt.Errorf("%w: --%s %q lists nothing", ErrUsage, name, s)
		}
	} else {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: --%s: %v", ErrUsage, name, err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			if k := strings.IndexByte(line, '#'); k >= 0 {
				line = line[:k]
			}
			if line = strings.TrimSpace(line); line != "" {
				vals = append(vals, line)
				where = append(where, fmt.Sprintf("%s line %d", path, n+1))
			}
		}
		if len(vals) == 0 {
			return nil, fmt.Errorf("%w: --%s: %s lists nothing", ErrUsage, name, path)
		}
	}
	if check != nil {
		for i, v := range vals {
			if err := check(v); err != nil {
				return nil, fmt.Errorf("%w: --%s: %s: %.200v", ErrUsage, name, where[i], err)
			}
		}
	}
	return vals, nil
}

var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	badValue      = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-+([^:]*): (.*)$`)
	needsValue    = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
)

// parseError rewords the flag package's parse error as one line naming
// the flag as people type it (--name), with the closest flag for an
// unknown one and the expected type for a bad value.
func parseError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		name, _, _ := strings.Cut(m[1], "=")
		if near := closestFlag(fs, name); near != "" {
			return fmt.Sprintf("unknown flag --%s (did you mean --%s?)", name, near)
		}
		return fmt.Sprintf("unknown flag --%s (--help lists them)", name)
	}
	if m := badValue.FindStringSubmatch(msg); m != nil {
		want := m[3]
		if f := fs.Lookup(m[2]); f != nil {
			if g, ok := f.Value.(flag.Getter); ok {
				want = "want " + typeWords(g.Get())
			}
		}
		return fmt.Sprintf("--%s %q: %s", m[2], m[1], want)
	}
	if m := needsValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("--%s needs a value", m[1])
	}
	return msg
}

// typeWords says what a flag of value v takes.
func typeWords(v any) string {
	switch v.(type) {
	case bool:
		return "true or false"
	case int, int64:
		return "an integer"
	case uint, uint64:
		return "a non-negative integer"
	case float64:
		return "a number"
	case time.Duration:
		return "a duration such as 1s, 500ms or 2m"
	}
	return fmt.Sprintf("a %T", v)
}
