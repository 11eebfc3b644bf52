package simulation

import (
	"bytes"
	"math"
	"math/rand/v2"
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
		if len(ivs) == 0 {
			t.Fatal("accepted a trace with no intervals")
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

// FuzzReadCSV: any bytes give rows, which WriteCSV writes (at 8
// significant digits) to a file that reads and writes back to the same
// bytes, or an error naming the file.
func FuzzReadCSV(f *testing.F) {
	var good bytes.Buffer
	if err := WriteCSV(&good, []Row{{Round: 1, Time: 2.5, Messages: 10, Bytes: 400, MeanAcc: 0.5, MinAcc: 0.25, MaxAcc: 0.75, MeanLoss: 1.5, MinLoss: 1, MaxLoss: 2, Consensus: 0.1, Online: 4}}); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add([]byte(CSVHeader))
	f.Add([]byte(CSVHeader + "1,2,3,4,5,6,7,8,9,10,11,12\n"))
	f.Add([]byte(CSVHeader + "1,NaN,3,4,0.5,0.5,0.5,NaN,Inf,-Inf,0,1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, err := ReadCSV(bytes.NewReader(b), "metrics.csv")
		if err != nil {
			if !strings.Contains(err.Error(), "metrics.csv") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if len(rows) == 0 {
			t.Fatal("accepted a file with no rows")
		}
		var out bytes.Buffer
		if err := WriteCSV(&out, rows); err != nil {
			t.Fatal(err)
		}
		again, err := ReadCSV(bytes.NewReader(out.Bytes()), "again")
		if err != nil {
			t.Fatalf("rows %+v written back do not read: %v", rows, err)
		}
		var out2 bytes.Buffer
		if err := WriteCSV(&out2, again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), out2.Bytes()) {
			t.Fatalf("round trip changed the rows:\n%s\n%s", out.Bytes(), out2.Bytes())
		}
	})
}

// FuzzParseLatency: any --latency spec is refused, or draws delays that
// are durations in [0, maxLatency] (NaN or an infinite σ drew none).
func FuzzParseLatency(f *testing.F) {
	for _, s := range []string{"0", "50ms", "uniform:10ms:90ms", "lognormal:50ms:0.5", "lognormal:50ms:NaN", "lognormal:1ms:1e300", "uniform:5ms:1ms"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		lat, err := parseLatency(spec)
		if err != nil {
			if !strings.Contains(err.Error(), "--latency") {
				t.Fatalf("error does not name the flag: %v", err)
			}
			return
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for range 20 {
			if d := lat(rng); d < 0 || d > maxLatency {
				t.Fatalf("%q drew %v", spec, d)
			}
		}
	})
}

// FuzzParseCompute: any --compute spec is refused, or gives speeds of at
// least 1 FLOP/s or +Inf, never NaN or ≤ 0 (which would make a training
// time of NaN or a negative one).
func FuzzParseCompute(f *testing.F) {
	for _, s := range []string{"0", "20G", "uniform:1G:5G", "lognormal:2G:1", "lognormal:2G:NaN", "lognormal:1:1e300", "uniform:5G:1G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		speed, err := parseCompute(spec, nil, 1)
		if err != nil {
			if !strings.Contains(err.Error(), "--compute") {
				t.Fatalf("error does not name the flag: %v", err)
			}
			return
		}
		if speed == nil {
			return // instant training
		}
		for i := range 20 {
			s := &sim{speed: speed, init: make([]float32, 10)}
			if v := speed(i); math.IsNaN(v) || v < 0 {
				t.Fatalf("%q: peer %d speed %v", spec, i, v)
			}
			if d := s.trainTime(i, 32); d < 0 {
				t.Fatalf("%q: peer %d trains for %v", spec, i, d)
			}
		}
	})
}
