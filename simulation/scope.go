package simulation

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
)

// Options apply to some runs only. One given for a run it does not apply
// to would be silently ignored, and a comparison made with it silently
// wrong, so CheckOptions refuses it.

// scope says which runs one of the simulator's own options (named as
// `gossipd simulate` spells its flag) applies to; the job's options are
// scoped by job.Scopes.
type scope struct {
	applies func(c *Config) bool
	to      string // "… applies to TO"
}

// protocolOption scopes an option to the protocols that use it
// (job.OptionProtocols), note added to their names.
func protocolOption(name, note string) scope {
	ps, words := job.OptionProtocols(name)
	return scope{func(c *Config) bool { return slices.Contains(ps, c.Protocol) }, words + note}
}

func isGossip(c *Config) bool { return slices.Contains(gossip.Protocols, c.Protocol) }

// shape is what decides which of the job's options apply to c.
func (c *Config) shape() job.Shape { return c.Settings.Shape() }

var scopes = map[string]scope{
	"voting":           protocolOption("voting", ""),
	"fanout":           protocolOption("fanout", ""),
	"fedavg-fraction":  {func(c *Config) bool { return c.Protocol == FedAvg }, "fedavg"},
	"jitter":           {isGossip, "the gossip protocols"},
	"codec":            {isGossip, "the gossip protocols: the baselines send no messages"},
	"churn-session":    {func(c *Config) bool { return c.Churn > 0 }, "--churn"},
	"departure":        {func(c *Config) bool { return c.Turnover > 0 }, "--turnover"},
	"member-timeout":   {func(c *Config) bool { return c.Turnover > 0 && c.Departure == DepartDie }, "--turnover with --departure die"},
	"latency":          {isGossip, networkModels},
	"bandwidth":        {isGossip, networkModels},
	"drop":             {isGossip, networkModels},
	"churn":            {isGossip, networkModels},
	"churn-trace":      {isGossip, networkModels},
	"netsplit":         {isGossip, networkModels},
	"peer-batch":       {isGossip, "the gossip protocols: the baselines train one model at a time"},
	"compute":          {isGossip, "the gossip protocols: the baselines do not model compute time"},
	"compute-trace":    {isGossip, "the gossip protocols: the baselines do not model compute time"},
	"final-eval-peers": {func(c *Config) bool { return c.Protocol != Centralized }, "runs of many models (centralized trains one)"},
	"eval-peers":       {func(c *Config) bool { return c.Protocol != Centralized }, "runs of many models (centralized trains one)"},
}

// networkModels is where the network model applies.
const networkModels = "the gossip protocols: the baselines (fedavg, allreduce, centralized) do not model the network, so a comparison under it would be wrong"

// CheckOptions refuses the options named in set (flag names, as `gossipd
// simulate` and scenario files spell them) that do not apply to c, and a
// network model set for a baseline whichever way it was set. Call it
// after Validate.
func (c *Config) CheckOptions(set []string) error {
	var bad []string
	var jobSet []string
	for _, name := range set {
		s, ok := scopes[name]
		switch {
		case !ok:
			jobSet = append(jobSet, name)
		case !s.applies(c):
			to, why, _ := strings.Cut(s.to, ": ")
			msg := fmt.Sprintf("--%s applies to %s, not to this run (protocol %s, model %s)", name, to, c.Protocol, c.Model)
			if why != "" {
				msg += ": " + why
			}
			bad = append(bad, msg)
		}
	}
	if err := job.Check(jobSet, c.shape()); err != nil {
		bad = append(bad, err.Error())
	}
	if len(bad) == 0 && !isGossip(c) {
		var net []string
		if c.Latency != "" && c.Latency != "0" {
			net = append(net, "latency")
		}
		if c.Bandwidth > 0 {
			net = append(net, "bandwidth")
		}
		if c.Drop > 0 {
			net = append(net, "drop")
		}
		if c.Churn > 0 || len(c.ChurnTrace) > 0 {
			net = append(net, "churn")
		}
		if len(c.Netsplits) > 0 {
			net = append(net, "netsplits")
		}
		if (c.Compute != "" && c.Compute != "0") || len(c.ComputeTrace) > 0 {
			net = append(net, "compute speeds")
		}
		if len(net) > 0 {
			bad = append(bad, fmt.Sprintf("%s: set for the %s baseline, which does not model them; the network model applies to %s", strings.Join(net, ", "), c.Protocol, networkModels))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(bad, "; "))
	}
	return nil
}
