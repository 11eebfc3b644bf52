package simulation

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/privacy"
)

// TestCheckOptions: every scoped option applies to some run and not to
// another; a network model set on a baseline is refused however it was
// set.
func TestCheckOptions(t *testing.T) {
	models := []string{"softmax", "mlp"}
	for name, s := range scopes {
		var yes, no bool
		for _, p := range Protocols {
			for _, m := range models {
				for _, churn := range []float64{0, 0.1} {
					for _, dep := range []string{"", DepartLeave, DepartDie} {
						for _, steps := range []int{0, 5} {
							for _, dp := range []privacy.Config{{}, {Clip: 1, Noise: 1}} {
								c := Config{Settings: job.Settings{Protocol: p, Model: m, LocalSteps: steps, DP: dp}, Churn: churn, Departure: dep}
								if dep != "" {
									c.Turnover = 0.1
								}
								if s.applies(&c) {
									yes = true
								} else {
									no = true
								}
							}
						}
					}
				}
			}
		}
		if !yes || !no {
			t.Errorf("--%s: applies to some run %v, to none %v; a scope must split the runs", name, yes, !no)
		}
	}
	for _, p := range []string{FedAvg, AllReduce, Centralized} {
		for _, c := range []Config{{Drop: 0.5}, {Latency: "2s"}, {Bandwidth: 1e6}, {Churn: 0.5}, {Netsplits: []Netsplit{{1, 2, 2}}}, {ChurnTrace: []Interval{{0, 0, 1}}}} {
			c.Protocol, c.Model = p, "softmax"
			if err := c.CheckOptions(nil); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "does not model") {
				t.Errorf("%s with %+v: %v", p, c, err)
			}
		}
	}
	for _, p := range gossip.Protocols {
		c := Config{Settings: job.Settings{Protocol: p, Model: "softmax"}, Drop: 0.5, Latency: "2s", Churn: 0.2}
		if err := c.CheckOptions([]string{"drop", "latency", "churn", "churn-session", "seed"}); err != nil {
			t.Errorf("%s under a network model: %v", p, err)
		}
	}
	outer := Config{Settings: job.Settings{Protocol: gossip.DPSGD, Model: "softmax", Outer: "average"}}
	if err := outer.CheckOptions([]string{"outer"}); err == nil || !strings.Contains(err.Error(), "--outer applies to --local-steps") {
		t.Errorf("--outer without --local-steps: %v", err)
	}
	outer.LocalSteps = 5
	if err := outer.CheckOptions([]string{"outer", "local-steps", "outer-lr"}); err == nil || !strings.Contains(err.Error(), "--outer-lr") || strings.Contains(err.Error(), "--outer applies") {
		t.Errorf("--outer average with --outer-lr: %v", err)
	}
	c := Config{Settings: job.Settings{Protocol: gossip.RandomWalk, Model: "softmax"}}
	err := c.CheckOptions([]string{"topology", "hidden", "peers"})
	if err == nil || !strings.Contains(err.Error(), "--topology") || !strings.Contains(err.Error(), "--hidden") || strings.Contains(err.Error(), "--peers") {
		t.Errorf("randomwalk softmax with --topology --hidden: %v", err)
	}
	if !slices.Contains(Protocols, FedAvg) {
		t.Fatal("no fedavg")
	}
}
