package main

import (
	"syscall"
	"testing"
	"time"
)

// TestDaemonSecureAggregation: four `gossipd run` processes train digits
// with secure D-PSGD on a complete graph (each member's round is the
// masked sum of its three neighbours' models; 2 of 3 unmask it) over
// libp2p, and reach 0.90. One member is SIGKILLed while the others'
// rounds run (back to back, so it dies inside some of them): the three
// survivors go on summing rounds — without it, or with its masks removed
// by the others' shares where it had dealt — and keep their accuracy; no
// message is refused. Restarted on its store, it resumes and sums
// rounds again. No member's core ever tried to send parameters in the
// clear.
func TestDaemonSecureAggregation(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	dir := t.TempDir()
	ds := startCluster(t, bin, dir, 4, "100ms", "--protocol", "dpsgd", "--topology", "complete", "--secure-aggregation", "--checkpoint-every", "10")
	converge(t, ds)
	rounds := func(d *proc) (summed, skipped, recovered uint64) {
		s, err := d.status()
		if err != nil || s.Secure == nil {
			t.Fatalf("%s: /status secure %+v (%v)", d.api, s.Secure, err)
		}
		return s.Secure.Summed, s.Secure.Skipped, s.Secure.Recovered
	}
	for _, d := range ds {
		poll(t, d, "20 secure rounds summed", 60*time.Second, func(s status) bool { return s.Secure != nil && s.Secure.Summed >= 20 })
	}
	victim := ds[3]
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	victim.cmd.Wait()
	for _, d := range ds[:3] {
		before, _, _ := rounds(d)
		s := poll(t, d, "30 more secure rounds summed after the kill, accuracy ≥ 0.90", 90*time.Second, func(s status) bool {
			return s.Secure.Summed >= before+30 && s.Accuracy >= 0.90
		})
		for reason, k := range s.Rejected {
			t.Errorf("%s: %d messages refused (%s)", d.api, k, reason)
		}
		summed, skipped, recovered := rounds(d)
		t.Logf("%s after the kill: %d rounds summed, %d skipped, %d dropouts recovered; accuracy %.3f", d.api, summed, skipped, recovered, s.Accuracy)
	}
	victim.start(t, bin)
	s := poll(t, victim, "the restarted member resuming and summing 10 rounds", 90*time.Second, func(s status) bool {
		return s.ResumedFrom > 0 && s.Secure != nil && s.Secure.Summed >= 10
	})
	t.Logf("restarted: resumed from checkpoint %d, %d rounds summed, accuracy %.3f", s.ResumedFrom, s.Secure.Summed, s.Accuracy)
	for _, d := range ds {
		if s, err := d.status(); err != nil || s.Secure.ClearWithheld != 0 {
			t.Errorf("%s: %d messages with parameters in the clear withheld (%v)", d.api, s.Secure.ClearWithheld, err)
		}
	}
	stopAll(t, ds, nil)
}
