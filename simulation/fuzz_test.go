package simulation

import (
	"strings"
	"testing"
)

// FuzzParseChurnTrace: any bytes give intervals with ordered, non-negative
// bounds, or an error naming the file.
func FuzzParseChurnTrace(f *testing.F) {
	f.Add([]byte("# peer start end\n0 0s 10s\n1 5s 1m\n"))
	f.Add([]byte("0 10s 5s\n"))
	f.Add([]byte("x y z\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ivs, err := ParseChurnTrace(b, "trace.txt")
		if err != nil {
			if !strings.Contains(err.Error(), "trace.txt") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, iv := range ivs {
			if iv.Peer < 0 || iv.Start < 0 || iv.End < iv.Start {
				t.Fatalf("accepted %+v", iv)
			}
		}
	})
}
