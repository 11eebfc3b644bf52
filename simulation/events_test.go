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
// the others at random times after it, as the simulator schedules; and
// events given their place when scheduled but pushed later (reserve,
// pushAt: a delivery whose size is taken later), at a time no earlier
// than the last event taken, which come out in that place.
func TestQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q queue
	var want []*event         // what is queued, in the order it must come out
	order := map[*event]int{} // the order of scheduling
	got, listed, late := 0, 0, 0
	var last time.Duration
	type held struct {
		e   *event
		seq uint64
	}
	var holding []held
	insert := func(e *event) {
		i, _ := slices.BinarySearchFunc(want, e, func(a, b *event) int {
			if a.at != b.at {
				return int(a.at - b.at)
			}
			return order[a] - order[b]
		})
		want = slices.Insert(want, i, e)
	}
	for range 20000 {
		if len(holding) > 0 && rng.IntN(4) == 0 {
			h := holding[0]
			holding = holding[1:]
			h.e.at = max(h.e.at, last+time.Duration(rng.IntN(3))*time.Millisecond)
			q.pushAt(h.e, h.seq)
			insert(h.e)
			late++
			continue
		}
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
		if rng.IntN(6) == 0 {
			holding = append(holding, held{e, q.reserve()})
			continue
		}
		q.push(e)
		if len(q.now) > q.head && q.now[len(q.now)-1].e == e {
			listed++
		}
		insert(e)
	}
	for _, h := range holding {
		h.e.at = max(h.e.at, last)
		q.pushAt(h.e, h.seq)
		insert(h.e)
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
	if listed < 3000 || late < 1000 {
		t.Fatalf("%d of 20,000 events went to the list of the moment's events, want at least 3,000; %d pushed in a place reserved before, want at least 1,000", listed, late)
	}
}
