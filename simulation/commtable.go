package simulation

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
)

// CommTableConfig configures CommTable: the job every run shares, the
// accuracy to reach, and the runs.
type CommTableConfig struct {
	Dataset string // default fashion-mnist
	Model   string // default softmax
	Hidden  []int
	Peers   int    // default 100
	Rounds  int    // default 100
	Seed    uint64 // default 1
	// Target is the mean accuracy (of the evaluated peers, per round)
	// whose first crossing counts the bytes (default 0.7).
	Target float64
	Runs   []CommRun
}

// CommRun is one row: a protocol, a compression, a learning rate and,
// for D-PSGD, local steps under the outer optimizer (0: none).
type CommRun struct {
	Protocol, Compression string
	LR                    float64
	LocalSteps            int
}

// ParseCommRuns reads runs written PROTOCOL/COMPRESSION/LR[/H],
// comma-separated ("dpsgd/none/0.5,dpsgd/topk:0.01/0.5,dpsgd/none/0.5/10":
// the last with 10 local steps and the outer Nesterov step).
func ParseCommRuns(s string) ([]CommRun, error) {
	var out []CommRun
	for _, f := range strings.Split(s, ",") {
		parts := strings.Split(strings.TrimSpace(f), "/")
		if len(parts) != 3 && len(parts) != 4 {
			return nil, fmt.Errorf("%w: run %q, want PROTOCOL/COMPRESSION/LR[/H]", ErrConfig, f)
		}
		lr, err := strconv.ParseFloat(parts[2], 64)
		if err != nil || !(lr > 0) {
			return nil, fmt.Errorf("%w: run %q: learning rate %q", ErrConfig, f, parts[2])
		}
		r := CommRun{Protocol: parts[0], Compression: parts[1], LR: lr}
		if len(parts) == 4 {
			if r.LocalSteps, err = strconv.Atoi(parts[3]); err != nil || r.LocalSteps < 1 {
				return nil, fmt.Errorf("%w: run %q: local steps %q, want at least 1", ErrConfig, f, parts[3])
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func (c *CommTableConfig) defaults() {
	if c.Dataset == "" {
		c.Dataset = "fashion-mnist"
	}
	if c.Model == "" {
		c.Model = "softmax"
	}
	if c.Peers == 0 {
		c.Peers = 100
	}
	if c.Rounds == 0 {
		c.Rounds = 100
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Target == 0 {
		c.Target = 0.7
	}
}

// config is the simulation of run r.
func (c *CommTableConfig) config(r CommRun) Config {
	return Config{Settings: job.Settings{Model: c.Model, Protocol: r.Protocol, Compression: r.Compression, LR: r.LR, LocalSteps: r.LocalSteps}, Data: job.Data{Dataset: c.Dataset}, Hidden: c.Hidden, Peers: c.Peers, Rounds: c.Rounds, Seed: c.Seed, Device: "cpu"}
}

// command is the gossipd command line of run r.
func (c *CommTableConfig) command(r CommRun) string {
	cmd := fmt.Sprintf("gossipd simulate --dataset %s --model %s", c.Dataset, c.Model)
	if len(c.Hidden) > 0 {
		h := make([]string, len(c.Hidden))
		for i, v := range c.Hidden {
			h[i] = strconv.Itoa(v)
		}
		cmd += " --hidden " + strings.Join(h, ",")
	}
	cmd += fmt.Sprintf(" --peers %d --rounds %d --seed %d --protocol %s --compression %s --lr %g",
		c.Peers, c.Rounds, c.Seed, r.Protocol, r.Compression, r.LR)
	if r.LocalSteps > 0 {
		cmd += fmt.Sprintf(" --local-steps %d", r.LocalSteps)
	}
	return cmd
}

// BytesToTarget is what the network had sent when the mean accuracy
// first reached target, and the round; ok is false if it never did.
func BytesToTarget(rows []Row, target float64) (bytes uint64, round int, ok bool) {
	for _, r := range rows {
		if r.MeanAcc >= target {
			return r.Bytes, r.Round, true
		}
	}
	return 0, 0, false
}

// CommTable runs every run and returns a Markdown table: the bytes sent
// until the mean accuracy first reached the target, how many times fewer
// than the same protocol uncompressed (its "none" run, when there is
// one), the final accuracy and its difference to uncompressed, and the
// command of each row.
func CommTable(ctx context.Context, c CommTableConfig, progress func(string)) (string, error) {
	c.defaults()
	type result struct {
		bytes, total uint64
		round        int
		reached      bool
		final        float64
		refused      string // the setting does not apply to the protocol
	}
	results := make([]result, len(c.Runs))
	plain := map[string]int{} // protocol → its uncompressed run
	for i, r := range c.Runs {
		cfg := c.config(r)
		res, err := Run(ctx, cfg, nil)
		if errors.Is(err, ErrConfig) || errors.Is(err, gossip.ErrConfig) {
			// A row the protocol does not take says why, so the table
			// covers every protocol × setting.
			results[i].refused = err.Error()
			continue
		}
		if err != nil {
			return "", fmt.Errorf("%s with %s: %w", r.Protocol, r.Compression, err)
		}
		b, round, ok := BytesToTarget(res.Rows, c.Target)
		results[i] = result{bytes: b, total: res.Bytes, round: round, reached: ok, final: res.FinalAccuracy}
		if (r.Compression == "none" || r.Compression == "") && r.LocalSteps == 0 {
			if _, seen := plain[r.Protocol]; !seen {
				plain[r.Protocol] = i
			}
		}
		if progress != nil {
			progress(fmt.Sprintf("%s %s", r.Protocol, r.Compression))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| protocol | compression | local steps | lr | bytes to %.2f (round) | fewer than none | final accuracy | vs none | all bytes |\n", c.Target)
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range c.Runs {
		res := results[i]
		steps := "—"
		if r.LocalSteps > 0 {
			steps = fmt.Sprintf("%d, outer Nesterov", r.LocalSteps)
		}
		if res.refused != "" {
			fmt.Fprintf(&b, "| %s | %s | %s | %g | not available: %s | | | | |\n", r.Protocol, r.Compression, steps, r.LR, refusal(res.refused))
			continue
		}
		reach, fewer, delta := "not reached", "—", "—"
		if res.reached {
			reach = fmt.Sprintf("%s (%d)", humanBytes(res.bytes), res.round)
		}
		if p, ok := plain[r.Protocol]; ok && p != i {
			if base := results[p]; base.reached && res.reached && res.bytes > 0 {
				fewer = fmt.Sprintf("%.1f×", float64(base.bytes)/float64(res.bytes))
			}
			delta = fmt.Sprintf("%+.4f", res.final-results[p].final)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %g | %s | %s | %.4f | %s | %s |\n", r.Protocol, r.Compression, steps, r.LR, reach, fewer, res.final, delta, humanBytes(res.total))
	}
	b.WriteString("\nCommands:\n\n")
	for i, r := range c.Runs {
		if results[i].refused != "" {
			continue
		}
		fmt.Fprintf(&b, "    %s\n", c.command(r))
	}
	return b.String(), nil
}

// refusal is the reason of a refused run, without the package prefixes.
func refusal(msg string) string {
	if i := strings.LastIndex(msg, "invalid config: "); i >= 0 {
		msg = msg[i+len("invalid config: "):]
	}
	return strings.ReplaceAll(msg, "|", "/")
}

// humanBytes writes n in kB, MB or GB (powers of 1000).
func humanBytes(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
