package simulation

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestQueueOrder: the queue gives its events by time, and events of the
// same time in the order they were scheduled, through pushes and pops
// interleaved at random: a third of the pushes at the time of the last
// event taken (a message at no latency), which go to the queue's list,
// the others at random times after it, as the simulator schedules.
func TestQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q queue
	var want []*event         // what is queued, in the order it must come out
	order := map[*event]int{} // the order of scheduling
	got, listed := 0, 0
	var last time.Duration
	for range 20000 {
		if len(want) > 0 && rng.IntN(3) == 0 {
			e := q.pop()
			if e != want[0] {
				t.Fatalf("pop %d: event at %v (pushed %d), want at %v (pushed %d)", got, e.at, order[e], want[0].at, order[want[0]])
			}
			want = want[1:]
			got++
			last = e.at
			continue
		}
		e := &event{at: last + time.Duration(rng.IntN(50))*time.Millisecond}
		if rng.IntN(3) == 0 {
			e.at = last
		}
		order[e] = len(order)
		q.push(e)
		if len(q.now) > q.head && q.now[len(q.now)-1].e == e {
			listed++
		}
		i, _ := slices.BinarySearchFunc(want, e, func(a, b *event) int {
			if a.at != b.at {
				return int(a.at - b.at)
			}
			return order[a] - order[b]
		})
		want = slices.Insert(want, i, e)
	}
	for len(want) > 0 {
		if e := q.pop(); e != want[0] {
			t.Fatalf("draining: event at %v (pushed %d), want at %v (pushed %d)", e.at, order[e], want[0].at, order[want[0]])
		}
		want = want[1:]
	}
	if q.peek() != nil {
		t.Fatal("an empty queue peeks an event")
	}
	if listed < 3000 {
		t.Fatalf("%d of 20,000 events went to the list of the moment's events, want at least 3,000", listed)
	}
}
