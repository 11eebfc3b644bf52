//go:build soak

package main

// The soak test, `make soak` (not part of `make test`): real daemons on
// 127.0.0.1, hundreds of kill -9s of random members of a job per
// protocol, full disks, damaged stores, a foreign job on the same host,
// and an hour of churn watched for leaks. It writes a markdown report.
//
//	SOAK_KILLS=300 SOAK_DURATION=1h SOAK_PROTOCOLS=randomwalk,dpsgd,pushsum \
//	    go test -tags soak -run '^TestSoak$' -count=1 -timeout 4h -v ./cmd/gossipd
//
// Knobs (environment): SOAK_KILLS (kill -9s per protocol, default 300),
// SOAK_DISKFULL (full-disk episodes per protocol, default 3),
// SOAK_DURATION (the long run, default 1h; 0 skips it), SOAK_CHURN (a
// member of the long run stopped and restarted this often, default 1m),
// SOAK_PROTOCOLS (default randomwalk,dpsgd,pushsum; empty: none),
// SOAK_SEED (default: the clock; always logged and reported), SOAK_REPORT
// (default soak-report.md at the repository's root).
//
// The random gaps between injected faults are fault timing, drawn from a
// seeded generator; every wait for a daemon's state polls with a deadline.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// soakSettings are the soak's knobs, from the environment.
type soakSettings struct {
	kills     int           // kill -9s per protocol
	diskFull  int           // full-disk episodes per protocol
	duration  time.Duration // the long run (0: none)
	churn     time.Duration // the long run's time between churn events
	protocols []string
	seed      uint64
	report    string
}

// Gaps between injected faults (fault timing, not synchronization).
const (
	soakGapMin = 100 * time.Millisecond
	soakGapMax = 1500 * time.Millisecond
	// soakMaxFailures ends a protocol's run after this many failed checks:
	// past that, later checks mostly repeat the first failure.
	soakMaxFailures = 10
	// soakMassTol is push-sum's tolerance: |Σw − n| ≤ soakMassTol·n.
	soakMassTol = 1e-6
	// soakMembers is each protocol's job size; soakLongMembers the long run's.
	soakMembers     = 3
	soakLongMembers = 5
	// soakTmpfsMiB is the size of the filesystem that is filled: room for
	// the store's write-ahead logs (16 MiB each, allocated) and the
	// daemon's spare space (12 MiB) however many restarts it takes.
	soakTmpfsMiB = 128
)

func soakConfig(t *testing.T) soakSettings {
	t.Helper()
	s := soakSettings{kills: 300, diskFull: 3, duration: time.Hour, churn: time.Minute,
		protocols: []string{"randomwalk", "dpsgd", "pushsum"}, seed: uint64(time.Now().UnixNano())}
	num := func(name string, dst *int) {
		if v, ok := os.LookupEnv(name); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a count ≥ 0", name, v)
			}
			*dst = n
		}
	}
	dur := func(name string, dst *time.Duration) {
		if v, ok := os.LookupEnv(name); ok {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				t.Fatalf("%s=%q: want a duration ≥ 0 (e.g. 1h, 3m)", name, v)
			}
			*dst = d
		}
	}
	num("SOAK_KILLS", &s.kills)
	num("SOAK_DISKFULL", &s.diskFull)
	dur("SOAK_DURATION", &s.duration)
	dur("SOAK_CHURN", &s.churn)
	if s.churn <= 0 {
		t.Fatalf("SOAK_CHURN=%v: want a positive interval", s.churn)
	}
	if v, ok := os.LookupEnv("SOAK_PROTOCOLS"); ok {
		s.protocols = nil
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			if !slices.Contains([]string{"randomwalk", "dpsgd", "pushsum", "adpsgd", "sfb"}, p) {
				t.Fatalf("SOAK_PROTOCOLS: unknown protocol %q", p)
			}
			s.protocols = append(s.protocols, p)
		}
	}
	if v := os.Getenv("SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED=%q: want an unsigned integer", v)
		}
		s.seed = n
	}
	s.report = os.Getenv("SOAK_REPORT")
	if s.report == "" {
		s.report = filepath.Join("..", "..", "soak-report.md") // the repository's root
	}
	if abs, err := filepath.Abs(s.report); err == nil {
		s.report = abs
	}
	return s
}

// TestSoak runs each protocol's kill series and the long run side by side
// (each in its own processes), then writes the report, also when a check
// failed.
func TestSoak(t *testing.T) {
	cfg := soakConfig(t)
	t.Logf("soak: seed %d (SOAK_SEED=%d repeats the choices), %d kills and %d full-disk episodes per protocol over %v, long run %v with churn every %v; report %s",
		cfg.seed, cfg.seed, cfg.kills, cfg.diskFull, cfg.protocols, cfg.duration, cfg.churn, cfg.report)
	if dl, ok := t.Deadline(); ok && time.Until(dl) < cfg.duration+15*time.Minute {
		t.Fatalf("-timeout leaves %v: too short for SOAK_DURATION=%v and the report (give it at least 15 minutes more)", time.Until(dl).Round(time.Second), cfg.duration)
	}
	began := time.Now()
	bin := buildBinary(t)
	results := make([]*protoResult, len(cfg.protocols))
	var long *longResult
	if cfg.duration > 0 {
		long = &longResult{members: soakLongMembers, duration: cfg.duration, churns: map[string]int{}, restarts: make([]int, soakLongMembers)}
	}
	t.Cleanup(func() { // after every subtest
		if err := writeSoakReport(cfg, began, results, long, t.Failed()); err != nil {
			t.Errorf("report: %v", err)
			return
		}
		t.Logf("soak report: %s", cfg.report)
	})
	for i, proto := range cfg.protocols {
		results[i] = &protoResult{protocol: proto, minMargin: math.MaxInt64, wrongJob: map[string]uint64{}, rejected: map[string]uint64{}}
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			soakProtocol(t, bin, cfg, uint64(i)+1, results[i])
		})
	}
	if long != nil {
		t.Run("longrun", func(t *testing.T) {
			t.Parallel()
			soakLong(t, bin, cfg, long)
		})
	}
}

// member is a daemon whose exit a goroutine watches, so that the soak can
// tell a restart that answers from one that refuses, without blocking.
type member struct {
	*proc
	name    string
	done    chan error // cmd.Wait's result, once
	exit    *error     // set once the process has exited
	logFrom int64      // the log's size when this process started
	starts  int
}

// launch starts the daemon on its arguments and watches its exit.
func (m *member) launch(t *testing.T, bin string) {
	t.Helper()
	if fi, err := os.Stat(m.log); err == nil {
		m.logFrom = fi.Size()
	}
	m.start(t, bin)
	m.watch()
}

func (m *member) watch() {
	done, cmd := make(chan error, 1), m.cmd
	go func() { done <- cmd.Wait() }()
	m.done, m.exit = done, nil
	m.starts++
}

// exited says whether the process has exited, and how.
func (m *member) exited() (error, bool) {
	if m.exit != nil {
		return *m.exit, true
	}
	select {
	case err := <-m.done:
		m.exit = &err
		return err, true
	default:
		return nil, false
	}
}

// signal sends sig and waits (bounded) for the process to exit.
func (m *member) signal(sig syscall.Signal, limit time.Duration) error {
	if err, ok := m.exited(); ok {
		return fmt.Errorf("%s had already exited (%v)", m.name, err)
	}
	if err := m.cmd.Process.Signal(sig); err != nil {
		return err
	}
	select {
	case err := <-m.done:
		m.exit = &err
		if sig == syscall.SIGKILL {
			return nil // killed, as asked
		}
		return err
	case <-time.After(limit):
		m.cmd.Process.Kill()
		err := <-m.done
		m.exit = &err
		return fmt.Errorf("%s did not exit within %v of %v", m.name, limit, sig)
	}
}

// lastWords is the end of what this process logged: a refusal's reason.
func (m *member) lastWords() string {
	f, err := os.Open(m.log)
	if err != nil {
		return ""
	}
	defer f.Close()
	f.Seek(m.logFrom, io.SeekStart)
	b, _ := io.ReadAll(f)
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// up waits until the daemon's API answers (its first status) or it exits
// (a refusal: its exit and last words); err says it did neither in time.
func (m *member) up(limit time.Duration) (s status, refusal string, err error) {
	deadline := time.Now().Add(limit)
	for {
		if e, ok := m.exited(); ok {
			why := m.lastWords()
			if why == "" {
				why = "(no message)"
			}
			return s, fmt.Sprintf("%v: %s", e, why), nil
		}
		if s, err = m.status(); err == nil {
			return s, "", nil
		}
		if time.Now().After(deadline) {
			return s, "", fmt.Errorf("%s neither answered nor exited within %v: %v; log tail:\n%s", m.name, limit, err, m.lastWords())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFor polls the daemon's status until cond holds (bounded).
func (m *member) waitFor(what string, limit time.Duration, cond func(status) bool) (status, error) {
	deadline := time.Now().Add(limit)
	for {
		s, err := m.status()
		if err == nil && cond(s) {
			return s, nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(m.log)
			return s, fmt.Errorf("%s: timed out after %v waiting for %s (last status: checkpoint %d, dp_steps %d, members %d, messages_in %d; err %v); log tail:\n%s",
				m.name, limit, what, s.Checkpoint, s.DPSteps, s.Members, s.MessagesIn, err, tail(string(log), 1500))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitField polls one field of the daemon's /status until cond holds.
func (m *member) waitField(name string, limit time.Duration, cond func(string) bool) error {
	deadline := time.Now().Add(limit)
	for {
		v, err := statusField(m.proc, name)
		s, _ := v.(string)
		if err == nil && cond(s) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: timed out after %v waiting on %s (last %q, err %v)", m.name, limit, name, s, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metricValue reads one series of the daemon's /metrics.
func metricValue(d *proc, name string) (float64, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + d.api + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s: no series %s in /metrics", d.api, name)
}

// protoResult is what one protocol's soak saw.
type protoResult struct {
	protocol    string
	kills       int
	fullKills   int      // of kills, while the store's disk was full
	restartsOK  int      // restarts after a kill -9 that answered
	refusals    []string // after a plain kill -9: a bug
	fullRefused []string // after a kill -9 on a full disk: with their reason
	minMargin   int64    // resumed_from_seq − the last checkpoint_seq seen before the kill
	resumeLow   int      // restarts that resumed below the last checkpoint seen, or younger than it
	epsChecks   int
	epsLower    int
	massChecks  int
	massMaxDev  float64 // the largest |Σw − n|/n at which a settle point settled
	massBreak   string  // where Σw first settled away from n
	wrongJob    map[string]uint64
	rejected    map[string]uint64 // every reason, every daemon, every lifetime
	foreignPeer int               // the most peers the foreign job's daemon had
	diskFull    []string          // one outcome per episode
	diskSkip    string            // why there were none
	damage      string
	final       []status
	storeMiB    []float64
	failures    []string
	stoppedAt   string // why the series ended early
}

// soakCluster is one protocol's job under fault injection.
type soakCluster struct {
	t       *testing.T
	bin     string
	dir     string
	ms      []*member
	foreign *member
	res     *protoResult
	rng     *rand.Rand
	dfIdx   int    // the member whose store is on a small filesystem (-1: none)
	dfDir   string // that filesystem
	// massBase is the Σw settle points expect once it settled away from
	// the member count (0: the member count).
	massBase float64
	// Rejections by reason of each daemon: the counts of its ended
	// lifetimes, and the latest read of its current one (counters only
	// grow within a lifetime and restart at 0).
	closed, current map[string]map[string]uint64
}

// fail records a failed check and, past soakMaxFailures, ends the series.
func (c *soakCluster) fail(format string, args ...any) {
	c.t.Helper()
	msg := fmt.Sprintf(format, args...)
	c.res.failures = append(c.res.failures, firstLine(msg))
	c.t.Error(msg)
	if len(c.res.failures) >= soakMaxFailures {
		c.res.stoppedAt = fmt.Sprintf("after %d failed checks", len(c.res.failures))
		c.t.FailNow()
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// noteRejected takes a daemon's latest rejection counts.
func (c *soakCluster) noteRejected(name string, r map[string]uint64) {
	c.current[name] = copyCounts(r)
}

// endLifetime adds a daemon's current counts to its ended lifetimes'.
func (c *soakCluster) endLifetime(name string) {
	if c.closed[name] == nil {
		c.closed[name] = map[string]uint64{}
	}
	for k, v := range c.current[name] {
		c.closed[name][k] += v
	}
	delete(c.current, name)
}

func copyCounts(r map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(r))
	for k, v := range r {
		out[k] = v
	}
	return out
}

// tallyRejected puts every daemon's rejections, over all its lifetimes,
// into the result.
func (c *soakCluster) tallyRejected() {
	c.res.rejected = map[string]uint64{}
	for _, m := range append(slices.Clone(c.ms), c.foreign) {
		total := map[string]uint64{}
		for _, src := range []map[string]uint64{c.closed[m.name], c.current[m.name]} {
			for k, v := range src {
				total[k] += v
			}
		}
		c.res.wrongJob[m.name] = total["wrong_job"]
		for k, v := range total {
			c.res.rejected[k] += v
		}
	}
}

// sweep reads every daemon (the job's and the foreign one) at once: their
// rejections, the foreign daemon's peers; it returns the members'
// statuses (ok false where one did not answer).
func (c *soakCluster) sweep() ([]status, bool) {
	all := append(slices.Clone(c.ms), c.foreign)
	ss := make([]status, len(all))
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, m := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss[i], errs[i] = m.status()
		}()
	}
	wg.Wait()
	ok := true
	for i, m := range all {
		if errs[i] != nil {
			if m != c.foreign {
				ok = false
			}
			continue
		}
		c.noteRejected(m.name, ss[i].Rejected)
		if m == c.foreign {
			c.res.foreignPeer = max(c.res.foreignPeer, ss[i].Peers)
		}
	}
	return ss[:len(c.ms)], ok
}

// settle waits until every member sees the whole job and, for push-sum,
// until the weights over the live members sum to their number (polled:
// a share in flight is counted nowhere). Where they never do, the sum
// they keep coming back to (the most frequent one) is reported and
// becomes what later settle points expect, so that one loss of push-sum
// mass fails once and a further one fails again.
func (c *soakCluster) settle(proto, when string) {
	c.t.Helper()
	n := len(c.ms)
	for _, m := range c.ms {
		if _, err := m.waitFor(fmt.Sprintf("%d live members (%s)", n, when), 90*time.Second, func(s status) bool { return s.Members == n }); err != nil {
			c.fail("%s: %v", when, err)
			return
		}
	}
	want := float64(n)
	if c.massBase != 0 {
		want = c.massBase
	}
	seen := map[float64]int{} // sums, rounded, and how often
	deadline := time.Now().Add(60 * time.Second)
	for {
		ss, ok := c.sweep()
		if proto != "pushsum" {
			return
		}
		if ok {
			sum := 0.0
			for _, s := range ss {
				sum += s.PushSumWeight
			}
			if math.Abs(sum-want) <= soakMassTol*float64(n) {
				c.res.massChecks++
				c.res.massMaxDev = max(c.res.massMaxDev, math.Abs(sum-float64(n))/float64(n))
				return
			}
			seen[math.Round(sum*1e9)/1e9]++
		}
		if time.Now().After(deadline) {
			steady, times := 0.0, 0
			for v, k := range seen {
				if k > times || (k == times && v < steady) {
					steady, times = v, k
				}
			}
			total := 0
			for _, k := range seen {
				total += k
			}
			c.res.massChecks++
			c.res.massMaxDev = max(c.res.massMaxDev, math.Abs(steady-float64(n))/float64(n))
			if c.res.massBreak == "" {
				c.res.massBreak = fmt.Sprintf("at %s: Σw settled at %.6g instead of %d", when, steady, n)
			}
			c.massBase = steady
			c.fail("%s: push-sum weights over %d live members never summed to %.6g (within %g relative) in 60 s; they came back to %.6g in %d of %d reads",
				when, n, want, soakMassTol, steady, times, total)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restart starts a stopped member on its arguments and waits for its API
// or its refusal; a restart that does neither ends the series.
func (c *soakCluster) restart(m *member) (status, string) {
	c.t.Helper()
	m.launch(c.t, c.bin)
	s, refusal, err := m.up(60 * time.Second)
	if err != nil {
		m.signal(syscall.SIGKILL, 30*time.Second)
		c.res.stoppedAt = "a restart that neither answered nor exited"
		c.res.failures = append(c.res.failures, firstLine(err.Error()))
		c.t.Fatal(err)
	}
	return s, refusal
}

// recoverStore starts a member that refused with --store-recover, then
// takes its plain arguments back for later restarts.
func (c *soakCluster) recoverStore(m *member) (status, bool) {
	c.t.Helper()
	base := m.args
	m.args = append(slices.Clone(base), "--store-recover")
	s, refusal := c.restart(m)
	m.args = base
	if refusal != "" {
		c.fail("%s refused even with --store-recover: %s", m.name, refusal)
		return s, false
	}
	return s, true
}

// ensureUp restarts a member that an episode left stopped (after a
// failed check), so that the series goes on.
func (c *soakCluster) ensureUp(m *member) {
	c.t.Helper()
	if _, ok := m.exited(); !ok {
		return
	}
	if _, refusal := c.restart(m); refusal != "" {
		c.recoverStore(m)
	}
}

// checkResume: after a restart, the model resumed at or after the last
// checkpoint the daemon reported, and ε never went back.
func (c *soakCluster) checkResume(what string, before, after status) {
	c.t.Helper()
	margin := int64(after.ResumedFrom) - int64(before.Checkpoint)
	c.res.minMargin = min(c.res.minMargin, margin)
	if margin < 0 || after.ModelAge < before.CkptAge {
		c.res.resumeLow++
		c.fail("%s: resumed from checkpoint %d with model age %v; before: checkpoint %d of age %v",
			what, after.ResumedFrom, after.ModelAge, before.Checkpoint, before.CkptAge)
	}
	c.res.epsChecks++
	if after.DPEpsilon < before.DPEpsilon || after.DPSteps < before.DPSteps {
		c.res.epsLower++
		c.fail("%s: ε %v after %d steps; before, ε %v after %d steps", what, after.DPEpsilon, after.DPSteps, before.DPEpsilon, before.DPSteps)
	}
}

// rejoin waits until a restarted member sees the whole job and learns on.
func (c *soakCluster) rejoin(m *member, first status, what string) {
	c.t.Helper()
	n := len(c.ms)
	if _, err := m.waitFor("rejoining the job and updating", 90*time.Second, func(s status) bool {
		return s.Members == n && s.Updates > first.Updates
	}); err != nil {
		c.fail("%s: %v", what, err)
	}
}

// soakProtocol runs one protocol's series: kills, full disks, a damaged
// store, with a foreign job beside it.
func soakProtocol(t *testing.T, bin string, cfg soakSettings, stream uint64, res *protoResult) {
	dir := t.TempDir()
	keepLogs(t, cfg, dir, res.protocol)
	c := &soakCluster{t: t, bin: bin, dir: dir, res: res, rng: rand.New(rand.NewPCG(cfg.seed, stream)), dfIdx: -1,
		closed: map[string]map[string]uint64{}, current: map[string]map[string]uint64{}}
	proto := res.protocol
	defer func() { // also when a check ended the series
		if len(c.ms) > 0 {
			c.tallyRejected()
		}
	}()
	// The last member's store on a small filesystem, to fill.
	if cfg.diskFull > 0 {
		c.dfIdx = soakMembers - 1
		c.dfDir = filepath.Join(dir, fmt.Sprintf("n%d", c.dfIdx))
		if err := mountTmpfs(t, c.dfDir, soakTmpfsMiB); err != nil {
			res.diskSkip = fmt.Sprintf("no full-disk episodes: cannot mount a %d MiB tmpfs (needs root and mount(8)): %v", soakTmpfsMiB, err)
			t.Log(res.diskSkip)
			c.dfIdx = -1
		}
	} else {
		res.diskSkip = "SOAK_DISKFULL=0"
	}
	ds := startCluster(t, bin, dir, soakMembers, "100ms", "--protocol", proto,
		"--dp-clip", "1", "--dp-noise", "1.1", "--checkpoint-every", "2")
	for i, d := range ds {
		c.ms = append(c.ms, &member{proc: d, name: fmt.Sprintf("n%d", i)})
		c.ms[i].watch()
	}
	t.Cleanup(func() { // before startCluster's, which would Wait again
		for _, m := range c.ms {
			if _, ok := m.exited(); !ok {
				m.signal(syscall.SIGKILL, 30*time.Second)
			}
		}
		if c.foreign != nil {
			if _, ok := c.foreign.exited(); !ok {
				c.foreign.signal(syscall.SIGKILL, 30*time.Second)
			}
		}
	})
	first, err := c.ms[0].waitFor("the first member's API", 60*time.Second, func(status) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	// A foreign job's daemon (another --name, same protocol) on the same
	// host, bootstrapped through member 0: nothing of it may be merged.
	port := freePorts(t, 2)
	c.foreign = &member{name: "foreign", proc: &proc{api: fmt.Sprintf("127.0.0.1:%d", port[1]), log: filepath.Join(dir, "foreign.log"),
		args: []string{"run", "--store", filepath.Join(dir, "foreign"), "--listen", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port[0]),
			"--api", fmt.Sprintf("127.0.0.1:%d", port[1]), "--shard", "0/1", "--delta", "100ms", "--lr", "0.5", "--mdns=false",
			"--log-format", "json", "--announce-interval", "500ms", "--protocol", proto, "--name", "soak-foreign",
			"--bootstrap", c.ms[0].flag("--listen") + "/p2p/" + first.PeerID}}}
	c.foreign.launch(t, bin)
	if _, refusal, err := c.foreign.up(60 * time.Second); err != nil || refusal != "" {
		t.Fatalf("the foreign job's daemon: %v %s", err, refusal)
	}
	for _, m := range c.ms {
		if _, err := m.waitFor("checkpoints and DP-SGD steps", 90*time.Second, func(s status) bool { return s.Checkpoint >= 1 && s.DPSteps > 0 }); err != nil {
			t.Fatal(err)
		}
	}
	c.settle(proto, "start")

	// Full-disk episodes at even intervals of the kills, a damaged store
	// half-way.
	diskAt := map[int][]int{}
	if c.dfIdx >= 0 {
		for j := 0; j < cfg.diskFull; j++ {
			k := (j + 1) * cfg.kills / (cfg.diskFull + 1)
			diskAt[k] = append(diskAt[k], j)
		}
	}
	for k := 0; k <= cfg.kills; k++ {
		if dl, ok := t.Deadline(); ok && time.Until(dl) < 10*time.Minute {
			res.stoppedAt = fmt.Sprintf("after %d kills: the test's -timeout is near", res.kills)
			t.Errorf("%s: stopping early, %s", proto, res.stoppedAt)
			break
		}
		for _, j := range diskAt[k] {
			c.diskFullEpisode(proto, j, j == cfg.diskFull-1)
		}
		if k == cfg.kills/2 {
			c.damageEpisode(proto)
		}
		if k == cfg.kills {
			break
		}
		// Fault timing: a random gap, then a random member.
		time.Sleep(soakGapMin + time.Duration(c.rng.Int64N(int64(soakGapMax-soakGapMin))))
		c.killOne(proto, k)
		if (k+1)%25 == 0 {
			t.Logf("%s: %d/%d kills, %d restarts answered, %d refusals, %d failed checks", proto, k+1, cfg.kills, res.restartsOK, len(res.refusals), len(res.failures))
		}
	}

	// The end: every member learned with DP-SGD, no frame of the other job
	// was taken, every daemon stops cleanly.
	c.settle(proto, "end")
	ss, _ := c.sweep()
	res.final = ss
	for i, s := range ss {
		if s.DPSteps == 0 || s.DPEpsilon <= 0 {
			c.fail("%s: no DP-SGD step at the end (dp_steps %d, ε %v): the ε checks were vacuous", c.ms[i].name, s.DPSteps, s.DPEpsilon)
		}
	}
	c.tallyRejected()
	var leaks []string
	for _, name := range sortedKeys(res.wrongJob) {
		if n := res.wrongJob[name]; n > 0 {
			leaks = append(leaks, fmt.Sprintf("%s %d", name, n))
		}
	}
	if len(leaks) > 0 {
		c.fail("frames of the other job reached the daemons (wrong_job: %s): the two jobs on one host were not kept apart", strings.Join(leaks, ", "))
	}
	for _, m := range append(slices.Clone(c.ms), c.foreign) {
		if err := m.signal(syscall.SIGTERM, 30*time.Second); err != nil {
			c.fail("%s: stopping with SIGTERM: %v", m.name, err)
		}
	}
	for _, m := range c.ms {
		res.storeMiB = append(res.storeMiB, float64(diskUsage(m.flag("--store")))/(1<<20))
	}
}

// killOne kill -9s a random member, restarts it and checks what it resumed.
func (c *soakCluster) killOne(proto string, k int) {
	c.t.Helper()
	m := c.ms[c.rng.IntN(len(c.ms))]
	before, err := m.status()
	if err != nil {
		c.fail("kill %d: %s's status before the kill: %v", k+1, m.name, err)
		return
	}
	c.noteRejected(m.name, before.Rejected)
	if err := m.signal(syscall.SIGKILL, 30*time.Second); err != nil {
		c.fail("kill %d: %v", k+1, err)
		return
	}
	c.endLifetime(m.name)
	c.res.kills++
	what := fmt.Sprintf("kill %d of %s", k+1, m.name)
	after, refusal := c.restart(m)
	if refusal != "" {
		c.res.refusals = append(c.res.refusals, fmt.Sprintf("%s: %s", what, refusal))
		c.fail("%s: the restart after a plain kill -9 refused: %s", what, refusal)
		var ok bool
		if after, ok = c.recoverStore(m); !ok {
			c.t.FailNow()
		}
	} else {
		c.res.restartsOK++
		c.checkResume(what, before, after)
	}
	c.rejoin(m, after, what)
	c.settle(proto, what)
}

// diskFullEpisode fills the small filesystem of one member's store: the
// member keeps running, its checkpoints and the privacy ledger fail and
// say why, no DP-SGD step is taken; with kill, it is also killed -9 while
// the disk is full and restarted. Once the space is back, checkpoints and
// steps resume.
func (c *soakCluster) diskFullEpisode(proto string, j int, kill bool) {
	c.t.Helper()
	m := c.ms[c.dfIdx]
	what := fmt.Sprintf("full disk %d (%s)", j+1, m.name)
	outcome := what + ": "
	defer func() { c.res.diskFull = append(c.res.diskFull, outcome) }()
	defer c.ensureUp(m) // after the filler's removal, below
	failed := func(format string, args ...any) {
		c.t.Helper()
		msg := fmt.Sprintf(format, args...)
		outcome += "FAILED: " + firstLine(msg)
		c.fail("%s: %s", what, msg)
	}
	if _, err := m.waitFor("checkpoints and DP-SGD steps", 60*time.Second, func(s status) bool { return s.Checkpoint >= 1 && s.DPSteps > 0 }); err != nil {
		failed("%v", err)
		return
	}
	filler := fillUp(c.t, c.dfDir)
	defer os.Remove(filler)
	for _, f := range []string{"checkpoint_error", "ledger_error"} {
		if err := m.waitField(f, 60*time.Second, func(s string) bool { return strings.Contains(s, "disk full") }); err != nil {
			failed("%v", err)
			return
		}
	}
	full, err := m.status()
	if err != nil {
		failed("%v", err)
		return
	}
	later, err := m.waitFor("more messages while the disk is full", 60*time.Second, func(s status) bool { return s.MessagesIn >= full.MessagesIn+20 })
	if err != nil {
		failed("%v", err)
		return
	}
	if later.DPSteps != full.DPSteps {
		failed("DP-SGD steps went from %d to %d while the ledger could not record them", full.DPSteps, later.DPSteps)
		return
	}
	if f, err := metricValue(m.proc, "gossipd_checkpoint_failures_total"); err != nil || f < 1 {
		failed("gossipd_checkpoint_failures_total %v (%v) with the disk full", f, err)
		return
	}
	outcome += fmt.Sprintf("kept running, checkpoint_error and ledger_error set, DP steps held at %d over %d messages", full.DPSteps, later.MessagesIn-full.MessagesIn)
	refused := false
	if kill {
		c.noteRejected(m.name, later.Rejected)
		if err := m.signal(syscall.SIGKILL, 30*time.Second); err != nil {
			failed("%v", err)
			return
		}
		c.endLifetime(m.name)
		c.res.kills++
		c.res.fullKills++
		after, refusal := c.restart(m)
		if refusal != "" {
			refused = true
			c.res.fullRefused = append(c.res.fullRefused, refusal)
			outcome += "; kill -9 while full: the restart refused: " + refusal
			if !strings.Contains(refusal, "disk full") && !strings.Contains(refusal, "no space") {
				failed("the restart on a full disk refused without saying the disk is full: %s", refusal)
				return
			}
		} else {
			c.res.restartsOK++
			c.checkResume(what+", kill -9 while full", later, after)
			if err := m.waitField("ledger_error", 60*time.Second, func(s string) bool { return strings.Contains(s, "disk full") }); err != nil {
				failed("restarted on a full disk: %v", err)
				return
			}
			s, err := m.waitFor("messages after the restart on a full disk", 60*time.Second, func(s status) bool { return s.MessagesIn >= after.MessagesIn+20 })
			if err != nil {
				failed("%v", err)
				return
			}
			if s.DPSteps != after.DPSteps {
				failed("restarted on a full disk: DP-SGD steps went from %d to %d", after.DPSteps, s.DPSteps)
				return
			}
			outcome += "; kill -9 while full: restarted, resumed, ledger_error set, steps held"
		}
	}
	base, _ := m.status()
	if err := os.Remove(filler); err != nil {
		failed("%v", err)
		return
	}
	if refused {
		after, refusal := c.restart(m)
		if refusal != "" {
			failed("refused again once the disk had room: %s", refusal)
			return
		}
		c.checkResume(what+", restart once freed", later, after)
		base = after
	}
	for _, f := range []string{"checkpoint_error", "ledger_error"} {
		if err := m.waitField(f, 60*time.Second, func(s string) bool { return s == "" }); err != nil {
			failed("once freed: %v", err)
			return
		}
	}
	if _, err := m.waitFor("checkpoints and DP-SGD steps once freed", 60*time.Second, func(s status) bool {
		return s.Checkpoint > base.Checkpoint && s.DPSteps > base.DPSteps
	}); err != nil {
		failed("%v", err)
		return
	}
	outcome += "; freed: checkpoints and DP steps resumed"
	c.rejoin(m, base, what)
	c.settle(proto, what)
}

// damageEpisode stops a member (SIGTERM), damages its store (a truncated
// MANIFEST or an emptied table file, chosen at random), and checks that
// it refuses to start saying why, that export refuses and changes
// nothing, and that --store-recover resumes with ε no lower.
func (c *soakCluster) damageEpisode(proto string) {
	c.t.Helper()
	m := c.ms[1]
	store := m.flag("--store")
	ckpts := filepath.Join(store, "checkpoints")
	kind := []string{"truncated MANIFEST", "empty table file"}[c.rng.IntN(2)]
	c.res.damage = kind + ": "
	defer c.ensureUp(m)
	failed := func(format string, args ...any) {
		c.t.Helper()
		msg := fmt.Sprintf(format, args...)
		c.res.damage += "FAILED: " + firstLine(msg)
		c.fail("damaged store (%s): %s", kind, msg)
	}
	before, err := m.waitFor("checkpoints and DP-SGD steps", 60*time.Second, func(s status) bool { return s.Checkpoint >= 3 && s.DPSteps > 0 })
	if err != nil {
		failed("%v", err)
		return
	}
	c.noteRejected(m.name, before.Rejected)
	if err := m.signal(syscall.SIGTERM, 30*time.Second); err != nil {
		failed("stopping with SIGTERM: %v", err)
		return
	}
	c.endLifetime(m.name)
	final, err := ledgerOf(c.bin, m.proc)
	if err != nil || len(final.Data) == 0 {
		failed("the stopped daemon's ledger: %v %+v", err, final)
		return
	}
	if kind == "empty table file" {
		tables, _ := filepath.Glob(filepath.Join(ckpts, "*.sst"))
		if len(tables) == 0 {
			kind = "truncated MANIFEST (no table file to empty)"
		} else if err := os.Truncate(tables[c.rng.IntN(len(tables))], 0); err != nil {
			failed("%v", err)
			return
		}
	}
	if strings.HasPrefix(kind, "truncated MANIFEST") {
		if err := os.Truncate(filepath.Join(ckpts, "MANIFEST"), 10); err != nil {
			failed("%v", err)
			return
		}
	}
	c.res.damage = kind + ": "
	sum := dirSum(c.t, store)
	s, refusal := c.restart(m)
	if refusal == "" {
		failed("the daemon started on a damaged store (resumed from %d)", s.ResumedFrom)
		c.rejoin(m, s, "damaged store")
		return
	}
	for _, want := range []string{"damaged", "--store-recover"} {
		if !strings.Contains(refusal, want) {
			failed("the refusal does not say %q: %s", want, refusal)
			return
		}
	}
	c.res.damage += "start refused (" + firstLine(refusal) + "); "
	for _, args := range [][]string{
		{"export", "--store", store, "--out", filepath.Join(c.t.TempDir(), "m.safetensors")},
		{"privacy", "ledger", "--store", store},
	} {
		out, err := exec.Command(c.bin, args...).CombinedOutput()
		if err == nil || !bytes.Contains(out, []byte("damaged")) {
			failed("gossipd %s on the damaged store: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
	}
	if dirSum(c.t, store) != sum {
		failed("a refused start, export or privacy ledger changed the store")
		return
	}
	c.res.damage += "export and privacy ledger refused, store unchanged; "
	after, ok := c.recoverStore(m)
	if !ok {
		c.res.damage += "FAILED: --store-recover refused"
		return
	}
	c.res.epsChecks++
	if after.DPEpsilon < final.Data[0].Epsilon || after.DPSteps < final.Data[0].Steps {
		c.res.epsLower++
		failed("recovered at ε %v after %d steps; the ledger had ε %v after %d", after.DPEpsilon, after.DPSteps, final.Data[0].Epsilon, final.Data[0].Steps)
		return
	}
	c.res.damage += fmt.Sprintf("--store-recover resumed from checkpoint %d (last before the stop: %d), ε %.4g ≥ %.4g", after.ResumedFrom, before.Checkpoint, after.DPEpsilon, final.Data[0].Epsilon)
	c.rejoin(m, after, "damaged store")
	c.settle(proto, "damaged store")
}

// keepLogs copies the daemons' logs of a failed run next to the report
// (soak-logs/NAME/), before the test's directory is removed.
func keepLogs(t *testing.T, cfg soakSettings, dir, name string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dst := filepath.Join(filepath.Dir(cfg.report), "soak-logs", name)
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Logf("keeping the logs: %v", err)
			return
		}
		for _, l := range logs {
			if b, err := os.ReadFile(l); err == nil {
				os.WriteFile(filepath.Join(dst, filepath.Base(l)), b, 0o644)
			}
		}
		t.Logf("the daemons' logs: %s", dst)
	})
}

// mountTmpfs mounts a tmpfs of mib MiB at dir, unmounted when the test
// ends; an error says this process may not.
func mountTmpfs(t *testing.T, dir string, mib int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", mib), "tmpfs", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return nil
}

// diskUsage is the space the files under dir take (allocated blocks, as
// du counts them: badger's logs are sparse or preallocated).
func diskUsage(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// procSample is a daemon's resources: VmRSS and its anonymous and
// file-backed parts, threads, open descriptors, goroutines.
type procSample struct {
	rssKiB, anonKiB, fileKiB, threads, fds, goroutines int
	uptime                                             float64
}

// sampleProc reads a daemon's RSS and threads (/proc/PID/status), open
// descriptors (/proc/PID/fd) and goroutines (go_goroutines in /metrics).
func sampleProc(m *member) (procSample, error) {
	var p procSample
	pid := m.cmd.Process.Pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return p, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "VmRSS:":
			p.rssKiB = v
		case "RssAnon:":
			p.anonKiB = v
		case "RssFile:":
			p.fileKiB = v
		case "Threads:":
			p.threads = v
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return p, err
	}
	p.fds = len(fds)
	g, err := metricValue(m.proc, "go_goroutines")
	if err != nil {
		return p, err
	}
	p.goroutines = int(g)
	s, err := m.status()
	if err != nil {
		return p, err
	}
	p.uptime = s.Uptime
	if p.rssKiB == 0 || p.anonKiB == 0 {
		return p, fmt.Errorf("no VmRSS or RssAnon in /proc/%d/status", pid)
	}
	return p, nil
}

// The long run's samples are floors: the least of longReads reads
// longReadGap apart. Badger builds each table in memory when it flushes
// a memtable, which lifts the anonymous RSS by tens of MiB for some
// seconds; a leak lifts the floor.
const (
	longReads   = 6
	longReadGap = 5 * time.Second
)

func floorSample(a, b procSample) procSample {
	return procSample{rssKiB: min(a.rssKiB, b.rssKiB), anonKiB: min(a.anonKiB, b.anonKiB), fileKiB: min(a.fileKiB, b.fileKiB),
		threads: min(a.threads, b.threads), fds: min(a.fds, b.fds), goroutines: min(a.goroutines, b.goroutines), uptime: max(a.uptime, b.uptime)}
}

// longResult is what the long run saw.
type longResult struct {
	members    int
	duration   time.Duration
	warmup     time.Duration
	churns     map[string]int // by signal
	restarts   []int          // per member
	start, end []procSample
	startOK    bool
	endOK      bool
	verdicts   []string
	failures   []string
	finalSteps []uint64
	finalAcc   []float64
}

// Leak margins for the member that is never restarted, from the sample
// after the warm-up to the end.
const (
	longRSSFactor   = 1.5
	longRSSSlackKiB = 30 << 10
	longGorFactor   = 1.2
	longFDSlack     = 10
)

// soakLong runs a 5-member random-walk job with DP-SGD for the soak's
// duration; every churn interval (±20%) a random member other than 0 is
// stopped, SIGTERM and SIGKILL in turn, and restarted. Member 0 is never
// restarted: its anonymous RSS, goroutines and descriptors after the
// warm-up and at the end must stay within the margins above.
func soakLong(t *testing.T, bin string, cfg soakSettings, res *longResult) {
	rng := rand.New(rand.NewPCG(cfg.seed, 0))
	dir := t.TempDir()
	keepLogs(t, cfg, dir, "longrun")
	n := res.members
	res.warmup = min(max(cfg.duration/6, 30*time.Second), 10*time.Minute)
	fail := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		res.failures = append(res.failures, firstLine(msg))
		t.Error(msg)
		if len(res.failures) >= soakMaxFailures {
			t.FailNow()
		}
	}
	ds := startCluster(t, bin, dir, n, "100ms", "--dp-clip", "1", "--dp-noise", "1.1", "--checkpoint-every", "5")
	ms := make([]*member, n)
	for i, d := range ds {
		ms[i] = &member{proc: d, name: fmt.Sprintf("n%d", i)}
		ms[i].watch()
	}
	t.Cleanup(func() {
		for _, m := range ms {
			if _, ok := m.exited(); !ok {
				m.signal(syscall.SIGKILL, 30*time.Second)
			}
		}
	})
	began := time.Now()
	// whole waits until every member sees all n and member 0 is connected
	// to all others: samples compare like with like.
	whole := func(when string) bool {
		for i, m := range ms {
			if _, err := m.waitFor(fmt.Sprintf("%d live members (%s)", n, when), 90*time.Second, func(s status) bool {
				return s.Members == n && (i != 0 || s.Peers == n-1)
			}); err != nil {
				fail("long run, %s: %v", when, err)
				return false
			}
		}
		return true
	}
	sample := func() ([]procSample, bool) {
		out := make([]procSample, n)
		for r := 0; r < longReads; r++ {
			if r > 0 {
				time.Sleep(longReadGap) // the spacing of the reads, not a wait for a state
			}
			for i, m := range ms {
				p, err := sampleProc(m)
				if err != nil {
					fail("long run: sampling %s: %v", m.name, err)
					return out, false
				}
				if r == 0 {
					out[i] = p
				} else {
					out[i] = floorSample(out[i], p)
				}
			}
		}
		return out, true
	}
	if !whole("start") {
		return
	}
	sig := syscall.SIGTERM
	tried := false // the sample after the warm-up
	for {
		el := time.Since(began)
		if el >= cfg.duration {
			break
		}
		if !tried && el >= res.warmup {
			tried = true
			if whole("after the warm-up") {
				res.start, res.startOK = sample()
				t.Logf("long run: after the warm-up (%v): %+v", res.warmup, res.start)
			}
			continue
		}
		// Fault timing: the churn interval ±20%, cut short by the
		// warm-up's end (to sample then) and by the run's end.
		gap := cfg.churn*4/5 + time.Duration(rng.Int64N(int64(cfg.churn*2/5)+1))
		if !tried {
			gap = min(gap, res.warmup-el)
		}
		time.Sleep(min(gap, cfg.duration-el))
		if el = time.Since(began); el >= cfg.duration || (!tried && el >= res.warmup) {
			continue
		}
		k := 1 + rng.IntN(n-1)
		m := ms[k]
		before, err := m.status()
		if err != nil {
			fail("long run: %s before churn: %v", m.name, err)
			continue
		}
		if err := m.signal(sig, 30*time.Second); err != nil {
			fail("long run: %s: %v: %v", m.name, sig, err)
		}
		res.churns[map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGKILL: "SIGKILL"}[sig]]++
		res.restarts[k]++
		m.launch(t, bin)
		after, refusal, err := m.up(60 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if refusal != "" {
			fail("long run: %s refused to restart after %v: %s", m.name, sig, refusal)
			t.FailNow()
		}
		if after.ResumedFrom < before.Checkpoint || after.DPEpsilon < before.DPEpsilon || after.DPSteps < before.DPSteps {
			fail("long run: %s after %v: resumed from %d (before %d), ε %v after %d steps (before %v after %d)",
				m.name, sig, after.ResumedFrom, before.Checkpoint, after.DPEpsilon, after.DPSteps, before.DPEpsilon, before.DPSteps)
		}
		if _, err := m.waitFor("rejoining", 90*time.Second, func(s status) bool { return s.Members == n && s.Updates > after.Updates }); err != nil {
			fail("long run: %v", err)
		}
		if sig == syscall.SIGTERM {
			sig = syscall.SIGKILL
		} else {
			sig = syscall.SIGTERM
		}
		if events := res.churns["SIGTERM"] + res.churns["SIGKILL"]; events%10 == 0 {
			t.Logf("long run: %v of %v, %d churn events", time.Since(began).Round(time.Second), cfg.duration, events)
		}
	}
	if !whole("end") {
		return
	}
	res.end, res.endOK = sample()
	for _, m := range ms {
		if s, err := m.status(); err == nil {
			res.finalSteps = append(res.finalSteps, s.DPSteps)
			res.finalAcc = append(res.finalAcc, s.Accuracy)
		}
	}
	if !res.startOK || !res.endOK {
		fail("long run: no sample after the warm-up (%v) or at the end: duration %v too short", res.warmup, cfg.duration)
		return
	}
	// The anonymous RSS is checked; VmRSS also counts the pages of the
	// store's memory-mapped logs that badger has touched (RssFile), page
	// cache that grows until a log rotates (128 MiB value logs), and is
	// reported.
	a, b := res.start[0], res.end[0]
	anonLimit := max(int(float64(a.anonKiB)*longRSSFactor), a.anonKiB+longRSSSlackKiB)
	for _, v := range []struct {
		what       string
		from, to   int
		limit      int
		limitTitle string
	}{
		{"anonymous RSS (KiB)", a.anonKiB, b.anonKiB, anonLimit, fmt.Sprintf("+50%% or +30 MiB: %d KiB", anonLimit)},
		{"goroutines", a.goroutines, b.goroutines, int(float64(a.goroutines) * longGorFactor), "+20%"},
		{"open fds", a.fds, b.fds, a.fds + longFDSlack, "+10"},
	} {
		verdict := fmt.Sprintf("n0 %s: %d → %d (limit %s)", v.what, v.from, v.to, v.limitTitle)
		if v.to > v.limit {
			verdict += ": GREW"
			fail("long run: %s", verdict)
		} else {
			verdict += ": flat"
		}
		res.verdicts = append(res.verdicts, verdict)
	}
	for _, m := range ms {
		if err := m.signal(syscall.SIGTERM, 30*time.Second); err != nil {
			fail("long run: stopping %s: %v", m.name, err)
		}
	}
}

// writeSoakReport writes the markdown report.
func writeSoakReport(cfg soakSettings, began time.Time, results []*protoResult, long *longResult, failed bool) error {
	var b strings.Builder
	cpu := "unknown"
	if out, err := exec.Command("lscpu").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(l, "Model name:"); ok {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	nproc := strconv.Itoa(runtime.NumCPU())
	if out, err := exec.Command("nproc").Output(); err == nil {
		nproc = strings.TrimSpace(string(out))
	}
	rev := "unknown"
	if out, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output(); err == nil {
		rev = strings.TrimSpace(string(out))
	}
	verdict := "PASS"
	if failed {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "# gossipd soak report\n\n")
	fmt.Fprintf(&b, "- result: **%s**\n", verdict)
	fmt.Fprintf(&b, "- date: %s; total runtime %v\n", began.UTC().Format(time.RFC3339), time.Since(began).Round(time.Second))
	fmt.Fprintf(&b, "- machine: %s, nproc %s, %s/%s, %s\n", cpu, nproc, runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(&b, "- tree: %s\n", rev)
	fmt.Fprintf(&b, "- settings: SOAK_SEED=%d SOAK_KILLS=%d SOAK_DISKFULL=%d SOAK_DURATION=%v SOAK_CHURN=%v SOAK_PROTOCOLS=%s\n",
		cfg.seed, cfg.kills, cfg.diskFull, cfg.duration, cfg.churn, strings.Join(cfg.protocols, ","))
	fmt.Fprintf(&b, "- each protocol: %d daemons of one job on 127.0.0.1 (Δ 100 ms, `--dp-clip 1 --dp-noise 1.1 --checkpoint-every 2`), "+
		"a daemon of another job (`--name soak-foreign`) bootstrapped through member 0; kill -9 of a random member after a random %v–%v gap, restart on its store\n\n",
		soakMembers, soakGapMin, soakGapMax)
	if len(results) > 0 {
		fmt.Fprintf(&b, "## Kills, full disks, damaged stores\n\n| | %s |\n|---|%s\n", strings.Join(cfg.protocols, " | "), strings.Repeat("---|", len(results)))
		row := func(name string, f func(r *protoResult) string) {
			fmt.Fprintf(&b, "| %s |", name)
			for _, r := range results {
				fmt.Fprintf(&b, " %s |", f(r))
			}
			b.WriteString("\n")
		}
		row("kill -9s (on a full disk)", func(r *protoResult) string { return fmt.Sprintf("%d (%d)", r.kills, r.fullKills) })
		row("restarts after kill -9 that answered", func(r *protoResult) string { return strconv.Itoa(r.restartsOK) })
		row("refused after a plain kill -9 (a bug)", func(r *protoResult) string { return strconv.Itoa(len(r.refusals)) })
		row("refused after kill -9 on a full disk (reason given)", func(r *protoResult) string { return strconv.Itoa(len(r.fullRefused)) })
		row("min resumed_from_seq − last checkpoint_seq", func(r *protoResult) string {
			if r.minMargin == math.MaxInt64 {
				return "–"
			}
			return strconv.FormatInt(r.minMargin, 10)
		})
		row("resumed below the last checkpoint (seq or age)", func(r *protoResult) string { return strconv.Itoa(r.resumeLow) })
		row("ε never lower (checks)", func(r *protoResult) string {
			return fmt.Sprintf("%s (%d checks, %d lower)", yesNo(r.epsLower == 0 && r.epsChecks > 0), r.epsChecks, r.epsLower)
		})
		row("Σw max deviation at settle points (relative)", func(r *protoResult) string {
			if r.protocol != "pushsum" {
				return "n/a"
			}
			out := fmt.Sprintf("%.2g (%d settle points)", r.massMaxDev, r.massChecks)
			if r.massBreak != "" {
				out += "; first off " + r.massBreak
			}
			return out
		})
		row("wrong_job (all daemons, all lifetimes)", func(r *protoResult) string {
			var parts []string
			var sum uint64
			for _, k := range sortedKeys(r.wrongJob) {
				parts = append(parts, fmt.Sprintf("%s %d", k, r.wrongJob[k]))
				sum += r.wrongJob[k]
			}
			return fmt.Sprintf("%d (%s)", sum, strings.Join(parts, ", "))
		})
		row("foreign daemon's peers (most seen)", func(r *protoResult) string { return strconv.Itoa(r.foreignPeer) })
		row("other rejections", func(r *protoResult) string {
			var parts []string
			for _, k := range sortedKeys(r.rejected) {
				if k != "wrong_job" {
					parts = append(parts, fmt.Sprintf("%s %d", k, r.rejected[k]))
				}
			}
			if len(parts) == 0 {
				return "none"
			}
			return strings.Join(parts, ", ")
		})
		row("full-disk episodes", func(r *protoResult) string {
			if r.diskSkip != "" {
				return "skipped"
			}
			ok := 0
			for _, o := range r.diskFull {
				if !strings.Contains(o, "FAILED") {
					ok++
				}
			}
			return fmt.Sprintf("%d, %d as expected", len(r.diskFull), ok)
		})
		row("damaged store", func(r *protoResult) string {
			switch {
			case r.damage == "":
				return "not reached"
			case strings.Contains(r.damage, "FAILED"):
				return "FAILED"
			}
			return "refused, recovered"
		})
		row("final accuracy", func(r *protoResult) string {
			var parts []string
			for _, s := range r.final {
				parts = append(parts, fmt.Sprintf("%.3f", s.Accuracy))
			}
			return strings.Join(parts, " / ")
		})
		row("final ε", func(r *protoResult) string {
			var parts []string
			for _, s := range r.final {
				parts = append(parts, fmt.Sprintf("%.3g", s.DPEpsilon))
			}
			return strings.Join(parts, " / ")
		})
		row("store on disk at the end (MiB, du)", func(r *protoResult) string {
			var parts []string
			for _, v := range r.storeMiB {
				parts = append(parts, fmt.Sprintf("%.1f", v))
			}
			return strings.Join(parts, " / ")
		})
		row("failed checks", func(r *protoResult) string { return strconv.Itoa(len(r.failures)) })
		b.WriteString("\n")
		for _, r := range results {
			fmt.Fprintf(&b, "### %s\n\n", r.protocol)
			if r.stoppedAt != "" {
				fmt.Fprintf(&b, "- **stopped early**, %s\n", r.stoppedAt)
			}
			if r.diskSkip != "" {
				fmt.Fprintf(&b, "- full disks: %s\n", r.diskSkip)
			}
			for _, o := range r.diskFull {
				fmt.Fprintf(&b, "- %s\n", o)
			}
			if r.damage != "" {
				fmt.Fprintf(&b, "- damaged store, %s\n", r.damage)
			}
			for _, o := range r.refusals {
				fmt.Fprintf(&b, "- refusal after a plain kill -9: %s\n", o)
			}
			if r.massBreak != "" {
				fmt.Fprintf(&b, "- push-sum weights first off %s\n", r.massBreak)
			}
			for _, f := range r.failures {
				fmt.Fprintf(&b, "- failed: %s\n", f)
			}
			b.WriteString("\n")
		}
	}
	if long != nil {
		fmt.Fprintf(&b, "## Long run\n\n%d daemons of one random-walk job with DP-SGD (`--checkpoint-every 5`) for %v; every %v (±20%%) a random member other than n0 stopped, SIGTERM and SIGKILL in turn, and restarted (%s). "+
			"n0 is never restarted; its growth from the sample after a %v warm-up to the end is checked; the others' end values are for comparison.\n\n",
			long.members, long.duration, cfg.churn, churnSummary(long.churns), long.warmup)
		fmt.Fprintf(&b, "Each figure is the least of %d reads %v apart. The anonymous RSS (RssAnon) is checked; VmRSS also holds the store's memory-mapped log pages (RssFile), page cache that grows until a log rotates.\n\n", longReads, longReadGap)
		fmt.Fprintf(&b, "| member | restarts | VmRSS start → end (MiB) | RssAnon start → end (MiB) | RssFile start → end (MiB) | goroutines start → end | open fds start → end | threads start → end | uptime at end (s) |\n|---|---|---|---|---|---|---|---|---|\n")
		for i := 0; i < long.members; i++ {
			var s, e procSample
			if long.startOK {
				s = long.start[i]
			}
			if long.endOK {
				e = long.end[i]
			}
			cell := func(a, z int, f func(int) string) string {
				from, to := "–", "–"
				if long.startOK {
					from = f(a)
				}
				if long.endOK {
					to = f(z)
				}
				return from + " → " + to
			}
			count := strconv.Itoa
			mib := func(kib int) string { return fmt.Sprintf("%.1f", float64(kib)/1024) }
			fmt.Fprintf(&b, "| n%d | %d | %s | %s | %s | %s | %s | %s | %.0f |\n", i, long.restarts[i], cell(s.rssKiB, e.rssKiB, mib),
				cell(s.anonKiB, e.anonKiB, mib), cell(s.fileKiB, e.fileKiB, mib),
				cell(s.goroutines, e.goroutines, count), cell(s.fds, e.fds, count), cell(s.threads, e.threads, count), e.uptime)
		}
		b.WriteString("\n(A restarted member's start value is its previous process's.)\n\n")
		for _, v := range long.verdicts {
			fmt.Fprintf(&b, "- %s\n", v)
		}
		for _, f := range long.failures {
			fmt.Fprintf(&b, "- failed: %s\n", f)
		}
		if len(long.finalAcc) > 0 {
			fmt.Fprintf(&b, "- final accuracy %v, DP steps %v\n", fmtFloats(long.finalAcc), long.finalSteps)
		}
	}
	return os.WriteFile(cfg.report, []byte(b.String()), 0o644)
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func churnSummary(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%d × %s", m[k], k))
	}
	if len(parts) == 0 {
		return "no churn event"
	}
	return strings.Join(parts, ", ")
}

func fmtFloats(v []float64) string {
	var parts []string
	for _, f := range v {
		parts = append(parts, fmt.Sprintf("%.3f", f))
	}
	return strings.Join(parts, " / ")
}
