package demo

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDaemonExitEndsDemo: a daemon that exits while the demo runs (here a
// stand-in binary whose run fails at once, as a daemon does on a device
// it cannot open) ends the demo with an error naming the peer, its exit
// status and its last words, instead of the demo waiting out its time
// with a peer that never answers.
func TestDaemonExitEndsDemo(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "gossipd")
	script := "#!/bin/sh\nif [ \"$1\" = keygen ]; then echo 12D3KooWStandIn; exit 0; fi\necho 'gossipd: usage: no such device' >&2\nexit 2\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// Were the exit missed, Run would return a summary after 20 s.
	s, err := Run(context.Background(), Config{Bin: bin, Peers: 2, Duration: 20 * time.Second, PNG: filepath.Join(dir, "c.png"), Dir: filepath.Join(dir, "peers")})
	if err == nil || s != nil {
		t.Fatalf("Run = %v, %v; want an error", s, err)
	}
	for _, want := range []string{"demo: peer 0:", "exit status 2", "gossipd: usage: no such device", "p0.log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestDevicesLine: where the peers trained, each place once with its count.
func TestDevicesLine(t *testing.T) {
	got := devices([]string{"cuda:0/H100", "cuda:0/H100", "cpu/avx2×1: the GPU failed"})
	want := "cuda:0/H100 (2 of 3 peers); cpu/avx2×1: the GPU failed (1 of 3 peers)"
	if got != want {
		t.Errorf("devices = %q, want %q", got, want)
	}
	if got := devices(nil); got != "" {
		t.Errorf("devices(nil) = %q", got)
	}
}

// TestConfigDevice: a malformed --device is refused before any daemon
// starts.
func TestConfigDevice(t *testing.T) {
	c := Config{Bin: "/bin/true", Device: "gpu"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `"gpu"`) {
		t.Errorf("Validate with device gpu: %v", err)
	}
	c = Config{Bin: "/bin/true"}
	if err := c.Validate(); err != nil || c.Device != "auto" {
		t.Errorf("Validate: %v, device %q; want auto", err, c.Device)
	}
}

// TestFreePorts: distinct ports, each free (it can be bound) and below
// the kernel's ephemeral range, where no outgoing connection takes one.
func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(64)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	high := ephemeralStart()
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d twice", p)
		}
		seen[p] = true
		if high-10000 >= 1000 && (p < 10000 || p >= high) {
			t.Errorf("port %d outside [10000, %d)", p, high)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		l.Close()
	}
	if len(ports) != 64 {
		t.Errorf("%d ports, want 64", len(ports))
	}
}
