package p2p

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestToTrim: of the connections to peers that are no neighbours, trim
// keeps PartialHeadroom, giving the headroom to the young ones first
// (never closing them), then to bootstrap peers, then to the oldest.
func TestToTrim(t *testing.T) {
	now := time.Unix(1000, 0)
	conn := func(i int, age time.Duration, boot bool) otherConn {
		return otherConn{id: peer.ID(fmt.Sprintf("p%02d", i)), opened: now.Add(-age), boot: boot}
	}
	var few []otherConn
	for i := range PartialHeadroom {
		few = append(few, conn(i, time.Hour, false))
	}
	if got := toTrim(few, now); len(got) != 0 {
		t.Errorf("%d others, the headroom: closed %v, want none", len(few), got)
	}

	// 4 young, 1 old bootstrap peer, 10 old others of ages 1…10 min.
	var others []otherConn
	for i := range 4 {
		others = append(others, conn(i, time.Duration(i+1)*time.Second, false))
	}
	others = append(others, conn(4, time.Minute, true))
	for i := range 10 {
		others = append(others, conn(5+i, time.Duration(i+1)*time.Minute, false))
	}
	got := toTrim(others, now)
	// Kept: 4 young + the bootstrap peer + the 3 oldest (p14, p13, p12).
	want := []peer.ID{"p05", "p06", "p07", "p08", "p09", "p10", "p11"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("closed %v, want %v (the newest of the old, not the young, the bootstrap peer or the 3 oldest)", got, want)
	}
	if len(others)-len(got) != PartialHeadroom {
		t.Errorf("kept %d others, want PartialHeadroom = %d", len(others)-len(got), PartialHeadroom)
	}

	// More young ones than the headroom: none of them closed, every old one is.
	var many []otherConn
	for i := range PartialHeadroom + 3 {
		many = append(many, conn(i, TrimGrace-time.Duration(i+1)*time.Millisecond, false))
	}
	many = append(many, conn(90, TrimGrace, true), conn(91, time.Hour, false))
	got = toTrim(many, now)
	slices.Sort(got)
	if !slices.Equal(got, []peer.ID{"p90", "p91"}) {
		t.Errorf("with %d young connections closed %v, want only the two old ones p90 p91", PartialHeadroom+3, got)
	}
}
