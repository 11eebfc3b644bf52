// Package node is the gossipd daemon: the shell around a gossip.Core core.
// One goroutine owns the core and feeds it the real clock, decoded and
// validated messages from a Transport, and the results of a trainer worker;
// it carries out the core's actions (send, train, checkpoint) and serves the
// operator API and Prometheus metrics. daemon/p2p is the only package that
// imports go-libp2p.
package daemon
