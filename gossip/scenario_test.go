package gossip_test

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/merge"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of gossip/testdata/*.txt")

// TestScenarios runs the golden scenarios of gossip/testdata: one node
// under test driven by commands (in the style of etcd raft's datadriven
// tests), each followed by "----" and the Ready it produced. The files
// are readable records of each protocol's behaviour; `go test ./gossip
// -run TestScenarios -rewrite` rewrites them after a deliberate change.
//
// Commands:
//
//	new KEY=VALUE...       a node "me" (protocol, neighbors=b:0.5,c:0.5,
//	                       self, delta, timeout, lr, variant, cache,
//	                       staleness, fanout, sampling, aggregator,
//	                       compression, tokens, broadcast, topology, join)
//	peers ID...            SetPeers
//	members ID[@INC]...    SetMembers (the live members and their
//	                       incarnations; "me" is added)
//	tick DURATION          Tick
//	step from=ID kind=K [round= age= weight= sent= params=V|V,V,… view=ID:AGE,…]
//	train-done [value=V] [examples=N] [id=N]
//	                       answers the outstanding request: an update
//	                       subtracts V from every parameter, a gradient
//	                       is V everywhere
//	state                  the node's counters and parameters
//	views                  the node's (HyParView) active and passive views
//	restart                a new node from the old one's Snapshot
//	leave, depart          Leave, Depart
//	undelivered            Undelivered: the last message sent never arrived
//	checkpoint             keep a Snapshot for "crash"
//	crash                  a new node from the kept snapshot and the last
//	                       Accounts the node wrote (a kill -9 and restart)
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in testdata: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScenario(t, f) })
	}
}

// scenario is the node under test and its last training request.
type scenario struct {
	t    *testing.T
	cfg  gossip.Config
	node *gossip.Core
	req  *gossip.TrainRequest
	// lastSent is the last message the node sent.
	lastSent *gossip.Message
	// accounts are the last accounts the node wrote; saved the last
	// snapshot taken by "checkpoint".
	accounts *gossip.Accounts
	saved    *gossip.State
}

type testCase struct {
	cmd  string
	want string
	line int
}

func parseScenario(t *testing.T, path string) []testCase {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []testCase
	var cur *testCase
	inOut := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && (line == "" || strings.HasPrefix(line, "#")):
		case cur == nil:
			cases = append(cases, testCase{cmd: line, line: n})
			cur = &cases[len(cases)-1]
		case !inOut && line == "----":
			inOut = true
		case !inOut:
			t.Fatalf("%s:%d: want ---- after the command", path, n)
		case line == "":
			cur, inOut = nil, false
		default:
			cur.want += line + "\n"
		}
	}
	return cases
}

func runScenario(t *testing.T, path string) {
	cases := parseScenario(t, path)
	s := &scenario{t: t}
	var out strings.Builder
	for _, c := range cases {
		got := s.run(c.cmd)
		if got == "" {
			got = "ok\n"
		}
		if !*rewrite && got != c.want {
			t.Errorf("%s:%d: %s\ngot:\n%swant:\n%s", path, c.line, c.cmd, got, c.want)
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n", c.cmd, got)
	}
	if *rewrite {
		head := leadingComments(t, path)
		if err := os.WriteFile(path, []byte(head+out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// leadingComments keeps a file's opening comment block on rewrite.
func leadingComments(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var head strings.Builder
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if !strings.HasPrefix(l, "#") && strings.TrimSpace(l) != "" {
			break
		}
		head.WriteString(l)
	}
	return head.String()
}

func fields(args []string) map[string]string {
	kv := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		kv[k] = v
	}
	return kv
}

func (s *scenario) run(cmd string) string {
	t := s.t
	parts := strings.Fields(cmd)
	kv := fields(parts[1:])
	switch parts[0] {
	case "new":
		s.cfg = s.config(kv)
		n, err := gossip.New(s.cfg)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		s.node, s.req = n, nil
		return ""
	case "peers":
		s.node.SetPeers(parts[1:])
	case "members":
		var ms []gossip.Member
		for _, p := range parts[1:] {
			id, inc, _ := strings.Cut(p, "@")
			i, _ := strconv.ParseUint(inc, 10, 64)
			ms = append(ms, gossip.Member{ID: id, Incarnation: i})
		}
		s.node.SetMembers(ms)
	case "tick":
		d, err := time.ParseDuration(parts[1])
		if err != nil {
			t.Fatal(err)
		}
		s.node.Tick(d)
	case "step":
		m := s.message(kv)
		s.node.Step(m)
		out := s.ready()
		if s.node.Kept() {
			out += "kept\n"
		}
		return out
	case "train-done":
		return s.trainDone(kv)
	case "undelivered":
		// The last message the node sent could not be delivered.
		s.node.Undelivered(s.lastSent)
	case "leave":
		s.node.Leave()
	case "depart":
		s.node.Depart()
	case "state":
		return s.state()
	case "views":
		return fmt.Sprintf("active=%s passive=%s\n", strings.Join(s.node.ViewMembers(), ","), strings.Join(s.node.PassiveMembers(), ","))
	case "checkpoint":
		st := s.node.Snapshot()
		s.saved = &st
		return ""
	case "crash":
		// A restart from the last "checkpoint" with the last accounts.
		cfg := s.cfg
		cfg.Resume, cfg.Init, cfg.Rand, cfg.Accounts = s.saved, nil, rand.New(rand.NewPCG(3, 3)), s.accounts
		n, err := gossip.New(cfg)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		s.node, s.req = n, nil
		return s.state()
	case "restart":
		st := s.node.Snapshot()
		cfg := s.cfg
		cfg.Resume, cfg.Init, cfg.Rand = &st, nil, rand.New(rand.NewPCG(2, 2))
		n, err := gossip.New(cfg)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		s.node, s.req = n, nil
		return s.state()
	default:
		t.Fatalf("unknown command %q", parts[0])
	}
	return s.ready()
}

func (s *scenario) config(kv map[string]string) gossip.Config {
	t := s.t
	c := gossip.Config{ID: "me", Protocol: kv["protocol"], Spec: tinySpec, Init: make([]float32, 8),
		Rand: rand.New(rand.NewPCG(1, 1)), Delta: time.Second}
	for k, v := range kv {
		var err error
		switch k {
		case "protocol":
		case "neighbors":
			for _, nb := range strings.Split(v, ",") {
				id, w, _ := strings.Cut(nb, ":")
				wf, _ := strconv.ParseFloat(w, 64)
				c.Neighbors = append(c.Neighbors, gossip.Neighbor{ID: id, Weight: wf})
			}
		case "self":
			c.SelfWeight, err = strconv.ParseFloat(v, 64)
		case "delta":
			c.Delta, err = time.ParseDuration(v)
		case "timeout":
			c.RoundTimeout, err = time.ParseDuration(v)
		case "lr":
			c.LR, err = strconv.ParseFloat(v, 64)
		case "variant":
			c.Variant = v
		case "sampling":
			c.Sampling = v
		case "active":
			c.ActiveView, err = strconv.Atoi(v)
		case "passive":
			c.PassiveView, err = strconv.Atoi(v)
		case "cache":
			c.CacheSize, err = strconv.Atoi(v)
		case "staleness":
			c.Staleness, err = strconv.Atoi(v)
		case "fanout":
			c.Fanout, err = strconv.Atoi(v)
		case "aggregator":
			c.Aggregator, err = merge.ParseAggregator(v)
		case "compression":
			var comp gossip.Compression
			comp, err = gossip.ParseCompression(v)
			c.Subsample, c.Partitions, c.Quantize = comp.Subsample, comp.Partitions, comp.Quantize
		case "tokens":
			c.Tokens, err = gossip.ParseTokens(v)
		case "broadcast":
			c.Broadcast = v == "true"
		case "topology":
			c.Topology = v
		case "join":
			c.Join = v == "true"
		default:
			t.Fatalf("new: unknown key %q", k)
		}
		if err != nil {
			t.Fatalf("new: %s=%s: %v", k, v, err)
		}
	}
	return c
}

var kinds = map[string]gossip.Kind{
	"model": gossip.KindModel, "params": gossip.KindParams, "avg-request": gossip.KindAvgRequest,
	"avg-reply": gossip.KindAvgReply, "push-sum": gossip.KindPushSum, "factors": gossip.KindFactors,
	"view-push": gossip.KindViewPush, "view-reply": gossip.KindViewReply,
	"state-request": gossip.KindStateRequest, "state-reply": gossip.KindStateReply,
	"hv-join": gossip.KindHVJoin, "hv-forward-join": gossip.KindHVForwardJoin, "hv-neighbor": gossip.KindHVNeighbor,
	"hv-neighbor-reply": gossip.KindHVNeighborReply, "hv-disconnect": gossip.KindHVDisconnect,
	"hv-shuffle": gossip.KindHVShuffle, "hv-shuffle-reply": gossip.KindHVShuffleReply, "hv-ping": gossip.KindHVPing,
}

func (s *scenario) message(kv map[string]string) *gossip.Message {
	t := s.t
	m := &gossip.Message{From: kv["from"], Kind: kinds[kv["kind"]]}
	if m.Kind == 0 {
		t.Fatalf("step: unknown kind %q", kv["kind"])
	}
	m.Round, _ = strconv.ParseUint(kv["round"], 10, 64)
	m.Age, _ = strconv.ParseFloat(kv["age"], 64)
	m.Weight, _ = strconv.ParseFloat(kv["weight"], 64)
	m.Sent, _ = strconv.ParseFloat(kv["sent"], 64)
	if v, ok := kv["params"]; ok {
		m.Params = vector(t, v, 8)
	}
	if v, ok := kv["partition"]; ok {
		p, _ := strconv.Atoi(v)
		m.Partition = uint32(p)
	}
	if v, ok := kv["view"]; ok {
		for _, d := range strings.Split(v, ",") {
			id, age, _ := strings.Cut(d, ":")
			a, _ := strconv.ParseInt(age, 10, 64)
			m.View = append(m.View, gossip.Descriptor{ID: id, Age: a})
		}
	}
	return m
}

// vector reads "V" (n copies; "nan" allowed) or "V,V,…".
func vector(t *testing.T, s string, n int) []float32 {
	vals := strings.Split(s, ",")
	if len(vals) == 1 {
		vals = slices.Repeat(vals, n)
	}
	out := make([]float32, len(vals))
	for i, v := range vals {
		f, err := strconv.ParseFloat(v, 32)
		if err != nil {
			t.Fatalf("vector %q: %v", s, err)
		}
		out[i] = float32(f)
	}
	return out
}

func (s *scenario) trainDone(kv map[string]string) string {
	if s.req == nil {
		s.t.Fatal("train-done without an outstanding request")
	}
	v := float32(0.1)
	if x, ok := kv["value"]; ok {
		f, _ := strconv.ParseFloat(x, 32)
		v = float32(f)
	}
	r := &gossip.TrainResult{ID: s.req.ID, Examples: 4}
	if x, ok := kv["examples"]; ok {
		r.Examples, _ = strconv.Atoi(x)
	}
	if x, ok := kv["id"]; ok {
		r.ID, _ = strconv.ParseUint(x, 10, 64)
	}
	if s.req.Op == gossip.OpUpdate {
		r.Params = make([]float32, len(s.req.Params))
		for i, p := range s.req.Params {
			r.Params[i] = p - v
		}
	} else {
		r.Grad = make([]float32, len(s.req.Params))
		for i := range r.Grad {
			r.Grad[i] = v
		}
	}
	s.node.TrainDone(r)
	return s.ready()
}

// ready prints and acknowledges everything the node asks for, in the
// order the peer driver handles it.
func (s *scenario) ready() string {
	var b strings.Builder
	for s.node.HasReady() {
		rd := s.node.Ready()
		s.node.Advance()
		if a := rd.Accounts; a != nil {
			// Printed first: the driver makes them durable before sending.
			fmt.Fprintf(&b, "accounts #%d weight=%.4g", a.Seq, a.Weight)
			for _, l := range a.Links {
				fmt.Fprintf(&b, " %s:sent=%.4g/%d,recv=%.4g/%d", l.Peer, l.Sent, l.SeqSent, l.Recv, l.SeqRecv)
			}
			b.WriteString("\n")
			s.accounts = a
		}
		for _, m := range rd.Messages {
			b.WriteString(formatMessage(&m))
			s.lastSent = &m
		}
		for _, tr := range rd.Trace {
			fmt.Fprintf(&b, "trace %s", tr.Event)
			if tr.Peer != "" {
				fmt.Fprintf(&b, " peer=%s", tr.Peer)
			}
			if tr.Code != "" {
				fmt.Fprintf(&b, " code=%s", tr.Code)
			}
			if tr.Value != 0 {
				fmt.Fprintf(&b, " value=%.4g", tr.Value)
			}
			if tr.Reason != "" {
				fmt.Fprintf(&b, ": %s", tr.Reason)
			}
			b.WriteString("\n")
		}
		if c := rd.Commit; c != nil {
			fmt.Fprintf(&b, "commit age=%g round=%d updates=%d\n", c.Age, c.Round, c.Updates)
		}
		if r := rd.Train; r != nil {
			r.Resolve() // as a shell does first
			s.req = r
			op := map[gossip.TrainOp]string{gossip.OpUpdate: "update", gossip.OpGradient: "gradient", gossip.OpFactors: "factors"}[r.Op]
			fmt.Fprintf(&b, "train #%d %s steps=%d age=%g params=%s", r.ID, op, r.Steps, r.Age, floats(r.Params))
			if len(r.FactorLayers) > 0 {
				fmt.Fprintf(&b, " layers=%s", strings.Join(r.FactorLayers, ","))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func formatMessage(m *gossip.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "send %s to=%s", m.Kind, m.To)
	if m.Round != 0 {
		fmt.Fprintf(&b, " round=%d", m.Round)
	}
	if m.Age != 0 {
		fmt.Fprintf(&b, " age=%g", m.Age)
	}
	if m.Weight != 0 {
		fmt.Fprintf(&b, " weight=%.4g", m.Weight)
	}
	if m.Sent != 0 {
		fmt.Fprintf(&b, " sent=%.4g", m.Sent)
	}
	if m.Params != nil {
		fmt.Fprintf(&b, " params=%s", floats(m.Params))
	}
	if len(m.Indices) > 0 {
		fmt.Fprintf(&b, " indices=%v", m.Indices)
	}
	if m.Partition != 0 {
		fmt.Fprintf(&b, " partition=%d", m.Partition)
	}
	if len(m.Factors) > 0 {
		fmt.Fprintf(&b, " factors=%d", len(m.Factors))
	}
	if len(m.View) > 0 {
		b.WriteString(" view=")
		for i, d := range m.View {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%s:%d", d.ID, d.Age)
		}
	}
	b.WriteString("\n")
	return b.String()
}

func floats(v []float32) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(float64(x), 'g', 4, 32)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func (s *scenario) state() string {
	n := s.node
	return fmt.Sprintf("age=%g round=%d updates=%d weight=%.4g busy=%v halted=%v params=%s\n",
		n.Age(), n.Round(), n.Updates(), n.PushSumWeight(), n.Busy(), n.Halted(), floats(n.Params()))
}
