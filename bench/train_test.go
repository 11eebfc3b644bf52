package bench

import "testing"

// TestRuns: the median speed (odd and even counts), the mean accuracy
// and the spread a row reports.
func TestRuns(t *testing.T) {
	r := runs{{300, 0.5}, {100, 0.7}, {200, 0.6}}
	if r.speed() != 200 || r.accuracy() < 0.6-1e-12 || r.accuracy() > 0.6+1e-12 {
		t.Fatalf("speed %v, accuracy %v; want 200 and 0.6", r.speed(), r.accuracy())
	}
	if got, want := r.spread(), "0.6000 ± 0.1000 (0.5000 to 0.7000, 3 seeds)"; got != want {
		t.Fatalf("spread %q, want %q", got, want)
	}
	r = append(r, Result{1000, 0.6})
	if r.speed() != 250 {
		t.Fatalf("median of 4: %v, want 250", r.speed())
	}
	if got, want := (runs{{5, 0.8}}).spread(), "0.8000 ± 0.0000 (0.8000 to 0.8000, 1 seeds)"; got != want {
		t.Fatalf("spread %q, want %q", got, want)
	}
}
