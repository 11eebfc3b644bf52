package gossip_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
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

// TestNoAccountsRefusesAccounts: saved accounts given to a node that
// keeps none are a configuration error, not silently dropped.
func TestNoAccountsRefusesAccounts(t *testing.T) {
	c := gossip.Config{ID: "n", Protocol: gossip.PushSum, Spec: tinySpec, Init: make([]float32, 8), Rand: rand.New(rand.NewPCG(1, 2)),
		Neighbors: []gossip.Neighbor{{ID: "m", Weight: 1}}, NoAccounts: true, Accounts: &gossip.Accounts{Weight: 1}}
	if _, err := gossip.New(c); !errors.Is(err, gossip.ErrConfig) || !strings.Contains(err.Error(), "NoAccounts") {
		t.Fatalf("New: %v, want a configuration error naming NoAccounts", err)
	}
}
