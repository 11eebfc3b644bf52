package simulation

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/gossip"
)

// TestSamplingOldName: --sampling newscast, the name earlier versions
// gave cyclon, still runs cyclon, and says so once, with the spelling to
// use; cyclon itself brings no note.
func TestSamplingOldName(t *testing.T) {
	for _, c := range []struct {
		value string
		notes int
	}{{"newscast", 1}, {"cyclon", 0}} {
		fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f Flags
		f.Register(fs)
		if err := fs.Parse([]string{"--sampling", c.value}); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.Config(fs)
		if err != nil {
			t.Fatalf("--sampling %s: %v", c.value, err)
		}
		if cfg.Sampling != gossip.SamplingCyclon {
			t.Errorf("--sampling %s: runs %q, want cyclon", c.value, cfg.Sampling)
		}
		if len(f.Deprecated) != c.notes || (c.notes > 0 && !strings.Contains(f.Deprecated[0], "--sampling cyclon")) {
			t.Errorf("--sampling %s: notes %q, want %d naming --sampling cyclon", c.value, f.Deprecated, c.notes)
		}
	}
}
