//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The suite's timings: for each protocol, how long each scenario's
// recovery took, written to e2e-logs/timings.md at the end of the run.

// timingColumns are the table's columns, in order, with their headings.
var timingColumns = []struct{ key, heading string }{
	{"converge", "converge (s)"},
	{"bytes", "bytes/node/min"},
	{"badlinks", "bad links: 20 updates (s)"},
	{"partition", "partition seen (s)"},
	{"heal", "re-converge after heal (s)"},
	{"consensus", "consensus distance: before / cut / healed"},
	{"detect", "dead peer dropped (s)"},
	{"lost", "frames to the dead peer"},
	{"restart", "restarted node caught up (s)"},
	{"joiner", "late joiner caught up (s)"},
	{"readdress", "new address found (s)"},
}

var timings = struct {
	sync.Mutex
	rows map[string]map[string]string // protocol → column → value
	rest []string                     // other lines (NAT, compose)
}{rows: map[string]map[string]string{}}

// record notes a timing of a protocol's scenario.
func record(proto, key string, d time.Duration) {
	recordValue(proto, key, fmt.Sprintf("%.1f", d.Seconds()))
}

func recordValue(proto, key, v string) {
	timings.Lock()
	defer timings.Unlock()
	if timings.rows[proto] == nil {
		timings.rows[proto] = map[string]string{}
	}
	timings.rows[proto][key] = v
}

// note adds a line under the table.
func note(format string, args ...any) {
	timings.Lock()
	defer timings.Unlock()
	timings.rest = append(timings.rest, fmt.Sprintf(format, args...))
}

// writeTimings writes the table to e2e-logs/timings.md and stdout.
func writeTimings() {
	timings.Lock()
	defer timings.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "e2e timings, %s\n\n| protocol |", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	for _, c := range timingColumns {
		fmt.Fprintf(&b, " %s |", c.heading)
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", len(timingColumns)))
	b.WriteString("\n")
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for k := range timings.rows {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "| %s |", p)
		for _, c := range timingColumns {
			v := timings.rows[p][c.key]
			if v == "" {
				v = "–"
			}
			fmt.Fprintf(&b, " %s |", v)
		}
		b.WriteString("\n")
	}
	for _, l := range timings.rest {
		fmt.Fprintf(&b, "\n%s\n", l)
	}
	fmt.Print("\n" + b.String())
	d := filepath.Join("..", "..", "e2e-logs")
	os.MkdirAll(d, 0o755)
	os.WriteFile(filepath.Join(d, "timings.md"), []byte(b.String()), 0o644)
}

func TestMain(m *testing.M) {
	for _, img := range []string{image, linkemuImage} {
		if _, err := dockerErr("image", "inspect", img); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: no image %s: run `make e2e-images` first (or `make e2e`)\n", img)
			os.Exit(1)
		}
	}
	if err := setupToken(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: the suite's API token: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	dockerErr("volume", "rm", "-f", tokenVolume)
	writeTimings()
	os.Exit(code)
}
