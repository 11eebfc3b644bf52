package daemon

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestPacer: at 1000 B/s, 4500 bytes in frames of 1500 take 3.5 s (the
// first second's worth goes at once), on a virtual clock; unpaced, none.
func TestPacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPacer(1000)
		start := time.Now()
		for range 3 {
			if err := p.wait(context.Background(), 1500); err != nil {
				t.Fatal(err)
			}
		}
		if got := time.Since(start); got != 3500*time.Millisecond {
			t.Fatalf("4500 bytes at 1000 B/s took %v, want 3.5s", got)
		}
		var none *pacer
		start = time.Now()
		none.wait(context.Background(), 1<<30)
		if time.Since(start) != 0 {
			t.Fatal("an unpaced send waited")
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := p.wait(ctx, 5000); err == nil {
			t.Fatal("a cancelled wait succeeded")
		}
	})
}
