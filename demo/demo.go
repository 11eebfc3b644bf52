// Package demo shows what gossipd is: it starts a handful of real daemons
// on 127.0.0.1, each holding a non-IID piece of the digits data that no
// peer can learn much from alone, and shows them learning together with
// no server, live in the terminal; it ends with a summary and a PNG of
// the curves (`make demo`, `gossipd demo`).
package demo

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gossipd/gossipd/central"
	"github.com/gossipd/gossipd/model/device"
)

// Config is what the demo runs. Zero values take the documented defaults.
type Config struct {
	// Bin is the gossipd binary the peers run (default: this program).
	Bin string
	// Peers is how many daemons (default 8).
	Peers int
	// Protocol (default randomwalk).
	Protocol string
	// Partition is how the digits are split among the peers (default
	// "shards:2": each peer holds two label-sorted pieces, a few classes).
	Partition string
	// Delta is the gossip period (default 200ms).
	Delta time.Duration
	// Target is the mean accuracy at which the demo stops, once it has held
	// for three polls (default 0.9).
	Target float64
	// Duration bounds the run (default 60s).
	Duration time.Duration
	// Dir holds the peers' stores and logs and the PNG (default: a new
	// temporary directory, removed at the end but for the PNG, which is
	// written to PNG).
	Dir string
	// PNG is where the curves go (default demo-curves.png).
	PNG string
	// Device is where the daemons train (their --device: auto, cpu,
	// cuda or cuda:N; default auto, the daemons' own default).
	Device string
	// Out receives the view and the summary; Live redraws the view in
	// place (a terminal) instead of printing a line every few seconds.
	Out  io.Writer
	Live bool
}

// Validate checks the config and fills defaults.
func (c *Config) Validate() error {
	if c.Bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("demo: the gossipd binary: %w", err)
		}
		c.Bin = exe
	}
	c.Peers = cmp.Or(c.Peers, 8)
	c.Protocol = cmp.Or(c.Protocol, "randomwalk")
	c.Partition = cmp.Or(c.Partition, "shards:2")
	c.Delta = cmp.Or(c.Delta, 200*time.Millisecond)
	c.Target = cmp.Or(c.Target, 0.9)
	c.Duration = cmp.Or(c.Duration, time.Minute)
	c.PNG = cmp.Or(c.PNG, "demo-curves.png")
	c.Device = cmp.Or(c.Device, "auto")
	if _, err := device.Parse(c.Device); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	switch {
	case c.Peers < 2 || c.Peers > 32:
		return fmt.Errorf("demo: %d peers, want 2 to 32", c.Peers)
	case c.Delta <= 0 || c.Duration <= 0:
		return fmt.Errorf("demo: delta %v and duration %v must be positive", c.Delta, c.Duration)
	case c.Target <= 0 || c.Target > 1:
		return fmt.Errorf("demo: target accuracy %v, want (0, 1]", c.Target)
	}
	return checkDir(c.Dir)
}

// checkDir accepts "" (a new temporary directory), a missing directory
// (created) or an empty one; an earlier demo's peers in a directory would
// resume their old stores, and a file is no directory.
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("demo: dir: %w", err)
	case !st.IsDir():
		return fmt.Errorf("demo: dir %s is a file, not a directory", dir)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
		return fmt.Errorf("demo: dir %s is not empty (an earlier demo's stores?): give a new or empty one", dir)
	}
	return nil
}

// Summary is how the demo went.
type Summary struct {
	Peers    int     `json:"peers"`
	Protocol string  `json:"protocol"`
	Seconds  float64 `json:"seconds"`
	// Mean, Min and Max are the peers' test accuracies at the end.
	Mean float64 `json:"mean_accuracy"`
	Min  float64 `json:"min_accuracy"`
	Max  float64 `json:"max_accuracy"`
	// Alone is what one peer reaches training on its own piece only.
	Alone float64 `json:"alone"`
	// Reached says the mean reached the target before the time ran out;
	// Stopped, that the demo was interrupted.
	Reached  bool   `json:"reached"`
	Stopped  bool   `json:"stopped,omitempty"`
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	PNG      string `json:"png"`
	// API is the first peer's API address while it ran.
	API string `json:"api"`
	// Devices is where each peer said it trained (its /status device's
	// backend, with the daemon's note when it did not train on the
	// --device asked for).
	Devices []string `json:"devices"`
}

// String is the demo's last line.
func (s *Summary) String() string {
	verb := "after"
	switch {
	case s.Stopped:
		verb = "when stopped, after"
	case !s.Reached:
		verb = "when time ran out, after"
	}
	line := fmt.Sprintf("%d peers, no server: %.2f mean accuracy (%.2f–%.2f) %s %.0f s, %d messages, %s; alone, a peer reaches %.2f",
		s.Peers, s.Mean, s.Min, s.Max, verb, s.Seconds, s.Messages, kB(s.Bytes), s.Alone)
	if d := devices(s.Devices); d != "" {
		line += "\nTrained on " + d + "."
	}
	return line
}

// devices says where the peers trained: each place once, with how many
// peers trained there, in the order first seen.
func devices(ds []string) string {
	var order []string
	count := map[string]int{}
	for _, d := range ds {
		if count[d] == 0 {
			order = append(order, d)
		}
		count[d]++
	}
	parts := make([]string, len(order))
	for i, d := range order {
		parts[i] = fmt.Sprintf("%s (%d of %d peers)", d, count[d], len(ds))
	}
	return strings.Join(parts, "; ")
}

// peerStatus is what the demo reads of a daemon's /status.
type peerStatus struct {
	Accuracy    float64 `json:"accuracy"`
	Peers       int     `json:"peers"`
	MessagesIn  uint64  `json:"messages_in"`
	MessagesOut uint64  `json:"messages_out"`
	BytesOut    uint64  `json:"bytes_out"`
	Updates     uint64  `json:"updates"`
	Device      struct {
		Backend string `json:"backend"`
		Note    string `json:"note"`
	} `json:"device"`
}

// peer is one daemon of the demo.
type peer struct {
	api  string
	cmd  *exec.Cmd
	log  string        // its log file
	done chan struct{} // closed when it has exited, with err its Wait's
	err  error
	last peerStatus
	ok   bool
	hist []point
}

type point struct{ t, acc float64 }

// Run runs the demo until the peers reach the target, the time runs out,
// or ctx ends (Ctrl-C), and always stops every daemon it started.
func Run(ctx context.Context, c Config) (*Summary, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	dir := c.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "gossipd-demo-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	// What a peer reaches alone: its piece, trained centrally.
	alone, err := central.Train(ctx, central.Config{Dataset: "digits", Scale: "global", Shard: fmt.Sprintf("0/%d", c.Peers),
		Partition: c.Partition, Model: "softmax", Epochs: 20, Seed: 1}, nil)
	if err != nil {
		return nil, fmt.Errorf("demo: one peer alone: %w", err)
	}
	peers, err := start(ctx, c, dir)
	defer stop(peers)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c.Out, "gossipd demo: %d daemons on 127.0.0.1 (%s, Δ %v), each holding a non-IID piece of the digits (%s); no server.\n",
		c.Peers, c.Protocol, c.Delta, c.Partition)
	fmt.Fprintf(c.Out, "Alone, a peer reaches %.2f. Peer 0's dashboard: http://%s/ (logs and stores in %s while it runs)\n\n", alone.TestAccuracy, peers[0].api, dir)

	started := time.Now()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	v := &view{c: c}
	held, reached := 0, false
	var lastLine time.Time
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
		}
		now := time.Since(started).Seconds()
		for i, p := range peers {
			if err := p.exited(); err != nil {
				return nil, fmt.Errorf("demo: peer %d: %w", i, err)
			}
			p.poll(now)
		}
		mean, lo, hi, n := stats(peers)
		v.spread = append(v.spread, hi-lo)
		if c.Live {
			v.draw(peers, now, mean, lo, hi)
		} else if time.Since(lastLine) >= 5*time.Second {
			fmt.Fprintf(c.Out, "t=%3.0fs  mean accuracy %.3f  min %.3f  max %.3f  spread %.3f  (%d of %d peers answering)\n", now, mean, lo, hi, hi-lo, n, len(peers))
			lastLine = time.Now()
		}
		if n == len(peers) && mean >= c.Target {
			if held++; held == 3 {
				reached = true
				break loop
			}
		} else {
			held = 0
		}
		if time.Since(started) >= c.Duration {
			break loop
		}
	}
	mean, lo, hi, _ := stats(peers)
	s := &Summary{Peers: c.Peers, Protocol: c.Protocol, Seconds: time.Since(started).Seconds(), Mean: mean, Min: lo, Max: hi,
		Alone: alone.TestAccuracy, Reached: reached, Stopped: ctx.Err() != nil, PNG: c.PNG, API: peers[0].api}
	for _, p := range peers {
		s.Messages += p.last.MessagesOut
		s.Bytes += p.last.BytesOut
		d := cmp.Or(p.last.Device.Backend, "unknown (no status)")
		if p.last.Device.Note != "" && c.Device != "auto" {
			// Why a daemon did not train where it was asked to (auto
			// asked for nothing in particular).
			d += ": " + p.last.Device.Note
		}
		s.Devices = append(s.Devices, d)
	}
	if err := writePNG(c.PNG, peers, alone.TestAccuracy, c); err != nil {
		return s, fmt.Errorf("demo: %s: %w", c.PNG, err)
	}
	if ctx.Err() != nil {
		return s, ctx.Err()
	}
	return s, nil
}

// start keys peer 0 and starts every daemon, the others bootstrapping
// from peer 0.
func start(ctx context.Context, c Config, dir string) ([]*peer, error) {
	ports, err := FreePorts(2 * c.Peers)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	out, err := exec.CommandContext(ctx, c.Bin, "keygen", "--out", filepath.Join(dir, "p0", "identity.key")).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return nil, fmt.Errorf("demo: keygen: %w", err)
	}
	boot := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/%s", ports[0], strings.TrimSpace(string(out)))
	var peers []*peer
	for i := range c.Peers {
		p := &peer{api: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]), log: filepath.Join(dir, fmt.Sprintf("p%d.log", i)), done: make(chan struct{})}
		args := []string{"run", "--store", filepath.Join(dir, fmt.Sprintf("p%d", i)), "--listen", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[2*i]),
			"--api", p.api, "--dataset", "digits", "--shard", fmt.Sprintf("%d/%d", i, c.Peers), "--partition", c.Partition,
			"--protocol", c.Protocol, "--delta", c.Delta.String(), "--lr", "0.5", "--mdns=false", "--dht", "off",
			"--announce-interval", "1s", "--log-format", "json", "--device", c.Device}
		if i > 0 {
			args = append(args, "--bootstrap", boot)
		}
		log, err := os.Create(p.log)
		if err != nil {
			return peers, err
		}
		p.cmd = exec.Command(c.Bin, args...)
		p.cmd.Stdout, p.cmd.Stderr = log, log
		p.cmd.SysProcAttr = childAttr()
		if err := p.cmd.Start(); err != nil {
			log.Close()
			return peers, fmt.Errorf("demo: peer %d: %w", i, err)
		}
		log.Close() // the child holds its own descriptor
		go func() { p.err = p.cmd.Wait(); close(p.done) }()
		peers = append(peers, p)
	}
	return peers, nil
}

// stop interrupts every daemon (they checkpoint and leave) and waits for
// them, killing any that takes longer than 10 s.
func stop(peers []*peer) {
	for _, p := range peers {
		p.cmd.Process.Signal(os.Interrupt)
	}
	deadline := time.After(10 * time.Second)
	for _, p := range peers {
		select {
		case <-p.done:
		case <-deadline:
			p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// exited is nil while the daemon runs; once it has exited (a usage
// error, a device it cannot open, a crash), how, with the end of its log.
func (p *peer) exited() error {
	select {
	case <-p.done:
	default:
		return nil
	}
	err := p.err
	if err == nil {
		err = errors.New("exit status 0")
	}
	b, _ := os.ReadFile(p.log)
	b = bytes.TrimSpace(b)
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return fmt.Errorf("the daemon exited (%w) while the demo ran; its log (%s) ends:\n%s", err, filepath.Base(p.log), b)
}

var client = &http.Client{Timeout: time.Second}

// poll reads the daemon's status and notes its accuracy at time t.
func (p *peer) poll(t float64) {
	resp, err := client.Get("http://" + p.api + "/status")
	if err != nil {
		p.ok = false
		return
	}
	defer resp.Body.Close()
	var s peerStatus
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&s); err != nil {
		p.ok = false
		return
	}
	p.last, p.ok = s, true
	p.hist = append(p.hist, point{t, s.Accuracy})
}

// stats are the mean, min and max accuracy of the peers that answered.
func stats(peers []*peer) (mean, lo, hi float64, n int) {
	lo = 1
	for _, p := range peers {
		if !p.ok {
			continue
		}
		n++
		a := p.last.Accuracy
		mean += a
		lo, hi = min(lo, a), max(hi, a)
	}
	if n == 0 {
		return 0, 0, 0, 0
	}
	return mean / float64(n), lo, hi, n
}

func kB(b uint64) string {
	if b >= 1e6 {
		return fmt.Sprintf("%.1f MB", float64(b)/1e6)
	}
	return fmt.Sprintf("%.0f kB", float64(b)/1e3)
}
