package memnet

import (
	"fmt"
	"testing"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/daemon/transporttest"
)

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, n int) []transport.Transport {
		net := New()
		out := make([]transport.Transport, n)
		for i := range out {
			e, err := net.Join(transport.PeerID(fmt.Sprintf("m%d", i)), 256)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			out[i] = e
		}
		return out
	})
}
