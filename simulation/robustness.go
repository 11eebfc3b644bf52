package simulation

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/merge"
)

// RobustnessConfig is the robustness experiment: every aggregator, clean
// and under every attack with 10% and 20% Byzantine peers, for each
// protocol. Zero values take the documented defaults.
type RobustnessConfig struct {
	// Protocols among dpsgd, randomwalk and pushsum (default all three).
	Protocols []string
	// Dataset (default digits), Peers (default 20), Rounds (default 100),
	// LR (default 0.5) and Seed of every run.
	Dataset string
	Peers   int
	Rounds  int
	LR      float64
	Seed    uint64
	// Topology of D-PSGD (default complete).
	Topology string
}

func (c *RobustnessConfig) defaults() {
	if len(c.Protocols) == 0 {
		c.Protocols = []string{gossip.DPSGD, gossip.RandomWalk, gossip.PushSum}
	}
	if c.Dataset == "" {
		c.Dataset = "digits"
	}
	if c.Peers == 0 {
		c.Peers = 20
	}
	if c.Rounds == 0 {
		c.Rounds = 100
	}
	if c.LR == 0 {
		c.LR = 0.5
	}
	if c.Topology == "" {
		c.Topology = "complete"
	}
}

// Tolerated is how many attackers trimmed mean and Krum are told to
// tolerate: those of the 20% runs (after defaults).
func (c RobustnessConfig) Tolerated() int {
	c.defaults()
	return int(math.Round(robustFractions[len(robustFractions)-1] * float64(c.Peers)))
}

// robustFractions are the fractions of attackers each attack is run with.
var robustFractions = []float64{0.1, 0.2}

// Robustness runs the grid and returns Markdown tables of the honest
// peers' mean final accuracy. progress, if not nil, hears of each row
// done.
func Robustness(ctx context.Context, c RobustnessConfig, progress func(string)) (string, error) {
	c.defaults()
	run := func(proto, agg, attack string, frac float64) (float64, error) {
		rc := Config{Settings: job.Settings{Protocol: proto, LR: c.LR, Aggregator: agg}, Data: job.Data{Dataset: c.Dataset}, Peers: c.Peers, Rounds: c.Rounds, Seed: c.Seed, Device: "cpu", Attack: attack, Byzantine: frac, EvalEvery: c.Rounds, FinalEvalPeers: 0}
		if proto == gossip.DPSGD {
			rc.Topology = c.Topology
		}
		res, err := Run(ctx, rc, nil)
		if err != nil {
			return 0, fmt.Errorf("%s: %s under %s at %g: %w", proto, agg, attack, frac, err)
		}
		return res.FinalAccuracy, nil
	}
	f := c.Tolerated()
	aggs := []string{"mean", "median", fmt.Sprintf("trimmed:%d", f), fmt.Sprintf("krum:%d", f), fmt.Sprintf("multikrum:%d", f), "clipped"}
	cache, err := cacheSizes(aggs[1:])
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, proto := range c.Protocols {
		switch proto {
		case gossip.DPSGD:
			fmt.Fprintf(&b, "## D-PSGD, %s graph\n\nEach peer aggregates its own parameters and its neighbours' every round.\n\n", c.Topology)
		case gossip.RandomWalk:
			fmt.Fprintf(&b, "## Random walk (MU)\n\nThe mean row is gossip learning's age-weighted merge of the received model; median, trimmed, Krum and Multi-Krum instead combine the peer's model with the last %s models it received (its cache); clipped is the age-weighted merge with the received model's pull clipped to τ, the median distance of the cached models from the peer's.\n\n", cache)
		case gossip.PushSum:
			fmt.Fprintf(&b, "## Push-sum (exponential graph)\n\nThe mean row is push-sum's weighted sum; median, trimmed, Krum and Multi-Krum instead combine the peer's de-biased estimate with the last %s de-biased models it received, once per round, while weights flow as in push-sum; clipped averages the estimate with the models received since, each pull clipped to τ, the median distance of those cached models from the estimate.\n\n", cache)
		default:
			return "", fmt.Errorf("%w: robustness: protocol %q, want dpsgd, randomwalk or pushsum", ErrConfig, proto)
		}
		fmt.Fprintf(&b, "| aggregator | clean |")
		for _, a := range Attacks {
			for _, fr := range robustFractions {
				fmt.Fprintf(&b, " %s %d%% |", a, int(fr*100))
			}
		}
		b.WriteString("\n|---|---|")
		b.WriteString(strings.Repeat("---|", len(Attacks)*len(robustFractions)))
		b.WriteString("\n")
		for _, agg := range aggs {
			clean, err := run(proto, agg, "", 0)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "| %s | %.4f |", agg, clean)
			for _, a := range Attacks {
				for _, fr := range robustFractions {
					acc, err := run(proto, agg, a, fr)
					if err != nil {
						return "", err
					}
					fmt.Fprintf(&b, " %.4f |", acc)
				}
			}
			b.WriteString("\n")
			if progress != nil {
				progress(proto + " " + agg)
			}
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// cacheSizes describes the model caches the core gives robust rules
// (gossip.Config.CacheSize): one number when they agree, else per rule.
func cacheSizes(aggs []string) (string, error) {
	var parts []string
	sizes := map[int]bool{}
	for _, a := range aggs {
		agg, err := merge.ParseAggregator(a)
		if err != nil {
			return "", err
		}
		n := gossip.CacheSizeFor(agg)
		sizes[n] = true
		parts = append(parts, fmt.Sprintf("%d (%s)", n, a))
	}
	if len(sizes) == 1 {
		for n := range sizes {
			return fmt.Sprint(n), nil
		}
	}
	return strings.Join(parts, ", "), nil
}

// RobustnessLegend explains the robustness tables.
const RobustnessLegend = `Byzantine peers (chosen by the seed) train like the others but send, in
every message: **bitflip** −x; **gaussian** N(0, 1) noise; **ipm** −0.1·μ
(μ the honest peers' mean); **alie** μ − z·σ per coordinate (z from the
numbers of peers and attackers); **labelflip** peers send honestly but train
on labels 9 − y. ipm and alie are omniscient (the simulator gives them the
honest parameters' moments, taken once per period Δ). Aggregators (merge/, ` + "`--aggregator`" + `): the
Metropolis–Hastings weighted **mean**; coordinate-wise **median**;
**trimmed** mean dropping f largest and f smallest per coordinate; **krum**
(f); **clipped** gossip with τ the median neighbour distance. The whole
table is regenerated by the command below (` + "`make robustness`" + `).

`
