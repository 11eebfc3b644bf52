package daemon

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/privacy"
)

func TestStoreKeepsLastAndResumes(t *testing.T) {
	dir := t.TempDir()
	job := JobID{1}
	s, err := OpenStore(dir, StoreOptions{Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.Latest(job); err != nil || c != nil {
		t.Fatalf("empty store: %v %v", c, err)
	}
	for i := 1; i <= 5; i++ {
		c := &Checkpoint{Time: time.Unix(int64(i), 0), Job: job, State: gossip.State{Params: []float32{float32(i)}, Age: float64(10 * i), Weight: 1}}
		if err := s.Save(c); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := s.Count(); n != 2 {
		t.Fatalf("%d checkpoints kept, want 2", n)
	}
	s.Close()
	// Reopen: the sequence continues and the latest is the fifth.
	s, err = OpenStore(dir, StoreOptions{Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.Latest(job)
	if err != nil || c == nil || c.Seq != 5 || c.State.Age != 50 || c.State.Params[0] != 5 {
		t.Fatalf("latest after reopen: %+v %v", c, err)
	}
	if c, _ := s.Latest(JobID{2}); c != nil {
		t.Fatal("another job's checkpoint returned")
	}
	if err := s.Save(&Checkpoint{Job: job, State: gossip.State{Weight: 1}}); err != nil || func() uint64 { c, _ := s.Latest(job); return c.Seq }() != 6 {
		t.Fatalf("sequence did not continue: %v", err)
	}
}

func TestCheckpointCodecRejectsCorruption(t *testing.T) {
	b, err := encode(&Checkpoint{Seq: 3, Job: JobID{7}, State: gossip.State{Params: []float32{1, 2}, Weight: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := decode(b); err != nil || c.Seq != 3 {
		t.Fatalf("%v %v", c, err)
	}
	b[len(b)/2] ^= 0xff
	if _, err := decode(b); err == nil {
		t.Fatal("corrupt checkpoint decoded")
	}
	if _, err := decode(nil); err == nil {
		t.Fatal("empty checkpoint decoded")
	}
}

func TestJobID(t *testing.T) {
	a := job.Spec{Model: testSpec()}
	b := a
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	b.Validate()
	if a.ID() != b.ID() {
		t.Fatal("equal specs, different IDs")
	}
	b.InitSeed = 2
	if a.ID() == b.ID() {
		t.Fatal("different specs, same ID")
	}
	if len(a.ID().String()) != 64 || len(a.ID().Short()) != 12 {
		t.Fatal("ID formatting")
	}
	bad := job.Spec{Model: testSpec(), Protocol: "flood"}
	if err := bad.Validate(); err == nil {
		t.Fatal("unknown protocol accepted")
	}
	if err := (&job.Spec{Model: testSpec(), Variant: "xx"}).Validate(); err == nil || !strings.Contains(err.Error(), `variant "xx"`) {
		t.Fatalf("unknown variant: %v", err)
	}
	for _, id := range []string{"0123456", "0123456z", "g1234567"} {
		if CheckJobID(id) == nil {
			t.Errorf("job ID %q accepted", id)
		}
	}
	if err := CheckJobID(strings.ToUpper(a.ID().Short())); err != nil {
		t.Errorf("job ID prefix %s: %v", a.ID().Short(), err)
	}
	// The spec travels in announcements: a canonical one parses back to
	// the same ID; anything else is refused.
	d := job.Spec{Model: testSpec(), Protocol: "dpsgd", Topology: "regular:3"}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	got, err := job.ParseSpec(d.Canonical())
	if err != nil || got.ID() != d.ID() {
		t.Fatalf("ParseSpec of a canonical spec: %v, %v", got.ID().Short(), err)
	}
	for _, b := range []string{`{"name":"x"}`, string(d.Canonical()) + " ", `{"name":"","model":{},"unknown":1}`, `[`} {
		if _, err := job.ParseSpec([]byte(b)); err == nil {
			t.Errorf("ParseSpec accepted %q", b)
		}
	}
}

// TestJobIdentity: what peers must agree on makes up the job's ID; who
// takes part and each peer's own settings do not.
func TestJobIdentity(t *testing.T) {
	base := job.Spec{Name: "j", Model: testSpec(), Protocol: "dpsgd", InitSeed: 1}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*job.Spec){
		"protocol": func(j *job.Spec) { j.Protocol = "pushsum"; j.Topology = "" },
		"model":    func(j *job.Spec) { j.Model.Classes++ },
		"seed":     func(j *job.Spec) { j.InitSeed = 7 },
		"scale":    func(j *job.Spec) { j.Scale = "minmax" },
		"delta":    func(j *job.Spec) { j.DeltaMillis = 100 },
		"topology": func(j *job.Spec) { j.Topology = "torus" },
		"name":     func(j *job.Spec) { j.Name = "other" },
	} {
		j := base
		change(&j)
		if err := j.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if j.ID() == base.ID() {
			t.Errorf("a different %s keeps the job ID", name)
		}
	}
	// Local settings are not part of the spec at all (job.Spec has no such
	// fields); an allowlist admits only its members.
	l := Local{Members: []string{"b", "a"}}
	if err := l.Validate(); err != nil || !l.IsMember("a") || l.IsMember("c") || !(Local{}).IsMember("c") {
		t.Fatalf("allowlist: %+v, %v", l, err)
	}
}

// TestPrivacyLedger: the data's ledger survives reopening, never goes
// down, keeps a share per job, and is kept per set of data.
func TestPrivacyLedger(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, StoreOptions{Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	conv := LegacyConversion{SamplingRate: 0.01, Noise: 1.1}
	l, err := s.OpenLedger("data-a", conv)
	if err != nil || l.Spent.Steps != 0 || len(l.Jobs) != 0 {
		t.Fatalf("empty ledger: %+v, %v", l, err)
	}
	forty, _ := privacy.StepSpending(0.01, 1.1, 40)
	if err := s.Reserve("data-a", forty, 1e-5, JobSpending{Job: "j1", Spent: forty}); err != nil {
		t.Fatal(err)
	}
	less, _ := privacy.StepSpending(0.01, 1.1, 39)
	if err := s.Reserve("data-a", less, 1e-5, JobSpending{Job: "j1", Spent: less}); err == nil {
		t.Fatal("the ledger went down")
	}
	// Another job on the same data adds to it; a lower noise spends more per step.
	ten, _ := privacy.StepSpending(0.02, 0.8, 10)
	if err := s.Reserve("data-a", forty.Add(ten), 1e-5, JobSpending{Job: "j2", Spent: ten}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = OpenStore(dir, StoreOptions{Keep: 2}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err = s.OpenLedger("data-a", conv)
	if err != nil {
		t.Fatal(err)
	}
	if l.Spent.Steps != 50 || len(l.Jobs) != 2 || l.Job("j1").Spent.Steps != 40 || l.Job("j2").Spent.Steps != 10 {
		t.Fatalf("after reopening: %d steps, jobs %+v", l.Spent.Steps, l.Jobs)
	}
	if got, want := l.Spent.Epsilon(1e-5), forty.Add(ten).Epsilon(1e-5); got != want {
		t.Fatalf("ε %v, want %v", got, want)
	}
	if other, _ := s.Ledger("data-b"); other != nil {
		t.Fatalf("another data's ledger: %+v", other)
	}
}

// TestLedgerMigration: a store with ledgers of the old per-job format
// merges them into the data's ledger once, sums their steps, keeps the ε
// its checkpoints recorded as a floor, and deletes the old entries.
func TestLedgerMigration(t *testing.T) {
	s, err := OpenStore(t.TempDir(), StoreOptions{Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeLegacy(t, s, JobID{1}, 300)
	writeLegacy(t, s, JobID{2}, 200)
	// The old daemon's checkpoint recorded an ε larger than 500 steps at
	// the migrating run's rate give (it ran with less noise).
	if err := s.Save(&Checkpoint{Job: JobID{2}, State: gossip.State{Params: []float32{1}, Weight: 1}, DPSteps: 200, DPEpsilon: 9.5}); err != nil {
		t.Fatal(err)
	}
	l, err := s.OpenLedger("data", LegacyConversion{SamplingRate: 0.01, Noise: 1.1})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := privacy.StepSpending(0.01, 1.1, 500)
	if l.Spent.Steps != 500 || len(l.MigratedJobs) != 2 || l.Job(JobID{1}.String()).Spent.Steps != 300 {
		t.Fatalf("migrated: %d steps, jobs %v", l.Spent.Steps, l.MigratedJobs)
	}
	if eps := l.Spent.Epsilon(1e-5); eps != 9.5 || want.Epsilon(1e-5) >= 9.5 {
		t.Fatalf("migrated ε %v: the checkpoint's 9.5 is the floor (500 steps alone: %v)", eps, want.Epsilon(1e-5))
	}
	_, legacy, err := s.Ledgers()
	if err != nil || len(legacy) != 0 {
		t.Fatalf("old entries left: %v, %v", legacy, err)
	}
	again, _ := s.OpenLedger("data", LegacyConversion{SamplingRate: 0.01, Noise: 1.1})
	if again.Spent.Steps != 500 {
		t.Fatalf("second open counted the old entries again: %d steps", again.Spent.Steps)
	}
}

// writeLegacy writes an entry of the old per-job ledger format.
func writeLegacy(t *testing.T, s *Store, job JobID, steps uint64) {
	t.Helper()
	err := s.db.Update(func(txn *badger.Txn) error {
		v := binary.LittleEndian.AppendUint64(nil, steps)
		return txn.Set(append(slices.Clone(legacyLedgerPrefix), job[:]...), binary.LittleEndian.AppendUint32(v, crc32.Checksum(v, castagnoli)))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzDecodeLedger: any bytes (a corrupt ledger entry) decode to a valid
// ledger or an error, never a panic.
func FuzzDecodeLedger(f *testing.F) {
	sp, _ := privacy.StepSpending(0.01, 1, 3)
	b, _ := encodeLedger(&DataLedger{Fingerprint: "x", Spent: sp, Jobs: []JobSpending{{Job: "j", Spent: sp}}})
	f.Add(b)
	f.Add([]byte("{}\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeLedger(b)
		if err != nil {
			return
		}
		if l.Spent.Check() != nil || math.IsNaN(l.Spent.Epsilon(1e-5)) {
			t.Fatalf("decoded an invalid ledger: %+v", l)
		}
	})
}

// FuzzDecodeCheckpoint: any bytes (a corrupt store entry) decode to a
// checkpoint or an error, never a panic; a valid encoding round-trips.
func FuzzDecodeCheckpoint(f *testing.F) {
	b, _ := encode(&Checkpoint{Seq: 3, Job: JobID{7}, State: gossip.State{Params: []float32{1, 2}, Weight: 1}})
	f.Add(b)
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decode(b)
		if err != nil {
			return
		}
		again, err := encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decode(again); err != nil {
			t.Fatalf("a decoded checkpoint does not round-trip: %v", err)
		}
	})
}

// FuzzDecodeAccounts: any bytes (a corrupt store entry) decode to push-sum
// accounts with a positive weight, or an error.
func FuzzDecodeAccounts(f *testing.F) {
	var b bytes.Buffer
	gob.NewEncoder(&b).Encode(gossip.Accounts{Seq: 3, Weight: 0.5, Links: []gossip.Link{{Peer: "a", Sent: 1, SeqSent: 2}}})
	f.Add(binary.LittleEndian.AppendUint32(b.Bytes(), crc32.Checksum(b.Bytes(), castagnoli)))
	f.Add([]byte{1, 2, 3, 4, 5})
	f.Fuzz(func(t *testing.T, v []byte) {
		a, err := decodeAccounts(v)
		if err == nil && !(a.Weight > 0) {
			t.Fatalf("accepted weight %v", a.Weight)
		}
	})
}

// TestOpenExistingStore: reading a store (export, privacy ledger) from a
// path that holds none fails with ErrNoStore and creates nothing; a
// store a process holds fails with ErrStoreInUse; a real one opens.
func TestOpenExistingStore(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "missing"): "no such directory",
		file:                          "not a directory",
		empty:                         "no MANIFEST",
	} {
		if _, err := OpenExistingStore(path); !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrNoStore naming it with %q", path, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the missing store was created: %v", err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("files created in an empty directory: %v", ents)
	}
	real := filepath.Join(dir, "real")
	s, err := OpenStore(real, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenExistingStore(real); !errors.Is(err, ErrStoreInUse) || !strings.Contains(err.Error(), real) {
		t.Errorf("a store in use: %v, want ErrStoreInUse naming it", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenExistingStore(real)
	if err != nil {
		t.Fatalf("a closed store: %v", err)
	}
	s.Close()
}
