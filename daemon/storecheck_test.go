package daemon

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/privacy"
)

// TreeSum is a digest of every file under dir: names, modes, sizes and
// contents. Two equal sums mean nothing was created, changed or deleted.
func treeSum(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
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

const testFP = "feedfacecafebeef0123456789"

// filledStore writes a closed store with five checkpoints (three kept) and
// a privacy ledger of 40 steps; it returns the spending recorded.
func filledStore(t *testing.T, dir string) privacy.Spending {
	t.Helper()
	s, err := OpenStore(dir, StoreOptions{Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		c := &Checkpoint{Time: time.Unix(int64(i), 0), Job: JobID{1}, State: gossip.State{Params: []float32{float32(i)}, Age: float64(i), Weight: 1}}
		if err := s.Save(c); err != nil {
			t.Fatal(err)
		}
	}
	sp, err := privacy.StepSpending(0.01, 1.1, 40)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve(testFP, sp, 1e-5, JobSpending{Job: "j", Spent: sp}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return sp
}

func onlyTable(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(m) != 1 {
		t.Fatalf("%d table files in %s, want 1", len(m), dir)
	}
	return m[0]
}

// TestStoreRefusesDamage: each kind of damage is refused by the daemon's
// open and by a read-only open, naming what is wrong, with no file of the
// store changed; a recovering open then keeps what is readable, and never
// less privacy spending than was recorded.
func TestStoreRefusesDamage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, dir string)
		says    string
		ckptSeq uint64 // the newest checkpoint --store-recover keeps (0: none)
	}{
		{"truncated MANIFEST", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, badger.ManifestFilename), 10); err != nil {
				t.Fatal(err)
			}
		}, "RECORD says checkpoint 5 was written but the newest the store holds is none", 5},
		{"empty table", func(t *testing.T, dir string) {
			if err := os.Truncate(onlyTable(t, dir), 0); err != nil {
				t.Fatal(err)
			}
		}, "is empty (0 bytes)", 0},
		{"unreadable ledger", func(t *testing.T, dir string) {
			writeRaw(t, dir, dataLedgerKey(testFP), []byte("not a ledger"))
		}, "privacy ledger of data feedfacecafe is unreadable", 5},
		{"lost ledger", func(t *testing.T, dir string) {
			deleteRaw(t, dir, dataLedgerKey(testFP))
		}, "privacy ledger of data feedfacecafe is missing", 5},
		{"unreadable record", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, recordFile), []byte("{}xxxx"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "RECORD is unreadable", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "checkpoints")
			sp := filledStore(t, dir)
			tc.damage(t, dir)
			before := treeSum(t, dir)
			for _, ro := range []bool{false, true} {
				s, err := OpenStore(dir, StoreOptions{ReadOnly: ro})
				if err == nil {
					s.Close()
				}
				if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("open (read-only %v): %v, want ErrDamaged naming %s and %q", ro, err, dir, tc.says)
				}
				if after := treeSum(t, dir); after != before {
					t.Fatalf("open (read-only %v) of a damaged store changed its files", ro)
				}
			}
			s, err := OpenStore(dir, StoreOptions{IfDamaged: DamagedRecover, Logger: quietLog()})
			if err != nil {
				t.Fatalf("recovering: %v", err)
			}
			defer s.Close()
			c, err := s.Newest()
			switch {
			case err != nil:
				t.Fatal(err)
			case tc.ckptSeq == 0 && c != nil:
				t.Errorf("recovered checkpoint %d from a store whose only table is empty", c.Seq)
			case tc.ckptSeq != 0 && (c == nil || c.Seq != tc.ckptSeq || c.State.Params[0] != float32(tc.ckptSeq)):
				t.Errorf("recovered %+v, want checkpoint %d", c, tc.ckptSeq)
			}
			l, err := s.Ledger(testFP)
			if err != nil || l == nil || !l.Spent.Covers(sp) {
				t.Fatalf("recovered ledger %+v (%v), want at least the %d steps recorded", l, err, sp.Steps)
			}
			aside, _ := filepath.Glob(dir + ".damaged-*")
			if len(aside) != 1 {
				t.Fatalf("damaged store kept aside: %v, want one directory", aside)
			}
			if got := treeSum(t, aside[0]); got != before {
				t.Errorf("the store moved aside is not the damaged store as it was")
			}
		})
	}
}

// TestStoreRecoverIsReopenable: a recovered store opens again as healthy
// and goes on counting checkpoints after the recovered ones.
func TestStoreRecoverIsReopenable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoints")
	filledStore(t, dir)
	os.Truncate(filepath.Join(dir, badger.ManifestFilename), 10)
	s, err := OpenStore(dir, StoreOptions{IfDamaged: DamagedRecover, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(&Checkpoint{Job: JobID{1}, State: gossip.State{Params: []float32{6}, Weight: 1}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	leftover := filepath.Join(filepath.Dir(dir), ".checkpoints.check-123") // as a daemon killed during its check leaves it
	if err := os.MkdirAll(leftover, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err = OpenStore(dir, StoreOptions{})
	if err != nil {
		t.Fatalf("reopening a recovered store: %v", err)
	}
	defer s.Close()
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".checkpoints.check-*")); len(m) != 0 {
		t.Errorf("checks left beside the store: %v", m)
	}
	if c, _ := s.Newest(); c == nil || c.Seq != 6 {
		t.Fatalf("newest after recovery and a save: %+v, want 6", c)
	}
}

// TestStoreFinishesMend: a stop between a mend's two renames leaves the
// store missing and the mended build beside it; the next open takes it.
func TestStoreFinishesMend(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoints")
	filledStore(t, dir)
	build := filepath.Join(filepath.Dir(dir), ".checkpoints.mend-1")
	if err := os.Rename(dir, build); err != nil { // as if moved aside, the build not yet in
		t.Fatal(err)
	}
	s, err := OpenStore(dir, StoreOptions{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, _ := s.Newest(); c == nil || c.Seq != 5 {
		t.Fatalf("newest %+v, want the build's checkpoint 5", c)
	}
}

// TestStoreResetKeepsLedger: --store-reset drops the model but never the
// privacy spending.
func TestStoreResetKeepsLedger(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoints")
	sp := filledStore(t, dir)
	os.Truncate(onlyTable(t, dir), 0) // the ledger's table too: only the record knows
	s, err := OpenStore(dir, StoreOptions{IfDamaged: DamagedReset, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, _ := s.Newest(); c != nil {
		t.Errorf("a reset store holds checkpoint %d", c.Seq)
	}
	if l, err := s.Ledger(testFP); err != nil || l == nil || !l.Spent.Covers(sp) {
		t.Fatalf("ledger after reset: %+v (%v), want the %d steps recorded", l, err, sp.Steps)
	}
}

// TestReadOnlyOpenChangesNothing: a read-only open of a store left by a
// crash (its logs unflushed, badger's lock file stale) or by a clean stop
// changes no file, reads its newest checkpoint, and refuses writes.
func TestReadOnlyOpenChangesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoints")
	s, err := OpenStore(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		if err := s.Save(&Checkpoint{Job: JobID{1}, State: gossip.State{Params: []float32{float32(i)}, Weight: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	// The store as a kill -9 leaves it: copied while open.
	crashed := filepath.Join(t.TempDir(), "checkpoints")
	if err := os.MkdirAll(crashed, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue // gone meanwhile (the record's temporary file)
		}
		if err := copySparse(filepath.Join(dir, e.Name()), filepath.Join(crashed, e.Name()), fi.Size()); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	for _, d := range []string{crashed, dir} {
		before := treeSum(t, d)
		r, err := OpenExistingStore(d)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if c, err := r.Newest(); err != nil || c == nil || c.Seq != 4 {
			t.Errorf("%s: newest %+v (%v), want 4", d, c, err)
		}
		if err := r.Save(&Checkpoint{Job: JobID{1}}); !errors.Is(err, errReadOnly) {
			t.Errorf("a read-only store saved: %v", err)
		}
		r.Close()
		if treeSum(t, d) != before {
			t.Errorf("%s: a read-only open changed the store", d)
		}
	}
	// The crashed store opens for writing too, healthy.
	w, err := OpenStore(crashed, StoreOptions{})
	if err != nil {
		t.Fatalf("the store a crash left: %v", err)
	}
	w.Close()
}

// TestStoreDiskFull: on a small filesystem that fills up, every write
// (checkpoint, ledger, accounts) fails with ErrDiskFull naming the store
// and the free space, without a fault, and the store keeps what it held;
// once there is room again the writes go through.
func TestStoreDiskFull(t *testing.T) {
	mnt := smallFS(t, 64)
	dir := filepath.Join(mnt, "checkpoints")
	s, err := OpenStore(dir, StoreOptions{Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ckpt := func(i int) error {
		p := make([]float32, 50_000) // 200 kB
		p[0] = float32(i)
		return s.Save(&Checkpoint{Job: JobID{1}, State: gossip.State{Params: p, Weight: 1}})
	}
	for i := 1; i <= 3; i++ {
		if err := ckpt(i); err != nil {
			t.Fatal(err)
		}
	}
	filler := fill(t, mnt, 256<<10)
	sp, _ := privacy.StepSpending(0.01, 1.1, 10)
	for i := 0; i < 50; i++ { // more than a memtable's worth: no write may slip through
		if err := ckpt(4 + i); !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "MiB left") {
			t.Fatalf("a checkpoint on a full disk: %v, want ErrDiskFull naming %s and the free space", err, dir)
		}
	}
	if err := s.Reserve(testFP, sp, 1e-5, JobSpending{Job: "j", Spent: sp}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("the ledger on a full disk: %v, want ErrDiskFull", err)
	}
	if err := s.SaveAccounts(JobID{1}, gossip.Accounts{Seq: 1}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("push-sum's accounts on a full disk: %v, want ErrDiskFull", err)
	}
	if c, _ := s.Newest(); c == nil || c.Seq != 3 {
		t.Fatalf("after the failures the newest is %+v, want 3", c)
	}
	os.Remove(filler)
	if err := ckpt(9); err != nil {
		t.Fatalf("a checkpoint once there is room: %v", err)
	}
	if err := s.Reserve(testFP, sp, 1e-5, JobSpending{Job: "j", Spent: sp}); err != nil {
		t.Fatalf("the ledger once there is room: %v", err)
	}
}

// smallFS mounts a tmpfs of mib MiB for the test (skipping, with the
// reason, where this process may not mount one).
func smallFS(t *testing.T, mib int) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", mib), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a small filesystem to fill (needs root and mount(8)): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes a file into dir until the filesystem has at most left bytes
// free, and returns its path.
func fill(t *testing.T, dir string, left int64) string {
	t.Helper()
	free, err := freeBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for n := free - left; n > 0; n -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), n)]); err != nil {
			break // full
		}
	}
	return p
}

func writeRaw(t *testing.T, dir string, k, v []byte) {
	t.Helper()
	db, err := badger.Open(badgerOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set(k, v) }); err != nil {
		t.Fatal(err)
	}
}

func deleteRaw(t *testing.T, dir string, k []byte) {
	t.Helper()
	db, err := badger.Open(badgerOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(txn *badger.Txn) error { return txn.Delete(k) }); err != nil {
		t.Fatal(err)
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// FuzzDecodeRecord: any bytes (a damaged RECORD) decode to a record whose
// spendings are valid, or an error, never a panic; a record round-trips.
func FuzzDecodeRecord(f *testing.F) {
	sp, _ := privacy.StepSpending(0.01, 1, 3)
	b, _ := encodeRecord(&record{Checkpoint: 7, Ledgers: map[string]privacy.Spending{"fp": sp}})
	f.Add(b)
	f.Add([]byte("{}\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		for fp, sp := range r.Ledgers {
			if sp.Check() != nil {
				t.Fatalf("decoded an invalid spending for %q: %+v", fp, sp)
			}
		}
		again, err := encodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		if r2, err := decodeRecord(again); err != nil || r2.Checkpoint != r.Checkpoint || len(r2.Ledgers) != len(r.Ledgers) {
			t.Fatalf("a decoded record does not round-trip: %+v, %v", r2, err)
		}
	})
}

// TestCopyStoreSharesNoFile: the check's copy shares no file with the
// store (badger deletes a table by truncating it: through a hard link, the
// copy's compaction would empty the store's table).
func TestCopyStoreSharesNoFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoints")
	filledStore(t, dir)
	for _, beside := range []bool{true, false} {
		tmp, err := copyStore(dir, nil, beside)
		if err != nil {
			t.Fatal(err)
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			a, err1 := os.Stat(filepath.Join(dir, e.Name()))
			b, err2 := os.Stat(filepath.Join(tmp, e.Name()))
			if err1 == nil && err2 == nil && os.SameFile(a, b) {
				t.Errorf("copy (beside %v): %s is the store's own file", beside, e.Name())
			}
		}
		os.RemoveAll(tmp)
	}
}
