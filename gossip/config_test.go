package gossip_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/merge"
)

// TestCacheDefaults: the model cache defaults to DefaultCacheSize and a
// robust rule grows it to what it needs (krum:9 needs 12 inputs: 11 cached
// models and the node's own) instead of being refused; an explicit cache
// too small for the rule is refused.
func TestCacheDefaults(t *testing.T) {
	base := func() gossip.Config {
		return gossip.Config{ID: "a", Spec: tinySpec, Init: make([]float32, 8), Rand: rand.New(rand.NewPCG(1, 1))}
	}
	c := base()
	if err := c.Validate(); err != nil || c.CacheSize != gossip.DefaultCacheSize {
		t.Fatalf("plain: cache %d, %v", c.CacheSize, err)
	}
	for _, tc := range []struct {
		agg  string
		want int
	}{{"median", 10}, {"krum:4", 10}, {"krum:9", 11}, {"trimmed:7", 14}} {
		c := base()
		c.Aggregator, _ = merge.ParseAggregator(tc.agg)
		if err := c.Validate(); err != nil || c.CacheSize != tc.want {
			t.Errorf("%s: cache %d, %v; want %d", tc.agg, c.CacheSize, err, tc.want)
		}
	}
	c = base()
	c.Aggregator, _ = merge.ParseAggregator("krum:9")
	c.CacheSize = 5
	if err := c.Validate(); !errors.Is(err, gossip.ErrConfig) {
		t.Errorf("krum:9 with a cache of 5: %v, want a config error", err)
	}
	c = base()
	c.Protocol, c.Neighbors = gossip.SFB, []gossip.Neighbor{{ID: "b"}}
	c.Aggregator, _ = merge.ParseAggregator("median")
	if err := c.Validate(); !errors.Is(err, gossip.ErrConfig) {
		t.Errorf("sfb with a robust rule: %v, want a config error", err)
	}
}
