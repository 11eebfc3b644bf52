package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/internal/cli"
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

func runPrivacyEpsilon(args []string, stdout, stderr io.Writer) error {
	return runAccountant("privacy epsilon", "privacy epsilon --sampling-rate Q --noise-multiplier S --steps T [--delta D] [--json]\n\nPrints the ε that T steps of DP-SGD spend and the Rényi order that gives it.", false, args, stdout, stderr)
}

func runPrivacyNoise(args []string, stdout, stderr io.Writer) error {
	return runAccountant("privacy noise", "privacy noise --target-epsilon E --sampling-rate Q --steps T [--delta D] [--json]\n\nPrints the smallest noise multiplier σ (to 1e-4 relative) whose ε stays within E.", true, args, stdout, stderr)
}

// runAccountant is `privacy epsilon`, or with target `privacy noise`.
func runAccountant(name, usage string, target bool, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet(name, usage, stderr)
	var a privacy.AccountantFlags
	a.Register(fs, target)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := a.Check(name); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	acc, err := a.Account()
	switch {
	case err != nil:
		return err
	case a.JSON:
		return json.NewEncoder(stdout).Encode(acc)
	case target:
		fmt.Fprintf(stdout, "σ = %.5g gives ε = %.6g at δ = %g (Rényi order %g)\n", acc.NoiseMultiplier, acc.Epsilon, acc.Delta, acc.Order)
	default:
		fmt.Fprintf(stdout, "ε = %.6g at δ = %g (Rényi order %g)\n", acc.Epsilon, acc.Delta, acc.Order)
	}
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
	rep := daemon.LedgerReport(ledgers, legacy, *delta)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	rep.WriteText(stdout, *storeDir)
	return nil
}
