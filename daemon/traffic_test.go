package daemon

import (
	"testing"
	"time"
)

func TestTrafficPerPeer(t *testing.T) {
	var tr traffic
	t0 := time.Unix(1000, 0)
	tr.out("a", 100, t0)
	tr.out("a", 50, t0)
	tr.failed("a", t0)
	tr.in("b", 7, t0)
	got := tr.snapshot(t0)
	if a := got["a"]; a.MessagesOut != 2 || a.BytesOut != 150 || a.SendErrors != 1 || a.MessagesIn != 0 {
		t.Fatalf("peer a: %+v", a)
	}
	if b := got["b"]; b.MessagesIn != 1 || b.BytesIn != 7 {
		t.Fatalf("peer b: %+v", b)
	}
	// A peer idle for longer than trafficIdle leaves the table.
	tr.in("b", 1, t0.Add(trafficIdle))
	if got := tr.snapshot(t0.Add(trafficIdle + time.Second)); len(got) != 1 || got["b"].MessagesIn != 2 {
		t.Fatalf("after a's idle time: %+v", got)
	}
}
