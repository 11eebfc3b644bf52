package demo

import (
	"fmt"
	"strings"
)

// view draws the live terminal view: a line per peer with its accuracy
// as a bar, its traffic and peers, then the mean and the spread between
// peers with its history, shrinking as they agree.
type view struct {
	c      Config
	lines  int // drawn last time, to move back over
	spread []float64
}

const barWidth = 30

func bar(a float64) string {
	n := int(a*barWidth + 0.5)
	n = max(0, min(barWidth, n))
	return strings.Repeat("█", n) + strings.Repeat("░", barWidth-n)
}

// sparkline draws the last width values of xs in [0, 1] as block heights.
func sparkline(xs []float64, width int) string {
	const blocks = "▁▂▃▄▅▆▇█"
	rs := []rune(blocks)
	if len(xs) > width {
		xs = xs[len(xs)-width:]
	}
	var b strings.Builder
	for _, x := range xs {
		i := int(x*float64(len(rs)-1) + 0.5)
		b.WriteRune(rs[max(0, min(len(rs)-1, i))])
	}
	return b.String()
}

func (v *view) draw(peers []*peer, t, mean, lo, hi float64) {
	var b strings.Builder
	if v.lines > 0 {
		fmt.Fprintf(&b, "\033[%dA", v.lines) // back to the view's first line
	}
	for i, p := range peers {
		if !p.ok {
			fmt.Fprintf(&b, "\033[2Kpeer %-2d  %s    –    starting…\n", i, bar(0))
			continue
		}
		s := p.last
		fmt.Fprintf(&b, "\033[2Kpeer %-2d  %s  %.3f   %d peers   msgs in/out %5d/%-5d   sent %8s\n",
			i, bar(s.Accuracy), s.Accuracy, s.Peers, s.MessagesIn, s.MessagesOut, kB(s.BytesOut))
	}
	fmt.Fprintf(&b, "\033[2K\n\033[2Kt=%4.1fs   mean %.3f   spread (max−min) %.3f  %s\n", t, mean, hi-lo, sparkline(v.spread, 40))
	fmt.Fprint(v.c.Out, b.String())
	v.lines = len(peers) + 2
}
