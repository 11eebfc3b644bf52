package simulation

import (
	"math"
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

func FuzzParseComputeTrace(f *testing.F) {
	f.Add([]byte("# FLOP/s\n1G\n500M\n2.5e9\n"))
	f.Add([]byte("-1\n"))
	f.Add([]byte("1Q\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		speeds, err := ParseComputeTrace(b, "speeds.txt")
		if err != nil {
			if !strings.Contains(err.Error(), "speeds.txt") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, v := range speeds {
			if !(v >= 1) || math.IsInf(v, 0) {
				t.Fatalf("accepted speed %v", v)
			}
		}
	})
}
