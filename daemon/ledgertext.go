package daemon

import (
	"fmt"
	"io"
)

// WriteText prints the summary as `gossipd privacy ledger` does: each
// data's ε and its jobs' shares, then the old per-job entries; store
// names the store in the line that says it recorded nothing.
func (s LedgerSummary) WriteText(w io.Writer, store string) {
	if len(s.Data) == 0 && len(s.Legacy) == 0 {
		fmt.Fprintf(w, "%s: no DP-SGD spending recorded\n", store)
	}
	for _, d := range s.Data {
		fmt.Fprintf(w, "data %s: ε = %.6g at δ = %g after %d steps (%d jobs)\n", d.Fingerprint, d.Epsilon, d.Delta, d.Steps, len(d.Jobs))
		for _, j := range d.Jobs {
			fmt.Fprintf(w, "  job %s %-16s ε = %.6g alone, %d steps (q %.4g, σ %.4g)%s\n", j.Job[:12], j.Name, j.Epsilon, j.Steps, j.SamplingRate, j.Noise, j.Note)
		}
	}
	for _, j := range s.Legacy {
		fmt.Fprintf(w, "job %s: %d steps in the old per-job ledger (merged into its data's ledger when a daemon next starts with DP-SGD)\n", j.Job[:12], j.Steps)
	}
}
