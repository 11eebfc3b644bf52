package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/gossipd/gossipd/simulation"
)

// runRobustness runs the robustness grid: for D-PSGD, random walk and
// push-sum, each aggregator, clean and under each attack with 10% and 20%
// attackers, and writes the tables.
func runRobustness(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("robustness", "robustness [flags]\n\nSimulates D-PSGD, random walk and push-sum with each aggregator (mean,\nmedian, trimmed mean, Krum, clipped gossip), clean and under every attack\nwith 10% and 20% Byzantine peers, and writes Markdown tables of the honest\npeers' final accuracy.", stderr)
	out := fs.String("out", "-", "Markdown file to write ('-' for stdout)")
	dataset := fs.String("dataset", "digits", "dataset")
	peers := fs.Int("peers", 20, "peers")
	rounds := fs.Int("rounds", 100, "rounds")
	topology := fs.String("topology", "complete", "D-PSGD topology")
	protocols := fs.String("protocols", "dpsgd,randomwalk,pushsum", "protocols, comma-separated")
	lr := fs.Float64("lr", 0.5, "learning rate")
	seed := fs.Uint64("seed", 1, "seed")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fractions := []float64{0.1, 0.2}
	run := func(proto, agg, attack string, frac float64) (float64, error) {
		c := simulation.Config{Peers: *peers, Protocol: proto, Dataset: *dataset, Rounds: *rounds, LR: *lr,
			Seed: *seed, Aggregator: agg, Attack: attack, Byzantine: frac, EvalEvery: *rounds, FinalEvalPeers: 0}
		if proto == "dpsgd" {
			c.Topology = *topology
		}
		res, err := simulation.Run(ctx, c, nil)
		if err != nil {
			return 0, fmt.Errorf("%s: %s under %s at %g: %w", proto, agg, attack, frac, err)
		}
		return res.FinalAccuracy, nil
	}
	// Trimmed mean and Krum are told the number of attackers they must
	// tolerate: that of the 20% runs.
	f := int(math.Round(0.2 * float64(*peers)))
	aggs := []string{"mean", "median", fmt.Sprintf("trimmed:%d", f), fmt.Sprintf("krum:%d", f), "clipped"}
	start := time.Now()
	var b strings.Builder
	for _, proto := range splitList(*protocols) {
		switch proto {
		case "dpsgd":
			fmt.Fprintf(&b, "## D-PSGD, %s graph\n\nEach peer aggregates its own parameters and its neighbours' every round.\n\n", *topology)
		case "randomwalk":
			fmt.Fprintf(&b, "## Random walk (MU)\n\nThe mean row is gossip learning's age-weighted merge of the received model; a robust rule instead combines the peer's model with the last %d models it received (its cache).\n\n", max(2*f, 8))
		case "pushsum":
			fmt.Fprintf(&b, "## Push-sum (exponential graph)\n\nThe mean row is push-sum's weighted sum; a robust rule instead combines the peer's de-biased estimate with the last %d de-biased models it received, once per round, while weights flow as in push-sum.\n\n", max(2*f, 8))
		default:
			return fmt.Errorf("%w: --protocols: %q, want dpsgd, randomwalk or pushsum", errUsage, proto)
		}
		fmt.Fprintf(&b, "| aggregator | clean |")
		for _, a := range simulation.Attacks {
			for _, fr := range fractions {
				fmt.Fprintf(&b, " %s %d%% |", a, int(fr*100))
			}
		}
		b.WriteString("\n|---|---|")
		b.WriteString(strings.Repeat("---|", len(simulation.Attacks)*len(fractions)))
		b.WriteString("\n")
		for _, agg := range aggs {
			clean, err := run(proto, agg, "", 0)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "| %s | %.4f |", agg, clean)
			for _, a := range simulation.Attacks {
				for _, fr := range fractions {
					acc, err := run(proto, agg, a, fr)
					if err != nil {
						return err
					}
					fmt.Fprintf(&b, " %.4f |", acc)
				}
			}
			b.WriteString("\n")
			fmt.Fprintf(stderr, "%s %s done (%s)\n", proto, agg, time.Since(start).Round(time.Second))
		}
		b.WriteString("\n")
	}
	cmd := fmt.Sprintf("gossipd robustness --dataset %s --peers %d --rounds %d --topology %s --protocols %s --lr %g --seed %d", *dataset, *peers, *rounds, *topology, *protocols, *lr, *seed)
	text := "# Robustness\n\n" + robustnessLegend + fmt.Sprintf("Honest peers' mean final test accuracy, %d peers, %s, %d rounds, lr %g, seed %d;\ntrimmed mean and Krum tolerate %d attackers. Produced by `%s` (%s).\n\n%s",
		*peers, *dataset, *rounds, *lr, *seed, f, cmd, time.Since(start).Round(time.Second), b.String())
	if *out == "-" {
		_, err := io.WriteString(stdout, text)
		return err
	}
	return os.WriteFile(*out, []byte(text), 0o644)
}

const robustnessLegend = `Byzantine peers (chosen by the seed) train like the others but send, in
every message: **bitflip** −x; **gaussian** N(0, 1) noise; **ipm** −0.1·μ
(μ the honest peers' mean); **alie** μ − z·σ per coordinate (z from the
numbers of peers and attackers); **labelflip** peers send honestly but train
on labels 9 − y. ipm and alie are omniscient (the simulator gives them the
honest parameters). Aggregators (merge/, ` + "`--aggregator`" + `): the
Metropolis–Hastings weighted **mean**; coordinate-wise **median**;
**trimmed** mean dropping f largest and f smallest per coordinate; **krum**
(f); **clipped** gossip with τ the median neighbour distance. The whole
table is regenerated by the command below (` + "`make robustness`" + `).

`
