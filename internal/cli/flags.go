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
	"strings"
)

// ErrUsage marks errors caused by bad command-line input (exit status 2).
var ErrUsage = errors.New("usage")

// NewFlagSet returns a flag set that reports errors instead of exiting and
// prints its usage to stderr.
func NewFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: gossipd %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// ParseFlags parses args, turning a parse error into a usage error and
// rejecting stray positional arguments, and string flags given empty
// where the empty value would silently become the default (checkEmpty).
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %s: %v", ErrUsage, fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %s: unexpected argument %q", ErrUsage, fs.Name(), fs.Arg(0))
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil {
			err = checkEmpty(f, f.Value.String())
		}
	})
	return err
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
		usage += fmt.Sprintf("\n  %-10s %s", c.Name, c.Summary)
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

// ListOrFile reads a list flag: comma-separated values, or "@FILE" with
// one value per line ('#' starts a comment). A missing or empty file is
// an error naming it.
func ListOrFile(s string) ([]string, error) {
	path, ok := strings.CutPrefix(s, "@")
	if !ok {
		return SplitList(s), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if k := strings.IndexByte(line, '#'); k >= 0 {
			line = line[:k]
		}
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s lists nothing", path)
	}
	return out, nil
}
