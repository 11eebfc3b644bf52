package node

import (
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
)

func TestStoreKeepsLastAndResumes(t *testing.T) {
	dir := t.TempDir()
	job := JobID{1}
	s, err := OpenStore(dir, 2, nil)
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
	s, err = OpenStore(dir, 2, nil)
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
	a := JobSpec{Model: testSpec()}
	b := a
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	b.Validate()
	if a.ID() != b.ID() {
		t.Fatal("equal specs, different IDs")
	}
	b.LR = 0.2
	if a.ID() == b.ID() {
		t.Fatal("different specs, same ID")
	}
	if len(a.ID().String()) != 64 || len(a.ID().Short()) != 12 {
		t.Fatal("ID formatting")
	}
	bad := JobSpec{Model: testSpec(), Protocol: "flood"}
	if err := bad.Validate(); err == nil {
		t.Fatal("unknown protocol accepted")
	}
}

// TestPrivacyLedger: the ledger survives reopening, never goes down, and
// is kept per job.
func TestPrivacyLedger(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := JobID{1}, JobID{2}
	if n, err := s.DPSteps(a); n != 0 || err != nil {
		t.Fatalf("empty ledger: %d, %v", n, err)
	}
	if err := s.ReserveDP(a, 40); err != nil {
		t.Fatal(err)
	}
	if err := s.ReserveDP(a, 39); err == nil {
		t.Fatal("the ledger went down")
	}
	s.Close()
	s, err = OpenStore(dir, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, _ := s.DPSteps(a); n != 40 {
		t.Fatalf("after reopening: %d steps, want 40", n)
	}
	if n, _ := s.DPSteps(b); n != 0 {
		t.Fatalf("another job's ledger: %d", n)
	}
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
