package job

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
)

// Options apply to some jobs only. One given for a job it does not apply
// to would be silently ignored, and a comparison made with it silently
// wrong, so Check refuses it, in the daemon and the simulator alike.

// optionProtocols are the protocols that use each protocol option, by
// its flag's name.
var optionProtocols = map[string][]string{
	"topology":   slices.DeleteFunc(slices.Clone(gossip.Protocols), func(p string) bool { return !gossip.NeedsTopology(p) }),
	"variant":    {gossip.RandomWalk},
	"sampling":   {gossip.RandomWalk, gossip.GoSGD},
	"tokens":     {gossip.RandomWalk},
	"voting":     {gossip.RandomWalk},
	"staleness":  {gossip.SFB},
	"sfb-mode":   {gossip.SFB},
	"fanout":     {gossip.SFB, gossip.PushSum},
	"aggregator": {gossip.RandomWalk, gossip.DPSGD, gossip.PushSum},
}

// OptionProtocols returns the protocols that use option and their names
// in words ("dpsgd, adpsgd and pushsum"); none for an option the table
// does not scope.
func OptionProtocols(option string) (protocols []string, words string) {
	ps := slices.Clone(optionProtocols[option])
	switch n := len(ps); n {
	case 0:
	case 1:
		words = ps[0]
	default:
		words = strings.Join(ps[:n-1], ", ") + " and " + ps[n-1]
	}
	return ps, words
}

// Shape is what decides which options apply to a job.
type Shape struct {
	Protocol, Model, Outer string
	Compression            string
	Sampling               string
	LocalSteps             int
	DP                     bool // DP-SGD on
	Secure                 bool // secure aggregation on
}

// Shape is the settings' shape.
func (s *Settings) Shape() Shape {
	return Shape{Protocol: s.Protocol, Model: s.Model, Outer: s.Outer, LocalSteps: s.LocalSteps, DP: s.DP.Enabled(),
		Compression: s.Compression, Sampling: s.Sampling, Secure: s.SecureAggregation}
}

// Shape is the spec's shape (DP-SGD is each peer's own: dp says).
func (j Spec) Shape(dp bool) Shape {
	s := Shape{Protocol: j.Protocol, Model: j.Model.Kind, DP: dp, Compression: j.Compression, Sampling: j.CoreSampling(), Secure: j.SecureAggregation}
	if j.Outer != nil {
		s.Outer, s.LocalSteps = j.Outer.Method, j.Outer.Steps
	}
	return s
}

// Scope says which jobs an option applies to; To says so in words.
type Scope struct {
	Applies func(Shape) bool
	To      string
}

// ProtocolScope scopes an option to the protocols that use it
// (OptionProtocols), note added to their names.
func ProtocolScope(name, note string) Scope {
	ps, words := OptionProtocols(name)
	return Scope{func(s Shape) bool { return slices.Contains(ps, s.Protocol) }, words + note}
}

// IsGossip says whether s runs a gossip protocol (not one of the
// simulator's baselines).
func IsGossip(s Shape) bool { return slices.Contains(gossip.Protocols, s.Protocol) }

func nesterov(s Shape) bool { return IsGossip(s) && s.LocalSteps > 0 && s.Outer != gossip.OuterAverage }

// compressionApplies: value compression to every gossip protocol,
// subsampling and partitioning to random walk, top-k and rand-k to the
// averaging protocols (CHOCO gossip) and SFB (error feedback).
func compressionApplies(s Shape) bool {
	comp, err := gossip.ParseCompression(s.Compression)
	switch {
	case err != nil:
		return s.Protocol == gossip.RandomWalk
	case comp.Sparse.Kind != 0:
		return s.Protocol != gossip.RandomWalk && s.Protocol != gossip.GoSGD && IsGossip(s)
	case comp.Subsample > 0 || comp.Partitions > 0:
		return s.Protocol == gossip.RandomWalk
	}
	return IsGossip(s)
}

func dp(s Shape) bool { return s.DP }

// Scopes are the scopes of the job's options.
var Scopes = map[string]Scope{
	"hidden":      {func(s Shape) bool { return s.Model == model.MLP }, "--model mlp"},
	"input-shape": {func(s Shape) bool { return model.IsLayered(s.Model) }, "a layered --model (a preset such as lenet5, or layers)"},
	"topology": {func(s Shape) bool {
		return slices.Contains(optionProtocols["topology"], s.Protocol) && s.Sampling != gossip.SamplingHyParView
	}, "dpsgd, adpsgd and pushsum (not under --sampling hyparview, where they mix with the active view)"},
	"variant":     ProtocolScope("variant", ""),
	"staleness":   ProtocolScope("staleness", ""),
	"sfb-mode":    ProtocolScope("sfb-mode", ""),
	"aggregator":  ProtocolScope("aggregator", ""),
	"compression": {compressionApplies, "the gossip protocols (fp16, int8), dpsgd, adpsgd, pushsum and sfb (topk:F, randk:F) or randomwalk (subsample:S, partition:P)"},
	"local-steps": {IsGossip, "the gossip protocols (an outer optimizer over local SGD)"},
	"tokens":      ProtocolScope("tokens", ""),
	"sampling": {func(s Shape) bool {
		return s.Protocol == gossip.RandomWalk || s.Protocol == gossip.GoSGD ||
			(s.Protocol == gossip.DPSGD || s.Protocol == gossip.ADPSGD || s.Protocol == gossip.PushSum) && s.Sampling == gossip.SamplingHyParView
	}, "randomwalk and gosgd (cyclon, hyparview and, in simulate, oracle), and to dpsgd, adpsgd and pushsum as hyparview (they mix with the active view)"},
	"local-epochs": {func(s Shape) bool {
		return s.Protocol == "fedavg" || s.Protocol == gossip.RandomWalk && s.LocalSteps == 0
	}, "randomwalk without --local-steps, and fedavg (the others take one minibatch step per round)"},
	"outer":          {func(s Shape) bool { return IsGossip(s) && s.LocalSteps > 0 }, "--local-steps"},
	"outer-lr":       {nesterov, "--local-steps with --outer nesterov"},
	"outer-momentum": {nesterov, "--local-steps with --outer nesterov"},
	"secure-aggregation": {func(s Shape) bool { return gossip.SecureRefusal(s.Protocol) == "" },
		"dpsgd (random walk moves one whole model, push-sum and gosgd send each share to one peer, AD-PSGD averages pairs and SFB broadcasts: none has a sum of several senders to hide a model in)"},
	"round-timeout": {func(s Shape) bool { return s.Protocol == gossip.DPSGD || s.Protocol == gossip.SFB },
		"dpsgd and sfb (their rounds wait for the neighbours)"},
	"secure-threshold": {func(s Shape) bool { return gossip.SecureRefusal(s.Protocol) == "" }, "dpsgd with --secure-aggregation"},
	"dp-delta":         {dp, "DP-SGD (--dp-clip and --dp-noise)"},
	"dp-distributed":   {func(s Shape) bool { return s.DP && s.Secure }, "DP-SGD (--dp-clip, --dp-noise) with --secure-aggregation"},
	"dp-colluders":     {func(s Shape) bool { return s.DP && s.Secure }, "--dp-distributed"},
	"dp-epsilon":       {dp, "DP-SGD (--dp-clip and --dp-noise)"},
}

// Check refuses the options named in set (flag names) that do not apply
// to a job of shape s (Scopes), each named with what it applies to.
func Check(set []string, s Shape) error {
	var bad []string
	for _, name := range set {
		sc, ok := Scopes[name]
		if ok && !sc.Applies(s) {
			bad = append(bad, fmt.Sprintf("--%s applies to %s, not to this run (protocol %s, model %s)", name, sc.To, s.Protocol, s.Model))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return nil
}
