package simulation

import (
	"math"
	"testing"
)

// TestValueCompression: fp16 and int8 shrink what every gossip protocol
// sends (bytes counted as encoded) to about a half and a quarter, learn as
// well as plain float32 on digits, and give the same results through the
// wire codec as without it.
func TestValueCompression(t *testing.T) {
	for _, proto := range []string{"randomwalk", "dpsgd", "pushsum", "adpsgd"} {
		base := Config{Peers: 8, Protocol: proto, Rounds: 30, Seed: 1, EvalPeers: 2, EvalExamples: 100, FinalEvalPeers: 8, LR: 0.5}
		_, plain := csvOf(t, base)
		if plain.BytesUncompressed != plain.Bytes {
			t.Errorf("%s: uncompressed run counts %d bytes and %d uncompressed", proto, plain.Bytes, plain.BytesUncompressed)
		}
		for _, c := range []struct {
			spec     string
			maxRatio float64
		}{{"fp16", 0.6}, {"int8", 0.4}} {
			cfg := base
			cfg.Compression = c.spec
			_, res := csvOf(t, cfg)
			ratio := float64(res.Bytes) / float64(plain.Bytes)
			if ratio > c.maxRatio || res.Messages == 0 {
				t.Errorf("%s %s: %d bytes, %.2f of float32's %d, want ≤ %.2f", proto, c.spec, res.Bytes, ratio, plain.Bytes, c.maxRatio)
			}
			if d := math.Abs(float64(res.BytesUncompressed)/float64(plain.Bytes) - 1); d > 0.01 {
				t.Errorf("%s %s: %d bytes uncompressed, the float32 run sent %d", proto, c.spec, res.BytesUncompressed, plain.Bytes)
			}
			if math.Abs(res.FinalAccuracy-plain.FinalAccuracy) > 0.02 {
				t.Errorf("%s %s: accuracy %.4f, float32 %.4f", proto, c.spec, res.FinalAccuracy, plain.FinalAccuracy)
			}
			cfg.Codec = true
			_, wire := csvOf(t, cfg)
			if wire.FinalAccuracy != res.FinalAccuracy || wire.Bytes != res.Bytes {
				t.Errorf("%s %s: through the codec %.4f / %d bytes, without %.4f / %d", proto, c.spec, wire.FinalAccuracy, wire.Bytes, res.FinalAccuracy, res.Bytes)
			}
		}
	}
}
