package gossip_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/privacy/secagg"
)

// secureHarness is n nodes on a complete graph (Metropolis–Hastings
// weights 1/n; with live, the live members' complete graph, whose
// members the caller sets) running D-PSGD every delta, with secure
// aggregation if secure, each starting from its own parameters (node i:
// i + k/10), gradients zero.
func secureHarness(t *testing.T, n int, secure, live bool, delta time.Duration) *harness {
	h := newHarness(t, n, secureConfig(n, secure, live, delta))
	h.train = zeroGrad
	return h
}

// secureConfig sets node i of n up for D-PSGD with a round timeout of
// 4 s on a complete graph (fixed, or live over the members), its
// parameters i + k/10, and with secure aggregation if secure.
func secureConfig(n int, secure, live bool, delta time.Duration) func(i int, c *gossip.Config) {
	return func(i int, c *gossip.Config) {
		c.Protocol, c.RoundTimeout, c.Delta = gossip.DPSGD, 4*time.Second, delta
		if live {
			c.Topology = "complete"
		} else {
			c.SelfWeight = 1 / float64(n)
			for j := range n {
				if j != i {
					c.Neighbors = append(c.Neighbors, gossip.Neighbor{ID: name(j), Weight: 1 / float64(n)})
				}
			}
		}
		c.Init = make([]float32, 8)
		for k := range c.Init {
			c.Init[k] = float32(i) + float32(k)/10
		}
		if secure {
			var key [32]byte
			key[0] = byte(i)
			c.Secure = gossip.SecureConfig{Enabled: true, Job: "test", Rand: rand.NewChaCha8(key)}
		}
	}
}

// members names the first n nodes as live members.
func members(n int) []gossip.Member {
	ms := make([]gossip.Member, n)
	for i := range ms {
		ms[i].ID = name(i)
	}
	return ms
}

// setMembers gives every node the live members and delivers what they
// send on it.
func (h *harness) setMembers(ms []gossip.Member) {
	for i, nd := range h.nodes {
		nd.SetMembers(ms)
		h.drain(i)
	}
	h.deliver()
}

// meanOf is the mean of the nodes' initial parameters over those in
// set.
func meanOf(set []int) []float64 {
	out := make([]float64, 8)
	for _, i := range set {
		for k := range out {
			out[k] += (float64(i) + float64(k)/10) / float64(len(set))
		}
	}
	return out
}

// TestSecureRound: after one round every node holds what plain D-PSGD
// gives (the mean, on a complete graph) within the quantisation error;
// with a member's masked contributions lost, each other node averages
// over the rest (the lost member's masks removed through its shares),
// while a round that keeps fewer than the threshold averages nothing.
func TestSecureRound(t *testing.T) {
	const n = 5
	all := []int{0, 1, 2, 3, 4}
	tol := float64(n) / (2 << 20) * 5 // k terms of error 1/(2·scale) each, rescaled by 1/weight
	for _, c := range []struct {
		name string
		drop func(m *gossip.Message) bool
		want func(node int) []float64
	}{
		{"none", nil, func(int) []float64 { return meanOf(all) }},
		{"n003's contributions lost", func(m *gossip.Message) bool { return m.Kind == gossip.KindSecMasked && m.From == name(3) },
			func(node int) []float64 {
				if node == 3 {
					return meanOf(all)
				}
				return meanOf([]int{0, 1, 2, 4})
			}},
		{"n001's reveals lost", func(m *gossip.Message) bool { return m.Kind == gossip.KindSecReveal && m.From == name(1) },
			func(int) []float64 { return meanOf(all) }},
		{"three members' contributions lost", func(m *gossip.Message) bool {
			return m.Kind == gossip.KindSecMasked && m.From != name(0) && m.From != name(1)
		}, func(node int) []float64 {
			// Each receiver hears from 0 and 1 only (one of them if it is
			// one): at most 2 of its 4 dealers, below the threshold of 3,
			// so it keeps its own parameters.
			return meanOf([]int{node})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := secureHarness(t, n, true, false, time.Minute) // one round in the run
			h.drop = c.drop
			h.run(4*time.Second, 250*time.Millisecond)
			for i, p := range h.params() {
				want := c.want(i)
				for k := range p {
					if d := math.Abs(float64(p[k]) - want[k]); d > tol {
						t.Fatalf("node %d value %d: %v, want %v (±%g)", i, k, p[k], want[k], tol)
					}
				}
			}
		})
	}
	// Plain D-PSGD gives the same first round.
	h := secureHarness(t, n, false, false, time.Minute)
	h.run(4*time.Second, 250*time.Millisecond)
	for i, p := range h.params() {
		for k, v := range meanOf(all) {
			if d := math.Abs(float64(p[k]) - v); d > 1e-6 {
				t.Fatalf("plain: node %d value %d: %v, want %v", i, k, p[k], v)
			}
		}
	}
}

// TestSecureLiveTopology: over a live topology (the members' complete
// graph) each end of an edge weighs it by the degrees the round started
// with (the adverts and the roster carry them), so one round gives the
// mean, as plain D-PSGD over the same topology does.
func TestSecureLiveTopology(t *testing.T) {
	const n = 5
	for _, secure := range []bool{false, true} {
		h := secureHarness(t, n, secure, true, time.Minute)
		h.setMembers(members(n))
		h.run(4*time.Second, 250*time.Millisecond)
		want := meanOf([]int{0, 1, 2, 3, 4})
		for i, p := range h.params() {
			for k := range p {
				if d := math.Abs(float64(p[k]) - want[k]); d > 1e-4 {
					t.Fatalf("secure %v: node %d value %d: %v, want %v", secure, i, k, p[k], want[k])
				}
			}
		}
	}
}

// TestSecureRewireSendsNothingClear: n004 joins the live graph of four
// nodes while their first round waits (for n003, silent until then).
// Plain D-PSGD sends the newcomer the round's parameters; a secure node
// sends none in the clear (nor tries to: nothing withheld), and n004
// takes part from a later round on.
func TestSecureRewireSendsNothingClear(t *testing.T) {
	const n = 5
	for _, secure := range []bool{false, true} {
		h := secureHarness(t, n, secure, true, time.Second)
		ms := members(n)
		h.dead[3] = true
		for i, nd := range h.nodes {
			nd.SetMembers(ms[:4])
			h.drain(i)
		}
		h.run(time.Second, 500*time.Millisecond) // every round has begun; none has its deadline yet
		clear, withheld := 0, 0
		h.drop = func(m *gossip.Message) bool {
			if m.To == name(4) && (len(m.Params) > 0 || m.Packed != nil) {
				clear++
			}
			return false
		}
		for i, nd := range h.nodes[:4] {
			nd.SetMembers(ms)
			h.drain(i)
		}
		h.deliver()
		h.dead[3] = false
		h.run(4*time.Second, 250*time.Millisecond)
		for _, e := range h.traces {
			if e.Event == "withheld" {
				withheld++
			}
		}
		switch {
		case !secure && clear == 0:
			t.Fatal("plain D-PSGD sent the newcomer no parameters: the test cannot tell")
		case secure && clear+withheld > 0:
			t.Errorf("secure: %d messages to the newcomer with parameters in the clear, %d withheld", clear, withheld)
		}
	}
}

// TestSecureLocalSteps: with --local-steps the local result goes out
// masked once its steps are taken, and the outer step moves from the
// round's start towards the mixed results: one round on a complete
// graph gives what plain D-PSGD with the same local steps gives, within
// the quantisation error, for the outer average and Nesterov.
func TestSecureLocalSteps(t *testing.T) {
	const n = 4
	tol := float64(n) / (2 << 20) * 5
	for _, method := range []string{gossip.OuterAverage, gossip.OuterNesterov} {
		var got [2][][]float32
		for k, secure := range []bool{false, true} {
			h := newHarness(t, n, func(i int, c *gossip.Config) {
				secureConfig(n, secure, false, time.Minute)(i, c)
				c.Outer = gossip.OuterConfig{Steps: 3, Method: method}
				if method == gossip.OuterNesterov {
					c.Outer.LR, c.Outer.Momentum = 0.7, 0.9
				}
			})
			h.train = func(i int, req *gossip.TrainRequest) *gossip.TrainResult {
				p := slices.Clone(req.Params)
				for j := range p {
					p[j] += float32(i+1) / 10 // each node's local steps move it apart
				}
				return &gossip.TrainResult{ID: req.ID, Params: p, Examples: 3}
			}
			h.run(4*time.Second, 250*time.Millisecond)
			got[k] = h.params()
		}
		for i := range got[0] {
			for j := range got[0][i] {
				if d := math.Abs(float64(got[0][i][j] - got[1][i][j])); d > tol || got[0][i][j] == float32(i)+float32(j)/10 {
					t.Fatalf("%s: node %d value %d: secure %v, plain %v (±%g)", method, i, j, got[1][i][j], got[0][i][j], tol)
				}
			}
		}
	}
}

// TestSecureGolden records secure rounds in testdata/secure-dpsgd.golden
// (rewritten with -rewrite): three nodes on a triangle for 6 s (Δ 1 s,
// round timeout 4 s), the first round's messages, every secure trace
// and the final parameters; with nothing lost, then with one node's
// masked contribution to one receiver lost in the first round (that
// receiver skips the round at its deadline and the others' rounds
// meanwhile go on without it), and on 4 nodes, where 2 of a receiver's 3
// neighbours meet the threshold, with one contribution lost after its
// sender dealt: the receiver removes its masks with the survivors'
// shares and averages the other two; and with one of the 4 cut off for
// the first rounds, which waits a whole round timeout for adverts, then
// skips to the round its neighbours advertise.
func TestSecureGolden(t *testing.T) {
	var b strings.Builder
	for _, c := range []struct {
		name  string
		nodes int
		drop  func(now time.Duration, m *gossip.Message) bool
	}{
		{"nothing lost", 3, nil},
		{"n002's masked contribution to n000 lost in round 0", 3, func(_ time.Duration, m *gossip.Message) bool {
			return m.Kind == gossip.KindSecMasked && m.From == name(2) && m.To == name(0) && m.Round == 0
		}},
		{"4 nodes: n003's masked contribution to n000 lost in round 0, after it dealt (recovered)", 4, func(_ time.Duration, m *gossip.Message) bool {
			return m.Kind == gossip.KindSecMasked && m.From == name(3) && m.To == name(0) && m.Round == 0
		}},
		{"4 nodes: n003 cut off (every message to or from it lost) until 2.5 s: it skips, then catches up with its neighbours' round", 4, func(now time.Duration, m *gossip.Message) bool {
			return now < 2500*time.Millisecond && (m.From == name(3) || m.To == name(3))
		}},
	} {
		fmt.Fprintf(&b, "# %s\n", c.name)
		h := secureHarness(t, c.nodes, true, false, time.Second)
		h.drop = func(m *gossip.Message) bool {
			lost := c.drop != nil && c.drop(h.now, m)
			mark := ""
			if lost {
				mark = " (lost)"
			}
			if m.Round == 0 {
				fmt.Fprintf(&b, "%s round %d %s → %s%s\n", m.Kind, m.Round, m.From, m.To, mark)
			}
			return lost
		}
		h.run(6*time.Second, 250*time.Millisecond)
		for _, e := range h.traces {
			if strings.HasPrefix(e.Event, "secure") || e.Event == "drop" || e.Event == "catch-up" {
				fmt.Fprintf(&b, "trace %v %s %s %s\n", e.Time, e.Event, e.Peer, e.Reason)
			}
		}
		for i, p := range h.params() {
			fmt.Fprintf(&b, "%s params %.4f\n", name(i), p)
		}
	}
	const path = "testdata/secure-dpsgd.golden"
	if *rewrite {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Fatalf("secure rounds differ from %s (go test ./gossip -run TestSecureGolden -rewrite):\n%s", path, b.String())
	}
}

// TestSecureRefusals: secure aggregation is refused, with the reason,
// for the other protocols and for the settings it cannot work with; a
// secure node drops parameters sent in the clear, and a plain node
// secure-aggregation messages.
func TestSecureRefusals(t *testing.T) {
	base := func() gossip.Config {
		return gossip.Config{ID: "me", Protocol: gossip.DPSGD, Spec: tinySpec, Init: make([]float32, 8), Rand: rand.New(rand.NewPCG(1, 2)),
			Neighbors: []gossip.Neighbor{{ID: "a", Weight: 0.3}, {ID: "b", Weight: 0.3}}, SelfWeight: 0.4,
			Secure: gossip.SecureConfig{Enabled: true, Rand: rand.NewChaCha8([32]byte{})}}
	}
	for name, mod := range map[string]func(c *gossip.Config){
		"randomwalk":   func(c *gossip.Config) { c.Protocol = gossip.RandomWalk },
		"pushsum":      func(c *gossip.Config) { c.Protocol = gossip.PushSum },
		"adpsgd":       func(c *gossip.Config) { c.Protocol = gossip.ADPSGD },
		"sfb":          func(c *gossip.Config) { c.Protocol = gossip.SFB },
		"no rand":      func(c *gossip.Config) { c.Secure.Rand = nil },
		"fraction":     func(c *gossip.Config) { c.Secure.Fraction = 0.5 },
		"fp16":         func(c *gossip.Config) { c.Quantize = compress.Spec{Kind: compress.FP16} },
		"median":       func(c *gossip.Config) { c.Aggregator = merge.Median{} },
		"one neighbor": func(c *gossip.Config) { c.Neighbors = c.Neighbors[:1] },
		"hyparview":    func(c *gossip.Config) { c.Sampling = gossip.SamplingHyParView },
	} {
		c := base()
		mod(&c)
		if _, err := gossip.New(c); !errors.Is(err, gossip.ErrConfig) || !strings.Contains(err.Error(), "secure aggregation") {
			t.Errorf("%s: %v, want a config error about secure aggregation", name, err)
		}
	}
	nd, err := gossip.New(base())
	if err != nil {
		t.Fatal(err)
	}
	nd.Tick(0)
	nd.Ready()
	nd.Advance()
	nd.Step(&gossip.Message{Kind: gossip.KindParams, From: "a", Params: make([]float32, 8)})
	if rd := nd.Ready(); len(rd.Trace) == 0 || rd.Trace[0].Code != gossip.DropUnmasked {
		t.Errorf("parameters in the clear: %+v", rd.Trace)
	}
	nd.Advance()
	plain := base()
	plain.Secure = gossip.SecureConfig{}
	pn, err := gossip.New(plain)
	if err != nil {
		t.Fatal(err)
	}
	pn.Step(&gossip.Message{Kind: gossip.KindSecAdvert, From: "a", Secure: &gossip.SecureAgg{Receiver: "me"}})
	if rd := pn.Ready(); len(rd.Trace) == 0 || rd.Trace[len(rd.Trace)-1].Code != "kind" {
		t.Errorf("a secure message to a plain node: %+v", rd.Trace)
	}
}

// TestSecureAbstains: with distributed DP a sender contributes only to
// rounds whose threshold reaches its noise shares plus the colluders
// tolerated. Over a live complete graph of 5 (rosters of 4, threshold 3)
// a least threshold of 4 makes every sender abstain: no round is summed
// and every node keeps its own parameters; a least threshold of 3 sums
// every round to the mean. On a fixed graph the shortfall is a config
// error.
func TestSecureAbstains(t *testing.T) {
	const n = 5
	for _, least := range []int{3, 4} {
		h := newHarness(t, n, func(i int, c *gossip.Config) {
			secureConfig(n, true, true, time.Minute)(i, c)
			c.Secure.MinThreshold = least
		})
		h.train = zeroGrad
		h.setMembers(members(n))
		h.run(4*time.Second, 250*time.Millisecond)
		events := map[string]int{}
		for _, e := range h.traces {
			events[e.Event]++
		}
		for i, p := range h.params() {
			want := meanOf([]int{0, 1, 2, 3, 4})
			if least == 4 {
				want = meanOf([]int{i})
			}
			for k := range p {
				if d := math.Abs(float64(p[k]) - want[k]); d > 1e-4 {
					t.Fatalf("least threshold %d: node %d value %d: %v, want %v (events %v)", least, i, k, p[k], want[k], events)
				}
			}
		}
		if least == 4 && (events["secure-abstained"] == 0 || events["secure-sum"] != 0) {
			t.Errorf("least threshold 4: events %v", events)
		}
	}
	c := gossip.Config{ID: "me", Protocol: gossip.DPSGD, Spec: tinySpec, Init: make([]float32, 8), Rand: rand.New(rand.NewPCG(1, 2)),
		Neighbors: []gossip.Neighbor{{ID: "a", Weight: 0.3}, {ID: "b", Weight: 0.3}}, SelfWeight: 0.4,
		Secure: gossip.SecureConfig{Enabled: true, Rand: rand.NewChaCha8([32]byte{}), MinThreshold: 3}}
	if _, err := gossip.New(c); err == nil || !strings.Contains(err.Error(), "2 neighbours give 2") {
		t.Errorf("least threshold 3 over 2 neighbours: %v", err)
	}
}

// TestSecureUnmaskedContribution: a member that sends its contribution
// without its masks, inside a sec-masked message, is refused (code
// unmasked): the receiver treats it as a dropout, removes its masks
// with the others' shares and averages the rest; the other receivers
// average everyone.
func TestSecureUnmaskedContribution(t *testing.T) {
	const n, dim = 4, 64
	h := newHarness(t, n, func(i int, c *gossip.Config) {
		secureConfig(n, true, false, time.Minute)(i, c)
		c.Spec, c.Init = model.Spec{Kind: model.Softmax, Inputs: dim/2 - 1, Classes: 2}, make([]float32, dim)
		for k := range c.Init {
			c.Init[k] = float32(i) + float32(k)/100
		}
	})
	h.train = zeroGrad
	ring := secagg.Ring{}.WithDefaults()
	h.drop = func(m *gossip.Message) bool {
		if m.Kind == gossip.KindSecMasked && m.From == name(3) && m.To == name(0) {
			x := make([]float32, dim)
			for k := range x {
				x[k] = 3 + float32(k)/100
			}
			m.Secure.Masked = make([]uint32, dim)
			ring.Encode(m.Secure.Masked, x, 1/float64(n))
		}
		return false
	}
	h.run(4*time.Second, 250*time.Millisecond)
	refused := 0
	for _, e := range h.traces {
		if e.Event == "drop" && e.Code == gossip.DropUnmasked && e.Peer == name(3) {
			refused++
		}
	}
	if refused != 1 {
		t.Fatalf("%d unmasked contributions refused, want 1", refused)
	}
	for i, p := range h.params() {
		set := []int{0, 1, 2, 3}
		if i == 0 {
			set = []int{0, 1, 2}
		}
		for k := range p {
			want := 0.0
			for _, j := range set {
				want += (float64(j) + float64(k)/100) / float64(len(set))
			}
			if d := math.Abs(float64(p[k]) - want); d > 1e-4 {
				t.Fatalf("node %d value %d: %v, want %v", i, k, p[k], want)
			}
		}
	}
}

// TestSecureSignedAdverts: members sign their adverts with identity keys
// (Ed25519 here, as libp2p's) and check each other's signatures in the
// roster before they deal. Honest rounds sum as unsigned ones do. A
// receiver that puts fresh keys in place of one member's in its roster
// (to read the shares sealed for it) is refused by every member (code
// secure): its round is skipped, the others' rounds are not; an advert
// with its signature stripped is refused by its receiver.
func TestSecureSignedAdverts(t *testing.T) {
	const n = 4
	pubs := map[gossip.PeerID]ed25519.PublicKey{}
	privs := make([]ed25519.PrivateKey, n)
	for i := range n {
		seed := make([]byte, ed25519.SeedSize)
		seed[0] = byte(i + 1)
		privs[i] = ed25519.NewKeyFromSeed(seed)
		pubs[name(i)] = privs[i].Public().(ed25519.PublicKey)
	}
	for _, attack := range []string{"none", "swapped keys", "stripped signature"} {
		h := newHarness(t, n, func(i int, c *gossip.Config) {
			secureConfig(n, true, false, time.Minute)(i, c)
			c.Secure.Sign = func(msg []byte) ([]byte, error) { return ed25519.Sign(privs[i], msg), nil }
			c.Secure.Verify = func(signer gossip.PeerID, msg, sig []byte) error {
				if pub, ok := pubs[signer]; !ok || !ed25519.Verify(pub, msg, sig) {
					return errors.New("bad signature")
				}
				return nil
			}
		})
		h.train = zeroGrad
		h.drop = func(m *gossip.Message) bool {
			switch {
			case attack == "swapped keys" && m.Kind == gossip.KindSecRoster && m.From == name(0):
				ro := m.Secure.Roster
				ro.MaskKeys, ro.ChannelKeys = slices.Clone(ro.MaskKeys), slices.Clone(ro.ChannelKeys)
				k := slices.Index(ro.Members, name(1))
				ro.MaskKeys[k], ro.ChannelKeys[k] = make([]byte, 32), make([]byte, 32)
				ro.MaskKeys[k][0], ro.ChannelKeys[k][0] = 9, 9
				m.Secure.Roster = ro
			case attack == "stripped signature" && m.Kind == gossip.KindSecAdvert && m.From == name(1) && m.To == name(0):
				m.Secure.Advert.Sig = nil
			}
			return false
		}
		h.run(4*time.Second, 250*time.Millisecond)
		refused := map[gossip.PeerID]int{}
		for _, e := range h.traces {
			if e.Event == "drop" && e.Code == gossip.DropSecure && strings.Contains(e.Reason, "not signed by") {
				refused[e.Peer]++
			}
		}
		for i, p := range h.params() {
			want := meanOf([]int{0, 1, 2, 3})
			switch {
			case attack == "swapped keys" && i == 0:
				want = meanOf([]int{0}) // every member refused to deal: skipped
			case attack == "stripped signature" && i == 0:
				want = meanOf([]int{0, 2, 3}) // n001's advert refused
			}
			for k := range p {
				if d := math.Abs(float64(p[k]) - want[k]); d > 1e-4 {
					t.Fatalf("%s: node %d value %d: %v, want %v (refused %v)", attack, i, k, p[k], want[k], refused)
				}
			}
		}
		switch attack {
		case "none":
			if len(refused) != 0 {
				t.Errorf("honest rounds: refused %v", refused)
			}
		case "swapped keys":
			if refused[name(0)] != 2 { // n002 and n003 (n001 sees its own keys changed)
				t.Errorf("swapped keys: refused %v, want n000's roster refused by n002 and n003", refused)
			}
		case "stripped signature":
			if refused[name(1)] != 1 {
				t.Errorf("stripped signature: refused %v, want n001's advert refused once", refused)
			}
		}
	}
}
