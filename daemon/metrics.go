package daemon

import (
	"regexp"
	"slices"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the daemon's Prometheus series, in a registry of its own.
type metrics struct {
	reg      *prometheus.Registry
	own      []prometheus.Collector // gossipd's series, for SeriesNames
	msgsIn   prometheus.Counter
	msgsOut  prometheus.Counter
	bytesIn  prometheus.Counter
	bytesOut prometheus.Counter
	// bytesOutFull counts what was sent as if vectors were plain float32.
	bytesOutFull  prometheus.Counter
	sendErrors    prometheus.Counter
	published     prometheus.Counter
	rejected      *prometheus.CounterVec
	faults        *prometheus.CounterVec
	updates       prometheus.Counter
	ckpts         prometheus.Counter
	ckptFailures  prometheus.Counter
	age           prometheus.Gauge
	accuracy      prometheus.Gauge
	loss          prometheus.Gauge
	peers         prometheus.Gauge
	otherJobPeers prometheus.Gauge
	unknownPeers  prometheus.Gauge
	activeView    prometheus.Gauge
	withheld      prometheus.Counter
	round         prometheus.Gauge
	dpEpsilon     prometheus.Gauge
	dpBudget      prometheus.Gauge
	dpSteps       prometheus.Gauge
	ckptTime      prometheus.Gauge
	paused        prometheus.Gauge
	deviceFailed  prometheus.Gauge
	// Secure aggregation (--secure-aggregation): rounds by result, and
	// dropouts whose masks a round removed with the others' shares.
	secureRounds    *prometheus.CounterVec
	secureRecovered prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	c := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "gossipd", Name: name, Help: help})
		m.register(x)
		return x
	}
	g := func(name, help string) prometheus.Gauge {
		x := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "gossipd", Name: name, Help: help})
		m.register(x)
		return x
	}
	m.msgsIn = c("messages_in_total", "Gossip messages received and accepted for the core.")
	m.msgsOut = c("messages_out_total", "Gossip messages sent.")
	m.bytesIn = c("bytes_in_total", "Payload bytes received.")
	m.bytesOut = c("bytes_out_total", "Payload bytes sent.")
	m.bytesOutFull = c("bytes_out_uncompressed_total", "Payload bytes sent, counted as if every vector went as plain float32 (--compression makes bytes_out_total smaller).")
	m.sendErrors = c("send_errors_total", "Messages that could not be delivered.")
	m.published = c("messages_published_total", "Messages broadcast to every member at once (gossipsub); each also counts once in messages_out_total.")
	m.paused = g("paused", "1 while local training is paused (POST /pause), else 0.")
	m.updates = c("updates_total", "Model updates.")
	m.ckpts = c("checkpoints_total", "Checkpoints written.")
	m.ckptFailures = c("checkpoint_failures_total", "Checkpoints that could not be written (a full or failing disk): the store keeps the earlier ones, /status's checkpoint_error says why.")
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "gossipd", Name: "rejected_total",
		Help: "Inbound messages rejected, by reason."}, []string{"reason"})
	m.register(m.rejected)
	m.faults = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "gossipd", Name: "network_faults_total",
		Help: "Network faults: streams that broke mid-frame or timed out, by reason (not input rejected)."}, []string{"reason"})
	m.register(m.faults)
	m.age = g("model_age", "Examples the model has seen.")
	m.accuracy = g("accuracy", "Accuracy on the node's held-out split.")
	m.loss = g("loss", "Loss on the node's held-out split.")
	m.peers = g("peers", "Connected peers that are live members of this node's job: the only ones it gossips with.")
	m.otherJobPeers = g("other_job_peers", "Connected peers that run other jobs (mDNS, the DHT and relays connect daemons of any job): no model is sent to them.")
	m.unknownPeers = g("unknown_peers", "Connected peers not heard announcing this job (yet, or within the live timeout): no model is sent to them.")
	m.activeView = g("active_view", "Neighbours in this member's HyParView active view (jobs with --sampling hyparview; 0 otherwise): the peers it gossips with.")
	m.withheld = c("messages_withheld_total", "Messages not sent because their addressee is not a live member of the job.")
	m.round = g("round", "D-PSGD round or SFB clock.")
	m.dpEpsilon = g("dp_epsilon_spent", "Privacy spent by DP-SGD on this node's data: ε at the configured δ (0 without DP).")
	m.dpSteps = g("dp_steps", "DP-SGD steps charged to the privacy ledger.")
	m.dpBudget = g("dp_epsilon_budget", "The privacy budget ε this node stops at (0: none).")
	m.deviceFailed = g("device_failed", "1 once the training device (a GPU) failed and training moved to the CPU (/status's device says why), else 0.")
	m.secureRounds = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "gossipd", Name: "secure_rounds_total",
		Help: "Secure-aggregation rounds this node received, by result: summed (the neighbours' masked sum decoded) or skipped (too few neighbours took part in time)."}, []string{"result"})
	m.register(m.secureRounds)
	m.secureRecovered = c("secure_dropouts_recovered_total", "Neighbours that dealt in a secure round and then sent no contribution, whose masks the round removed with the survivors' shares.")
	m.ckptTime = g("checkpoint_timestamp_seconds", "When the last checkpoint was written (or resumed from), Unix seconds: alert on its age.")
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) register(c prometheus.Collector) {
	m.reg.MustRegister(c)
	m.own = append(m.own, c)
}

// SeriesNames lists the gossipd_* series a daemon can export (with a
// transport that lists its connections), sorted: what dashboards and
// alert rules may use. A labelled series appears in /metrics only once a
// value was counted under some label.
func SeriesNames() []string {
	m := newMetrics()
	m.watchConns(noConns{})
	m.watchMembership(func() ByteCount { return ByteCount{} })
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range m.own {
			c.Describe(ch)
		}
		close(ch)
	}()
	var out []string
	for d := range ch {
		if s := descName.FindStringSubmatch(d.String()); s != nil {
			out = append(out, s[1])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// noConns is a ConnLister with nothing to list.
type noConns struct{}

func (noConns) Conns() []transport.Conn            { return nil }
func (noConns) HolePunches() transport.HolePunches { return transport.HolePunches{} }
func (noConns) DeadPeersDropped() uint64           { return 0 }

// watchConns adds series read from a transport that lists its connections:
// open connections by type (direct, relayed), hole punches by outcome,
// and peers dropped by the liveness check.
func (m *metrics) watchConns(c transport.ConnLister) {
	for _, typ := range []string{transport.ConnDirect, transport.ConnRelayed} {
		m.register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "gossipd", Name: "connections",
			Help: "Open connections to gossipd peers, by type: direct, or relayed through a circuit relay.", ConstLabels: prometheus.Labels{"type": typ}},
			func() float64 {
				n := 0
				for _, x := range c.Conns() {
					if x.Type == typ {
						n++
					}
				}
				return float64(n)
			}))
	}
	for _, r := range []string{"succeeded", "failed"} {
		m.register(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "gossipd", Name: "hole_punches_total",
			Help: "Hole punches (relayed connections upgraded to direct ones) this node took part in, by result.", ConstLabels: prometheus.Labels{"result": r}},
			func() float64 {
				h := c.HolePunches()
				if r == "succeeded" {
					return float64(h.Succeeded)
				}
				return float64(h.Failed)
			}))
	}
	m.register(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "gossipd", Name: "dead_peers_dropped_total",
		Help: "Peers disconnected because they did not answer their liveness check (a silent peer is pinged)."},
		func() float64 { return float64(c.DeadPeersDropped()) }))
}

// watchMembership adds the bytes spent on membership (Status's
// MembershipBytes), by direction.
func (m *metrics) watchMembership(read func() ByteCount) {
	for _, dir := range []string{"in", "out"} {
		m.register(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "gossipd", Name: "membership_bytes_total",
			Help: "Bytes spent on keeping the membership, by direction: view messages (Cyclon, HyParView) and, over libp2p, announcements, pubsub control, peer exchange, liveness checks and routing.", ConstLabels: prometheus.Labels{"direction": dir}},
			func() float64 {
				b := read()
				if dir == "in" {
					return float64(b.In)
				}
				return float64(b.Out)
			}))
	}
}
