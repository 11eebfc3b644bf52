package daemon

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
	"github.com/gossipd/gossipd/job"
)

// Checkpoint is a saved daemon state.
type Checkpoint struct {
	Seq   uint64
	Time  time.Time
	Job   JobID
	Spec  job.Spec
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

	dir      string // the store's directory (a read-only store reads a copy of it)
	readOnly bool
	copyDir  string // the private copy a read-only store reads, removed by Close

	mu   sync.Mutex // serialises Save
	seq  uint64
	last *Checkpoint // the newest saved by this process (its job and updates)

	recMu    sync.Mutex    // guards rec
	rec      *record       // what the store has durably written (RECORD)
	recDirty chan struct{} // signals writeRecords that rec changed (nil: read-only)
	recDone  chan struct{} // closed when writeRecords is done
}

// ErrSuperseded means Save was handed a state older than one it already
// saved for the same job (a periodic snapshot overtaken by a durable one):
// it is not written.
var ErrSuperseded = errors.New("daemon: checkpoint superseded by a newer one")

var ckptPrefix = []byte("ckpt/")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func ckptKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), ckptPrefix...), seq)
}

// ErrNoStore: a directory given to read an existing store holds none (a
// read-only command given a wrong path, which must not create one).
var ErrNoStore = errors.New("daemon: no store")

// ErrStoreInUse: another process (a running daemon) holds the store.
var ErrStoreInUse = errors.New("daemon: the store is in use by another process")

// StoreOptions configures OpenStore.
type StoreOptions struct {
	// Keep is how many checkpoints the store keeps (default 3).
	Keep int
	// Logger hears of damage found and mended (default slog.Default()).
	Logger *slog.Logger
	// IfDamaged says what OpenStore does with a store it finds damaged
	// (default DamagedRefuse: fail with ErrDamaged, changing nothing).
	IfDamaged DamagedAction
	// ReadOnly opens a private copy of an existing store: nothing in dir
	// is created, changed or deleted, and writes fail. A missing store is
	// ErrNoStore; a damaged one is ErrDamaged (read-only commands never
	// mend a store).
	ReadOnly bool
}

// OpenExistingStore opens the store in dir read-only, for a command that
// reads what a daemon wrote (export, privacy ledger, status --store).
func OpenExistingStore(dir string) (*Store, error) {
	return OpenStore(dir, StoreOptions{ReadOnly: true})
}

// storeExists says whether dir holds a store (ErrNoStore where it is
// missing, not a directory, or holds no badger MANIFEST).
func storeExists(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w at %s: no such directory", ErrNoStore, dir)
	case err != nil:
		return fmt.Errorf("%w at %s: %w", ErrNoStore, dir, err)
	case !st.IsDir():
		return fmt.Errorf("%w at %s: not a directory", ErrNoStore, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, badger.ManifestFilename)); err != nil {
		return fmt.Errorf("%w at %s: the directory holds no checkpoint database (no %s)", ErrNoStore, dir, badger.ManifestFilename)
	}
	return nil
}

// OpenStore opens the store in dir (creating it unless opts.ReadOnly).
// Badger's directory lock keeps a second daemon off the same store.
//
// An existing store is checked first, on a private copy, so that nothing
// badger does on opening (it deletes table files its MANIFEST does not
// list) can lose data: the copy must open, and hold the newest checkpoint
// and the privacy spending the store's record (RECORD) says were written.
// A store that fails is damaged: OpenStore refuses it with ErrDamaged,
// naming what is wrong and where, unless opts.IfDamaged says to recover
// or reset it.
func OpenStore(dir string, opts StoreOptions) (*Store, error) {
	if opts.Keep <= 0 {
		opts.Keep = 3
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	log := opts.Logger
	if !opts.ReadOnly {
		finishMend(dir, log)
	}
	existing := storeExists(dir) == nil
	if opts.ReadOnly && !existing {
		return nil, storeExists(dir)
	}
	if existing {
		if lockedByOther(dir) {
			return nil, inUse(dir)
		}
		if !opts.ReadOnly { // checks a daemon killed meanwhile left behind
			old, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".check-*"))
			for _, o := range old {
				os.RemoveAll(o)
			}
		}
		// A read-only open reads its copy to the end and must not touch
		// the store's directory; a daemon's check is removed at once.
		tmp, ins, err := inspect(dir, !opts.ReadOnly)
		if err != nil {
			return nil, err
		}
		if opts.ReadOnly {
			if ins.damaged() {
				os.RemoveAll(tmp)
				return nil, ins.err(dir, "the store was left as it is; a daemon started with --store-recover keeps what is readable")
			}
			s, err := openBadger(tmp, opts.Keep, log)
			if err != nil {
				os.RemoveAll(tmp)
				return nil, err
			}
			s.readOnly, s.copyDir, s.dir = true, tmp, dir
			return s, nil
		}
		os.RemoveAll(tmp)
		if ins.damaged() {
			switch opts.IfDamaged {
			case DamagedRecover, DamagedReset:
				if err := mend(dir, ins, opts.IfDamaged, log); err != nil {
					return nil, err
				}
			default:
				return nil, ins.err(dir, "start with --store-recover to keep what is readable and move the damaged files aside, or --store-reset to start afresh (the privacy ledger is kept either way)")
			}
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("daemon: creating store %s: %w", dir, err)
	}
	// Badger writes the first page of a new log through a memory map:
	// on a full disk that is a SIGBUS, not an error.
	if free, err := freeBytes(dir); err == nil && free < minFreeToOpen {
		return nil, fmt.Errorf("%w: store %s: %s free, opening it needs at least %s", ErrDiskFull, dir, mib(free), mib(minFreeToOpen))
	}
	s, err := openBadger(dir, opts.Keep, log)
	if err != nil {
		return nil, err
	}
	s.rec, err = readRecord(dir)
	if err != nil { // inspect read it a moment ago
		s.db.Close()
		return nil, err
	}
	s.recDirty, s.recDone = make(chan struct{}, 1), make(chan struct{})
	go s.writeRecords()
	return s, nil
}

func inUse(dir string) error {
	return fmt.Errorf("%w: %s (a running daemon holds it: stop it first, or ask it over its API)", ErrStoreInUse, dir)
}

// badgerOptions are the store's badger settings: synced writes, an 8 MiB
// memtable (values up to 1 MiB stay in the LSM tree), 64 MiB value logs,
// and a 4 MiB block cache (badger's default, 256 MiB, would grow a small
// board's daemon by the size of its checkpoints read back, for nothing: a
// store is read at start and by export), and 2 compactors, badger's
// least (each wakes every 50 ms; a store of a few checkpoints needs
// little compaction, and many daemons on one host pay for each wake-up).
func badgerOptions(dir string) badger.Options {
	return badger.DefaultOptions(dir).WithSyncWrites(true).WithLogger(nil).
		WithMemTableSize(memTableSize).WithValueLogFileSize(64 << 20).WithNumVersionsToKeep(1).
		WithBlockCacheSize(4 << 20).WithNumCompactors(2)
}

// openBadger opens the badger database in dir as it is.
func openBadger(dir string, keep int, log *slog.Logger) (*Store, error) {
	db, err := badger.Open(badgerOptions(dir))
	if err != nil {
		// Badger formats its lock error as text, without wrapping.
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, inUse(dir)
		}
		return nil, fmt.Errorf("daemon: opening store %s: %w", dir, err)
	}
	s := &Store{db: db, keep: keep, log: log, dir: dir}
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
	if err := s.makeRoom("a checkpoint", len(b)); err != nil {
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
		return fmt.Errorf("daemon: saving checkpoint %d: %w", c.Seq, err)
	}
	s.seq, s.last = c.Seq, &Checkpoint{Job: c.Job, State: gossip.State{Updates: c.State.Updates}}
	s.note(func(r *record) { r.Checkpoint = c.Seq })
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
			case job != nil && c.Job != *job && JobID(c.Spec.ID()) != *job:
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

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Close closes the database (and removes a read-only store's copy).
func (s *Store) Close() error {
	if s.recDirty != nil {
		close(s.recDirty)
		<-s.recDone // the last record written
	}
	err := s.db.Close()
	if s.copyDir != "" {
		os.RemoveAll(s.copyDir)
	}
	return err
}
