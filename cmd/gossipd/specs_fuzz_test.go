package main

import (
	"math/rand/v2"
	"testing"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/device"
	"github.com/gossipd/gossipd/simulation"
)

// FuzzFlagSpecs: every parser of a flag's spec (--hidden, --memory-limit,
// --aggregator, --tokens, --compression, --device, --topology,
// --partition, --netsplit, --shard, --runs) takes any string without a
// panic, and what it accepts is usable: positive widths and sizes, a
// shard inside its count, a topology with the nodes asked for, a
// partition of a small dataset that covers no node twice.
func FuzzFlagSpecs(f *testing.F) {
	for _, s := range []string{"128,64", "64MiB", "trimmed:2", "krum:1", "clipped", "2:1", "topk:0.01:0.9",
		"subsample:0.25+int8", "cuda:1", "regular:3", "dirichlet:0.5", "shards:2", "sample:3", "2-5:2", "1/4",
		"dpsgd/topk:0.01/0.5", "", ":", "-1", "1e400"} {
		f.Add(s)
	}
	ds := &dataset.Dataset{N: 12, D: 1, Classes: 3, X: make([]float32, 12), Y: []int32{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 64 {
			return
		}
		if h, err := model.ParseHidden(s); err == nil {
			for _, w := range h {
				if w <= 0 {
					t.Fatalf("--hidden %q: width %d", s, w)
				}
			}
		}
		if n, err := cli.ParseBytes(s); err == nil && n < 0 {
			t.Fatalf("--memory-limit %q: %d bytes", s, n)
		}
		merge.ParseAggregator(s)
		gossip.ParseTokens(s)
		gossip.ParseCompression(s)
		compress.Parse(s)
		device.Parse(s)
		if i, n, err := dataset.ParseShard(s); err == nil && !(i >= 0 && i < n) {
			t.Fatalf("--shard %q: %d of %d", s, i, n)
		}
		simulation.ParseNetsplits(s)
		simulation.ParseCommRuns(s)
		ok := gossip.CheckTopology(s, 8) == nil
		g, err := gossip.ParseTopology(s, 8, rand.New(rand.NewPCG(1, 2)))
		if (err == nil) != ok {
			t.Fatalf("--topology %q: CheckTopology ok %v, ParseTopology %v", s, ok, err)
		}
		if err == nil && (g.N != 8 || len(g.Out) != 8) {
			t.Fatalf("--topology %q: %d nodes of 8", s, g.N)
		}
		if p, err := dataset.ParsePartitioner(s); err == nil {
			parts, err := p.Partition(ds, 3, 1)
			if err == nil && len(parts) != 3 {
				t.Fatalf("--partition %q: %d parts of 3", s, len(parts))
			}
		}
	})
}
