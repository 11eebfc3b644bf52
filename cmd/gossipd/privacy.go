package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/privacy"
)

// runPrivacy dispatches `gossipd privacy epsilon|noise`.
func runPrivacy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cli.DispatchSub("privacy", []cli.Subcommand{
		{Name: "epsilon", Summary: "ε spent by DP-SGD (sampled Gaussian mechanism, RDP accountant, Balle et al. 2020 conversion)", Run: runPrivacyEpsilon},
		{Name: "noise", Summary: "the smallest noise multiplier that keeps ε within a budget", Run: runPrivacyNoise},
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
