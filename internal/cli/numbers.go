package cli

import (
	"flag"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Bounds maps each numeric flag of a flag set (int, uint, float and
// duration flags) to the values it may take, as an interval in the usual
// notation: "[1,inf)" at least 1, "(0,inf)" positive, "[0,1)",
// "(-inf,inf)" any number, "(-inf,0)|(0,inf)" any but 0; durations in
// seconds. A flag whose zero means
// "the default" takes the interval without zero, so that an explicit 0,
// which would silently become the default, is refused.
type Bounds map[string]string

// CheckNumbers refuses, as a usage error naming the flag, every numeric
// flag of fs set (on the command line, by the environment or a settings
// file) to a value outside its interval in bounds, and every float set to
// NaN or an infinity. A flag left at its default is not checked.
//
// bounds must name every numeric flag of fs and nothing else: one
// missing, unknown or malformed is a programming error, and CheckNumbers
// panics naming it, so that a flag added without its bound fails every
// test that runs the command.
func CheckNumbers(fs *flag.FlagSet, bounds Bounds) error {
	parsed := make(map[string][]interval, len(bounds))
	for name, iv := range bounds {
		f := fs.Lookup(name)
		if f == nil {
			panic(fmt.Sprintf("cli: bounds of %s name --%s, which it does not have", fs.Name(), name))
		}
		if _, _, ok := number(f); !ok {
			panic(fmt.Sprintf("cli: bounds of %s name --%s, which is not numeric", fs.Name(), name))
		}
		ivs, err := parseBound(iv)
		if err != nil {
			panic(fmt.Sprintf("cli: bound of --%s: %v", name, err))
		}
		parsed[name] = ivs
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var bad []string
	fs.VisitAll(func(f *flag.Flag) {
		v, isDur, ok := number(f)
		if !ok {
			return
		}
		ivs, listed := parsed[f.Name]
		if !listed {
			panic(fmt.Sprintf("cli: %s's numeric flag --%s has no bound", fs.Name(), f.Name))
		}
		if !set[f.Name] {
			return
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			bad = append(bad, fmt.Sprintf("--%s %s: want a finite number", f.Name, f.Value))
		} else if !slices.ContainsFunc(ivs, func(in interval) bool { return in.contains(v) }) {
			want := make([]string, len(ivs))
			for i, in := range ivs {
				want[i] = in.describe(isDur)
			}
			bad = append(bad, fmt.Sprintf("--%s %s: want %s", f.Name, f.Value, strings.Join(want, " or ")))
		}
	})
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrUsage, strings.Join(bad, "; "))
	}
	return nil
}

// number is a numeric flag's value as a float64 (a duration in seconds).
func number(f *flag.Flag) (v float64, isDur, ok bool) {
	g, isGetter := f.Value.(flag.Getter)
	if !isGetter {
		return 0, false, false
	}
	switch x := g.Get().(type) {
	case int:
		return float64(x), false, true
	case int64:
		return float64(x), false, true
	case uint:
		return float64(x), false, true
	case uint64:
		return float64(x), false, true
	case float64:
		return x, false, true
	case time.Duration:
		return x.Seconds(), true, true
	}
	return 0, false, false
}

// interval is a parsed bound.
type interval struct {
	lo, hi         float64
	loOpen, hiOpen bool
}

// parseBound parses a bound: intervals joined by "|".
func parseBound(s string) ([]interval, error) {
	var out []interval
	for _, part := range strings.Split(s, "|") {
		in, err := parseInterval(part)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

func parseInterval(s string) (interval, error) {
	var in interval
	lo, hi, ok := strings.Cut(s, ",")
	if !ok || len(lo) < 2 || len(hi) < 2 || !strings.ContainsAny(lo[:1], "[(") || !strings.ContainsAny(hi[len(hi)-1:], "])") {
		return in, fmt.Errorf("interval %q: want [LO,HI] with ( or ) for open ends", s)
	}
	in.loOpen, in.hiOpen = lo[0] == '(', hi[len(hi)-1] == ')'
	var err error
	if in.lo, err = strconv.ParseFloat(strings.TrimSpace(lo[1:]), 64); err != nil {
		return in, fmt.Errorf("interval %q: %v", s, err)
	}
	if in.hi, err = strconv.ParseFloat(strings.TrimSpace(hi[:len(hi)-1]), 64); err != nil {
		return in, fmt.Errorf("interval %q: %v", s, err)
	}
	if !(in.lo < in.hi) || (math.IsInf(in.lo, 0) && !in.loOpen) || (math.IsInf(in.hi, 0) && !in.hiOpen) {
		return in, fmt.Errorf("interval %q is empty or closed at an infinity", s)
	}
	return in, nil
}

func (in interval) contains(v float64) bool {
	return (v > in.lo || !in.loOpen && v == in.lo) && (v < in.hi || !in.hiOpen && v == in.hi)
}

// describe says what the interval wants, in words where it can.
func (in interval) describe(isDur bool) string {
	f := func(v float64) string {
		if isDur {
			return time.Duration(v * float64(time.Second)).String()
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	switch {
	case math.IsInf(in.hi, 1) && !in.loOpen:
		return "at least " + f(in.lo)
	case math.IsInf(in.hi, 1):
		return "more than " + f(in.lo)
	case math.IsInf(in.lo, -1) && !in.hiOpen:
		return "at most " + f(in.hi)
	case math.IsInf(in.lo, -1):
		return "less than " + f(in.hi)
	}
	return fmt.Sprintf("a value in %c%s, %s%c", "[("[b2i(in.loOpen)], f(in.lo), f(in.hi), "])"[b2i(in.hiOpen)])
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// WithBounds is the union of bs (later ones win).
func WithBounds(bs ...map[string]string) Bounds {
	out := Bounds{}
	for _, b := range bs {
		maps.Copy(out, b)
	}
	return out
}
