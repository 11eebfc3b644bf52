package daemon

import (
	"context"
	"errors"
)

// Job control, asked for through the API (POST /pause, /resume, /leave)
// and carried out on the core goroutine.

// ErrNotRunning means the node's Run loop is not (or no longer) running,
// so it cannot act on a control request.
var ErrNotRunning = errors.New("daemon: not running")

// Pause pauses local training (peer.Peer.SetPaused): the node stays in
// the job, averaging, forwarding and pushing, but takes no step on its
// data and spends no privacy budget until Resume. A restarted daemon
// trains again. It returns once the core goroutine has paused.
func (n *Node) Pause(ctx context.Context) error { return n.setPaused(ctx, true) }

// Resume resumes local training after Pause.
func (n *Node) Resume(ctx context.Context) error { return n.setPaused(ctx, false) }

func (n *Node) setPaused(ctx context.Context, paused bool) error {
	done := make(chan struct{})
	select {
	case n.pauseCh <- pauseReq{paused, done}:
	case <-n.runDone:
		return ErrNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-n.runDone:
		return ErrNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pauseReq is a Pause or Resume for the core goroutine, which closes done
// once it is in effect.
type pauseReq struct {
	paused bool
	done   chan struct{}
}

// Leave makes the node leave its job: it says goodbye (a push-sum node
// hands off its weight), writes a final checkpoint, and Run returns nil,
// as on shutdown. It does not wait: Left reports when it has.
func (n *Node) Leave() {
	n.leaveOnce.Do(func() { close(n.leaveCh) })
}

// Left is closed once Run has returned.
func (n *Node) Left() <-chan struct{} { return n.runDone }

// applyPause acts on a pause request (core goroutine).
func (n *Node) applyPause(r pauseReq) {
	if n.peer.Paused() != r.paused {
		n.peer.SetPaused(r.paused)
		if r.paused {
			n.log.Info("training paused: the node stays in the job, averaging and forwarding without training on its data")
		} else {
			n.log.Info("training resumed")
		}
	}
	v := 0.0
	if r.paused {
		v = 1
	}
	n.met.paused.Set(v)
	n.mu.Lock()
	n.status.Paused = r.paused
	n.mu.Unlock()
	close(r.done)
}
