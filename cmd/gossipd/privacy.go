package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/node"
	"github.com/gossipd/gossipd/privacy"
)

// runPrivacy dispatches `gossipd privacy epsilon|noise|ledger`.
func runPrivacy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cli.DispatchSub("privacy", []cli.Subcommand{
		{Name: "epsilon", Summary: "ε spent by DP-SGD (sampled Gaussian mechanism, RDP accountant, Balle et al. 2020 conversion)", Run: runPrivacyEpsilon},
		{Name: "noise", Summary: "the smallest noise multiplier that keeps ε within a budget", Run: runPrivacyNoise},
		{Name: "ledger", Summary: "ε a store's data has spent, per dataset and per job", Run: runPrivacyLedger},
	}, args, stdout, stderr)
}

type accountantFlags struct {
	q, delta float64
	steps    int
	json     bool
}

func (a *accountantFlags) declare(fs *flag.FlagSet) {
	fs.Float64Var(&a.q, "sampling-rate", 0, "Poisson sampling rate q: lot size / dataset size (required)")
	fs.IntVar(&a.steps, "steps", 0, "DP-SGD steps (required)")
	fs.Float64Var(&a.delta, "delta", 1e-5, "δ of the (ε, δ) guarantee")
	fs.BoolVar(&a.json, "json", false, "print JSON")
}

func (a *accountantFlags) check(fs *flag.FlagSet) error {
	if !(a.q > 0 && a.q <= 1) {
		return fmt.Errorf("%w: %s: --sampling-rate %v, want (0, 1]", errUsage, fs.Name(), a.q)
	}
	if a.steps < 1 {
		return fmt.Errorf("%w: %s: --steps %d, want ≥ 1", errUsage, fs.Name(), a.steps)
	}
	if !(a.delta > 0 && a.delta < 1) {
		return fmt.Errorf("%w: %s: --delta %v, want (0, 1)", errUsage, fs.Name(), a.delta)
	}
	return nil
}

func runPrivacyEpsilon(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("privacy epsilon", "privacy epsilon --sampling-rate Q --noise-multiplier S --steps T [--delta D] [--json]\n\nPrints the ε that T steps of DP-SGD spend and the Rényi order that gives it.", stderr)
	var a accountantFlags
	a.declare(fs)
	sigma := fs.Float64("noise-multiplier", 0, "noise multiplier σ: noise std / clipping norm (required)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := a.check(fs); err != nil {
		return err
	}
	if !(*sigma > 0) {
		return fmt.Errorf("%w: privacy epsilon: --noise-multiplier %v, want > 0", errUsage, *sigma)
	}
	eps, order, err := privacy.SpentEpsilon(a.q, *sigma, a.steps, a.delta)
	if err != nil {
		return err
	}
	if a.json {
		return json.NewEncoder(stdout).Encode(map[string]any{"epsilon": eps, "order": order, "delta": a.delta,
			"sampling_rate": a.q, "noise_multiplier": *sigma, "steps": a.steps})
	}
	fmt.Fprintf(stdout, "ε = %.6g at δ = %g (Rényi order %g)\n", eps, a.delta, order)
	return nil
}

func runPrivacyNoise(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("privacy noise", "privacy noise --target-epsilon E --sampling-rate Q --steps T [--delta D] [--json]\n\nPrints the smallest noise multiplier σ (to 1e-4 relative) whose ε stays within E.", stderr)
	var a accountantFlags
	a.declare(fs)
	target := fs.Float64("target-epsilon", 0, "the privacy budget ε (required)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := a.check(fs); err != nil {
		return err
	}
	if !(*target > 0) {
		return fmt.Errorf("%w: privacy noise: --target-epsilon %v, want > 0", errUsage, *target)
	}
	sigma, err := privacy.NoiseFor(*target, a.q, a.steps, a.delta)
	if err != nil {
		return err
	}
	eps, order, err := privacy.SpentEpsilon(a.q, sigma, a.steps, a.delta)
	if err != nil {
		return err
	}
	if a.json {
		return json.NewEncoder(stdout).Encode(map[string]any{"noise_multiplier": sigma, "epsilon": eps, "order": order,
			"delta": a.delta, "sampling_rate": a.q, "steps": a.steps})
	}
	fmt.Fprintf(stdout, "σ = %.5g gives ε = %.6g at δ = %g (Rényi order %g)\n", sigma, eps, a.delta, order)
	return nil
}

func runPrivacyLedger(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("privacy ledger", "privacy ledger --store DIR [--delta D] [--json]\n\nPrints the privacy ledger of a (stopped) daemon's store: ε spent per set of\ntraining data (its content fingerprint), across every job, and per job.", stderr)
	storeDir := fs.String("store", "gossipd-data", "the daemon's --store directory")
	delta := fs.Float64("delta", 0, "δ at which to show ε (0: the δ of each data's last run)")
	asJSON := fs.Bool("json", false, "print the ledgers as JSON")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *delta != 0 && !(*delta > 0 && *delta < 1) {
		return fmt.Errorf("%w: privacy ledger: --delta %v, want (0, 1)", errUsage, *delta)
	}
	store, err := openExistingStore("privacy ledger", *storeDir)
	if err != nil {
		return err
	}
	defer store.Close()
	ledgers, legacy, err := store.Ledgers()
	if err != nil {
		return err
	}
	rep := node.LedgerReport(ledgers, legacy, *delta)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	if len(rep.Data) == 0 && len(rep.Legacy) == 0 {
		fmt.Fprintf(stdout, "%s: no DP-SGD spending recorded\n", *storeDir)
	}
	for _, d := range rep.Data {
		fmt.Fprintf(stdout, "data %s: ε = %.6g at δ = %g after %d steps (%d jobs)\n", d.Fingerprint, d.Epsilon, d.Delta, d.Steps, len(d.Jobs))
		for _, j := range d.Jobs {
			fmt.Fprintf(stdout, "  job %s %-16s ε = %.6g alone, %d steps (q %.4g, σ %.4g)%s\n", j.Job[:12], j.Name, j.Epsilon, j.Steps, j.SamplingRate, j.Noise, j.Note)
		}
	}
	for _, j := range rep.Legacy {
		fmt.Fprintf(stdout, "job %s: %d steps in the old per-job ledger (merged into its data's ledger when a daemon next starts with DP-SGD)\n", j.Job[:12], j.Steps)
	}
	return nil
}
