package simulation

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestQueueOrder: the queue gives its events by time, and events of the
// same time in the order they were scheduled, through pushes and pops
// interleaved at random.
func TestQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q queue
	var want []*event         // what is queued, in the order it must come out
	order := map[*event]int{} // the order of scheduling
	got := 0
	for range 20000 {
		if len(want) > 0 && rng.IntN(3) == 0 {
			e := q.pop()
			if e != want[0] {
				t.Fatalf("pop %d: event at %v (pushed %d), want at %v (pushed %d)", got, e.at, order[e], want[0].at, order[want[0]])
			}
			want = want[1:]
			got++
			continue
		}
		e := &event{at: time.Duration(rng.IntN(50)) * time.Millisecond}
		order[e] = len(order)
		q.push(e)
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
}
