package cli

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteUnits are the suffixes ParseBytes accepts, longest first.
var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
	{"B", 1},
}

// ParseBytes reads a size such as 256MiB, 1.5GiB, 500MB or 1048576 (bytes).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if v, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || f*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit (KiB, MiB, GiB, KB, MB, GB)", s)
	}
	return int64(f * float64(mult)), nil
}

// Rate is a flag of bytes per second, written as people write them:
// 1048576, 1MiB, 1MiB/s or 1.5GB/s; it prints in the largest binary unit
// that holds it whole (256MiB/s). A negative value (-1) takes no unit.
type Rate float64

// RateVar declares a Rate flag.
func RateVar(fs *flag.FlagSet, p *float64, name string, value float64, usage string) {
	*p = value
	fs.Var((*Rate)(p), name, usage)
}

// Set parses s.
func (r *Rate) Set(s string) error {
	t := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	if v, err := strconv.ParseFloat(t, 64); err == nil {
		*r = Rate(v)
		return nil
	}
	n, err := ParseBytes(t)
	if err != nil {
		return fmt.Errorf("rate %q: want bytes per second, such as 262144, 256KiB/s or 1MiB/s", s)
	}
	*r = Rate(n)
	return nil
}

// String formats the rate.
func (r *Rate) String() string {
	if r == nil {
		return "0"
	}
	v := float64(*r)
	if v > 0 && v == math.Trunc(v) {
		for _, u := range []struct {
			suffix string
			mult   float64
		}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
			if math.Mod(v, u.mult) == 0 {
				return strconv.FormatFloat(v/u.mult, 'f', -1, 64) + u.suffix + "/s"
			}
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Get returns the rate in bytes per second.
func (r *Rate) Get() any { return float64(*r) }
