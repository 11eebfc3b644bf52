package main

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash/crc32"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gossipd/gossipd/daemon/p2p"
	"github.com/gossipd/gossipd/daemon/p2p/p2ptest"
	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
)

// TestDaemonHostilePeer: three real `gossipd run` processes learn digits by
// random walk while a peer played by the test (a libp2p host of its own)
// keeps sending each of them NaN models, wrong-shape models, models of
// enormous norm, undecodable payloads and frames announcing a 1 GiB payload,
// and publishes job announcements on gossipsub that are unsigned or signed
// by it in another daemon's name. Every daemon still reaches 0.90 accuracy,
// counts each kind of attack under its own reason in /status, and lists
// none of the unsigned or forged announcements in /announcements, while a properly
// signed announcement from the same peer does arrive (so the forged ones
// reached the daemons and were dropped for their signatures).
func TestDaemonHostilePeer(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	dir := t.TempDir()
	ds := startCluster(t, bin, dir, 3, "100ms")
	sts := make([]status, len(ds))
	for i, d := range ds {
		sts[i] = poll(t, d, "peers", 30*time.Second, func(s status) bool { return s.Peers >= len(ds)-1 && len(s.Addrs) > 0 })
	}
	var job transport.JobID
	if b, err := hex.DecodeString(sts[0].JobID); err != nil || len(b) != len(job) {
		t.Fatalf("job id %q: %v", sts[0].JobID, err)
	} else {
		copy(job[:], b)
	}
	evil, err := p2ptest.New()
	if err != nil {
		t.Fatal(err)
	}
	defer evil.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ids := make([]gossip.PeerID, len(ds))
	for i, s := range sts {
		addr := s.Addrs[0]
		if !strings.Contains(addr, "/p2p/") {
			addr += "/p2p/" + s.PeerID
		}
		if ids[i], err = evil.Connect(ctx, addr); err != nil {
			t.Fatalf("connect to daemon %d: %v", i, err)
		}
	}
	const size = 650 // digits softmax: 64·10 weights + 10 biases
	model := func(n int, f func(p []float32)) []byte {
		p := make([]float32, n)
		f(p)
		b, err := gossip.Encode(&gossip.Message{Kind: gossip.KindModel, From: evil.ID(), Params: p, Age: 1e6})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	nan := model(size, func(p []float32) { p[5] = float32(math.NaN()) })
	shape := model(size+1, func([]float32) {})
	huge := model(size, func(p []float32) { p[0] = 1e30 })
	// A well-formed frame header announcing a 1 GiB payload.
	oversized := make([]byte, 42)
	binary.LittleEndian.PutUint32(oversized, 1<<30)
	oversized[4], oversized[5] = p2p.FrameVersion, byte(gossip.KindModel)
	copy(oversized[6:38], job[:])
	binary.LittleEndian.PutUint32(oversized[38:], crc32.Checksum(oversized[:38], crc32.MakeTable(crc32.Castagnoli)))
	announce := func(jobID string) []byte {
		b, _ := json.Marshal(transport.Announcement{JobID: jobID, Name: "hostile", Protocol: "randomwalk", Model: "softmax"})
		return b
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			for i, to := range ids {
				other := ids[(i+1)%len(ids)]
				// Errors are expected: daemons reset streams they refuse.
				evil.SendFrame(ctx, to, job, gossip.KindModel, nan)
				evil.SendFrame(ctx, to, job, gossip.KindModel, shape)
				evil.SendFrame(ctx, to, job, gossip.KindModel, huge)
				evil.SendFrame(ctx, to, job, gossip.KindModel, []byte("not a gossip message"))
				evil.SendRaw(ctx, to, p2p.ProtocolFor(transport.LaneModel), oversized)
				evil.Publish(ctx, to, p2p.TopicJobs, announce("unsigned"), p2ptest.Unsigned, "")
				evil.Publish(ctx, to, p2p.TopicJobs, announce("forged"), p2ptest.Forged, other)
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond): // pace the attack, not a synchronisation
			}
		}
	})
	if err := evil.Publish(ctx, ids[0], p2p.TopicJobs, announce("signed"), p2ptest.Signed, ""); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		poll(t, d, "accuracy ≥ 0.90 under attack", 90*time.Second, func(s status) bool { return s.Accuracy >= 0.90 && s.Peers >= len(ds)-1 })
	}
	reasons := []string{"non_finite", "shape", "norm", "undecodable", "oversized_frame", "pubsub_missing_signature", "pubsub_invalid_signature"}
	for _, d := range ds {
		poll(t, d, "every attack counted", 30*time.Second, func(s status) bool {
			for _, r := range reasons {
				if s.Rejected[r] == 0 {
					return false
				}
			}
			return true
		})
	}
	cancel()
	wg.Wait()
	var jobs []transport.Announcement
	resp, err := http.Get("http://" + ds[0].api + "/announcements")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&jobs); err != nil {
		t.Fatal(err)
	}
	signed := false
	for _, a := range jobs {
		if a.JobID == "unsigned" || a.JobID == "forged" {
			t.Errorf("/announcements lists a %s announcement: %+v", a.JobID, a)
		}
		signed = signed || (a.JobID == "signed" && a.Peer == evil.ID())
	}
	if !signed {
		t.Errorf("the signed announcement never arrived: /announcements = %+v", jobs)
	}
}
