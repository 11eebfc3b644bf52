package daemon_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/daemon/memnet"
	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model/compute"
)

// TestRoundDeadlinesOnVirtualClock runs real daemons — their timers,
// tickers and workers — on testing/synctest's virtual clock: a D-PSGD job
// of three members of which one never comes. Every round must then close
// at its deadline (RoundTimeout = 4Δ) without the missing member, so after
// 10 s each live daemon has closed exactly 10 s / 400 ms = 25 rounds (the
// 25th at the instant the test looks, so 24 or 25), and its uptime is
// exactly 10 s. On wall-clock time the count would depend on the machine.
func TestRoundDeadlinesOnVirtualClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parts, test := shards(t, 3)
		j := testJob()
		j.Protocol, j.DeltaMillis = gossip.DPSGD, 100
		if err := j.Validate(); err != nil {
			t.Fatal(err)
		}
		members := []string{"d000", "d001", "d002"}
		net := memnet.New()
		ctx, cancel := context.WithCancel(context.Background())
		// d002 is a live member (it announced the job) that never sends.
		silent, err := net.Join("d002", 16)
		if err != nil {
			t.Fatal(err)
		}
		silent.Announce(ctx, transport.Announcement{JobID: j.ID().String(), Incarnation: 1})
		var wg sync.WaitGroup
		var nodes []*daemon.Node
		for i := 0; i < 2; i++ {
			ep, err := net.Join(members[i], 1024)
			if err != nil {
				t.Fatal(err)
			}
			nd, err := daemon.New(daemon.Config{Job: j, Train: parts[i], Test: test, Transport: ep, Logger: quiet(),
				Backend: compute.NewCPU(compute.WithThreads(1))})
			if err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, nd)
			wg.Go(func() {
				if err := nd.Run(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		for _, nd := range nodes {
			s := nd.Status()
			if s.Round < 24 || s.Round > 25 {
				t.Errorf("%s: round %d after 10 s of 400 ms deadlines, want 24 or 25", s.PeerID, s.Round)
			}
			if s.UptimeSeconds != 10 {
				t.Errorf("%s: uptime %v s, want 10", s.PeerID, s.UptimeSeconds)
			}
			if s.MessagesIn == 0 || s.Updates != s.Round {
				t.Errorf("%s: %d messages in, %d updates in %d rounds", s.PeerID, s.MessagesIn, s.Updates, s.Round)
			}
		}
		cancel()
		wg.Wait()
	})
}

// TestAloneIsSaid: a daemon with no peer for 30 s says so at warning
// level (on the virtual clock: 31 s of it).
func TestAloneIsSaid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parts, test := shards(t, 1)
		ep, _ := memnet.New().Join("d000", 16)
		var buf bytes.Buffer
		var mu sync.Mutex
		log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return buf.Write(p)
		}), nil))
		nd, err := daemon.New(daemon.Config{Job: testJob(), Train: parts[0], Test: test, Transport: ep, Logger: log,
			Backend: compute.NewCPU(compute.WithThreads(1))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { nd.Run(ctx); close(done) }()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		mu.Lock()
		early := strings.Contains(buf.String(), "no peers")
		mu.Unlock()
		time.Sleep(12 * time.Second)
		synctest.Wait()
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		if early || !strings.Contains(buf.String(), "level=WARN msg=\"no peers: training alone") {
			t.Fatalf("warned after 20 s: %v; log after 32 s:\n%s", early, buf.String())
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
