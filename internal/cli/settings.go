package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// ApplySettings fills the flags not given on the command line, first from
// the environment (envPrefix + the flag name in upper case with '-' as '_',
// when envPrefix is not empty), then from the YAML file that flag fileFlag
// names (keys are flag names), read once the environment has had its say,
// so that $PREFIX_CONFIG names it as --config does. So the precedence is
// flags > environment > file > defaults.
//
// A value from the environment or the file that restates the flag's
// default (as `gossipd init` writes every one) leaves the flag unset, so
// that checks of the flags given (a count of 0, an option that does not
// apply to the run) see only what was chosen.
func ApplySettings(fs *flag.FlagSet, fileFlag, envPrefix string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if envPrefix != "" {
		var err error
		fs.VisitAll(func(f *flag.Flag) {
			env := envPrefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
			if v, ok := os.LookupEnv(env); ok && !given[f.Name] && err == nil {
				if restatesDefault(f, v) {
					given[f.Name] = true
					return
				}
				if e := checkEmpty(f, v); e != nil {
					err = fmt.Errorf("$%s: %w", env, e)
					return
				}
				if e := fs.Set(f.Name, v); e != nil {
					err = fmt.Errorf("%w: $%s: %v", ErrUsage, env, e)
				}
				given[f.Name] = true
			}
		})
		if err != nil {
			return err
		}
	}
	path := fs.Lookup(fileFlag).Value.String()
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	var kv map[string]any
	if err := yaml.Unmarshal(b, &kv); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUsage, path, err)
	}
	lines := keyLines(b)
	where := func(k string) string {
		if n, ok := lines[k]; ok {
			return fmt.Sprintf("%s:%d", path, n)
		}
		return path
	}
	if len(kv) == 0 {
		return fmt.Errorf("%w: %s holds no settings (it is empty, or only comments): leave it out for the defaults", ErrUsage, path)
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if fs.Lookup(k) == nil {
			hint := ""
			if near := closestFlag(fs, k); near != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", near)
			}
			return fmt.Errorf("%w: %s: unknown key %q%s", ErrUsage, where(k), k, hint)
		}
		if given[k] || k == fileFlag || k == "json" {
			continue
		}
		var s string
		switch x := kv[k].(type) {
		case nil:
			return fmt.Errorf("%w: %s: %s has no value", ErrUsage, where(k), k)
		case map[string]any:
			return fmt.Errorf("%w: %s: %s is a mapping; want a value (or a list)", ErrUsage, where(k), k)
		case []any:
			parts := make([]string, len(x))
			for i, e := range x {
				parts[i] = fmt.Sprint(e)
			}
			s = strings.Join(parts, ",")
		default:
			s = fmt.Sprint(x)
		}
		if restatesDefault(fs.Lookup(k), s) {
			continue
		}
		if err := checkEmpty(fs.Lookup(k), s); err != nil {
			return fmt.Errorf("%s: %s: %w", where(k), k, err)
		}
		if err := fs.Set(k, s); err != nil {
			f := fs.Lookup(k)
			if g, ok := f.Value.(flag.Getter); ok {
				return fmt.Errorf("%w: %s: %s: %q: want %s", ErrUsage, where(k), k, s, typeWords(g.Get()))
			}
			return fmt.Errorf("%w: %s: %s: %v", ErrUsage, where(k), k, err)
		}
	}
	return nil
}

// restatesDefault reports whether s, set on a flag of f's type, gives its
// default value ("32" and "32.0", "1s" and "1000ms" alike).
func restatesDefault(f *flag.Flag, s string) bool {
	if s == f.DefValue {
		return true
	}
	t := reflect.TypeOf(f.Value)
	if t.Kind() != reflect.Pointer {
		return false
	}
	v, ok := reflect.New(t.Elem()).Interface().(flag.Value)
	return ok && v.Set(s) == nil && v.String() == f.DefValue
}

// SettingsTemplate is a commented YAML settings file holding every flag
// of fs but skip at its current value (its default unless set), for
// ApplySettings to read back.
func SettingsTemplate(fs *flag.FlagSet, header string, skip ...string) string {
	var b strings.Builder
	b.WriteString(header)
	for _, g := range groupsOf(fs) {
		var fl []*flag.Flag
		for _, f := range g.flags {
			if !slices.Contains(skip, f.Name) {
				fl = append(fl, f)
			}
		}
		if len(fl) == 0 {
			continue
		}
		fmt.Fprintf(&b, "# ---- %s ----\n\n", g.title)
		for _, f := range fl {
			_, usage := flag.UnquoteUsage(f)
			for _, l := range wrap(usage, 76) {
				fmt.Fprintf(&b, "# %s\n", l)
			}
			fmt.Fprintf(&b, "%s: %q\n\n", f.Name, plainValue(f))
		}
	}
	return b.String()
}

// WriteNew writes text to path, or to stdout when path is "-"; it never
// overwrites an existing file.
func WriteNew(path, text string, stdout io.Writer) error {
	if path == "-" {
		_, err := io.WriteString(stdout, text)
		return err
	}
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%w: %s exists", ErrUsage, path)
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

// ReplaceSection replaces what lies between the lines "<!-- NAME:begin -->"
// and "<!-- NAME:end -->" of the file at path with text, so that a
// generated table can live inside a hand-written document.
func ReplaceSection(path, name, text string) error {
	s, i, j, err := findSection(path, name)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(s[:i]+text+s[j:]), 0o644)
}

// CheckSection reports, as a usage error naming flag, what would make
// ReplaceSection(path, name, …) fail, so that a command can refuse before
// its long run instead of after it.
func CheckSection(flag, path, name string) error {
	if _, _, _, err := findSection(path, name); err != nil {
		return fmt.Errorf("%w: --%s: %v", ErrUsage, flag, err)
	}
	return nil
}

// findSection reads path and finds the text between name's markers, s[i:j].
func findSection(path, name string) (s string, i, j int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, 0, err
	}
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	s = string(b)
	i, j = strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return "", 0, 0, fmt.Errorf("%s: no section between %q and %q", path, strings.TrimSpace(begin), end)
	}
	return s, i + len(begin), j, nil
}

// CheckOutput reports, as a usage error naming flag, a file path that a
// command could not write when it is done: a directory, or one in a
// directory that does not exist.
func CheckOutput(flag, path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%w: --%s %s is a directory", ErrUsage, flag, path)
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: --%s %s: no directory %s to write it in", ErrUsage, flag, path, dir)
	}
	return nil
}

// keyLines maps each top-level key of a YAML mapping to its line.
func keyLines(b []byte) map[string]int {
	var doc yaml.Node
	out := map[string]int{}
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return out
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		out[m.Content[i].Value] = m.Content[i].Line
	}
	return out
}
