package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/gossipd/gossipd/daemon"
)

// statusField reads one field of a daemon's /status (nil where absent).
func statusField(d *proc, name string) (any, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + d.api + "/status")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return nil, err
	}
	return m[name], nil
}

// pollField waits (bounded) until cond holds for a field of /status.
func pollField(t *testing.T, d *proc, name string, limit time.Duration, cond func(any) bool) any {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		v, err := statusField(d, name)
		if err == nil && cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(d.log)
			t.Fatalf("%s: timed out after %v waiting on %s (last %v, err %v)\nlog tail:\n%s", d.api, limit, name, v, err, tail(string(log), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mountSmall mounts a tmpfs of mib MiB at dir (skipping where this
// process may not mount one).
func mountSmall(t *testing.T, dir string, mib int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", mib), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a small filesystem to fill (needs root and mount(8)): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
}

// fillUp writes a file into dir until the filesystem is full.
func fillUp(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for i := 0; i < 1<<16; i++ { // bounded: 4 GiB
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	for { // the last pages
		if _, err := f.Write(buf[:512]); err != nil {
			break
		}
	}
	return p
}

// TestDaemonDiskFull: a daemon training with DP-SGD and a checkpoint at
// every update has its store on a small filesystem, which then fills up
// completely. It keeps running: checkpoints fail and are counted, /status
// says why, the privacy ledger cannot record so no DP-SGD step is taken,
// and the log names the store and the free space; a push-sum daemon also
// sends no share while its accounts cannot be saved. When the space comes
// back, checkpoints and training resume without a restart, and push-sum's
// weights still sum to the number of members.
func TestDaemonDiskFull(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	for _, protocol := range []string{"randomwalk", "pushsum"} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			diskFull(t, bin, protocol)
		})
	}
}

func diskFull(t *testing.T, bin, protocol string) {
	dir := t.TempDir()
	mountSmall(t, filepath.Join(dir, "n1"), 48)
	ds := startCluster(t, bin, dir, 2, "100ms", "--protocol", protocol, "--dp-clip", "1", "--dp-noise", "1.1", "--checkpoint-every", "1")
	d := ds[1]
	poll(t, d, "checkpoints and DP-SGD steps", 60*time.Second, func(s status) bool { return s.Checkpoint >= 2 && s.DPSteps > 0 })
	filler := fillUp(t, filepath.Join(dir, "n1"))
	pollField(t, d, "checkpoint_error", 30*time.Second, func(v any) bool { s, _ := v.(string); return strings.Contains(s, "disk full") })
	pollField(t, d, "ledger_error", 30*time.Second, func(v any) bool { s, _ := v.(string); return strings.Contains(s, "disk full") })
	full := poll(t, d, "status", 5*time.Second, func(status) bool { return true })
	// While the disk is full no DP-SGD step is taken: more messages
	// arrive and are merged, the steps stay put.
	later := poll(t, d, "more messages while the disk is full", 30*time.Second, func(s status) bool { return s.MessagesIn >= full.MessagesIn+20 })
	if later.DPSteps != full.DPSteps {
		t.Fatalf("DP-SGD steps went from %d to %d while the ledger could not record them", full.DPSteps, later.DPSteps)
	}
	if f := metric(t, d, "gossipd_checkpoint_failures_total"); f < 1 {
		t.Fatalf("gossipd_checkpoint_failures_total %v with the disk full", f)
	}
	log, _ := os.ReadFile(d.log)
	store := filepath.Join(dir, "n1", "checkpoints")
	wants := []string{"checkpoint failed", store, "MiB", "training paused"}
	if protocol == "pushsum" {
		wants = append(wants, "push-sum paused")
	}
	for _, want := range wants {
		if !strings.Contains(string(log), want) {
			t.Fatalf("the log does not say %q:\n%s", want, tail(string(log), 3000))
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	pollField(t, d, "checkpoint_error", 30*time.Second, func(v any) bool { return v == nil || v == "" })
	pollField(t, d, "ledger_error", 30*time.Second, func(v any) bool { return v == nil || v == "" })
	poll(t, d, "checkpoints and DP-SGD steps once there is room", 30*time.Second, func(s status) bool {
		return s.Checkpoint > later.Checkpoint && s.DPSteps > later.DPSteps
	})
	if protocol == "pushsum" {
		deadline := time.Now().Add(30 * time.Second)
		for {
			a, errA := ds[0].status()
			b, errB := d.status()
			if errA == nil && errB == nil && math.Abs(a.PushSumWeight+b.PushSumWeight-2) < 1e-6 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("push-sum weights %v + %v after the disk-full episode, want a sum of 2", a.PushSumWeight, b.PushSumWeight)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	stop(t, ds[0])
	stop(t, d)
}

// dirSum is a digest of every file under dir (names, modes, sizes,
// contents): equal sums, nothing created, changed or deleted.
func dirSum(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d\n", strings.TrimPrefix(p, dir), fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestDaemonDamagedStore: a stopped daemon's store is damaged three ways
// in turn (a truncated MANIFEST, an empty table file, an unreadable
// privacy ledger). Each time the daemon refuses to start, saying what is
// wrong, where, and what to do; `export` and `privacy ledger` refuse too
// and change no file of the store; and the daemon started with
// --store-recover resumes from what was readable, ε no lower than before.
func TestDaemonDamagedStore(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	bin := buildBinary(t)
	dir := t.TempDir()
	ds := startCluster(t, bin, dir, 2, "100ms", "--dp-clip", "1", "--dp-noise", "1.1", "--checkpoint-every", "1")
	d := ds[1]
	store := filepath.Join(dir, "n1")
	ckpts := filepath.Join(store, "checkpoints")
	base := d.args
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T)
		says   string
	}{
		{"truncated MANIFEST", func(t *testing.T) {
			if err := os.Truncate(filepath.Join(ckpts, "MANIFEST"), 10); err != nil {
				t.Fatal(err)
			}
		}, "MANIFEST"},
		{"empty table", func(t *testing.T) {
			m, _ := filepath.Glob(filepath.Join(ckpts, "*.sst"))
			if len(m) == 0 {
				t.Fatal("no table file to empty")
			}
			if err := os.Truncate(m[len(m)-1], 0); err != nil {
				t.Fatal(err)
			}
		}, "is empty (0 bytes)"},
		{"unreadable ledger", func(t *testing.T) {
			db, err := badger.Open(badger.DefaultOptions(ckpts).WithLogger(nil).WithMemTableSize(8 << 20).WithValueLogFileSize(64 << 20))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var keys [][]byte
			db.View(func(txn *badger.Txn) error {
				it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("dp-data/")})
				defer it.Close()
				for it.Rewind(); it.Valid(); it.Next() {
					keys = append(keys, it.Item().KeyCopy(nil))
				}
				return nil
			})
			if len(keys) == 0 {
				t.Fatal("no privacy ledger in the store")
			}
			if err := db.Update(func(txn *badger.Txn) error { return txn.Set(keys[0], []byte("not a ledger")) }); err != nil {
				t.Fatal(err)
			}
		}, "privacy ledger"},
	} {
		before := poll(t, d, "checkpoints and DP-SGD steps", 60*time.Second, func(s status) bool { return s.Checkpoint >= 3 && s.DPSteps > 0 })
		stop(t, d)
		// Healthy, status --store says what it holds.
		var rep daemon.StoreReport
		if out, err := exec.Command(bin, "status", "--store", store).Output(); err != nil {
			t.Fatalf("status --store on a healthy store: %v", err)
		} else if err := json.Unmarshal(out, &rep); err != nil || !rep.Healthy || rep.Newest == nil || rep.Newest.Seq < before.Checkpoint ||
			len(rep.Privacy.Data) != 1 || rep.Privacy.Data[0].Steps < before.DPSteps {
			t.Fatalf("status --store on a healthy store: %v %s", err, out)
		}
		tc.damage(t)
		sum := dirSum(t, store)
		// The daemon refuses.
		d.args = base
		d.start(t, bin)
		done := make(chan error, 1)
		go func() { done <- d.cmd.Wait() }()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("%s: the daemon started on a damaged store", tc.name)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: the daemon neither refused nor stopped within 60 s", tc.name)
		}
		log, _ := os.ReadFile(d.log)
		last := tail(string(log), 2000)
		for _, want := range []string{"damaged", ckpts, tc.says, "--store-recover", "--store-reset"} {
			if !strings.Contains(last, want) {
				t.Fatalf("%s: the refusal does not say %q:\n%s", tc.name, want, last)
			}
		}
		// The read-only commands refuse, and change nothing.
		for _, args := range [][]string{
			{"export", "--store", store, "--out", filepath.Join(t.TempDir(), "m.safetensors")},
			{"privacy", "ledger", "--store", store},
			{"status", "--store", store},
		} {
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "damaged") {
				t.Fatalf("%s: gossipd %s: %v\n%s", tc.name, strings.Join(args, " "), err, out)
			}
		}
		if dirSum(t, store) != sum {
			t.Fatalf("%s: a refused start, export or privacy ledger changed the store", tc.name)
		}
		// --store-recover keeps what is readable.
		d.args = append(append([]string(nil), base...), "--store-recover")
		d.start(t, bin)
		after := poll(t, d, "the recovered daemon", 60*time.Second, func(s status) bool { return s.Uptime > 0 })
		if after.DPEpsilon < before.DPEpsilon || after.DPSteps < before.DPSteps {
			t.Fatalf("%s: recovered with ε %v after %d steps; before, ε %v after %d", tc.name, after.DPEpsilon, after.DPSteps, before.DPEpsilon, before.DPSteps)
		}
		if tc.name != "empty table" && after.ResumedFrom == 0 {
			t.Fatalf("%s: recovered without a checkpoint", tc.name)
		}
		if aside, _ := filepath.Glob(ckpts + ".damaged-*"); len(aside) == 0 {
			t.Fatalf("%s: no damaged store moved aside", tc.name)
		}
	}
	stop(t, ds[0])
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err == nil {
		d.cmd.Wait()
	}
}
