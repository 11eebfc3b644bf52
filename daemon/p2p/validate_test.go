package p2p

import (
	"strings"
	"testing"
)

// TestConfigValidate: what New would refuse, Validate refuses first,
// naming the value, without starting anything; a config New takes passes.
func TestConfigValidate(t *testing.T) {
	const id = "12D3KooWN9b6B9ukkSTJGC5ZkeJs8tmuncQmqmi6jQQyc47opZ99"
	good := Config{Listen: []string{"/ip4/127.0.0.1/tcp/0", "/ip4/0.0.0.0/udp/4001/quic-v1"}, DHT: DHTClient,
		Bootstrap: []string{"/ip4/10.0.0.1/tcp/4001/p2p/" + id, "http://10.0.0.1:8080"},
		NAT:       NATConfig{Relays: []string{"/dns4/relay/tcp/4001/p2p/" + id}}}
	if err := good.Validate(); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("the zero config (New's defaults): %v", err)
	}
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.DHT = "full" }, `dht mode "full"`},
		{func(c *Config) { c.Listen = append(c.Listen, "0.0.0.0:4001") }, `listen address "0.0.0.0:4001"`},
		{func(c *Config) { c.Bootstrap = []string{"/ip4/10.0.0.1/tcp/4001"} }, `bootstrap address "/ip4/10.0.0.1/tcp/4001"`},
		{func(c *Config) { c.Bootstrap = []string{"http://"} }, "http://"},
		{func(c *Config) { c.NAT.Relays = []string{"relay:4001"} }, `relay address "relay:4001"`},
		{func(c *Config) { c.Limits.Conns = -1 }, "conns -1"},
	} {
		c := good
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error naming %s", err, tc.want)
		}
	}
}
