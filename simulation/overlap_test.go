package simulation

import (
	"runtime"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/gossip"
)

// TestOverlappedUpdates: training quiet peers' updates on every core while
// other peers' events, and their own Cyclon shuffles, go on (overlap.go)
// gives byte for byte the metrics and counts of strict event order, for
// every protocol and for the random-walk options that change what an
// update's result does, and the same on one core or three.
func TestOverlappedUpdates(t *testing.T) {
	base := Config{Peers: 24, Rounds: 6, Seed: 11, EvalPeers: 5, EvalExamples: 200, FinalEvalPeers: 24}
	tokens, err := gossip.ParseTokens("2:4")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*Config){
		"randomwalk":   func(*Config) {},
		"variant rw":   func(c *Config) { c.Variant = "rw" },
		"variant um":   func(c *Config) { c.Variant = "um" },
		"tokens":       func(c *Config) { c.Tokens = tokens },
		"oracle":       func(c *Config) { c.Sampling = "oracle" },
		"int8":         func(c *Config) { c.Compression = "int8" },
		"subsample":    func(c *Config) { c.Compression = "subsample:0.5" },
		"voting":       func(c *Config) { c.Voting = true },
		"churn codec":  func(c *Config) { c.Churn, c.Drop, c.Latency, c.Codec = 0.3, 0.1, "uniform:0s:100ms", true },
		"netsplit":     func(c *Config) { c.Netsplits, c.Latency = []Netsplit{{From: 1, To: 5, Groups: 2}}, "uniform:0s:500ms" },
		"dpsgd":        func(c *Config) { c.Protocol = "dpsgd" },
		"adpsgd":       func(c *Config) { c.Protocol = "adpsgd" },
		"pushsum":      func(c *Config) { c.Protocol = "pushsum" },
		"sfb":          func(c *Config) { c.Protocol = "sfb" },
		"mlp fanout 2": func(c *Config) { c.Model, c.Hidden, c.Fanout = "mlp", []int{16}, 2 },
	}
	for name, edit := range cases {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			c := base
			edit(&c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			var aside, besides int
			afterRun = func(s *sim) { aside, besides = s.setAsides, s.besides }
			defer func() { afterRun = nil }()

			sequentialUpdates = true
			want, wantRes := csvOf(t, c)
			sequentialUpdates = false
			if aside != 0 {
				t.Fatalf("%d updates set aside in strict event order", aside)
			}
			prev := runtime.GOMAXPROCS(1)
			one, oneRes := csvOf(t, c)
			runtime.GOMAXPROCS(3)
			three, _ := csvOf(t, c)
			runtime.GOMAXPROCS(prev)
			maxAside = 2 // the oldest result handed over early, often
			few, _ := csvOf(t, c)
			maxAside = 64
			if one != want || three != want || few != want {
				t.Fatalf("overlapped updates changed the metrics:\nstrict order:\n%s\none core:\n%s\nthree cores:\n%s\ntwo set aside at most:\n%s", want, one, three, few)
			}
			if oneRes.Stats.Messages != wantRes.Stats.Messages || oneRes.Stats.Updates != wantRes.Stats.Updates ||
				oneRes.Stats.Dropped != wantRes.Stats.Dropped || oneRes.FinalAccuracy != wantRes.FinalAccuracy {
				t.Fatalf("counts differ: %+v, want %+v", oneRes.Stats, wantRes.Stats)
			}
			// Random walk's updates (without token replies owed) are set
			// aside; those of protocols that answer an update with
			// messages never are.
			quiet := c.Protocol == "" || c.Protocol == "randomwalk"
			if quiet != (aside > 0) {
				t.Fatalf("%d updates set aside", aside)
			}
			// Cyclon's shuffles went on beside them (all but oracle
			// sampling), without a change above.
			if cyclon := quiet && c.Sampling != "oracle"; cyclon != (besides > 0) {
				t.Fatalf("%d events beside a set-aside update", besides)
			}
		})
	}
}

// TestSendFromQuietUpdate: a message sent while a set-aside result is
// taken ends the run with an error naming the peer, since it would
// arrive out of order.
func TestSendFromQuietUpdate(t *testing.T) {
	s := &sim{late: "p00007"}
	w := &world{s: s}
	w.Send(&gossip.Message{Kind: gossip.KindModel, From: "p00007", To: "p00001"})
	if s.err == nil || !strings.Contains(s.err.Error(), "p00007") || !strings.Contains(s.err.Error(), "quiet") {
		t.Fatalf("err = %v", s.err)
	}
	if s.stats.Messages != 0 {
		t.Fatal("the message was counted")
	}
}
