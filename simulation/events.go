package simulation

import (
	"container/heap"
	"time"

	"github.com/gossipd/gossipd/gossip"
)

type eventKind uint8

const (
	evTick eventKind = iota
	evDeliver
	evTrainDone
	evChurn
	evUp   // trace-driven: the peer comes online
	evDown // trace-driven: the peer goes offline
	// Turnover (turnover.go): a member is replaced; a leaver's grace ends;
	// a dead member times out.
	evTurnover
	evDepart
	evDrop
)

// event is one thing that happens at a virtual time. Events at equal times
// run in the order they were scheduled (seq), which makes runs reproducible.
type event struct {
	at   time.Duration
	seq  uint64
	kind eventKind
	peer int
	// A delivery: from the sender's index, the message, or its encoding
	// and kind when it goes through the codec (Config.Codec).
	from    int
	msg     *gossip.Message
	buf     []byte
	msgKind gossip.Kind
	// orig is the message as sent, for the sender's undelivered notice.
	orig   *gossip.Message
	result *gossip.TrainResult
	// job, for an update that takes virtual time, is its run on the
	// training pool; result is its result once done.
	job *trainJob
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// queue is the simulator's event queue.
type queue struct {
	h   eventHeap
	seq uint64
}

func (q *queue) push(e *event) {
	q.seq++
	e.seq = q.seq
	heap.Push(&q.h, e)
}

func (q *queue) pop() *event { return heap.Pop(&q.h).(*event) }

func (q *queue) peek() *event {
	if len(q.h) == 0 {
		return nil
	}
	return q.h[0]
}
