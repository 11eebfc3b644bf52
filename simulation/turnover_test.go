package simulation

import (
	"math"
	"testing"

	"github.com/gossipd/gossipd/job"
)

// TestTurnover: half the members are replaced during the run, for every
// protocol, by goodbyes and by deaths. Every replacement joins (taking a
// member's state), the live count stays the roster's size, runs are
// reproducible, and accuracy stays close to the static run's. Push-sum's
// weights over the live members keep summing to their number when members
// leave (within 1%); when they die, each takes its weight with it, and
// the live and the dead weights together account for every peer's unit.
func TestTurnover(t *testing.T) {
	for _, proto := range []string{"randomwalk", "dpsgd", "adpsgd", "pushsum", "sfb"} {
		static := Config{Settings: job.Settings{Protocol: proto, LR: 0.3}, Peers: 20, Rounds: 40, Seed: 5, FinalEvalPeers: 0}
		_, base := csvOf(t, static)
		for _, dep := range []string{DepartLeave, DepartDie} {
			c := static
			c.Turnover, c.Departure = 0.5, dep
			a, res := csvOf(t, c)
			if b, _ := csvOf(t, c); a != b {
				t.Fatalf("%s/%s: two runs with one seed differ", proto, dep)
			}
			if res.JoinedPeers != 10 || res.LiveMembers != 20 {
				t.Fatalf("%s/%s: %d joined, %d live; want 10 and 20", proto, dep, res.JoinedPeers, res.LiveMembers)
			}
			if res.FinalAccuracy < base.FinalAccuracy-0.05 {
				t.Errorf("%s/%s: accuracy %.4f after turnover, static %.4f", proto, dep, res.FinalAccuracy, base.FinalAccuracy)
			}
			if proto == "pushsum" {
				sum, n := res.PushSumWeightSum, float64(res.LiveMembers)
				if dep == DepartLeave && math.Abs(sum-n) > 0.01*n {
					t.Errorf("pushsum/leave: weights over %v live members sum to %v", n, sum)
				}
				all := float64(c.Peers + res.JoinedPeers)
				if dep == DepartDie && math.Abs(sum+res.PushSumWeightDead-all) > 0.01*all {
					t.Errorf("pushsum/die: live weights %v and dead %v, want %v in all", sum, res.PushSumWeightDead, all)
				}
			}
		}
	}
}

// TestTurnoverConfig: turnover is refused where it cannot apply.
func TestTurnoverConfig(t *testing.T) {
	for _, c := range []Config{
		{Settings: job.Settings{Protocol: "fedavg"}, Turnover: 0.2},
		{Settings: job.Settings{Protocol: "dpsgd"}, Turnover: 0.2, Churn: 0.1},
		{Settings: job.Settings{Protocol: "dpsgd"}, Turnover: 1.5},
		{Settings: job.Settings{Protocol: "dpsgd"}, Turnover: 0.2, Departure: "vanish"},
		{Settings: job.Settings{Protocol: "dpsgd"}, Peers: 4, Turnover: 0.1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
}
