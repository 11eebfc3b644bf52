package node

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/gossipd/gossipd/gossip"
)

// Checkpoint is a saved daemon state.
type Checkpoint struct {
	Seq   uint64
	Time  time.Time
	Job   JobID
	Spec  JobSpec
	State gossip.State
	// Meta is the metadata an exported model carries (job, scaler).
	Meta map[string]string
	// DPSteps and DPEpsilon record the DP-SGD steps and ε spent up to this
	// checkpoint (zero without DP). The ledger (DPSteps of the store) is
	// authoritative; these travel with the model for the record.
	DPSteps   uint64
	DPEpsilon float64
}

// Store keeps the last checkpoints in a badger database. Each Save is one
// transaction with synced writes: a crash (kill -9) at any moment leaves
// the previous checkpoints intact, and the latest good one is what Latest
// returns.
type Store struct {
	db   *badger.DB
	keep int
	log  *slog.Logger

	mu   sync.Mutex // serialises Save
	seq  uint64
	last *Checkpoint // the newest saved by this process (its job and updates)
}

// ErrSuperseded means Save was handed a state older than one it already
// saved for the same job (a periodic snapshot overtaken by a durable one):
// it is not written.
var ErrSuperseded = errors.New("node: checkpoint superseded by a newer one")

var ckptPrefix = []byte("ckpt/")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func ckptKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), ckptPrefix...), seq)
}

// ErrNoStore: a directory given to read an existing store holds none (a
// read-only command given a wrong path, which must not create one).
var ErrNoStore = errors.New("node: no store")

// ErrStoreInUse: another process (a running daemon) holds the store.
var ErrStoreInUse = errors.New("node: the store is in use by another process")

// OpenExistingStore opens the store in dir like OpenStore, for reading
// one that a daemon wrote (export, privacy ledger): where dir is missing,
// not a directory or holds no store, it fails with ErrNoStore instead of
// creating one.
func OpenExistingStore(dir string) (*Store, error) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w at %s: no such directory", ErrNoStore, dir)
	case err != nil:
		return nil, fmt.Errorf("%w at %s: %w", ErrNoStore, dir, err)
	case !st.IsDir():
		return nil, fmt.Errorf("%w at %s: not a directory", ErrNoStore, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, badger.ManifestFilename)); err != nil {
		return nil, fmt.Errorf("%w at %s: the directory holds no checkpoint database (no %s)", ErrNoStore, dir, badger.ManifestFilename)
	}
	return OpenStore(dir, 0, nil)
}

// OpenStore opens (or creates) the store in dir, keeping the last keep
// checkpoints (default 3). Badger's directory lock keeps a second daemon
// off the same store.
func OpenStore(dir string, keep int, log *slog.Logger) (*Store, error) {
	if keep <= 0 {
		keep = 3
	}
	if log == nil {
		log = slog.Default()
	}
	opts := badger.DefaultOptions(dir).WithSyncWrites(true).WithLogger(nil).
		WithMemTableSize(8 << 20).WithValueLogFileSize(64 << 20).WithNumVersionsToKeep(1)
	db, err := badger.Open(opts)
	if err != nil {
		// Badger formats its lock error as text, without wrapping.
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w: %s (a running daemon holds it: stop it first, or ask it over its API)", ErrStoreInUse, dir)
		}
		return nil, fmt.Errorf("node: opening store %s: %w", dir, err)
	}
	s := &Store{db: db, keep: keep, log: log}
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: ckptPrefix, Reverse: true, PrefetchValues: false})
		defer it.Close()
		it.Seek(ckptKey(^uint64(0)))
		if it.ValidForPrefix(ckptPrefix) {
			s.seq = binary.BigEndian.Uint64(it.Item().Key()[len(ckptPrefix):])
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// encode serialises a checkpoint with a CRC-32C trailer.
func encode(c *Checkpoint) ([]byte, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(c); err != nil {
		return nil, err
	}
	return binary.LittleEndian.AppendUint32(b.Bytes(), crc32.Checksum(b.Bytes(), castagnoli)), nil
}

func decode(b []byte) (*Checkpoint, error) {
	if len(b) < 4 {
		return nil, errors.New("checkpoint too short")
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, errors.New("checkpoint checksum mismatch")
	}
	var c Checkpoint
	if err := gob.NewDecoder(bytes.NewReader(body)).Decode(&c); err != nil {
		return nil, err
	}
	return &c, nil
}

// Save writes c as the newest checkpoint (assigning its Seq) and prunes
// older ones beyond the last keep, atomically.
func (s *Store) Save(c *Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.last; l != nil && l.Job == c.Job && c.State.Updates < l.State.Updates {
		return ErrSuperseded
	}
	c.Seq = s.seq + 1
	b, err := encode(c)
	if err != nil {
		return err
	}
	err = s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(ckptKey(c.Seq), b); err != nil {
			return err
		}
		if c.Seq > uint64(s.keep) {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: ckptPrefix})
			var old [][]byte
			for it.Rewind(); it.ValidForPrefix(ckptPrefix); it.Next() {
				if binary.BigEndian.Uint64(it.Item().Key()[len(ckptPrefix):]) <= c.Seq-uint64(s.keep) {
					old = append(old, it.Item().KeyCopy(nil))
				}
			}
			it.Close()
			for _, k := range old {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("node: saving checkpoint %d: %w", c.Seq, err)
	}
	s.seq, s.last = c.Seq, &Checkpoint{Job: c.Job, State: gossip.State{Updates: c.State.Updates}}
	return nil
}

// Latest returns the newest checkpoint that decodes and belongs to job, or
// nil if there is none. Corrupt or foreign entries are skipped and logged.
func (s *Store) Latest(job JobID) (*Checkpoint, error) { return s.latest(&job) }

// Newest returns the newest checkpoint that decodes, of any job.
func (s *Store) Newest() (*Checkpoint, error) { return s.latest(nil) }

func (s *Store) latest(job *JobID) (*Checkpoint, error) {
	var out *Checkpoint
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: ckptPrefix, Reverse: true, PrefetchValues: false})
		defer it.Close()
		for it.Seek(ckptKey(^uint64(0))); it.ValidForPrefix(ckptPrefix); it.Next() {
			var c *Checkpoint
			err := it.Item().Value(func(v []byte) error {
				var err error
				c, err = decode(v)
				return err
			})
			seq := binary.BigEndian.Uint64(it.Item().Key()[len(ckptPrefix):])
			switch {
			case err != nil:
				s.log.Warn("skipping unreadable checkpoint", "seq", seq, "err", err)
			case job != nil && c.Job != *job && c.Spec.ID() != *job:
				// (A checkpoint written before the job's ID left out the
				// per-peer settings has an old ID but a spec that hashes
				// to the new one: it is resumed.)
				s.log.Warn("skipping a checkpoint of another job", "seq", seq, "job", c.Job.Short())
			default:
				out = c
				return nil
			}
		}
		return nil
	})
	return out, err
}

// Count returns how many checkpoints the store holds.
func (s *Store) Count() (int, error) {
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: ckptPrefix, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(ckptPrefix); it.Next() {
			n++
		}
		return nil
	})
	return n, err
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }
