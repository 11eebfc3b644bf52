package simulation

import (
	"fmt"
	"io"
	"time"
)

// Option adds an observer to Run. Observers see the run; none changes a
// number (TestProgressDoesNotChangeResults).
type Option func(*sim)

// OnRound has fn called with 0 just before the first round starts and
// with r after round r ends (after its metrics row, if it takes one, was
// recorded), on Run's goroutine.
func OnRound(fn func(round int)) Option {
	return func(s *sim) { s.roundDone = fn }
}

// endRound tells the OnRound observer that round r ended (0: the rounds
// begin).
func (s *sim) endRound(r int) {
	if s.roundDone != nil {
		s.roundDone(r)
	}
}

// DefaultProgressEvery is the default interval between progress lines.
const DefaultProgressEvery = 5 * time.Second

// ProgressConfig configures a Progress.
type ProgressConfig struct {
	// Rounds is the run's number of rounds and Delta the virtual length
	// of one (Config.Rounds, Config.Delta).
	Rounds int
	Delta  time.Duration
	// Every is the least wall-clock time between two lines (0:
	// DefaultProgressEvery).
	Every time.Duration
	// Now is the wall clock (nil: time.Now). The simulation runs on
	// virtual time; progress is about the real one, and tests inject a
	// fake clock here.
	Now func() time.Time
}

// Progress reports a run's progress on the wall clock, for logs that are
// not a terminal: a plain line at most every Every, written at the end of
// a round, with the round, the virtual time, the latest evaluated mean
// accuracy and the estimated time to the last round, e.g.
//
//	simulate: round 37/100 (37%), virtual 37s, accuracy 0.8123 (round 36), elapsed 5s, eta 9s
//
// Feed it with Run's onRow (Row) and OnRound (Round) hooks. With a nil
// writer it prints nothing and only tracks the figures (ETA, Latest), for
// an in-place bar on a terminal. A Progress is not safe for concurrent
// use; Run calls its hooks on one goroutine.
type Progress struct {
	w     io.Writer
	cfg   ProgressConfig
	start time.Time // the Progress was made
	// begin is when round 1 started (Round(0)); zero until then.
	begin time.Time
	last  time.Time // the last line; zero: none yet
	round int
	row   Row
	rowOK bool
	lines int
	err   error
}

// NewProgress returns a Progress writing to w (nil: no lines), with
// cfg's defaults filled in. Its clock starts now (cfg.Now).
func NewProgress(w io.Writer, cfg ProgressConfig) *Progress {
	if cfg.Every <= 0 {
		cfg.Every = DefaultProgressEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Progress{w: w, cfg: cfg, start: cfg.Now()}
}

// Row takes a metrics row: its mean accuracy becomes the latest one.
func (p *Progress) Row(r Row) {
	p.row, p.rowOK = r, true
}

// Round notes that round r ended (0: the rounds begin, which starts the
// ETA's clock) and writes a line if Every has passed since the last one
// (or since the Progress was made).
func (p *Progress) Round(r int) {
	now := p.cfg.Now()
	if r == 0 {
		p.begin = now
		return
	}
	p.round = r
	since := p.last
	if since.IsZero() {
		since = p.start
	}
	if p.w == nil || p.err != nil || now.Sub(since) < p.cfg.Every {
		return
	}
	p.last = now
	p.write(p.line(now))
}

// line is the progress line at now.
func (p *Progress) line(now time.Time) string {
	pct := 100 * p.round / max(p.cfg.Rounds, 1)
	eta := "?"
	if d, ok := p.eta(now); ok {
		eta = roundDuration(d)
	}
	return fmt.Sprintf("simulate: round %d/%d (%d%%), virtual %s, %s, elapsed %s, eta %s\n",
		p.round, p.cfg.Rounds, pct, time.Duration(p.round)*p.cfg.Delta, p.accuracy(), roundDuration(now.Sub(p.start)), eta)
}

// accuracy is "accuracy A (round R)", or "accuracy -" before the first
// row.
func (p *Progress) accuracy() string {
	if !p.rowOK {
		return "accuracy -"
	}
	return fmt.Sprintf("accuracy %.4f (round %d)", p.row.MeanAcc, p.row.Round)
}

// Finish writes a last line, "simulate: done, …", if the run lasted long
// enough to have written a progress line: a log that showed the run going
// shows it ending.
func (p *Progress) Finish() {
	if p.w == nil || p.err != nil || p.lines == 0 {
		return
	}
	now := p.cfg.Now()
	p.write(fmt.Sprintf("simulate: done, %d rounds in %s, %s\n", p.round, roundDuration(now.Sub(p.start)), p.accuracy()))
}

// write writes s; the first error silences the Progress (Err), since a
// log that cannot be written must not stop the run.
func (p *Progress) write(s string) {
	if _, err := io.WriteString(p.w, s); err != nil {
		p.err = fmt.Errorf("simulation: progress: %w", err)
		return
	}
	p.lines++
}

// ETA is the estimated wall-clock time to the end of the last round, from
// the rounds' pace so far; false before a round ended.
func (p *Progress) ETA() (time.Duration, bool) { return p.eta(p.cfg.Now()) }

func (p *Progress) eta(now time.Time) (time.Duration, bool) {
	begin := p.begin
	if begin.IsZero() {
		begin = p.start
	}
	if p.round <= 0 {
		return 0, false
	}
	left := max(p.cfg.Rounds-p.round, 0)
	per := float64(now.Sub(begin)) / float64(p.round)
	return time.Duration(per * float64(left)), true
}

// Latest is the last metrics row taken; false before the first.
func (p *Progress) Latest() (Row, bool) { return p.row, p.rowOK }

// Err is the error that silenced the Progress, if any.
func (p *Progress) Err() error { return p.err }

// roundDuration is d rounded to whole seconds, or to tenths under 10 s.
func roundDuration(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
