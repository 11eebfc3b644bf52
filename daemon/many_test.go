package daemon_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/daemon/memnet"
)

// TestManyDaemons: 200 daemons (race builds: 50, the detector's overhead
// on the wall clock) in one process over memnet, each with about 7 digits
// examples, converge by random walk: their mean accuracy passes 0.85
// within 120 s of the bubble's virtual clock.
func TestManyDaemons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 200
		if raceEnabled {
			n = 50
		}
		r := start(t, memnet.New(), n, func(i int, c *daemon.Config) {
			c.Job.DeltaMillis = 100
			c.EvalInterval = 500 * time.Millisecond
			c.Senders = 2
		})
		mean := func() float64 {
			s := 0.0
			for _, nd := range r.nodes {
				s += nd.Status().Accuracy
			}
			return s / float64(len(r.nodes))
		}
		start := time.Now()
		t.Cleanup(func() {
			if t.Failed() {
				stuck := 0
				for _, nd := range r.nodes {
					if nd.Status().Updates == 0 {
						stuck++
					}
				}
				t.Logf("mean accuracy %.3f; %d of %d daemons never updated", mean(), stuck, n)
			}
		})
		waitFor(t, "mean accuracy ≥ 0.85", 120*time.Second, func() bool { return mean() >= 0.85 })
		t.Logf("%d daemons: mean accuracy %.3f after %v of virtual time", n, mean(), time.Since(start).Round(100*time.Millisecond))
	})
}
