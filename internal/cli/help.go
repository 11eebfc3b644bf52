package cli

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// A command's --help lists its flags under headings (job, training,
// privacy, network…), one flag to a line where the help fits, and no line
// of HelpWidth characters or more: long explanations are in the docs.

// HelpWidth bounds the lines of --help.
const HelpWidth = 100

// helpColumn is where a flag's help starts.
const helpColumn = 28

// usage is what a flag set's help needs beyond the flags.
type usage struct {
	synopsis string
	out      io.Writer
	groups   []group
}

type group struct {
	title string
	names []string
}

var (
	usageMu sync.Mutex
	usages  = map[*flag.FlagSet]*usage{}
)

func usageOf(fs *flag.FlagSet) *usage {
	usageMu.Lock()
	defer usageMu.Unlock()
	u := usages[fs]
	if u == nil {
		u = &usage{out: io.Discard}
		usages[fs] = u
	}
	return u
}

// Group declares flags under a heading of fs's help: the flags that
// declare adds to fs are listed under title, in the order declared.
// Flags declared outside any group are listed last, under "Other".
func Group(fs *flag.FlagSet, title string, declare func()) {
	before := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
	declare()
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if !before[f.Name] {
			names = append(names, f.Name)
		}
	})
	u := usageOf(fs)
	usageMu.Lock()
	defer usageMu.Unlock()
	for i := range u.groups {
		if u.groups[i].title == title {
			u.groups[i].names = append(u.groups[i].names, names...)
			return
		}
	}
	u.groups = append(u.groups, group{title, names})
}

// PrintUsage writes fs's help: the synopsis, then its flags by group.
func PrintUsage(fs *flag.FlagSet, w io.Writer) {
	if u := usageOf(fs); u.synopsis != "" {
		fmt.Fprintf(w, "Usage: gossipd %s\n", u.synopsis)
	}
	for _, g := range groupsOf(fs) {
		printGroup(w, g.title, g.flags)
	}
}

// flagGroup is a group's flags.
type flagGroup struct {
	title string
	flags []*flag.Flag
}

// groupsOf lists fs's flags by group, those of no group last, under
// "Other" (or "Flags" where fs has no groups).
func groupsOf(fs *flag.FlagSet) []flagGroup {
	u := usageOf(fs)
	usageMu.Lock()
	groups := slices.Clone(u.groups)
	usageMu.Unlock()
	var out []flagGroup
	listed := map[string]bool{}
	for _, g := range groups {
		fg := flagGroup{title: g.title}
		for _, n := range g.names {
			if f := fs.Lookup(n); f != nil && !listed[n] {
				fg.flags = append(fg.flags, f)
				listed[n] = true
			}
		}
		out = append(out, fg)
	}
	rest := flagGroup{title: "Other"}
	if len(groups) == 0 {
		rest.title = "Flags"
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !listed[f.Name] {
			rest.flags = append(rest.flags, f)
		}
	})
	return append(out, rest)
}

// plainValue is f's value as a person writes it: a whole number without
// an exponent (268435456, not 2.68435456e+08).
func plainValue(f *flag.Flag) string {
	s := f.Value.String()
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return s
}

func printGroup(w io.Writer, title string, fl []*flag.Flag) {
	if len(fl) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, f := range fl {
		kind, help := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if kind != "" {
			head += " " + kind
		}
		if d := shownDefault(f); d != "" {
			help += " (default " + d + ")"
		}
		lines := wrap(help, HelpWidth-1-helpColumn)
		if len(head) >= helpColumn-1 {
			fmt.Fprintln(w, head)
		} else {
			fmt.Fprintf(w, "%-*s%s\n", helpColumn, head, lines[0])
			lines = lines[1:]
		}
		for _, l := range lines {
			fmt.Fprintf(w, "%*s%s\n", helpColumn, "", l)
		}
	}
}

// shownDefault is f's default as help shows it: nothing for a zero value.
func shownDefault(f *flag.Flag) string {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return ""
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case string:
			return fmt.Sprintf("%q", f.DefValue)
		case float64:
			if v, err := strconv.ParseFloat(f.DefValue, 64); err == nil {
				return strconv.FormatFloat(v, 'f', -1, 64)
			}
		}
	}
	return f.DefValue
}

// wrap breaks s into lines of at most width characters (runes), at spaces;
// a word longer than width gets a line of its own.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		for r := []rune(w); len(r) > width; r = []rune(w) { // a word too long for a line is cut
			if line != "" {
				lines = append(lines, line)
				line = ""
			}
			lines = append(lines, string(r[:width]))
			w = string(r[width:])
		}
		switch {
		case line == "":
			line = w
		case len([]rune(line))+1+len([]rune(w)) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	return append(lines, line)
}

// HelpFlag is one flag as a command's --help shows it.
type HelpFlag struct {
	Group, Name, Kind, Help string
}

var (
	helpHeading = regexp.MustCompile(`^([A-Z][^:]*):$`)
	helpLine    = regexp.MustCompile(`^  --([a-z0-9][a-z0-9-]*)(?: ([A-Za-z0-9]+))?(?:\s{2,}(.*))?$`)
)

// ParseHelp reads the flags back from a command's --help (PrintUsage's
// format), with each flag's help joined from its lines.
func ParseHelp(text string) []HelpFlag {
	var out []HelpFlag
	heading := ""
	for _, l := range strings.Split(text, "\n") {
		if m := helpHeading.FindStringSubmatch(l); m != nil {
			heading = m[1]
			continue
		}
		if m := helpLine.FindStringSubmatch(l); m != nil {
			out = append(out, HelpFlag{Group: heading, Name: m[1], Kind: m[2], Help: m[3]})
			continue
		}
		if len(out) > 0 && strings.HasPrefix(l, strings.Repeat(" ", helpColumn)) {
			h := &out[len(out)-1].Help
			*h = strings.TrimSpace(*h + " " + strings.TrimSpace(l))
		}
	}
	return out
}
