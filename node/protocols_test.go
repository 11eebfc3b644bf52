package node_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/node"
	"github.com/gossipd/gossipd/node/memnet"
	"github.com/gossipd/gossipd/node/transport"
)

// TestMemberProtocols: four daemons on memnet run each protocol that needs
// a member list (D-PSGD on a ring, AD-PSGD, push-sum, SFB by broadcast);
// all reach 0.9 accuracy.
func TestMemberProtocols(t *testing.T) {
	const n = 4
	members := make([]string, n)
	for i := range members {
		members[i] = fmt.Sprintf("d%03d", i)
	}
	for _, proto := range []string{gossip.DPSGD, gossip.ADPSGD, gossip.PushSum, gossip.SFB} {
		t.Run(proto, func(t *testing.T) {
			r := start(t, memnet.New(), n, func(i int, c *node.Config) {
				c.Job.Protocol, c.Job.Members, c.Job.LR = proto, members, 0.3
				if proto == gossip.SFB {
					c.Job.LR = 0.5
				}
			})
			waitFor(t, proto+": every daemon at ≥ 0.9 accuracy", 90*time.Second, func() bool {
				for _, nd := range r.nodes {
					if nd.Status().Accuracy < 0.9 {
						return false
					}
				}
				return true
			})
			for _, nd := range r.nodes {
				if s := nd.Status(); s.MessagesIn == 0 || s.Updates == 0 || s.ModelAge == 0 {
					t.Fatalf("%s: %+v", s.PeerID, s)
				}
			}
		})
	}
}

// TestNonMember: a daemon whose ID is not among the job's members refuses
// to start a member protocol, and members reject frames from outsiders.
func TestNonMember(t *testing.T) {
	net := memnet.New()
	parts, test := shards(t, 2)
	ep, err := net.Join("outsider", 16)
	if err != nil {
		t.Fatal(err)
	}
	j := job()
	j.Protocol, j.Members = gossip.DPSGD, []string{"d000", "d001"}
	_, err = node.New(node.Config{Job: j, Train: parts[0], Test: test, Transport: ep, Logger: quiet()})
	if err == nil || !strings.Contains(err.Error(), "not among the job's 2 members") {
		t.Fatalf("a non-member started: %v", err)
	}
	j.Protocol = gossip.RandomWalk // a random-walk job with a member list admits members only
	r := start(t, net, 2, func(i int, c *node.Config) { c.Job.Members = j.Members })
	msg, _ := gossip.Encode(&gossip.Message{Kind: gossip.KindModel, From: "outsider", Params: make([]float32, 650)})
	jid := r.nodes[0].JobID()
	waitFor(t, "the outsider's frame rejected as not_member", 10*time.Second, func() bool {
		ep.Send(t.Context(), "d000", transport.Frame{Job: jid, Kind: uint8(gossip.KindModel), Lane: transport.LaneModel, Payload: msg})
		return r.nodes[0].Status().Rejected["not_member"] > 0
	})
}
