package simulation

import (
	"strings"
	"testing"

	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/privacy"
)

// TestSecureAggregation: secure D-PSGD learns what plain D-PSGD learns
// (within 0.5 points; the masked sums are exact to 2⁻²⁰ per value), over
// the four exchanges per round that cost their messages, also with local
// steps and the outer optimizer; under churn it
// keeps learning and two runs agree, and over a live graph (turnover); other protocols are refused with
// the reason.
func TestSecureAggregation(t *testing.T) {
	base := Config{Settings: job.Settings{Protocol: "dpsgd", Topology: "regular:4"}, Peers: 16, Rounds: 60, Seed: 1, EvalPeers: 4, EvalExamples: 200, FinalEvalPeers: 16}
	for _, c := range []struct {
		proto, want string
		threshold   float64
		secure      bool
	}{
		{"randomwalk", "one whole model", 0, true},
		{"pushsum", "one peer at a time", 0, true},
		{"fedavg", "D-PSGD rounds only", 0, true},
		{"dpsgd", "without --secure-aggregation", 0.7, false},
	} {
		cfg := base
		cfg.Protocol, cfg.SecureAggregation, cfg.SecureThreshold = c.proto, c.secure, c.threshold
		if _, err := Run(t.Context(), cfg, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.proto, err, c.want)
		}
	}
	_, plain := csvOf(t, base)
	sec := base
	sec.SecureAggregation = true
	_, secure := csvOf(t, sec)
	t.Logf("plain %.4f (%d messages), secure %.4f (%d messages)", plain.FinalAccuracy, plain.Messages, secure.FinalAccuracy, secure.Messages)
	if d := secure.FinalAccuracy - plain.FinalAccuracy; d > 0.005 || d < -0.005 || plain.FinalAccuracy < 0.75 {
		t.Errorf("secure %.4f, plain %.4f", secure.FinalAccuracy, plain.FinalAccuracy)
	}
	if c := secure.Secure; c == nil || c.Summed < 16*55 || c.ClearWithheld != 0 || plain.Secure != nil {
		t.Errorf("secure rounds %+v (16 peers, 60 rounds), plain %+v", c, plain.Secure)
	}
	if secure.Messages < 6*plain.Messages {
		t.Errorf("%d messages with secure aggregation, %d without: the exchanges did not run", secure.Messages, plain.Messages)
	}
	if trimmed() {
		// The rest runs in make kernels: every secure round takes a
		// dozen X25519 agreements a member, minutes of pure-Go field
		// arithmetic under the race detector, on one goroutine.
		return
	}
	// Four local steps a round: the local results go out masked.
	local, localSec := base, sec
	local.LocalSteps, localSec.LocalSteps = 4, 4
	_, pl := csvOf(t, local)
	_, sl := csvOf(t, localSec)
	if d := sl.FinalAccuracy - pl.FinalAccuracy; d > 0.005 || d < -0.005 || pl.FinalAccuracy < 0.8 {
		t.Errorf("local steps: secure %.4f, plain %.4f", sl.FinalAccuracy, pl.FinalAccuracy)
	}
	churn := sec
	churn.Churn = 0.1
	a, ra := csvOf(t, churn)
	b, _ := csvOf(t, churn)
	if a != b || ra.FinalAccuracy < 0.6 {
		t.Errorf("under churn: accuracy %.4f, two runs equal: %v", ra.FinalAccuracy, a == b)
	}
	// A quarter of the members replaced: the graph is live, and both ends
	// of an edge weigh it by the degrees their round started with.
	turnover := sec
	turnover.Turnover = 0.25
	if _, rt := csvOf(t, turnover); rt.FinalAccuracy < 0.75 {
		t.Errorf("under turnover: accuracy %.4f", rt.FinalAccuracy)
	}
}

// TestDistributedDP: with distributed DP each member adds 1/M of the
// noise variance and ε is accounted at the whole noise every masked sum
// carries. Local DP at σ and distributed DP over M = 4 shares at 2σ add
// the same noise to every step (the same draws), so they learn exactly
// the same; distributed DP reports the smaller ε. Its settings are refused
// without secure aggregation or DP-SGD, and a threshold below its shares
// plus colluders makes every sender abstain: no round is summed.
func TestDistributedDP(t *testing.T) {
	base := Config{Settings: job.Settings{Protocol: "dpsgd", Topology: "regular:6", SecureAggregation: true,
		DP: privacy.Config{Clip: 1, Noise: 0.6}}, Peers: 8, Rounds: 60, Seed: 1, EvalPeers: 4, EvalExamples: 200, FinalEvalPeers: 8}
	dist := base
	dist.DPDistributed, dist.DP.Noise = 4, 2*0.6
	// regular:6 gives rounds of threshold 4 (⅔ of 6): 4 shares and a
	// colluder need 5.
	abstain := dist
	abstain.DPColluders = 1
	if _, err := Run(t.Context(), abstain, nil); err == nil || !strings.Contains(err.Error(), "threshold 5") {
		t.Errorf("4 shares and a colluder on degree 6: %v, want an error naming threshold 5", err)
	}
	for _, c := range []struct {
		mod  func(c *Config)
		want string
	}{
		{func(c *Config) { c.SecureAggregation = false }, "needs --secure-aggregation"},
		{func(c *Config) { c.DP = privacy.Config{} }, "needs --secure-aggregation and DP-SGD"},
		{func(c *Config) { c.DPDistributed = 1 }, "1 is local DP"},
		{func(c *Config) { c.DPDistributed, c.DPColluders = 0, 1 }, "without --dp-distributed"},
	} {
		cfg := dist
		c.mod(&cfg)
		if _, err := Run(t.Context(), cfg, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want an error saying %q", err, c.want)
		}
	}
	if trimmed() {
		return // two runs of secure rounds of six members take minutes under the race detector (TestSecureAggregation); make kernels runs them
	}
	_, local := csvOf(t, base)
	_, d := csvOf(t, dist)
	t.Logf("local DP: accuracy %.4f ε %.3f; distributed: accuracy %.4f ε %.3f", local.FinalAccuracy, local.DPEpsilonMax, d.FinalAccuracy, d.DPEpsilonMax)
	if d.FinalAccuracy != local.FinalAccuracy || local.FinalAccuracy < 0.5 {
		t.Errorf("the same noise per step: accuracy %.4f distributed, %.4f local", d.FinalAccuracy, local.FinalAccuracy)
	}
	if !(d.DPEpsilonMax > 0 && d.DPEpsilonMax < 0.75*local.DPEpsilonMax) {
		t.Errorf("ε %.3f distributed, %.3f local: want it well below", d.DPEpsilonMax, local.DPEpsilonMax)
	}
}
