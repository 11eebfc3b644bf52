package simulation

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
)

// PlotRuns draws the mean test accuracy of runs on one PNG at path
// (`gossipd plot`): each run is LABEL=DIR, or DIR labelled by its base
// name, a directory holding a run's metrics.csv (ReadRun).
func PlotRuns(path, title string, x Axis, runs []string) error {
	var series []Series
	for _, a := range runs {
		label, dir, ok := strings.Cut(a, "=")
		if !ok {
			label, dir = filepath.Base(a), a
		}
		rows, err := ReadRun(dir)
		if err != nil {
			return err
		}
		series = append(series, Series{Label: label, Rows: rows})
	}
	var buf bytes.Buffer
	if err := PlotAccuracy(&buf, title, x, series); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
