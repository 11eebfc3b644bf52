package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// ProgressBar draws a one-line progress bar on a terminal and nothing
// elsewhere. It redraws at most every 100 ms.
type ProgressBar struct {
	w     io.Writer
	on    bool
	start time.Time
	last  time.Time
}

// NewProgressBar returns a bar drawn on w when enabled and w is a terminal.
func NewProgressBar(w io.Writer, enabled bool) *ProgressBar {
	return &ProgressBar{w: w, on: enabled && IsTerminal(w), start: time.Now()}
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Update draws done/total with a label and a trailing status text.
func (p *ProgressBar) Update(label string, done, total int, status string) {
	if !p.on {
		return
	}
	now := time.Now()
	if done < total && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	const width = 30
	frac := float64(done) / float64(max(total, 1))
	fill := int(frac * width)
	fmt.Fprintf(p.w, "\r%s [%s%s] %3.0f%% %s\033[K", label, strings.Repeat("=", fill), strings.Repeat(" ", width-fill), 100*frac, status)
}

// Finish ends the bar's line.
func (p *ProgressBar) Finish() {
	if p.on {
		fmt.Fprintln(p.w)
	}
}
