package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// docFlagReference is the flag reference that TestFlagReference checks
// and, with -update, writes.
const docFlagReference = "../../docs/reference/flags.md"

var updateDocs = flag.Bool("update", false, "rewrite docs/reference/flags.md from the commands' --help")

// docFlag is one flag as a command's --help shows it.
type docFlag struct {
	name, value, def, help string
}

// docGroup is a run of flags under one heading of a help text (the
// heading is empty where the help has none).
type docGroup struct {
	heading string
	flags   []docFlag
}

// docSection is what the flag reference says about one command (or one
// verb of a command with verbs, such as "privacy epsilon").
type docSection struct {
	name   string // "run", "privacy epsilon"
	usage  string // the usage line, without "Usage: "
	about  string // the help's description
	groups []docGroup
}

var (
	// A flag's line: "  -name type" (the flag package's format) or
	// "  --name VALUE  help".
	docFlagLine = regexp.MustCompile(`^(\s+)--?([a-z][a-z0-9-]*)(.*)$`)
	// The gap between a flag's value and its help: "  --name VALUE  help".
	docGap     = regexp.MustCompile(`\s{2,}|\t`)
	docDefault = regexp.MustCompile(`\s*\(default (.*)\)\s*$`)
	// A command in an indented code block, which TestReadmeCommands would miss.
	docIndentedCommand = regexp.MustCompile(`^(    |\t)(\$ )?(gossipd|make|bin/gossipd) `)
)

// docHelpText runs `gossipd ARGS --help` and returns what it printed.
func docHelpText(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := mainExit(context.Background(), append(args, "--help"), &out, &errb); code != 0 {
		t.Fatalf("gossipd %s --help: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return errb.String() + out.String()
}

// parseDocHelp reads the help text of command cmd: its usage line, its
// description, its flags (grouped under the help's headings, if any)
// and, for a command without flags, the verbs its usage lines list
// ("gossipd privacy epsilon|noise|ledger", or one usage line per verb).
func parseDocHelp(cmd, text string) (s docSection, verbs []string) {
	verbLine := regexp.MustCompile(`^\s*(?:Usage:\s*)?gossipd ` + regexp.QuoteMeta(cmd) + ` ([a-z][a-z0-9-]*(?:\|[a-z][a-z0-9-]*)*)(?:\s|$)`)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	var cur *docFlag
	indent := ""
	heading := ""
	flush := func() {
		if cur == nil {
			return
		}
		if m := docDefault.FindStringSubmatch(cur.help); m != nil {
			cur.def = m[1]
			cur.help = strings.TrimSpace(cur.help[:len(cur.help)-len(m[0])])
			if len(cur.def) >= 2 && cur.def[0] == '"' && cur.def[len(cur.def)-1] == '"' {
				cur.def = cur.def[1 : len(cur.def)-1]
			}
		}
		if n := len(s.groups); n == 0 || s.groups[n-1].heading != heading {
			s.groups = append(s.groups, docGroup{heading: heading})
		}
		g := &s.groups[len(s.groups)-1]
		g.flags = append(g.flags, *cur)
		cur = nil
	}
	var about []string
	seenFlag := false
	for _, line := range lines {
		if m := verbLine.FindStringSubmatch(line); m != nil {
			verbs = append(verbs, strings.Split(m[1], "|")...)
		}
		if u, ok := strings.CutPrefix(line, "Usage: "); ok && s.usage == "" {
			s.usage = strings.TrimSpace(u)
			continue
		}
		if m := docFlagLine.FindStringSubmatch(line); m != nil {
			flush()
			seenFlag = true
			cur = &docFlag{name: m[2]}
			indent = m[1]
			rest := m[3]
			switch {
			case strings.HasPrefix(rest, "  "), strings.HasPrefix(rest, "\t"):
				cur.help = strings.TrimSpace(rest) // no value: a boolean
			default:
				rest = strings.TrimSpace(rest)
				if i := docGap.FindStringIndex(rest); i != nil {
					cur.value, cur.help = rest[:i[0]], strings.TrimSpace(rest[i[1]:])
				} else {
					cur.value = rest
				}
			}
			continue
		}
		trimmed := strings.TrimSpace(line)
		if cur != nil && trimmed != "" && len(line)-len(strings.TrimLeft(line, " \t")) > len(indent) {
			cur.help = strings.TrimSpace(cur.help + " " + trimmed)
			continue
		}
		flush()
		switch {
		case trimmed == "":
		case strings.HasSuffix(trimmed, ":") && !strings.Contains(trimmed, ". "),
			seenFlag && len(trimmed) < 50 && !strings.HasSuffix(trimmed, "."):
			// A heading over a group of flags.
			heading = strings.TrimSuffix(trimmed, ":")
		default:
			about = append(about, trimmed)
		}
	}
	flush()
	s.about = strings.Join(about, " ")
	if len(s.groups) > 0 {
		verbs = nil // a command with flags of its own is not a set of verbs
	}
	return s, verbs
}

// docSections reads every command's help, and every verb's of a command
// whose help lists verbs instead of flags.
func docSections(t *testing.T) []docSection {
	t.Helper()
	var out []docSection
	for _, c := range commands() {
		s, verbs := parseDocHelp(c.name, docHelpText(t, c.name))
		if len(verbs) == 0 {
			s.name = c.name
			out = append(out, s)
			continue
		}
		seen := map[string]bool{}
		for _, v := range verbs {
			if seen[v] {
				continue
			}
			seen[v] = true
			vs, more := parseDocHelp(c.name+" "+v, docHelpText(t, c.name, v))
			if len(more) > 0 {
				t.Fatalf("gossipd %s %s --help lists verbs of its own (%v): not parsed", c.name, v, more)
			}
			vs.name = c.name + " " + v
			out = append(out, vs)
		}
	}
	return out
}

func docCell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "<", "&lt;")
	s = strings.ReplaceAll(s, "*", `\*`)
	return strings.TrimSpace(s)
}

func docCode(s string) string {
	if s == "" {
		return ""
	}
	s = strings.ReplaceAll(s, "|", `\|`)
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// renderFlagReference writes docs/reference/flags.md's text.
func renderFlagReference(sections []docSection) string {
	var b strings.Builder
	b.WriteString("# Command-line flags\n\n")
	b.WriteString("Every flag of every `gossipd` command, as its `--help` prints it. This page is\n")
	b.WriteString("generated: `go test ./cmd/gossipd -run TestFlagReference -update` rewrites it,\n")
	b.WriteString("and the same test without `-update` fails when a flag is missing here.\n")
	b.WriteString("Settings files, `GOSSIPD_*` variables and their precedence are in\n")
	b.WriteString("[configuration.md](configuration.md).\n\n")
	for _, s := range sections {
		b.WriteString("- [gossipd " + s.name + "](#gossipd-" + strings.ReplaceAll(s.name, " ", "-") + ")\n")
	}
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## gossipd %s\n\n", s.name)
		if s.usage != "" {
			fmt.Fprintf(&b, "`%s`\n\n", s.usage)
		}
		if s.about != "" {
			b.WriteString(docCell(s.about) + "\n\n")
		}
		if len(s.groups) == 0 {
			b.WriteString("No flags.\n")
			continue
		}
		for i, g := range s.groups {
			if g.heading != "" {
				fmt.Fprintf(&b, "### %s\n\n", docCell(g.heading))
			}
			b.WriteString("| flag | value | default | meaning |\n|---|---|---|---|\n")
			for _, f := range g.flags {
				fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.name, docCell(f.value), docCode(f.def), docCell(f.help))
			}
			if i < len(s.groups)-1 {
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}

// docSplitHeadings splits a Markdown file at its "## " headings.
func docSplitHeadings(text string) map[string]string {
	out := map[string]string{}
	name := ""
	for _, line := range strings.Split(text, "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			name = strings.TrimSpace(strings.NewReplacer("`", "", "gossipd ", "").Replace(h))
			continue
		}
		out[name] += line + "\n"
	}
	return out
}

// TestFlagReference: docs/reference/flags.md names every flag of every
// command (and of every verb of privacy and consortium) under that
// command's heading, as "`--NAME`". With -update it is rewritten from the
// help texts.
func TestFlagReference(t *testing.T) {
	sections := docSections(t)
	nflags := 0
	for _, s := range sections {
		for _, g := range s.groups {
			nflags += len(g.flags)
		}
	}
	if nflags < 100 {
		t.Fatalf("%d flags found in the commands' --help, want every command's (well over 100): is the help format parsed?", nflags)
	}
	if *updateDocs {
		if err := os.WriteFile(docFlagReference, []byte(renderFlagReference(sections)), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d commands, %d flags", docFlagReference, len(sections), nflags)
		return
	}
	data, err := os.ReadFile(docFlagReference)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/gossipd -run TestFlagReference -update writes it)", err)
	}
	doc := docSplitHeadings(string(data))
	var missing []string
	for _, s := range sections {
		text, ok := doc[s.name]
		if !ok {
			missing = append(missing, fmt.Sprintf("the heading \"## gossipd %s\"", s.name))
			continue
		}
		for _, g := range s.groups {
			for _, f := range g.flags {
				if !strings.Contains(text, "`--"+f.name+"`") {
					missing = append(missing, fmt.Sprintf("gossipd %s: `--%s`", s.name, f.name))
				}
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s lacks %d flags (go test ./cmd/gossipd -run TestFlagReference -update rewrites it):\n  %s",
			docFlagReference, len(missing), strings.Join(missing, "\n  "))
	}
}

// readmeMakeTargets are the make targets README.md may show, which this
// test does not run: make test is CI's whole check, and what make demo
// runs (gossipd demo) has tests of its own in package main and demo/.
var readmeMakeTargets = map[string]bool{"make demo": true, "make test": true}

// readmeBlock is one fenced code block of README.md that holds commands.
type readmeBlock struct {
	line     int // where it starts in README.md
	commands []readmeCommand
}

type readmeCommand struct {
	line int
	text string
}

// readmeBlocks reads README.md's fenced code blocks. Blocks tagged as
// output or data (text, json, yaml, ...) hold no commands; the others
// (untagged, sh, shell, bash, console) hold one command a line, with `\`
// continuation lines and `#` comments.
func readmeBlocks(t *testing.T, text string) []readmeBlock {
	t.Helper()
	var blocks []readmeBlock
	var cur *readmeBlock
	commandBlock := false
	pending, pendingLine := "", 0
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if cur == nil {
				info := strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
				commandBlock = info == "" || info == "sh" || info == "shell" || info == "bash" || info == "console"
				cur = &readmeBlock{line: n}
				continue
			}
			if pending != "" {
				t.Errorf("README.md:%d: a command ends with a `\\` continuation at the end of its block", pendingLine)
			}
			pending = ""
			if commandBlock && len(cur.commands) > 0 {
				blocks = append(blocks, *cur)
			}
			cur = nil
			continue
		}
		if cur == nil {
			if docIndentedCommand.MatchString(line) {
				t.Errorf("README.md:%d: a command in an indented code block: put it in a fenced block (```sh) so that this test runs it: %q", n, trimmed)
			}
			continue
		}
		if !commandBlock {
			continue
		}
		if strings.HasPrefix(trimmed, "#") || trimmed == "" && pending == "" {
			continue
		}
		if pending == "" {
			pendingLine = n
		}
		if c, ok := strings.CutSuffix(trimmed, `\`); ok {
			pending += c + " "
			continue
		}
		full := strings.TrimSpace(pending + trimmed)
		pending = ""
		// A trailing comment.
		if i := strings.Index(full, " #"); i >= 0 {
			full = strings.TrimSpace(full[:i])
		}
		full = strings.TrimPrefix(full, "$ ")
		cur.commands = append(cur.commands, readmeCommand{pendingLine, full})
	}
	if cur != nil {
		t.Errorf("README.md:%d: a code block is not closed", cur.line)
	}
	return blocks
}

// docSplitWords splits a command line into words as a shell would for
// plain words and '...' or "..." quotes; what needs a shell to mean
// anything (variables, pipes, redirections, substitutions) is an error.
func docSplitWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unclosed quote")
			}
			q := s[i+1 : i+1+j]
			if c == '"' && strings.ContainsAny(q, "$`\\") {
				return nil, fmt.Errorf("%q needs a shell", q)
			}
			w.WriteString(q)
			inWord = true
			i += j + 1
		case strings.IndexByte("$`|&;<>()\\*?", c) >= 0:
			return nil, fmt.Errorf("%q needs a shell", string(c))
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// docSyncBuffer is a bytes.Buffer that a running daemon and the test may
// use at once.
type docSyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *docSyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *docSyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// docSetFlag sets --name to value in args, in place where it is given
// (as "--name V" or "--name=V"), else at the end.
func docSetFlag(args []string, name, value string) []string {
	for i, a := range args {
		for _, p := range []string{"-" + name, "--" + name} {
			if a == p && i+1 < len(args) {
				args[i+1] = value
				return args
			}
			if strings.HasPrefix(a, p+"=") {
				args[i] = p + "=" + value
				return args
			}
		}
	}
	return append(args, "--"+name, value)
}

var docAPIAddr = regexp.MustCompile(`"api":"([^"]+)"|\bapi=(\S+)`)

// readmeRunDaemon runs a README's `gossipd run` line until its API
// answers GET /healthz, then stops it as SIGTERM would and wants exit 0.
// The daemon listens on ports of the system's choosing on 127.0.0.1
// (whatever the README's --listen and --api say) without mDNS, so that
// it meets no other daemon on this machine.
func readmeRunDaemon(t *testing.T, args []string) {
	t.Helper()
	args = docSetFlag(args, "api", "127.0.0.1:0")
	args = docSetFlag(args, "listen", "/ip4/127.0.0.1/tcp/0")
	args = docSetFlag(args, "mdns", "false")
	args = docSetFlag(args, "log-format", "json")
	// docSetFlag appends "--mdns false", which a boolean flag takes as
	// a positional argument: write it as one word.
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--mdns" && args[i+1] == "false" {
			args = append(append(args[:i:i], "--mdns=false"), args[i+2:]...)
			break
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out docSyncBuffer
	var errb docSyncBuffer
	done := make(chan int, 1)
	go func() { done <- mainExit(ctx, args, &out, &errb) }()
	deadline := time.After(45 * time.Second)
	client := &http.Client{Timeout: 2 * time.Second}
	for healthy := false; !healthy; {
		select {
		case code := <-done:
			t.Fatalf("gossipd %s: exited (%d) before its API answered: %s", strings.Join(args, " "), code, errb.String())
		case <-deadline:
			cancel()
			<-done
			t.Fatalf("gossipd %s: its API did not answer /healthz within 45 s: %s", strings.Join(args, " "), errb.String())
		case <-time.After(100 * time.Millisecond):
		}
		m := docAPIAddr.FindStringSubmatch(errb.String())
		if m == nil {
			continue
		}
		addr := m[1] + m[2]
		resp, err := client.Get("http://" + addr + "/healthz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		healthy = resp.StatusCode == http.StatusOK
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("gossipd %s: exit %d after it was stopped, want 0: %s", strings.Join(args, " "), code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("gossipd %s: still running 30 s after it was stopped", strings.Join(args, " "))
	}
}

// TestReadmeCommands runs every command in README.md's code blocks, so
// that the README's examples work: `make demo` and `make test` are CI's
// own (any other make target or shell command fails the test); every
// `gossipd ...` line runs in-process, the lines of one block in order in
// one temporary directory, and must exit 0; a `gossipd run ...` line
// passes once its API answers GET /healthz and it then stops cleanly.
func TestReadmeCommands(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// A README daemon may set the runtime's memory limit (the edge
	// profile's --memory-limit): give the tests after this one theirs back.
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	blocks := readmeBlocks(t, string(data))
	known := make([]string, 0, len(readmeMakeTargets))
	for k := range readmeMakeTargets {
		known = append(known, k)
	}
	sort.Strings(known)
	ran := 0
	for _, b := range blocks {
		// Every line of the block is checked before any runs, so that
		// each problem is named at once.
		var runs [][]string
		var lines []readmeCommand
		var bad []string
		for _, c := range b.commands {
			if readmeMakeTargets[c.text] {
				continue // CI runs it
			}
			words, err := docSplitWords(c.text)
			switch {
			case err != nil:
				bad = append(bad, fmt.Sprintf("README.md:%d: %q: %v: README commands are run without a shell", c.line, c.text, err))
			case len(words) == 0 || words[0] != "gossipd":
				bad = append(bad, fmt.Sprintf("README.md:%d: %q is not a gossipd command, and no test runs it (the README may show %s and gossipd commands)", c.line, c.text, strings.Join(known, ", ")))
			default:
				runs = append(runs, words[1:])
				lines = append(lines, c)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s", strings.Join(bad, "\n"))
			continue
		}
		ran += len(runs)
		t.Run(fmt.Sprintf("line%d", b.line), func(t *testing.T) {
			t.Chdir(t.TempDir())
			for i, args := range runs {
				c := lines[i]
				start := time.Now()
				if len(args) > 0 && args[0] == "run" {
					readmeRunDaemon(t, args)
					t.Logf("README.md:%d: %s: healthy and stopped in %s", c.line, c.text, time.Since(start).Round(time.Millisecond))
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				var out, errb bytes.Buffer
				code := mainExit(ctx, args, &out, &errb)
				cancel()
				if code != 0 {
					t.Fatalf("README.md:%d: %s: exit %d: %s", c.line, c.text, code, errb.String())
				}
				t.Logf("README.md:%d: %s: %s", c.line, c.text, time.Since(start).Round(time.Millisecond))
			}
		})
	}
	if ran == 0 {
		t.Errorf("README.md: no gossipd command found in its code blocks")
	}
}
