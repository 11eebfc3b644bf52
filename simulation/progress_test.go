package simulation

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gossipd/gossipd/job"
)

// fakeClock is a wall clock that moves only when told.
type fakeClock struct{ t time.Time }

func newFakeClock() *fakeClock               { return &fakeClock{t: time.Unix(1_000_000, 0)} }
func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func lines(b *bytes.Buffer) []string {
	s := strings.TrimSuffix(b.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestProgressLinesFakeClock drives a Progress with a fake clock: lines
// name the round, the virtual time, the latest evaluated accuracy (and its
// round) and an ETA from the rounds' pace (setup excluded), one at most
// every Every, and a last "done" line.
func TestProgressLinesFakeClock(t *testing.T) {
	clk := newFakeClock()
	var b bytes.Buffer
	p := NewProgress(&b, ProgressConfig{Rounds: 10, Delta: 2 * time.Second, Every: 5 * time.Second, Now: clk.now})
	clk.advance(2 * time.Second) // loading the data set, building peers
	p.Round(0)
	for r := 1; r <= 10; r++ {
		clk.advance(time.Second)
		if r%2 == 0 { // eval every 2 rounds
			p.Row(Row{Round: r, MeanAcc: 0.5 + float64(r)/100})
		}
		p.Round(r)
	}
	p.Finish()
	want := []string{
		// t = 5 s: round 3, pace 1 s a round since round 1 began, 7 left.
		"simulate: round 3/10 (30%), virtual 6s, accuracy 0.5200 (round 2), elapsed 5s, eta 7s",
		// t = 10 s: the next line, not before.
		"simulate: round 8/10 (80%), virtual 16s, accuracy 0.5800 (round 8), elapsed 10s, eta 2s",
		"simulate: done, 10 rounds in 12s, accuracy 0.6000 (round 10)",
	}
	if got := lines(&b); !slices.Equal(got, want) {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}

	// No row yet: "accuracy -"; a long ETA in minutes; sub-10 s in tenths.
	clk = newFakeClock()
	b.Reset()
	p = NewProgress(&b, ProgressConfig{Rounds: 1000, Delta: time.Second, Every: 5 * time.Second, Now: clk.now})
	p.Round(0)
	clk.advance(5 * time.Second)
	p.Round(50)
	want = []string{"simulate: round 50/1000 (5%), virtual 50s, accuracy -, elapsed 5s, eta 1m35s"}
	if got := lines(&b); !slices.Equal(got, want) {
		t.Fatalf("lines: %q, want %q", got, want)
	}
	if d, ok := p.ETA(); !ok || d != 95*time.Second {
		t.Fatalf("ETA = %v, %v; want 1m35s", d, ok)
	}
	if got := roundDuration(4260 * time.Millisecond); got != "4.3s" {
		t.Errorf("roundDuration(4.26 s) = %q, want 4.3s", got)
	}
}

// TestProgressRateLimit: rounds every 100 ms for a minute give a line at
// most every 5 s (12 of them, 5 s apart), and a short run none at all,
// nor a "done" line.
func TestProgressRateLimit(t *testing.T) {
	clk := newFakeClock()
	var b bytes.Buffer
	p := NewProgress(&b, ProgressConfig{Rounds: 600, Delta: time.Second, Now: clk.now}) // Every: the default 5 s
	p.Round(0)
	for r := 1; r <= 600; r++ {
		clk.advance(100 * time.Millisecond)
		p.Round(r)
	}
	got := lines(&b)
	if len(got) != 12 {
		t.Fatalf("%d lines over 60 s at most every 5 s, want 12:\n%s", len(got), strings.Join(got, "\n"))
	}
	elapsed := regexp.MustCompile(`, elapsed ([^,]+), eta `)
	prev := -5 * time.Second
	for _, l := range got {
		m := elapsed.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("no elapsed time in %q", l)
		}
		d, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatal(err)
		}
		if d-prev < DefaultProgressEvery {
			t.Fatalf("lines %v apart, want at least %v: %q", d-prev, DefaultProgressEvery, l)
		}
		prev = d
	}

	clk = newFakeClock()
	b.Reset()
	p = NewProgress(&b, ProgressConfig{Rounds: 3, Delta: time.Second, Every: time.Minute, Now: clk.now})
	p.Round(0)
	for r := 1; r <= 3; r++ {
		clk.advance(time.Second)
		p.Row(Row{Round: r, MeanAcc: 0.9})
		p.Round(r)
	}
	p.Finish()
	if b.Len() != 0 {
		t.Fatalf("a 3 s run with lines every minute wrote %q", b.String())
	}
	if r, ok := p.Latest(); !ok || r.Round != 3 {
		t.Fatalf("Latest = %+v, %v", r, ok)
	}
}

type failingWriter struct{ n int }

var errBrokenLog = errors.New("broken log")

func (w *failingWriter) Write(b []byte) (int, error) {
	w.n++
	return 0, errBrokenLog
}

// TestProgressWriteError: a log that cannot be written silences the
// Progress after the first try, and Err wraps the cause.
func TestProgressWriteError(t *testing.T) {
	clk := newFakeClock()
	w := &failingWriter{}
	p := NewProgress(w, ProgressConfig{Rounds: 10, Delta: time.Second, Every: time.Second, Now: clk.now})
	for r := 1; r <= 10; r++ {
		clk.advance(time.Second)
		p.Round(r)
	}
	p.Finish()
	if w.n != 1 || !errors.Is(p.Err(), errBrokenLog) {
		t.Fatalf("%d writes, Err %v; want 1 and %v", w.n, p.Err(), errBrokenLog)
	}
}

// TestProgressDoesNotChangeResults: the same seed gives the same
// metrics.csv and final figures with a Progress fed by Run's hooks as
// without any, for a gossip protocol (rows filed a round late) and a
// baseline; the OnRound hook sees 0 and then every round in order.
func TestProgressDoesNotChangeResults(t *testing.T) {
	for _, proto := range []string{"randomwalk", "dpsgd", "fedavg"} {
		c := Config{Settings: job.Settings{Protocol: proto}, Peers: 8, Rounds: 6, EvalEvery: 2, Seed: 5, EvalPeers: 4, EvalExamples: 200, FinalEvalPeers: 4}
		plain, res := csvOf(t, c)

		clk := newFakeClock()
		var b bytes.Buffer
		p := NewProgress(&b, ProgressConfig{Rounds: c.Rounds, Delta: time.Second, Every: time.Nanosecond, Now: clk.now})
		var rounds []int
		res2, err := Run(context.Background(), c, p.Row, OnRound(func(r int) {
			clk.advance(time.Second)
			rounds = append(rounds, r)
			p.Round(r)
		}))
		if err != nil {
			t.Fatal(err)
		}
		p.Finish()
		var got bytes.Buffer
		if err := WriteCSV(&got, res2.Rows); err != nil {
			t.Fatal(err)
		}
		if got.String() != plain {
			t.Fatalf("%s: metrics differ with progress:\n%s\nwithout:\n%s", proto, got.String(), plain)
		}
		if res2.FinalAccuracy != res.FinalAccuracy || res2.FinalLoss != res.FinalLoss || res2.Stats.Messages != res.Stats.Messages ||
			res2.Stats.Bytes != res.Stats.Bytes || res2.Stats.Updates != res.Stats.Updates {
			t.Fatalf("%s: summary differs with progress: %+v vs %+v", proto, res2, res)
		}
		if !slices.Equal(rounds, []int{0, 1, 2, 3, 4, 5, 6}) {
			t.Fatalf("%s: OnRound saw %v", proto, rounds)
		}
		out := lines(&b)
		if len(out) != 7 || !strings.HasPrefix(out[0], "simulate: round 1/6 (16%), virtual 1s, ") ||
			!strings.HasPrefix(out[6], "simulate: done, 6 rounds in ") || !strings.Contains(out[5], "round 6/6") {
			t.Fatalf("%s: progress:\n%s", proto, b.String())
		}
	}
}
