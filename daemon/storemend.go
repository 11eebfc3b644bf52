package daemon

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/gossipd/gossipd/privacy"
)

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
		return fmt.Errorf("daemon: mending store %s: %w", dir, err)
	}
	defer os.RemoveAll(build) // gone once swapped in
	ckpts, kept, err := rebuild(build, got, ins, how, log)
	if err != nil {
		return fmt.Errorf("daemon: mending store %s: %w", dir, err)
	}
	aside := fmt.Sprintf("%s.damaged-%s", dir, time.Now().UTC().Format("20060102T150405"))
	for i := 2; ; i++ { // never over an earlier one
		if _, err := os.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s.damaged-%s-%d", dir, time.Now().UTC().Format("20060102T150405"), i)
	}
	if err := os.Rename(dir, aside); err != nil {
		return fmt.Errorf("daemon: moving the damaged store %s aside: %w", dir, err)
	}
	if err := os.Rename(build, dir); err != nil {
		return fmt.Errorf("daemon: moving the mended store into %s: %w", dir, err)
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
