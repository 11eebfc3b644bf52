package simulation

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/gossipd/gossipd/job"
)

// TurnoverTableConfig configures TurnoverTable.
type TurnoverTableConfig struct {
	// Protocols (default dpsgd, pushsum, randomwalk).
	Protocols []string
	// Dataset (default fashion-mnist), Peers (default 100), Rounds
	// (default 100), LR (default 0.1) and Seed (default 1) of every run.
	Dataset string
	Peers   int
	Rounds  int
	LR      float64
	Seed    uint64
	// Turnovers to compare with the static run (default 0.2 and 0.5).
	Turnovers []float64
}

func (c *TurnoverTableConfig) defaults() {
	if len(c.Protocols) == 0 {
		c.Protocols = []string{"dpsgd", "pushsum", "randomwalk"}
	}
	if c.Dataset == "" {
		c.Dataset = "fashion-mnist"
	}
	if c.Peers == 0 {
		c.Peers = 100
	}
	if c.Rounds == 0 {
		c.Rounds = 100
	}
	if c.LR == 0 {
		c.LR = 0.1
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if len(c.Turnovers) == 0 {
		c.Turnovers = []float64{0.2, 0.5}
	}
}

// recoverTolerance is how close to the static run's mean accuracy a run
// must come to have recovered.
const recoverTolerance = 0.01

// TurnoverTable runs each protocol with a static roster and with each
// turnover, members leaving (goodbye) or dying, and returns a Markdown
// table: final accuracy, the largest gap to the static run's mean accuracy
// while members come and go, and how many rounds after the last change
// the mean accuracy is back within 0.01 of the static run's.
func TurnoverTable(ctx context.Context, c TurnoverTableConfig, progress func(string)) (string, error) {
	c.defaults()
	run := func(proto string, turnover float64, dep string) (*Result, error) {
		rc := Config{Settings: job.Settings{Protocol: proto, LR: c.LR}, Data: job.Data{Dataset: c.Dataset}, Peers: c.Peers, Rounds: c.Rounds, Seed: c.Seed, Device: "cpu", Turnover: turnover, Departure: dep, EvalPeers: 0, FinalEvalPeers: 0}
		res, err := Run(ctx, rc, nil)
		if err != nil {
			return nil, fmt.Errorf("%s at turnover %g (%s): %w", proto, turnover, dep, err)
		}
		if progress != nil {
			progress(fmt.Sprintf("%s, turnover %g, %s", proto, turnover, dep))
		}
		return res, nil
	}
	var b strings.Builder
	b.WriteString("| protocol | turnover | members go by | final accuracy | largest gap to static | rounds to recover | push-sum Σw / live |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	first, last := int(turnoverRound(0, 2, c.Rounds)), int(turnoverRound(1, 2, c.Rounds))
	for _, proto := range c.Protocols {
		static, err := run(proto, 0, DepartLeave)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "| %s | static | — | %.4f | — | — | %s |\n", proto, static.FinalAccuracy, massCell(proto, static, c.Peers))
		for _, t := range c.Turnovers {
			for _, dep := range []string{DepartLeave, DepartDie} {
				res, err := run(proto, t, dep)
				if err != nil {
					return "", err
				}
				gap, rec := compareRuns(static.Rows, res.Rows, first, last)
				depName := map[string]string{DepartLeave: "goodbye", DepartDie: "death"}[dep]
				fmt.Fprintf(&b, "| %s | %d%% | %s | %.4f | %.4f | %s | %s |\n", proto, int(math.Round(100*t)), depName,
					res.FinalAccuracy, gap, rec, massCell(proto, res, res.LiveMembers))
			}
		}
	}
	return b.String(), nil
}

// compareRuns returns the largest gap between the static run's mean
// accuracy and the run's from round first on, and the rounds after round
// last until the run is within recoverTolerance of the static run.
func compareRuns(static, run []Row, first, last int) (float64, string) {
	gap := 0.0
	rec := "not within the run"
	found := false
	for i := range min(len(static), len(run)) {
		r := run[i].Round
		d := static[i].MeanAcc - run[i].MeanAcc
		if r >= first {
			gap = max(gap, d)
		}
		if r >= last && !found && d <= recoverTolerance {
			rec, found = fmt.Sprint(r-last), true
		}
	}
	return gap, rec
}

// massCell is push-sum's sum of weights over the live members, per member.
func massCell(proto string, res *Result, live int) string {
	if proto != "pushsum" {
		return "—"
	}
	if res.PushSumWeightSum == 0 { // a static run: every unit stays
		return "1.0000"
	}
	return fmt.Sprintf("%.4f", res.PushSumWeightSum/float64(live))
}
