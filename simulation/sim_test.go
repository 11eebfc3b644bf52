package simulation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
)

func csvOf(t *testing.T, c Config) (string, *Result) {
	t.Helper()
	res, err := Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, res.Rows); err != nil {
		t.Fatal(err)
	}
	return b.String(), res
}

// TestDeterministic: the same scenario and seed give byte-identical
// metrics.csv, under latency, drops, churn and the wire codec; another seed
// gives other numbers.
func TestDeterministic(t *testing.T) {
	for _, proto := range []string{"randomwalk", "dpsgd", "pushsum", "sfb", "adpsgd", "fedavg"} {
		c := Config{Settings: job.Settings{Protocol: proto}, Peers: 10, Rounds: 8, Latency: "uniform:10ms:300ms", Drop: 0.05, Churn: 0.2, Codec: true, Seed: 3, EvalPeers: 4, EvalExamples: 200, FinalEvalPeers: 4}
		a, _ := csvOf(t, c)
		b, _ := csvOf(t, c)
		if a != b {
			t.Fatalf("%s: two runs with seed 3 differ:\n%s\n%s", proto, a, b)
		}
		c.Seed = 4
		if d, _ := csvOf(t, c); d == a {
			t.Fatalf("%s: seeds 3 and 4 gave identical metrics", proto)
		}
		if strings.Count(a, "\n") != 9 || !strings.HasPrefix(a, CSVHeader) {
			t.Fatalf("%s: metrics.csv:\n%s", proto, a)
		}
	}
}

// testModels are the models the protocol, compression and privacy
// tests run, a table over kinds: softmax, and a CNN preset for the 8×8
// digits. A CNN takes more minibatch steps to learn; the protocols that
// take one a round run it for more rounds.
var testModels = []testModel{
	{"softmax", 0.5, 40, 40},
	{"small-cnn", 0.5, 200, 60},
}

// trimmed reports whether the slow accuracy checks run smaller: under
// the race detector, and with -short (make kernels' passes over the
// kernel sets other than the CPU's own). make kernels runs them in full
// on the CPU's own kernel set, the one the simulator picks.
func trimmed() bool { return raceEnabled || testing.Short() }

// sweepModels are the models of the sweeps over compression codecs and
// robust aggregation rules, whose code sees a model as a vector: softmax
// alone where the tests are trimmed (their CNN runs take minutes under
// the race detector; TestEveryProtocolLearns trains the CNN under every
// protocol in every pass).
func sweepModels() []testModel {
	if trimmed() {
		return testModels[:1]
	}
	return testModels
}

// testModel is one model the tests run, with its learning rate.
type testModel struct {
	model string
	lr    float64
	// rounds for the protocols of one minibatch step a round, and for
	// those of an epoch an update (random walk, the baselines).
	stepRounds, epochRounds int
}

// roundsFor is how many rounds proto runs m for.
func roundsFor(m testModel, proto string) int {
	if proto == "randomwalk" || proto == FedAvg || proto == Centralized {
		return m.epochRounds
	}
	return m.stepRounds
}

// TestEveryProtocolLearns: on digits every protocol ends well above chance
// (0.1) after a short run, with every test model (SFB's with a CNN:
// factors for its dense layers where cheaper, the rest whole).
func TestEveryProtocolLearns(t *testing.T) {
	for _, m := range testModels {
		for _, proto := range Protocols {
			rounds := roundsFor(m, proto)
			_, res := csvOf(t, Config{Settings: job.Settings{Protocol: proto, Model: m.model, LR: m.lr}, Peers: 8, Rounds: rounds, Seed: 1, EvalPeers: 2, EvalExamples: 100, FinalEvalPeers: 8})
			if res.FinalAccuracy < 0.7 {
				t.Errorf("%s, %s: final accuracy %.3f after %d rounds", m.model, proto, res.FinalAccuracy, rounds)
			}
			if proto != Centralized && (res.Messages == 0 || res.Bytes == 0) {
				t.Errorf("%s, %s: no traffic counted", m.model, proto)
			}
		}
	}
}

// TestChurnAndNetsplit: random walk keeps learning with half the peers
// offline at any time, and a netsplit drops cross-group messages.
func TestChurnAndNetsplit(t *testing.T) {
	_, res := csvOf(t, Config{Peers: 20, Rounds: 60, Churn: 0.5, ChurnSession: 5 * time.Second, Seed: 2, EvalPeers: 4, EvalExamples: 200, FinalEvalPeers: 20})
	if res.FinalAccuracy < 0.8 || res.Dropped == 0 {
		t.Fatalf("50%% churn: accuracy %.3f, %d dropped", res.FinalAccuracy, res.Dropped)
	}
	_, split := csvOf(t, Config{Settings: job.Settings{Protocol: "dpsgd"}, Peers: 10, Rounds: 10, Netsplits: []Netsplit{{From: 2, To: 8, Groups: 2}}, Seed: 1, EvalPeers: 2, EvalExamples: 100, FinalEvalPeers: 2})
	if split.Dropped == 0 {
		t.Fatal("netsplit dropped nothing")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{
		{Settings: job.Settings{Protocol: "gossipsub"}}, {Drop: 1}, {Churn: -0.1}, {Latency: "fast"}, {Latency: "uniform:5ms"},
		{Peers: 1}, {Netsplits: []Netsplit{{From: 3, To: 1, Groups: 2}}}, {Settings: job.Settings{LR: -1}}, {FedAvgFraction: 2},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if _, err := Run(context.Background(), Config{Data: job.Data{Partition: "shards:x"}}, nil); err == nil {
		t.Error("bad partition accepted")
	}
}

// TestChurnTrace: peers listed in a trace are online only in their
// intervals; the online count in metrics.csv follows the trace.
func TestChurnTrace(t *testing.T) {
	trace, err := ParseChurnTrace([]byte("# peer start end\n0 0 3.5\n1 2 6\n1 8 20\n"), "trace")
	if err != nil {
		t.Fatal(err)
	}
	_, res := csvOf(t, Config{Peers: 5, Rounds: 10, ChurnTrace: trace, Seed: 1, EvalPeers: 2, EvalExamples: 50, FinalEvalPeers: 2})
	// Online at the end of round r (time r s): peers 2–4 always, 0 until
	// 3.5 s, 1 in [2, 6) and [8, 20).
	want := []int{4, 5, 5, 4, 4, 3, 3, 4, 4, 4}
	for i, r := range res.Rows {
		if r.Online != want[i] {
			t.Fatalf("round %d: %d online, want %d", r.Round, r.Online, want[i])
		}
	}
	// An empty trace (or one of comments) would leave every peer online:
	// silently no churn.
	for _, bad := range []string{"0 1", "x 0 1", "0 2 1", "0 -1 1", "", "# nothing\n\n"} {
		if _, err := ParseChurnTrace([]byte(bad), "trace"); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "trace: ") {
			t.Errorf("%q: %v, want ErrConfig naming the file", bad, err)
		}
	}
	if err := (&Config{Peers: 2, ChurnTrace: []Interval{{Peer: 5, End: 1}}}).Validate(); err == nil {
		t.Error("interval for peer 5 of 2 accepted")
	}
}

func TestVoting(t *testing.T) {
	_, res := csvOf(t, Config{Peers: 20, Rounds: 30, Voting: true, Seed: 1, EvalPeers: 2, EvalExamples: 100, FinalEvalPeers: 5})
	if res.FinalVotingAccuracy < 0.7 {
		t.Fatalf("voting accuracy %v", res.FinalVotingAccuracy)
	}
}

// TestCompression: subsampling and partitioning cut the bytes sent and
// random walk still learns.
func TestCompression(t *testing.T) {
	base := Config{Peers: 20, Rounds: 40, Seed: 1, EvalPeers: 2, EvalExamples: 100, FinalEvalPeers: 10, Sampling: "oracle"}
	_, full := csvOf(t, base)
	for _, c := range []struct {
		spec string
		frac float64 // expected bytes relative to full, roughly
	}{{"subsample:0.25", 0.25}, {"partition:4", 0.25}} { // subsampled coordinates are named by a seed, not listed
		cfg := base
		cfg.Compression = c.spec
		_, res := csvOf(t, cfg)
		ratio := float64(res.Bytes) / float64(full.Bytes)
		if ratio > c.frac*1.3 || ratio < c.frac*0.7 {
			t.Errorf("%s: %.2f of the full model's bytes, want about %.2f", c.spec, ratio, c.frac)
		}
		if res.FinalAccuracy < full.FinalAccuracy-0.1 {
			t.Errorf("%s: accuracy %.3f, uncompressed %.3f", c.spec, res.FinalAccuracy, full.FinalAccuracy)
		}
	}
}

// TestCodecRecyclesOnlyWhatTheCoreReleases: with Codec, every delivered
// message borrows its vectors from its encoding, and the simulator
// overwrites the encoding with NaNs once the core says it did not keep it
// (as the daemon's transport recycles receive buffers). The metrics must
// equal a run that hands the cores private copies: a core that kept a
// vector without saying so would learn from NaNs.
func TestCodecRecyclesOnlyWhatTheCoreReleases(t *testing.T) {
	for _, c := range []Config{
		{Settings: job.Settings{Protocol: "randomwalk", Variant: "mu"}},
		{Settings: job.Settings{Protocol: "randomwalk", Variant: "rw"}},
		{Settings: job.Settings{Protocol: "randomwalk", Variant: "um"}},
		{Settings: job.Settings{Protocol: "randomwalk", Compression: "subsample:0.5"}},
		{Settings: job.Settings{Protocol: "randomwalk", Compression: "partition:2"}},
		{Settings: job.Settings{Protocol: "dpsgd"}, Latency: "uniform:10ms:900ms"},
		{Settings: job.Settings{Protocol: "adpsgd"}},
		{Settings: job.Settings{Protocol: "pushsum"}},
		{Settings: job.Settings{Protocol: "sfb"}},
		{Settings: job.Settings{Protocol: "sfb", SFBMode: "factors", Staleness: 2}},
	} {
		c.Peers, c.Rounds, c.Seed, c.EvalPeers, c.EvalExamples, c.FinalEvalPeers = 8, 10, 5, 8, 200, 8
		if c.Latency == "" {
			c.Latency = "uniform:10ms:300ms" // models arrive while peers train
		}
		plain, _ := csvOf(t, c)
		c.Codec = true
		recycled, res := csvOf(t, c)
		if plain != recycled {
			t.Errorf("%s %s%s: recycling received buffers changed the run:\n%s\n%s", c.Protocol, c.Variant, c.Compression, plain, recycled)
		}
		if res.FinalAccuracy < 0.3 {
			t.Errorf("%s %s%s: final accuracy %.3f", c.Protocol, c.Variant, c.Compression, res.FinalAccuracy)
		}
	}
}

// TestReadCSVErrors: a metrics.csv that no run writes is refused naming
// the file and line, an empty one and one with no rows included (plot
// would draw nothing).
func TestReadCSVErrors(t *testing.T) {
	row := "1,2,3,4,0.5,0.25,0.75,1,0.5,2,0.1,4\n"
	for in, want := range map[string]string{
		"":                         "m.csv: empty",
		CSVHeader:                  "m.csv: no rows",
		"round,time\n" + row:       "m.csv: line 1: not a gossipd metrics.csv header",
		CSVHeader + "1,2,3\n":      "m.csv: line 2: 3 fields",
		CSVHeader + "x" + row[1:]:  "m.csv: line 2, column 1",
		CSVHeader + "-1" + row[1:]: "m.csv: line 2: round -1",
		CSVHeader + "1,2,3,4,1.5,0.25,0.75,1,0.5,2,0.1,4\n":   "m.csv: line 2: accuracy 1.5",
		CSVHeader + "1,NaN,3,4,0.5,0.25,0.75,1,0.5,2,0.1,4\n": "m.csv: line 2: time NaN",
	} {
		if _, err := ReadCSV(strings.NewReader(in), "m.csv"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", in, err, want)
		}
	}
	rows, err := ReadCSV(strings.NewReader(CSVHeader+row+row), "m.csv")
	if err != nil || len(rows) != 2 || rows[1].MaxAcc != 0.75 || rows[0].Online != 4 {
		t.Errorf("two rows: %+v, %v", rows, err)
	}
}

// TestPeerIndex checks that index inverts peerName for every peer of a
// run, above 99,999 too, and names no peer for anything else.
func TestPeerIndex(t *testing.T) {
	s := &sim{peers: make([]*simPeer, 123457)}
	for _, i := range []int{0, 1, 9, 10, 99999, 100000, 123456} {
		if got, ok := s.index(peerName(i)); !ok || got != i {
			t.Errorf("index(%q) = %d, %v; want %d", peerName(i), got, ok, i)
		}
	}
	for _, id := range []gossip.PeerID{"", "p", "p0000", "q00001", "p0000x", "p-0001", "p00001 ", "p012345", "p123457", "p999999999999999999999", "P00001"} {
		if got, ok := s.index(id); ok {
			t.Errorf("index(%q) = %d, true; want no peer", id, got)
		}
	}
}

// TestPeerNames checks that the names reservePeerNames keeps side by
// side are peerName's, past the reservation too, and that a smaller
// reservation keeps the larger table.
func TestPeerNames(t *testing.T) {
	reservePeerNames(100001)
	reservePeerNames(3)
	for _, i := range []int{0, 1, 9, 10, 99999, 100000, 100001, 123456} {
		if got, want := peerName(i), gossip.PeerID(fmt.Sprintf("p%05d", i)); got != want {
			t.Errorf("peerName(%d) = %q, want %q", i, got, want)
		}
	}
	a, b := peerName(99999), peerName(100000)
	if at, bt := uintptr(unsafe.Pointer(unsafe.StringData(string(a)))), uintptr(unsafe.Pointer(unsafe.StringData(string(b)))); bt != at+uintptr(len(a)) {
		t.Errorf("%q at %#x and %q at %#x: not side by side", a, at, b, bt)
	}
}
