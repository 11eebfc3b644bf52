package daemon

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
)

// A store guards three things an operator must never lose silently: the
// checkpoints, push-sum's accounts and the privacy ledger.
//
// Space. Badger writes its logs and tables through memory maps of files
// it sized first; where the filesystem cannot back a page the process
// gets SIGBUS, not ENOSPC. So before each write the store has the
// filesystem back every page of badger's write-ahead logs (fallocate) and
// checks that the free space covers the write twice over plus what a
// memtable flush and a compaction need (makeRoom); otherwise the write
// fails with ErrDiskFull and the store keeps what it holds.
//
// Damage. Badger deletes, on opening, every table its MANIFEST does not
// list: a truncated MANIFEST empties the store without a word. So the
// store keeps a record of what it has durably written (RECORD: the
// newest checkpoint's number and each privacy ledger's spending, written
// after the database's own synced write, so that it can lag behind the
// database but never run ahead of it), and OpenStore first opens a copy
// and holds it to the record.

// ErrDiskFull: the filesystem that holds the store lacks the space a
// write needs. Nothing was written; the store keeps what it held.
var ErrDiskFull = errors.New("daemon: disk full")

// ErrDamaged: the store cannot be read as it was written. The error says
// what is wrong and where; nothing was changed.
var ErrDamaged = errors.New("daemon: the store is damaged")

// errReadOnly: a write to a store opened read-only.
var errReadOnly = errors.New("daemon: the store was opened read-only")

// DamagedAction says what OpenStore does with a damaged store.
type DamagedAction int

const (
	// DamagedRefuse fails with ErrDamaged and changes nothing.
	DamagedRefuse DamagedAction = iota
	// DamagedRecover moves the damaged store aside (DIR.damaged-TIME)
	// and starts a new one holding everything readable in it: the
	// checkpoints, push-sum's accounts and the privacy ledgers (each at
	// least what the record says was spent).
	DamagedRecover
	// DamagedReset moves the damaged store aside and starts afresh, but
	// for the privacy ledgers, which are kept as DamagedRecover keeps
	// them: resetting a model never resets ε.
	DamagedReset
)

const (
	memTableSize = 8 << 20
	// spareSpace is what a write needs free beyond twice its own size: a
	// memtable flushed to a table, and a compaction's new tables.
	spareSpace = memTableSize + 4<<20
	// minFreeToOpen is the least free space in which badger's new logs
	// can be started.
	minFreeToOpen = 1 << 20
	recordFile    = "RECORD"
)

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// makeRoom makes sure a write of about size bytes can go through badger's
// memory maps without a fault: it has the filesystem back the pages of the
// write-ahead logs, and checks the free space.
func (s *Store) makeRoom(what string, size int) error {
	if s.readOnly {
		return errReadOnly
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("daemon: store %s: %w", s.dir, err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".mem") && e.Name() != "DISCARD" {
			continue
		}
		if err := allocate(filepath.Join(s.dir, e.Name())); errors.Is(err, fs.ErrNotExist) {
			continue // rotated away meanwhile
		} else if err != nil {
			free, _ := freeBytes(s.dir)
			return fmt.Errorf("%w: %s in store %s: backing %s: %v (%s free)", ErrDiskFull, what, s.dir, e.Name(), err, mib(free))
		}
	}
	free, err := freeBytes(s.dir)
	if err != nil {
		return fmt.Errorf("daemon: store %s: %w", s.dir, err)
	}
	if need := 2*int64(size) + spareSpace; free < need {
		return fmt.Errorf("%w: %s in store %s needs about %s free, %s left (the store keeps what it holds)", ErrDiskFull, what, s.dir, mib(need), mib(free))
	}
	return nil
}

// inspection is what inspect found wrong with a store.
type inspection struct {
	problems []string
	rec      *record
	lost     bool // the record says more was written than the store holds
}

func (i *inspection) damaged() bool { return len(i.problems) > 0 }

func (i *inspection) add(format string, a ...any) {
	i.problems = append(i.problems, fmt.Sprintf(format, a...))
}

func (i *inspection) err(dir, advice string) error {
	return fmt.Errorf("%w: %s: %s; %s", ErrDamaged, dir, strings.Join(i.problems, "; "), advice)
}

// inspect checks the store in dir on a private copy (beside it: see
// copyStore), which it returns (opened and closed once by badger) for the
// caller to read or remove.
func inspect(dir string, beside bool) (string, *inspection, error) {
	ins := &inspection{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", nil, fmt.Errorf("daemon: store %s: %w", dir, err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		switch {
		case strings.HasSuffix(e.Name(), ".sst") && fi.Size() == 0:
			ins.add("table %s is empty (0 bytes)", e.Name())
		case e.Name() == badger.ManifestFilename && fi.Size() < 8:
			ins.add("%s is truncated (%d bytes)", e.Name(), fi.Size())
		}
	}
	rec, err := readRecord(dir)
	if err != nil {
		ins.add("%v", err)
	}
	ins.rec = rec
	tmp, err := copyStore(dir, nil, beside)
	if err != nil {
		return "", nil, fmt.Errorf("daemon: store %s: copying it to check it: %w", dir, err)
	}
	db, err := badger.Open(badgerOptions(tmp))
	if err != nil {
		// (Badger names the files of the copy: name the store's.)
		ins.add("badger cannot open it: %s", strings.ReplaceAll(err.Error(), tmp, dir))
		return tmp, ins, nil
	}
	defer db.Close()
	err = db.View(func(txn *badger.Txn) error {
		ins.checkContents(txn)
		return nil
	})
	return tmp, ins, err
}

// checkContents holds what txn reads against the record.
func (ins *inspection) checkContents(txn *badger.Txn) {
	newest, readable := uint64(0), uint64(0)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: ckptPrefix})
	for it.Rewind(); it.ValidForPrefix(ckptPrefix); it.Next() {
		seq := binary.BigEndian.Uint64(it.Item().Key()[len(ckptPrefix):])
		newest = max(newest, seq)
		err := it.Item().Value(func(v []byte) error { _, err := decode(v); return err })
		if err != nil {
			ins.add("checkpoint %d is unreadable: %v", seq, err)
			continue
		}
		readable = max(readable, seq)
	}
	it.Close()
	if r := ins.rec; r != nil && r.Checkpoint > newest {
		ins.lost = true
		have := "none"
		if newest > 0 {
			have = fmt.Sprint(newest)
		}
		ins.add("%s says checkpoint %d was written but the newest the store holds is %s: its MANIFEST or table files lost data", recordFile, r.Checkpoint, have)
	}
	ledgers := map[string]*DataLedger{}
	it = txn.NewIterator(badger.IteratorOptions{Prefix: dataLedgerPrefix})
	for it.Rewind(); it.ValidForPrefix(dataLedgerPrefix); it.Next() {
		fp := string(it.Item().Key()[len(dataLedgerPrefix):])
		l, err := getLedger(txn, fp)
		if err != nil {
			ins.add("the privacy ledger of data %.12s is unreadable: %v", fp, err)
			ledgers[fp] = nil
			continue
		}
		ledgers[fp] = l
	}
	it.Close()
	if r := ins.rec; r != nil {
		for _, fp := range slices.Sorted(mapKeys(r.Ledgers)) {
			l, ok := ledgers[fp]
			switch {
			case !ok:
				ins.lost = true
				ins.add("the privacy ledger of data %.12s is missing (%s says %d steps were recorded)", fp, recordFile, r.Ledgers[fp].Steps)
			case l != nil && !l.Spent.Covers(r.Ledgers[fp]):
				ins.lost = true
				ins.add("the privacy ledger of data %.12s holds %d steps, %s says %d were recorded", fp, l.Spent.Steps, recordFile, r.Ledgers[fp].Steps)
			}
		}
	}
	it = txn.NewIterator(badger.IteratorOptions{Prefix: accountsPrefix})
	for it.Rewind(); it.ValidForPrefix(accountsPrefix); it.Next() {
		err := it.Item().Value(func(v []byte) error { _, err := decodeAccounts(v); return err })
		if err != nil {
			ins.add("push-sum's accounts are unreadable: %v", err)
		}
	}
	it.Close()
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
