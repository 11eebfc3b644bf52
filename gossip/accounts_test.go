package gossip_test

import (
	"slices"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
)

// TestNoAccounts: push-sum and GoSGD nodes whose shell keeps no accounts
// (Config.NoAccounts) make none, and otherwise run as the nodes that
// make them: the same models and weights.
func TestNoAccounts(t *testing.T) {
	for _, proto := range []string{gossip.PushSum, gossip.GoSGD} {
		run := func(none bool) ([][]float32, []float64, int) {
			h := newHarness(t, 5, func(i int, c *gossip.Config) {
				c.Protocol, c.LR, c.NoAccounts = proto, 0.2, none
				for k := range c.Init {
					c.Init[k] = float32(i+k) / 8
				}
				for _, k := range []int{(i + 1) % 5, (i + 2) % 5} {
					c.Neighbors = append(c.Neighbors, gossip.Neighbor{ID: name(k), Weight: 1})
				}
			})
			h.connectAll()
			h.train = zeroGrad
			h.run(6*time.Second, 250*time.Millisecond)
			var ws []float64
			for _, nd := range h.nodes {
				ws = append(ws, nd.PushSumWeight())
			}
			return h.params(), ws, h.accounts
		}
		with, ww, made := run(false)
		without, wo, none := run(true)
		if made == 0 || none != 0 {
			t.Fatalf("%s: %d accounts made by default, %d with NoAccounts (want some, none)", proto, made, none)
		}
		for i := range with {
			if !slices.Equal(with[i], without[i]) || ww[i] != wo[i] {
				t.Fatalf("%s node %d: %v (weight %v) with accounts, %v (weight %v) without", proto, i, with[i], ww[i], without[i], wo[i])
			}
		}
	}
}
