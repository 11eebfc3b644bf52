package cli

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
)

// CheckEnv refuses an environment variable that begins with prefix and
// names neither a flag of fs (prefix + the flag's name in upper case,
// '-' as '_') nor one of others, the program's variables that are not
// flags: a misspelt setting in a unit file or a container's environment
// would otherwise be silently ignored. The error names the variable and
// the flag it most likely meant.
func CheckEnv(fs *flag.FlagSet, prefix string, others ...string) error {
	env := os.Environ()
	slices.Sort(env)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok || slices.Contains(others, name) {
			continue
		}
		flagName := strings.ReplaceAll(strings.ToLower(rest), "_", "-")
		if fs.Lookup(flagName) != nil {
			continue
		}
		hint := ""
		if near := closestFlag(fs, flagName); near != "" {
			hint = fmt.Sprintf("; did you mean $%s%s (--%s)?", prefix, strings.ToUpper(strings.ReplaceAll(near, "-", "_")), near)
		}
		return fmt.Errorf("%w: $%s is set, but gossipd %s has no flag --%s%s", ErrUsage, name, fs.Name(), flagName, hint)
	}
	return nil
}

// closestFlag returns the flag of fs nearest to name, by edit distance,
// if it is near enough to be a misspelling (2 edits, 1 for short names);
// "" if none is.
func closestFlag(fs *flag.FlagSet, name string) string {
	best, bestD := "", min(2, len(name)/3)+1
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(name, f.Name); d < bestD {
			best, bestD = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
