package daemon

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gossipd/gossipd/privacy"
)

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
