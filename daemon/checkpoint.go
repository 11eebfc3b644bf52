package daemon

import (
	"errors"
	"time"
)

// Checkpoints are taken on the core goroutine (a snapshot is a copy of the
// state) and written by a goroutine of their own, so that a slow disk
// never stalls the protocol. /status reports a checkpoint only once it is
// durable: a daemon killed at any moment restarts from a model at least as
// old as the last checkpoint it reported.

// snapshot is a checkpoint of the current state (core goroutine).
func (n *Node) snapshot() *Checkpoint {
	core := n.peer.Core()
	c := &Checkpoint{Time: n.cfg.Now(), Job: n.job, Spec: n.cfg.Job, State: core.Snapshot(), Meta: n.modelMetadata(core.Age())}
	if b := n.peer.Budget(); b != nil {
		c.DPSteps, c.DPEpsilon = uint64(b.Steps()), b.Spent()
	}
	return c
}

// checkpoint snapshots the state and hands it to the writer; an older
// snapshot not yet written is replaced (core goroutine).
func (n *Node) checkpoint(why string) {
	if n.cfg.Store == nil {
		return
	}
	c := n.snapshot()
	n.lastCkptUpdates = c.State.Updates
	n.log.Debug("checkpoint", "why", why, "age", c.State.Age)
	for {
		select {
		case n.ckptCh <- c:
			return
		default:
		}
		select {
		case <-n.ckptCh: // superseded before it was written
		default:
		}
	}
}

// writeCheckpoints saves what checkpoint hands over until ckptCh closes.
// A failing disk is logged once when the failures start, then at most
// once a minute, and once more when a checkpoint is written again: a full
// disk must not also fill the log.
func (n *Node) writeCheckpoints() {
	var failing int
	var lastLog time.Time
	for c := range n.ckptCh {
		err := n.cfg.Store.Save(c)
		switch {
		case errors.Is(err, ErrSuperseded):
			continue
		case err != nil:
			failing++
			n.met.ckptFailures.Inc()
			n.mu.Lock()
			n.status.CheckpointError = err.Error()
			n.mu.Unlock()
			if now := n.cfg.Now(); failing == 1 || now.Sub(lastLog) >= time.Minute {
				lastLog = now
				n.log.Error("checkpoint failed; the store keeps the earlier ones and training goes on", "store", n.cfg.Store.Dir(), "failures", failing, "err", err)
			}
			continue
		}
		if failing > 0 {
			n.log.Info("checkpoints written again", "store", n.cfg.Store.Dir(), "failed_before", failing, "checkpoint", c.Seq)
			failing = 0
		}
		n.saved(c)
	}
}

// saved reports a durable checkpoint.
func (n *Node) saved(c *Checkpoint) {
	n.met.ckpts.Inc()
	n.met.ckptTime.Set(float64(n.cfg.Now().UnixNano()) / 1e9)
	n.mu.Lock()
	n.status.CheckpointError = ""
	if c.Seq > n.status.Checkpoint {
		n.status.Checkpoint, n.status.CheckpointAge = c.Seq, c.State.Age
	}
	n.mu.Unlock()
}
