package daemon

import (
	"sync"
	"time"
)

// Sample is one point of a node's recent history (GET /history, the
// dashboard's charts).
type Sample struct {
	// Time is Unix seconds.
	Time        float64 `json:"t"`
	Accuracy    float64 `json:"accuracy"`
	Loss        float64 `json:"loss"`
	Peers       int     `json:"peers"`
	BytesIn     uint64  `json:"bytes_in"`
	BytesOut    uint64  `json:"bytes_out"`
	MessagesIn  uint64  `json:"messages_in"`
	MessagesOut uint64  `json:"messages_out"`
	DPEpsilon   float64 `json:"dp_epsilon,omitempty"`
}

// The history keeps a sample every historyEvery for the last historyLen
// of them (an hour).
const (
	historyEvery = 2 * time.Second
	historyLen   = 1800
)

// history is a ring of samples.
type history struct {
	mu   sync.Mutex
	buf  []Sample
	next int
	last time.Time
}

// due says whether a sample is due at now: historyEvery has passed
// since the last.
func (h *history) due(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last.IsZero() || now.Sub(h.last) >= historyEvery
}

// add records s if a sample is due at now.
func (h *history) add(now time.Time, s Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.last.IsZero() && now.Sub(h.last) < historyEvery {
		return
	}
	h.last = now
	if len(h.buf) < historyLen {
		h.buf = append(h.buf, s)
		return
	}
	h.buf[h.next] = s
	h.next = (h.next + 1) % historyLen
}

// samples returns the history, oldest first.
func (h *history) samples() []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Sample, 0, len(h.buf))
	out = append(out, h.buf[h.next:]...)
	return append(out, h.buf[:h.next]...)
}

// sample records the node's state in its history when a sample is due
// (core goroutine, every second: the status is read only when one is).
func (n *Node) sample() {
	now := n.cfg.Now()
	if !n.hist.due(now) {
		return
	}
	s := n.Status()
	n.hist.add(now, Sample{Time: float64(now.UnixMilli()) / 1e3, Accuracy: s.Accuracy, Loss: s.Loss, Peers: s.Peers,
		BytesIn: s.BytesIn, BytesOut: s.BytesOut, MessagesIn: s.MessagesIn, MessagesOut: s.MessagesOut, DPEpsilon: s.DPEpsilon})
}

// History returns the node's recent samples, oldest first.
func (n *Node) History() []Sample { return n.hist.samples() }
