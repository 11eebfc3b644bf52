//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The NAT scenario's networks. The WAN must count as public to libp2p,
// whose hole punching offers and dials only public addresses: it uses
// 192.0.0.128/25, in IANA's special-purpose 192.0.0.0/24 and routed
// nowhere, which libp2p's list of unroutable ranges (192.0.0.0/26) does
// not cover. The traffic stays on this host's Docker bridge.
const (
	natWANSubnet = "192.0.0.128/25"
	natRelayIP   = "192.0.0.130"
)

// natSite is a peer behind a NAT: a LAN of its own, a router container
// that masquerades the LAN onto the WAN and turns away what nobody inside
// asked for, and a host container whose network namespace the daemon
// shares (its default route goes through the router before the daemon
// starts).
type natSite struct {
	name, lan, subnet, wanIP string
}

func (s natSite) router() string { return "e2e-nat-router-" + s.name }
func (s natSite) host() string   { return "e2e-nat-host-" + s.name }
func (s natSite) daemon() string { return "e2e-nat-" + s.name }
func (s natSite) ip() string     { return s.subnet + ".10" }

// TestNAT: two peers, each behind its own NAT, meet through a relay on
// the WAN. First without hole punching: they reach each other only over
// a relayed connection, and models cross it. Then, restarted on their
// stores with --hole-punching, they upgrade to a direct connection
// through both NATs; /status shows the type of each connection and the
// hole punches.
func TestNAT(t *testing.T) {
	wan := "gossipd-e2e-wan"
	sites := []natSite{
		{name: "a", lan: "gossipd-e2e-lan-a", subnet: "10.77.31", wanIP: "192.0.0.131"},
		{name: "b", lan: "gossipd-e2e-lan-b", subnet: "10.77.32", wanIP: "192.0.0.132"},
	}
	relay := "e2e-nat-relay"
	containers := []string{relay}
	volumes := []string{relay}
	networks := []string{sites[0].lan, sites[1].lan, wan}
	for _, s := range sites {
		containers = append(containers, s.daemon(), s.host(), s.router())
		volumes = append(volumes, s.daemon())
	}
	removeAll(containers, volumes, networks)
	defer func() {
		keepLogs(t, "nat", containers)
		removeAll(containers, volumes, networks)
	}()

	docker(t, "network", "create", "--subnet", natWANSubnet, wan)
	// The relay is on the WAN, with a job of its own: it is not a member
	// of the NATed peers' job, so any model they receive came from each
	// other.
	docker(t, append(append([]string{"run", "-d", "--name", relay, "--network", wan, "--ip", natRelayIP, "-v", relay + ":/data"}, tokenArgs()...),
		image, "run", "--relay-service", "--name", "relay", "--shard", "0/3")...)
	waitAll(t, "the relay up", 60*time.Second, []node{{relay, natRelayIP}}, func(s status) bool { return s.PeerID != "" })
	rst := statusOf(t, natRelayIP)
	relayAddr := "/ip4/" + natRelayIP + "/udp/4001/quic-v1/p2p/" + rst.PeerID
	for _, s := range sites {
		docker(t, "network", "create", "--subnet", s.subnet+".0/24", s.lan)
		docker(t, "create", "--name", s.router(), "--network", wan, "--ip", s.wanIP, "--sysctl", "net.ipv4.ip_forward=1", linkemuImage, "router")
		docker(t, "network", "connect", "--ip", s.subnet+".2", s.lan, s.router())
		docker(t, "start", s.router())
		lan := s.subnet + ".0/24"
		for _, rule := range [][]string{
			{"-t", "nat", "-A", "POSTROUTING", "-s", lan, "!", "-d", lan, "-j", "MASQUERADE"},
			{"-A", "FORWARD", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"},
			{"-A", "FORWARD", "-s", lan, "-j", "ACCEPT"},
			{"-A", "FORWARD", "-j", "DROP"},
			// Unsolicited packets to the router itself are dropped, not
			// answered: answering would commit a conntrack entry that
			// makes the router remap its LAN peer's next packets to
			// another port.
			{"-A", "INPUT", "!", "-s", lan, "-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"},
		} {
			nsenter(t, s.router(), append([]string{"iptables"}, rule...)...)
		}
		docker(t, "run", "-d", "--name", s.host(), "--network", s.lan, "--ip", s.ip(), linkemuImage, "router")
		nsenter(t, s.host(), "ip", "route", "replace", "default", "via", s.subnet+".2")
	}
	startDaemons := func(extra ...string) {
		for i, s := range sites {
			args := append(append([]string{"run", "-d", "--name", s.daemon(), "--network", "container:" + s.host(), "-v", s.daemon() + ":/data"}, tokenArgs()...),
				image, "run", "--shard", fmt.Sprintf("%d/3", i+1), "--lr", "0.5", "--delta", "200ms", "--announce-interval", "1s",
				"--bootstrap", relayAddr, "--relays", relayAddr, "--behind-nat")
			docker(t, append(args, extra...)...)
		}
	}
	peers := []node{{sites[0].daemon(), sites[0].ip()}, {sites[1].daemon(), sites[1].ip()}}
	ids := map[string]string{} // daemon → peer ID

	t.Run("relayed", func(t *testing.T) {
		startDaemons()
		started := time.Now()
		waitAll(t, "both up", 60*time.Second, peers, func(s status) bool { return s.PeerID != "" })
		for _, p := range peers {
			ids[p.name] = statusOf(t, p.ip).PeerID
		}
		other := map[string]string{ids[peers[0].name]: ids[peers[1].name], ids[peers[1].name]: ids[peers[0].name]}
		// Neither can dial the other: they meet through the relay, and
		// models cross the relayed connection (the relay is in another
		// job and sends them none).
		at := waitAll(t, "a relayed connection only, and models over it", 90*time.Second, peers, func(s status) bool {
			o := other[s.PeerID]
			return strings.Join(s.connTo(o), ",") == "relayed" && s.Traffic[o].MessagesIn >= 3 && s.Members == 2
		})
		note("NAT: two peers behind their own NATs exchanged models through the relay %.1f s after they started (relayed connection only, no hole punching).", at.Sub(started).Seconds())
		removeAll([]string{sites[0].daemon(), sites[1].daemon()}, nil, nil)
	})
	if t.Failed() {
		return
	}
	t.Run("hole-punched", func(t *testing.T) {
		startDaemons("--hole-punching")
		started := time.Now()
		other := map[string]string{ids[peers[0].name]: ids[peers[1].name], ids[peers[1].name]: ids[peers[0].name]}
		wanOf := map[string]string{ids[peers[0].name]: sites[1].wanIP, ids[peers[1].name]: sites[0].wanIP}
		at := waitAll(t, "a direct connection through both NATs", 90*time.Second, peers, func(s status) bool {
			o := other[s.PeerID]
			for _, c := range s.Connections {
				// Direct, to the other side's NAT address: the hole.
				if c.Peer == o && c.Type == "direct" && strings.HasPrefix(c.Addr, "/ip4/"+wanOf[s.PeerID]+"/") {
					return s.Traffic[o].MessagesIn > 0
				}
			}
			return false
		})
		var punched uint64
		for _, p := range peers {
			s := statusOf(t, p.ip)
			punched += s.HolePunches.Succeeded
			t.Logf("%s: connections %+v, hole punches %+v", p.name, s.Connections, s.HolePunches)
		}
		if punched == 0 {
			t.Fatal("a direct connection, but no hole punch counted")
		}
		waitAll(t, "both learn", 60*time.Second, peers, func(s status) bool { return s.Accuracy >= 0.85 })
		note("NAT: with --hole-punching the two peers had a direct connection through both NATs %.1f s after they started (%d hole punch(es) succeeded).", at.Sub(started).Seconds(), punched)
	})
}

// statusOf reads a daemon's status once, bounded.
func statusOf(t testing.TB, ip string) status {
	t.Helper()
	var s status
	var err error
	for range 20 {
		if s, err = getStatus(ip); err == nil {
			return s
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s: %v", ip, err)
	return s
}
