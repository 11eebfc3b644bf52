package daemon

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/gossipd/gossipd/peer"
	"github.com/gossipd/gossipd/privacy"
)

// The privacy ledger follows the data, not the job. ε is spent on records:
// a daemon that trains the same local data under another job, another
// learning rate or another name has spent what it spent before. The store
// keeps one DataLedger per dataset fingerprint (dataset.Fingerprint of the
// training data, before scaling), the spending in Rényi form so that steps
// taken under different sampling rates and noise multipliers compose
// exactly, with a breakdown per job for the record. It is written ahead:
// steps are recorded before they are taken.
//
// What it cannot see: a fresh store (or another machine) pointed at the
// same data starts from nothing; data that overlaps another fingerprint's
// (a different shard or test split of one source) is accounted apart.

// DataLedger is the privacy spending of one set of training data in one
// store, across every job and setting it was trained under.
type DataLedger struct {
	// Fingerprint is the data's content hash (dataset.Fingerprint).
	Fingerprint string `json:"fingerprint"`
	// Spent is everything spent on the data.
	Spent privacy.Spending `json:"spent"`
	// Delta is the δ of the last run, at which ε is shown by default.
	Delta float64 `json:"delta"`
	// Jobs breaks Spent down by job, sorted by job ID. Their RDP sums to
	// Spent's, but for migrated entries (MigratedJobs) whose steps were
	// converted at the migrating run's sampling rate and noise.
	Jobs []JobSpending `json:"jobs"`
	// MigratedJobs lists the jobs whose old per-job entries were merged in.
	MigratedJobs []string `json:"migrated_jobs,omitempty"`
	// Updated is when the ledger was last written.
	Updated time.Time `json:"updated"`
}

// JobSpending is one job's share of a DataLedger.
type JobSpending struct {
	Job   string           `json:"job"`
	Name  string           `json:"name,omitempty"`
	Spent privacy.Spending `json:"spent"`
	// SamplingRate and Noise are the last run's q and σ.
	SamplingRate float64 `json:"sampling_rate"`
	Noise        float64 `json:"noise_multiplier"`
}

// Job returns the entry of job (a zero one for a job not in the ledger).
func (l *DataLedger) Job(job string) JobSpending {
	if i, ok := slices.BinarySearchFunc(l.Jobs, job, func(e JobSpending, j string) int { return strings.Compare(e.Job, j) }); ok {
		return l.Jobs[i]
	}
	return JobSpending{Job: job}
}

// setJob stores e, keeping Jobs sorted.
func (l *DataLedger) setJob(e JobSpending) {
	i, ok := slices.BinarySearchFunc(l.Jobs, e.Job, func(e JobSpending, j string) int { return strings.Compare(e.Job, j) })
	if ok {
		l.Jobs[i] = e
	} else {
		l.Jobs = slices.Insert(l.Jobs, i, e)
	}
}

var (
	dataLedgerPrefix = []byte("dp-data/")
	// legacyLedgerPrefix keys the ledgers of stores written before the
	// ledger followed the data: DP-SGD steps per job ID (8 bytes, CRC-32C).
	legacyLedgerPrefix = []byte("dp-ledger/")
)

func dataLedgerKey(fp string) []byte { return append(slices.Clone(dataLedgerPrefix), fp...) }

// encodeLedger is the ledger's JSON with a CRC-32C trailer.
func encodeLedger(l *DataLedger) ([]byte, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

func decodeLedger(b []byte) (*DataLedger, error) {
	if len(b) < 4 || crc32.Checksum(b[:len(b)-4], castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, errors.New("checksum mismatch")
	}
	var l DataLedger
	if err := json.Unmarshal(b[:len(b)-4], &l); err != nil {
		return nil, err
	}
	if err := l.Spent.Check(); err != nil {
		return nil, err
	}
	for _, j := range l.Jobs {
		if err := j.Spent.Check(); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.Job, err)
		}
	}
	return &l, nil
}

// getLedger reads fp's ledger in txn (nil: none). A corrupt ledger is an
// error, never an empty one: it would reset ε.
func getLedger(txn *badger.Txn, fp string) (*DataLedger, error) {
	it, err := txn.Get(dataLedgerKey(fp))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var l *DataLedger
	err = it.Value(func(v []byte) error {
		var err error
		l, err = decodeLedger(v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("daemon: privacy ledger of data %.12s is corrupt (refusing to start from zero): %w", fp, err)
	}
	return l, nil
}

// Ledger returns the privacy ledger of the data with fingerprint fp (nil
// if it was never trained on with DP-SGD in this store).
func (s *Store) Ledger(fp string) (*DataLedger, error) {
	var l *DataLedger
	err := s.db.View(func(txn *badger.Txn) (err error) {
		l, err = getLedger(txn, fp)
		return err
	})
	return l, err
}

// Ledgers returns every data ledger of the store, sorted by fingerprint,
// and the per-job step counts of a legacy ledger not yet migrated.
func (s *Store) Ledgers() ([]DataLedger, map[JobID]uint64, error) {
	var out []DataLedger
	legacy := map[JobID]uint64{}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: dataLedgerPrefix})
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(dataLedgerPrefix); it.Next() {
			l, err := getLedger(txn, string(it.Item().Key()[len(dataLedgerPrefix):]))
			if err != nil {
				return err
			}
			out = append(out, *l)
		}
		var err error
		legacy, err = legacyLedgers(txn)
		return err
	})
	return out, legacy, err
}

// legacyLedgers reads the old per-job step counts.
func legacyLedgers(txn *badger.Txn) (map[JobID]uint64, error) {
	out := map[JobID]uint64{}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: legacyLedgerPrefix})
	defer it.Close()
	for it.Rewind(); it.ValidForPrefix(legacyLedgerPrefix); it.Next() {
		var job JobID
		k := it.Item().Key()[len(legacyLedgerPrefix):]
		if len(k) != len(job) {
			return nil, fmt.Errorf("daemon: legacy privacy ledger key of %d bytes", len(k))
		}
		copy(job[:], k)
		err := it.Item().Value(func(v []byte) error {
			if len(v) != 12 || crc32.Checksum(v[:8], castagnoli) != binary.LittleEndian.Uint32(v[8:]) {
				return fmt.Errorf("daemon: legacy privacy ledger of job %s is corrupt", job.Short())
			}
			out[job] = binary.LittleEndian.Uint64(v)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// LegacyConversion says how OpenLedger turns an old per-job entry (a
// step count) into spending: the steps at the migrating run's sampling
// rate and noise multiplier (old ledgers did not record theirs), and a
// floor of ε that checkpoints recorded.
type LegacyConversion struct {
	SamplingRate, Noise float64
}

// OpenLedger returns the ledger of the data fp, first merging into it
// every entry of the old per-job format the store holds (one transaction:
// the old entries are deleted as they are merged). Old entries are step
// counts; each becomes conv's spending for its steps, and the ε that the
// store's checkpoints recorded becomes a floor, so migration never lowers
// ε. It returns an empty ledger for data never trained with DP here.
func (s *Store) OpenLedger(fp string, conv LegacyConversion) (*DataLedger, error) {
	if err := s.makeRoom("the privacy ledger", 64<<10); err != nil {
		return nil, fmt.Errorf("daemon: opening the privacy ledger: %w", err)
	}
	var out *DataLedger
	err := s.db.Update(func(txn *badger.Txn) error {
		l, err := getLedger(txn, fp)
		if err != nil {
			return err
		}
		if l == nil {
			l = &DataLedger{Fingerprint: fp}
		}
		out = l
		legacy, err := legacyLedgers(txn)
		if err != nil || len(legacy) == 0 {
			return err
		}
		jobs := make([]JobID, 0, len(legacy))
		for j := range legacy {
			jobs = append(jobs, j)
		}
		slices.SortFunc(jobs, func(a, b JobID) int { return strings.Compare(a.String(), b.String()) })
		floor, err := checkpointEpsilon(txn)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			sp, err := privacy.StepSpending(conv.SamplingRate, conv.Noise, int(legacy[j]))
			if err != nil {
				return err
			}
			sp.Floor = floor
			l.Spent = l.Spent.Add(sp)
			e := l.Job(j.String())
			e.Spent = e.Spent.Add(sp)
			l.setJob(e)
			l.MigratedJobs = append(l.MigratedJobs, j.String())
			if err := txn.Delete(append(slices.Clone(legacyLedgerPrefix), j[:]...)); err != nil {
				return err
			}
		}
		l.Updated = time.Now().UTC()
		b, err := encodeLedger(l)
		if err != nil {
			return err
		}
		return txn.Set(dataLedgerKey(fp), b)
	})
	if err != nil {
		return nil, fmt.Errorf("daemon: opening the privacy ledger: %w", err)
	}
	if out.Spent.Steps > 0 || out.Spent.Floor > 0 {
		s.note(func(r *record) { r.setLedger(fp, out.Spent) })
	}
	return out, nil
}

// checkpointEpsilon is the largest ε any readable checkpoint recorded.
func checkpointEpsilon(txn *badger.Txn) (float64, error) {
	var eps float64
	it := txn.NewIterator(badger.IteratorOptions{Prefix: ckptPrefix})
	defer it.Close()
	for it.Rewind(); it.ValidForPrefix(ckptPrefix); it.Next() {
		_ = it.Item().Value(func(v []byte) error {
			if c, err := decode(v); err == nil && c.DPEpsilon > eps {
				eps = c.DPEpsilon
			}
			return nil
		})
	}
	return eps, nil
}

// Reserve durably records that the data fp has now spent total, of which
// job (the entry e) spent e.Spent, before those steps are taken
// (write-ahead: a crash can only overstate what was spent, never
// understate it). The ledger never goes down: a total that does not cover
// the recorded one is refused.
func (s *Store) Reserve(fp string, total privacy.Spending, delta float64, e JobSpending) error {
	if err := s.makeRoom("the privacy ledger", 64<<10); err != nil {
		return err
	}
	err := s.db.Update(func(txn *badger.Txn) error {
		l, err := getLedger(txn, fp)
		if err != nil {
			return err
		}
		if l == nil {
			l = &DataLedger{Fingerprint: fp}
		}
		if !total.Covers(l.Spent) {
			return fmt.Errorf("daemon: privacy ledger of data %.12s would go down (from %d to %d steps)", fp, l.Spent.Steps, total.Steps)
		}
		l.Spent, l.Delta, l.Updated = total, delta, time.Now().UTC()
		l.setJob(e)
		b, err := encodeLedger(l)
		if err != nil {
			return err
		}
		return txn.Set(dataLedgerKey(fp), b)
	})
	if err != nil {
		return err
	}
	s.note(func(r *record) { r.setLedger(fp, total) })
	return nil
}

// setLedger records fp's spending.
func (r *record) setLedger(fp string, sp privacy.Spending) {
	if r.Ledgers == nil {
		r.Ledgers = map[string]privacy.Spending{}
	}
	r.Ledgers[fp] = sp
}

// openLedger opens the privacy ledger of the node's training data (merging
// an old per-job ledger into it) and returns a budget that starts from
// what the data has spent under every job and setting, and the ledger the
// peer charges before each step.
func (n *Node) openLedger(rate float64) (*privacy.Budget, *dataLedger, error) {
	cfg := n.cfg
	l, err := cfg.Store.OpenLedger(cfg.DataFingerprint, LegacyConversion{SamplingRate: rate, Noise: cfg.DP.Noise})
	if err != nil {
		return nil, nil, err
	}
	prior := l.Spent
	if n.resumed != nil && n.resumed.DPEpsilon > prior.Epsilon(cfg.DP.Delta) {
		// A checkpoint recorded more than the ledger shows (the ledger was
		// lost): never report less than it did.
		prior.Floor = max(prior.Floor, n.resumed.DPEpsilon)
	}
	b, err := privacy.NewBudget(cfg.DP, rate, prior)
	if err != nil {
		return nil, nil, err
	}
	job := l.Job(n.job.String())
	job.Name, job.SamplingRate, job.Noise = cfg.Job.Name, rate, cfg.DP.Noise
	n.log.Info("DP-SGD on", "data", cfg.DataFingerprint[:12], "clip", cfg.DP.Clip, "noise", cfg.DP.Noise, "sampling_rate", rate,
		"spent_steps", b.Steps(), "spent_epsilon", b.Spent(), "jobs_in_ledger", len(l.Jobs), "budget", cfg.DP.Epsilon, "delta", cfg.DP.Delta)
	if len(l.MigratedJobs) > 0 {
		n.log.Warn("privacy ledger migrated from the per-job format: old steps counted at this run's sampling rate and noise",
			"jobs", len(l.MigratedJobs), "spent_epsilon", b.Spent())
	}
	return b, &dataLedger{store: cfg.Store, fp: cfg.DataFingerprint, prior: prior, job: job, delta: cfg.DP.Delta, node: n}, nil
}

// dataLedger is peer.Ledger over the store's ledger of one set of data:
// each charge records the data's total and this job's share.
type dataLedger struct {
	store *Store
	fp    string
	prior privacy.Spending // the data's spending when the node started
	job   JobSpending      // this job's entry when the node started
	delta float64
	node  *Node
	// failing counts the reservations refused in a row for want of space
	// (the core goroutine only).
	failing  int
	lastWarn time.Time
}

// Reserve records the spending before the steps are taken. Where the
// disk is full the steps are not taken (peer.ErrNotRecorded): the node
// says that its training is paused, and resumes when the ledger records
// again.
func (l *dataLedger) Reserve(run privacy.Spending) error {
	e := l.job
	e.Spent = e.Spent.Add(run)
	err := l.store.Reserve(l.fp, l.prior.Add(run), l.delta, e)
	n := l.node
	switch {
	case errors.Is(err, ErrDiskFull):
		l.failing++
		if now := n.cfg.Now(); l.failing == 1 || now.Sub(l.lastWarn) >= time.Minute {
			l.lastWarn = now
			n.log.Error("training paused: the privacy ledger cannot record its spending, so no DP-SGD step is taken (ε is never under-counted); it resumes when the disk has room",
				"store", l.store.Dir(), "refused", l.failing, "err", err)
		}
		n.mu.Lock()
		n.status.LedgerError = err.Error()
		n.mu.Unlock()
		return fmt.Errorf("%w: %w", peer.ErrNotRecorded, err)
	case err != nil:
		return err
	}
	if l.failing > 0 {
		n.log.Info("training resumed: the privacy ledger records again", "store", l.store.Dir(), "refused_before", l.failing)
		l.failing = 0
		n.mu.Lock()
		n.status.LedgerError = ""
		n.mu.Unlock()
	}
	return nil
}

// LedgerSummary is what `gossipd privacy ledger` shows: ε per set of data
// and per job, at a δ.
type LedgerSummary struct {
	Data   []DataSummary `json:"data"`
	Legacy []JobSummary  `json:"legacy,omitempty"`
}

// DataSummary is one data ledger's totals and its jobs.
type DataSummary struct {
	Fingerprint string       `json:"fingerprint"`
	Epsilon     float64      `json:"epsilon"`
	Delta       float64      `json:"delta"`
	Steps       uint64       `json:"steps"`
	Updated     time.Time    `json:"updated"`
	Jobs        []JobSummary `json:"jobs"`
}

// JobSummary is one job's share.
type JobSummary struct {
	Job          string  `json:"job"`
	Name         string  `json:"name,omitempty"`
	Epsilon      float64 `json:"epsilon"`
	Steps        uint64  `json:"steps"`
	SamplingRate float64 `json:"sampling_rate,omitempty"`
	Noise        float64 `json:"noise_multiplier,omitempty"`
	Note         string  `json:"note,omitempty"`
}

// LedgerReport summarises ledgers (and old per-job entries not yet
// migrated) at δ (0: each ledger's own).
func LedgerReport(ledgers []DataLedger, legacy map[JobID]uint64, delta float64) LedgerSummary {
	out := LedgerSummary{Data: []DataSummary{}}
	for _, l := range ledgers {
		d := delta
		if d == 0 {
			d = l.Delta
		}
		if !(d > 0 && d < 1) {
			d = 1e-5
		}
		ds := DataSummary{Fingerprint: l.Fingerprint, Epsilon: l.Spent.Epsilon(d), Delta: d, Steps: l.Spent.Steps, Updated: l.Updated}
		for _, j := range l.Jobs {
			js := JobSummary{Job: j.Job, Name: j.Name, Epsilon: j.Spent.Epsilon(d), Steps: j.Spent.Steps, SamplingRate: j.SamplingRate, Noise: j.Noise}
			if slices.Contains(l.MigratedJobs, j.Job) {
				js.Note = " [migrated from the per-job ledger]"
			}
			ds.Jobs = append(ds.Jobs, js)
		}
		out.Data = append(out.Data, ds)
	}
	for job, steps := range legacy {
		out.Legacy = append(out.Legacy, JobSummary{Job: job.String(), Steps: steps})
	}
	slices.SortFunc(out.Legacy, func(a, b JobSummary) int { return strings.Compare(a.Job, b.Job) })
	return out
}
