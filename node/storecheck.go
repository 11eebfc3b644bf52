package node

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/badger/v4/table"
	"google.golang.org/protobuf/proto"

	"github.com/gossipd/gossipd/privacy"
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
var ErrDiskFull = errors.New("node: disk full")

// ErrDamaged: the store cannot be read as it was written. The error says
// what is wrong and where; nothing was changed.
var ErrDamaged = errors.New("node: the store is damaged")

// errReadOnly: a write to a store opened read-only.
var errReadOnly = errors.New("node: the store was opened read-only")

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
		return fmt.Errorf("node: store %s: %w", s.dir, err)
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
		return fmt.Errorf("node: store %s: %w", s.dir, err)
	}
	if need := 2*int64(size) + spareSpace; free < need {
		return fmt.Errorf("%w: %s in store %s needs about %s free, %s left (the store keeps what it holds)", ErrDiskFull, what, s.dir, mib(need), mib(free))
	}
	return nil
}

// record is what the store has durably written: the newest checkpoint's
// number and each privacy ledger's spending (by data fingerprint).
type record struct {
	Checkpoint uint64                      `json:"checkpoint"`
	Ledgers    map[string]privacy.Spending `json:"ledgers,omitempty"`
	Updated    time.Time                   `json:"updated"`
}

// readRecord reads dir's record (nil, nil: none).
func readRecord(dir string) (*record, error) {
	b, err := os.ReadFile(filepath.Join(dir, recordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r, err := decodeRecord(b)
	if err != nil {
		return nil, fmt.Errorf("%s is unreadable: %w", recordFile, err)
	}
	return r, nil
}

// decodeRecord decodes a record: JSON with a CRC-32C trailer, every
// spending valid (a recovery may take it as a ledger).
func decodeRecord(b []byte) (*record, error) {
	if len(b) < 4 || crc32.Checksum(b[:len(b)-4], castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, fmt.Errorf("checksum mismatch (%d bytes)", len(b))
	}
	var r record
	if err := json.Unmarshal(b[:len(b)-4], &r); err != nil {
		return nil, err
	}
	for _, fp := range slices.Sorted(mapKeys(r.Ledgers)) {
		if err := r.Ledgers[fp].Check(); err != nil {
			return nil, fmt.Errorf("ledger of data %.12s: %w", fp, err)
		}
	}
	return &r, nil
}

// encodeRecord is the record's JSON with a CRC-32C trailer.
func encodeRecord(r *record) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// writeRecord replaces dir's record atomically and durably.
func writeRecord(dir string, r *record) error {
	b, err := encodeRecord(r)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, recordFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, recordFile))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// note updates the record after a durable write; a goroutine of its own
// writes it (writeRecords), so that no write waits on it. A record that
// has not been written yet, or could not be, lags behind the database,
// which is safe: it only ever says less was written than was.
func (s *Store) note(f func(*record)) {
	s.recMu.Lock()
	r := record{}
	if s.rec != nil {
		r = *s.rec
		r.Ledgers = make(map[string]privacy.Spending, len(s.rec.Ledgers))
		for k, v := range s.rec.Ledgers {
			r.Ledgers[k] = v
		}
	}
	f(&r)
	r.Updated = time.Now().UTC()
	s.rec = &r // never changed once here: the writer reads it unlocked
	s.recMu.Unlock()
	select {
	case s.recDirty <- struct{}{}:
	default: // a write is pending; it will take this record
	}
}

// writeRecords writes the newest record each time note signals, until
// recDirty closes.
func (s *Store) writeRecords() {
	defer close(s.recDone)
	failing := false
	for range s.recDirty {
		s.recMu.Lock()
		r := s.rec
		s.recMu.Unlock()
		err := writeRecord(s.dir, r)
		switch {
		case err != nil && !failing:
			failing = true
			s.log.Warn("could not update the store's record; it lags behind the store", "store", s.dir, "err", err)
		case err == nil && failing:
			failing = false
			s.log.Info("the store's record is written again", "store", s.dir)
		}
	}
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
		return "", nil, fmt.Errorf("node: store %s: %w", dir, err)
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
		return "", nil, fmt.Errorf("node: store %s: copying it to check it: %w", dir, err)
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

// copyStore copies the store's files (not LOCK, not subdirectories) into a
// new temporary directory, holes left as holes; skip leaves files out.
// Beside puts the copy next to the store, on its filesystem (sized for
// it); where that cannot be, and otherwise, the copy goes to the system's
// temporary directory.
func copyStore(dir string, skip func(fs.FileInfo) bool, beside bool) (string, error) {
	var tmp string
	var err error
	if beside {
		if tmp, err = os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".check-"); err != nil {
			beside = false
		}
	}
	if !beside {
		if tmp, err = os.MkdirTemp("", "gossipd-store-"); err != nil {
			return "", err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || e.Name() == "LOCK" || (skip != nil && skip(fi)) {
			continue
		}
		// Every file is copied, none linked: badger deletes a table by
		// truncating it first, which through a link would empty the
		// store's own.
		if err := copySparse(filepath.Join(dir, e.Name()), filepath.Join(tmp, e.Name()), fi.Size()); err != nil {
			os.RemoveAll(tmp)
			if beside { // no room beside it: the temporary directory may have
				return copyStore(dir, skip, false)
			}
			return "", err
		}
	}
	return tmp, nil
}

// copySparse copies src to dst, seeking over blocks of zeros (badger's
// logs are mostly holes).
func copySparse(src, dst string, size int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	zero := make([]byte, len(buf))
	for {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 {
			if bytes.Equal(buf[:n], zero[:n]) {
				_, err = out.Seek(int64(n), io.SeekCurrent)
			} else {
				_, err = out.Write(buf[:n])
			}
			if err != nil {
				out.Close()
				return err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			out.Close()
			return rerr
		}
	}
	if err := out.Truncate(size); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// rebuildManifest writes a MANIFEST into dir that lists every table file
// in it at level 0 (where tables may overlap; reads take each key's newest
// version), for reading a store whose own MANIFEST lost them.
func rebuildManifest(dir string) error {
	// The header (magic and versions) of the badger in use: from a new,
	// empty database.
	fresh, err := os.MkdirTemp("", "gossipd-manifest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(fresh)
	db, err := badger.Open(badgerOptions(fresh))
	if err != nil {
		return err
	}
	db.Close()
	m, err := os.ReadFile(filepath.Join(fresh, badger.ManifestFilename))
	if err != nil || len(m) < 8 {
		return fmt.Errorf("reading a new MANIFEST's header: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var set pb.ManifestChangeSet
	for _, e := range entries {
		if id, ok := table.ParseFileID(e.Name()); ok {
			set.Changes = append(set.Changes, &pb.ManifestChange{Id: id, Op: pb.ManifestChange_CREATE, Level: 0,
				Compression: uint32(badgerOptions(dir).Compression)})
		}
	}
	sort.Slice(set.Changes, func(i, j int) bool { return set.Changes[i].Id < set.Changes[j].Id })
	body, err := proto.Marshal(&set)
	if err != nil {
		return err
	}
	out := append([]byte(nil), m[:8]...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum(body, castagnoli))
	out = append(out, body...)
	return os.WriteFile(filepath.Join(dir, badger.ManifestFilename), out, 0o600)
}

// salvaged is what could be read from a damaged store.
type salvaged struct {
	checkpoints, accounts, ledgers, legacy map[string][]byte
	unreadable                             int
}

// salvage reads everything readable of the store in dir, from copies:
// first as it is (without empty tables), and where that fails or holds
// less than the record, with a MANIFEST rebuilt from its table files.
func salvage(dir string, ins *inspection) *salvaged {
	best := &salvaged{}
	for _, rebuild := range []bool{false, true} {
		if !rebuild && ins.lost {
			continue
		}
		tmp, err := copyStore(dir, func(fi fs.FileInfo) bool { return strings.HasSuffix(fi.Name(), ".sst") && fi.Size() == 0 }, true)
		if err != nil {
			continue
		}
		if rebuild {
			if err := rebuildManifest(tmp); err != nil {
				os.RemoveAll(tmp)
				continue
			}
		}
		s := readAll(tmp)
		os.RemoveAll(tmp)
		if s != nil && len(s.checkpoints)+len(s.ledgers) >= len(best.checkpoints)+len(best.ledgers) {
			best = s
		}
		if s != nil && !rebuild {
			break
		}
	}
	return best
}

// readAll reads the store in dir, keeping the entries that decode.
func readAll(dir string) *salvaged {
	db, err := badger.Open(badgerOptions(dir))
	if err != nil {
		return nil
	}
	defer db.Close()
	s := &salvaged{checkpoints: map[string][]byte{}, accounts: map[string][]byte{}, ledgers: map[string][]byte{}, legacy: map[string][]byte{}}
	db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := string(it.Item().Key())
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				s.unreadable++
				continue
			}
			var into map[string][]byte
			switch {
			case strings.HasPrefix(k, string(ckptPrefix)):
				_, err = decode(v)
				into = s.checkpoints
			case strings.HasPrefix(k, string(accountsPrefix)):
				_, err = decodeAccounts(v)
				into = s.accounts
			case strings.HasPrefix(k, string(dataLedgerPrefix)):
				_, err = decodeLedger(v)
				into = s.ledgers
			case strings.HasPrefix(k, string(legacyLedgerPrefix)):
				if len(v) != 12 || crc32.Checksum(v[:8], castagnoli) != binary.LittleEndian.Uint32(v[8:]) {
					err = errors.New("corrupt")
				}
				into = s.legacy
			default:
				continue
			}
			if err != nil {
				s.unreadable++
				continue
			}
			into[k] = v
		}
		return nil
	})
	return s
}

// mend moves the damaged store in dir aside and starts a new one there
// with what how keeps of it. The new store is built first, beside (a
// directory named .BASE.mend-*); then two renames swap it in, and a
// start that finds the store missing but a finished build beside it (its
// RECORD written, last) completes the swap (finishMend).
func mend(dir string, ins *inspection, how DamagedAction, log *slog.Logger) error {
	got := salvage(dir, ins)
	build, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".mend-")
	if err != nil {
		return fmt.Errorf("node: mending store %s: %w", dir, err)
	}
	defer os.RemoveAll(build) // gone once swapped in
	ckpts, kept, err := rebuild(build, got, ins, how, log)
	if err != nil {
		return fmt.Errorf("node: mending store %s: %w", dir, err)
	}
	aside := fmt.Sprintf("%s.damaged-%s", dir, time.Now().UTC().Format("20060102T150405"))
	for i := 2; ; i++ { // never over an earlier one
		if _, err := os.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s.damaged-%s-%d", dir, time.Now().UTC().Format("20060102T150405"), i)
	}
	if err := os.Rename(dir, aside); err != nil {
		return fmt.Errorf("node: moving the damaged store %s aside: %w", dir, err)
	}
	if err := os.Rename(build, dir); err != nil {
		return fmt.Errorf("node: moving the mended store into %s: %w", dir, err)
	}
	what := "recovered"
	if how == DamagedReset {
		what = "reset"
	}
	log.Warn("store "+what+": the damaged files were moved aside", "store", dir, "aside", aside,
		"checkpoints_kept", ckpts, "ledgers_kept", kept, "unreadable_entries", got.unreadable, "damage", strings.Join(ins.problems, "; "))
	return nil
}

// finishMend completes a mend that a crash interrupted between its two
// renames: where dir is missing and a finished build lies beside it, the
// build becomes the store.
func finishMend(dir string, log *slog.Logger) {
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	builds, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".mend-*"))
	for _, b := range builds {
		if _, err := os.Stat(filepath.Join(b, recordFile)); err == nil && os.Rename(b, dir) == nil {
			log.Warn("store: finished mending it (a stop interrupted the swap)", "store", dir)
			return
		}
	}
}

// rebuild writes into the empty directory dir a store of what how keeps
// of got, and its RECORD last; it returns the checkpoints and ledgers
// kept.
func rebuild(dir string, got *salvaged, ins *inspection, how DamagedAction, log *slog.Logger) (ckpts, kept int, err error) {
	db, err := badger.Open(badgerOptions(dir))
	if err != nil {
		return 0, 0, err
	}
	var rec *record
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err == nil {
			err = writeRecord(dir, rec)
		}
	}()
	rec = &record{Ledgers: map[string]privacy.Spending{}}
	if ins.rec != nil {
		for k, v := range ins.rec.Ledgers {
			rec.Ledgers[k] = v
		}
	}
	put := func(k string, v []byte) error {
		return db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(k), v) })
	}
	if how == DamagedRecover {
		for _, k := range slices.Sorted(mapKeys(got.checkpoints)) {
			if err := put(k, got.checkpoints[k]); err != nil {
				return 0, 0, err
			}
			rec.Checkpoint = max(rec.Checkpoint, binary.BigEndian.Uint64([]byte(k)[len(ckptPrefix):]))
			ckpts++
		}
		for _, k := range slices.Sorted(mapKeys(got.accounts)) {
			if err := put(k, got.accounts[k]); err != nil {
				return 0, 0, err
			}
		}
	}
	for _, k := range slices.Sorted(mapKeys(got.legacy)) {
		if err := put(k, got.legacy[k]); err != nil {
			return 0, 0, err
		}
	}
	// The ledgers: what the store held, raised to what the record says
	// was spent where it held less (or nothing).
	ledgers := map[string]*DataLedger{}
	for k, v := range got.ledgers {
		l, _ := decodeLedger(v)
		ledgers[k[len(dataLedgerPrefix):]] = l
	}
	for _, fp := range slices.Sorted(mapKeys(rec.Ledgers)) {
		sp, l := rec.Ledgers[fp], ledgers[fp]
		if l == nil {
			l = &DataLedger{Fingerprint: fp, Delta: 1e-5}
			ledgers[fp] = l
		}
		if !l.Spent.Covers(sp) {
			l.Spent = sp
			log.Warn("privacy ledger restored from the store's record", "data", fp[:min(12, len(fp))], "steps", sp.Steps)
		}
	}
	for _, fp := range slices.Sorted(mapKeys(ledgers)) {
		l := ledgers[fp]
		l.Updated = time.Now().UTC()
		b, err := encodeLedger(l)
		if err != nil {
			return 0, 0, err
		}
		if err := put(string(dataLedgerKey(fp)), b); err != nil {
			return 0, 0, err
		}
		rec.Ledgers[fp] = l.Spent
		kept++
	}
	rec.Updated = time.Now().UTC()
	return ckpts, kept, nil
}

// StoreReport is what `gossipd status --store` shows of a stopped
// daemon's store: whether it is healthy, and what it holds.
type StoreReport struct {
	Dir     string   `json:"dir"`
	Healthy bool     `json:"healthy"`
	Damage  []string `json:"damage,omitempty"`
	// Checkpoints counts the checkpoints kept; Newest is the newest
	// readable one.
	Checkpoints int             `json:"checkpoints"`
	Newest      *CheckpointInfo `json:"newest,omitempty"`
	// Recorded is the newest checkpoint the store's record says was
	// written (0: no record).
	Recorded uint64 `json:"recorded_checkpoint"`
	// Privacy is the privacy ledger, per set of data.
	Privacy LedgerSummary `json:"privacy"`
}

// CheckpointInfo describes one checkpoint.
type CheckpointInfo struct {
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	Job      string    `json:"job"`
	Name     string    `json:"name,omitempty"`
	Protocol string    `json:"protocol"`
	Model    string    `json:"model"`
	Updates  uint64    `json:"updates"`
	Age      float64   `json:"age"`
}

// InspectStore reports on the store in dir without changing any of its
// files (it reads a copy). A damaged store is reported, not an error.
func InspectStore(dir string) (*StoreReport, error) {
	if err := storeExists(dir); err != nil {
		return nil, err
	}
	if lockedByOther(dir) {
		return nil, inUse(dir)
	}
	tmp, ins, err := inspect(dir, false)
	if tmp != "" {
		defer os.RemoveAll(tmp)
	}
	if err != nil {
		return nil, err
	}
	rep := &StoreReport{Dir: dir, Healthy: !ins.damaged(), Damage: ins.problems, Privacy: LedgerSummary{Data: []DataSummary{}}}
	if ins.rec != nil {
		rep.Recorded = ins.rec.Checkpoint
	}
	if ins.damaged() {
		return rep, nil
	}
	s, err := openBadger(tmp, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer s.db.Close()
	if rep.Checkpoints, err = s.Count(); err != nil {
		return nil, err
	}
	if c, err := s.Newest(); err != nil {
		return nil, err
	} else if c != nil {
		rep.Newest = &CheckpointInfo{Seq: c.Seq, Time: c.Time, Job: c.Job.String(), Name: c.Spec.Name, Protocol: c.Spec.Protocol,
			Model: c.Spec.Model.String(), Updates: c.State.Updates, Age: c.State.Age}
	}
	ledgers, legacy, err := s.Ledgers()
	if err != nil {
		return nil, err
	}
	rep.Privacy = LedgerReport(ledgers, legacy, 0)
	return rep, nil
}
