package node

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the daemon's Prometheus series, in a registry of its own.
type metrics struct {
	reg        *prometheus.Registry
	msgsIn     prometheus.Counter
	msgsOut    prometheus.Counter
	bytesIn    prometheus.Counter
	bytesOut   prometheus.Counter
	sendErrors prometheus.Counter
	published  prometheus.Counter
	rejected   *prometheus.CounterVec
	faults     *prometheus.CounterVec
	updates    prometheus.Counter
	ckpts      prometheus.Counter
	age        prometheus.Gauge
	accuracy   prometheus.Gauge
	loss       prometheus.Gauge
	peers      prometheus.Gauge
	round      prometheus.Gauge
	dpEpsilon  prometheus.Gauge
	dpSteps    prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	c := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "gossipd", Name: name, Help: help})
		m.reg.MustRegister(x)
		return x
	}
	g := func(name, help string) prometheus.Gauge {
		x := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "gossipd", Name: name, Help: help})
		m.reg.MustRegister(x)
		return x
	}
	m.msgsIn = c("messages_in_total", "Gossip messages received and accepted for the core.")
	m.msgsOut = c("messages_out_total", "Gossip messages sent.")
	m.bytesIn = c("bytes_in_total", "Payload bytes received.")
	m.bytesOut = c("bytes_out_total", "Payload bytes sent.")
	m.sendErrors = c("send_errors_total", "Messages that could not be delivered.")
	m.published = c("messages_published_total", "Messages broadcast to every member at once (gossipsub); each also counts once in messages_out_total.")
	m.updates = c("updates_total", "Model updates.")
	m.ckpts = c("checkpoints_total", "Checkpoints written.")
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "gossipd", Name: "rejected_total",
		Help: "Inbound messages rejected, by reason."}, []string{"reason"})
	m.reg.MustRegister(m.rejected)
	m.faults = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "gossipd", Name: "network_faults_total",
		Help: "Network faults: streams that broke mid-frame or timed out, by reason (not input rejected)."}, []string{"reason"})
	m.reg.MustRegister(m.faults)
	m.age = g("model_age", "Examples the model has seen.")
	m.accuracy = g("accuracy", "Accuracy on the node's held-out split.")
	m.loss = g("loss", "Loss on the node's held-out split.")
	m.peers = g("peers", "Connected gossipd peers.")
	m.round = g("round", "D-PSGD round or SFB clock.")
	m.dpEpsilon = g("dp_epsilon_spent", "Privacy spent by DP-SGD on this node's data: ε at the configured δ (0 without DP).")
	m.dpSteps = g("dp_steps", "DP-SGD steps charged to the privacy ledger.")
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
