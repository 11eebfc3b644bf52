package daemon

import (
	"log/slog"
	"os"
	"time"
)

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
