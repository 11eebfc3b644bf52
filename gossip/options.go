package gossip

import (
	"slices"
	"strings"
)

// optionProtocols are the protocols that use each protocol option of a
// run, by the name the daemon's and the simulator's flags give it. Given
// for another protocol the option would be ignored, so both refuse it,
// from this one table.
var optionProtocols = map[string][]string{
	"topology":   {DPSGD, ADPSGD, PushSum},
	"variant":    {RandomWalk},
	"sampling":   {RandomWalk},
	"tokens":     {RandomWalk},
	"voting":     {RandomWalk},
	"staleness":  {SFB},
	"sfb-mode":   {SFB},
	"fanout":     {SFB, PushSum},
	"aggregator": {RandomWalk, DPSGD, PushSum},
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
