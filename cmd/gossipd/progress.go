package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progressBar draws a one-line progress bar on a terminal and nothing
// elsewhere. It redraws at most every 100 ms.
type progressBar struct {
	w     io.Writer
	on    bool
	start time.Time
	last  time.Time
}

func newProgressBar(w io.Writer, enabled bool) *progressBar {
	return &progressBar{w: w, on: enabled && isTerminal(w), start: time.Now()}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// update draws done/total with a label and a trailing status text.
func (p *progressBar) update(label string, done, total int, status string) {
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

// finish ends the bar's line.
func (p *progressBar) finish() {
	if p.on {
		fmt.Fprintln(p.w)
	}
}
