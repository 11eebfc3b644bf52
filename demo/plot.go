package demo

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writePNG draws every peer's accuracy over time, and what one peer
// reaches alone.
func writePNG(path string, peers []*peer, alone float64, c Config) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("gossipd: %d peers learning together (%s, %s data, no server)", len(peers), c.Protocol, c.Partition)
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "test accuracy"
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top, p.Legend.Left = false, false
	p.Add(plotter.NewGrid())
	end := 0.0
	for i, pr := range peers {
		if len(pr.hist) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(pr.hist))
		for j, h := range pr.hist {
			pts[j].X, pts[j].Y = h.t, h.acc
		}
		end = max(end, pts[len(pts)-1].X)
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.2)
		p.Add(l)
		if i == 0 {
			p.Legend.Add("each peer", l)
		}
	}
	a, err := plotter.NewLine(plotter.XYs{{X: 0, Y: alone}, {X: end, Y: alone}})
	if err != nil {
		return err
	}
	a.Color = color.Gray{Y: 90}
	a.Width = vg.Points(1.5)
	a.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(a)
	p.Legend.Add("one peer alone", a)
	wt, err := p.WriterTo(8*vg.Inch, 4.5*vg.Inch, "png")
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := wt.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
