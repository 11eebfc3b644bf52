package cli

import "testing"

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "1048576": 1 << 20, "256MiB": 256 << 20, "1.5GiB": 3 << 29, "500MB": 5e8, "2 KiB": 2048, "7B": 7} {
		if got, err := ParseBytes(s); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "MiB", "-1MiB", "ten", "1TiB", "9e99GB"} {
		if _, err := ParseBytes(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
