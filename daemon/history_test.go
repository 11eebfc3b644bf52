package daemon

import (
	"testing"
	"time"
)

func TestHistoryRing(t *testing.T) {
	var h history
	t0 := time.Unix(1000, 0)
	h.add(t0, Sample{Time: 0})
	h.add(t0.Add(time.Second), Sample{Time: 1}) // too soon: dropped
	for i := 1; i <= historyLen+5; i++ {
		h.add(t0.Add(time.Duration(i)*historyEvery), Sample{Time: float64(i)})
	}
	s := h.samples()
	if len(s) != historyLen || s[0].Time != 6 || s[len(s)-1].Time != historyLen+5 {
		t.Fatalf("%d samples from %v to %v", len(s), s[0].Time, s[len(s)-1].Time)
	}
	for i := 1; i < len(s); i++ {
		if s[i].Time != s[i-1].Time+1 {
			t.Fatalf("sample %d at %v after %v", i, s[i].Time, s[i-1].Time)
		}
	}
}
