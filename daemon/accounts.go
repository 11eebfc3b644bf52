package daemon

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/gossipd/gossipd/gossip"
)

// Push-sum's accounts (its weight and the running sums of its links) are
// written on every change, synchronously, before the shares they count
// leave: a few bytes per link, not the model. A restart takes them over
// its last checkpoint's (gossip.Config.Accounts).

var accountsPrefix = []byte("pushsum-accounts/")

func accountsKey(job JobID) []byte { return append(slices.Clone(accountsPrefix), job[:]...) }

// SaveAccounts durably records push-sum's accounts for job; a record older
// than the stored one (by Seq) is refused.
func (s *Store) SaveAccounts(job JobID, a gossip.Accounts) error {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(a); err != nil {
		return err
	}
	v := binary.LittleEndian.AppendUint32(b.Bytes(), crc32.Checksum(b.Bytes(), castagnoli))
	if err := s.makeRoom("push-sum's accounts", len(v)); err != nil {
		return err
	}
	return s.db.Update(func(txn *badger.Txn) error {
		old, err := getAccounts(txn, job)
		if err == nil && old != nil && old.Seq > a.Seq {
			return fmt.Errorf("daemon: push-sum accounts %d are older than the stored %d", a.Seq, old.Seq)
		}
		return txn.Set(accountsKey(job), v)
	})
}

// Accounts returns push-sum's last accounts for job (nil: none).
func (s *Store) Accounts(job JobID) (*gossip.Accounts, error) {
	var a *gossip.Accounts
	err := s.db.View(func(txn *badger.Txn) (err error) {
		a, err = getAccounts(txn, job)
		return err
	})
	return a, err
}

func getAccounts(txn *badger.Txn, job JobID) (*gossip.Accounts, error) {
	it, err := txn.Get(accountsKey(job))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var a *gossip.Accounts
	err = it.Value(func(v []byte) error {
		var err error
		a, err = decodeAccounts(v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("daemon: push-sum accounts of job %s: %w", job.Short(), err)
	}
	return a, nil
}

// decodeAccounts reads a stored record (gob, CRC-32C trailer).
func decodeAccounts(v []byte) (*gossip.Accounts, error) {
	if len(v) < 4 || crc32.Checksum(v[:len(v)-4], castagnoli) != binary.LittleEndian.Uint32(v[len(v)-4:]) {
		return nil, errors.New("checksum mismatch")
	}
	var a gossip.Accounts
	if err := gob.NewDecoder(bytes.NewReader(v[:len(v)-4])).Decode(&a); err != nil {
		return nil, err
	}
	if !(a.Weight > 0) {
		return nil, fmt.Errorf("weight %v", a.Weight)
	}
	return &a, nil
}
