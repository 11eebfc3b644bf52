package simulation

import (
	"bufio"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Series is one run's rows under a label, for plots that compare runs.
type Series struct {
	Label string
	Rows  []Row
}

// Axis is what a plot's x axis shows.
type Axis string

const (
	// ByTime plots against virtual time in seconds.
	ByTime Axis = "time"
	// ByBytes plots against cumulative megabytes sent.
	ByBytes Axis = "bytes"
)

// PlotAccuracy draws mean test accuracy (and, for a single series, the
// min–max band) against x, as a PNG written to w.
func PlotAccuracy(w io.Writer, title string, x Axis, series []Series) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "test accuracy"
	p.Y.Min, p.Y.Max = 0, 1
	switch x {
	case ByTime:
		p.X.Label.Text = "virtual time (s)"
	case ByBytes:
		p.X.Label.Text = "bytes sent (MB)"
	default:
		return fmt.Errorf("%w: plot axis %q", ErrConfig, x)
	}
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	xy := func(rows []Row, val func(Row) float64) plotter.XYs {
		pts := make(plotter.XYs, len(rows))
		for i, r := range rows {
			pts[i].X = r.Time
			if x == ByBytes {
				pts[i].X = float64(r.Bytes) / 1e6
			}
			pts[i].Y = val(r)
		}
		return pts
	}
	for i, s := range series {
		l, err := plotter.NewLine(xy(s.Rows, func(r Row) float64 { return r.MeanAcc }))
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.Label+" (mean)", l)
		if len(series) == 1 {
			for _, band := range []struct {
				name string
				f    func(Row) float64
			}{{"min", func(r Row) float64 { return r.MinAcc }}, {"max", func(r Row) float64 { return r.MaxAcc }}} {
				b, err := plotter.NewLine(xy(s.Rows, band.f))
				if err != nil {
					return err
				}
				b.Color = color.Gray{Y: 150}
				b.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
				p.Add(b)
				p.Legend.Add(band.name, b)
			}
		}
	}
	c := vgimg.New(7*vg.Inch, 4.5*vg.Inch)
	p.Draw(draw.New(c))
	// A chart of flat colours compresses well at the fastest level; the
	// default level took a third of the plotting time.
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	bw := bufio.NewWriter(w)
	if err := enc.Encode(bw, c.Image()); err != nil {
		return err
	}
	return bw.Flush()
}

// ReadCSV parses a metrics.csv written by WriteCSV.
func ReadCSV(r io.Reader, name string) ([]Row, error) {
	sc := bufio.NewScanner(r)
	line := 0
	var rows []Row
	for sc.Scan() {
		line++
		if line == 1 {
			if sc.Text()+"\n" != CSVHeader {
				return nil, fmt.Errorf("%s: line 1: not a gossipd metrics.csv header", name)
			}
			continue
		}
		f := strings.Split(sc.Text(), ",")
		if len(f) != 12 {
			return nil, fmt.Errorf("%s: line %d: %d fields, want 12", name, line, len(f))
		}
		var r Row
		var errs [12]error
		r.Round, errs[0] = strconv.Atoi(f[0])
		r.Time, errs[1] = strconv.ParseFloat(f[1], 64)
		r.Messages, errs[2] = strconv.ParseUint(f[2], 10, 64)
		r.Bytes, errs[3] = strconv.ParseUint(f[3], 10, 64)
		vals := []*float64{&r.MeanAcc, &r.MinAcc, &r.MaxAcc, &r.MeanLoss, &r.MinLoss, &r.MaxLoss, &r.Consensus}
		for k, v := range vals {
			*v, errs[4+k] = strconv.ParseFloat(f[4+k], 64)
		}
		r.Online, errs[11] = strconv.Atoi(f[11])
		for k, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("%s: line %d, column %d: %v", name, line, k+1, err)
			}
		}
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("%s: line %d: %v", name, line, err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	switch {
	case line == 0:
		return nil, fmt.Errorf("%s: empty, not a gossipd metrics.csv", name)
	case len(rows) == 0:
		return nil, fmt.Errorf("%s: no rows after the header: the run recorded no evaluation", name)
	}
	return rows, nil
}

// check refuses a row that no run writes: a negative round, time or
// online count, or an accuracy outside [0, 1] (losses and the consensus
// distance may be anything, a diverged run's included).
func (r Row) check() error {
	switch {
	case r.Round < 0 || r.Online < 0:
		return fmt.Errorf("round %d, online %d: want counts ≥ 0", r.Round, r.Online)
	case !(r.Time >= 0) || math.IsInf(r.Time, 0):
		return fmt.Errorf("time %v: want a finite time ≥ 0", r.Time)
	}
	for _, a := range []float64{r.MeanAcc, r.MinAcc, r.MaxAcc} {
		if !(a >= 0 && a <= 1) {
			return fmt.Errorf("accuracy %v: want one in [0, 1]", a)
		}
	}
	return nil
}
