package simulation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/internal/cli"
)

// Summary is a run's summary.json: the scenario, how long it took and
// the Result.
type Summary struct {
	Protocol  string  `json:"protocol"`
	Peers     int     `json:"peers"`
	Rounds    int     `json:"rounds"`
	Model     string  `json:"model"`
	Dataset   string  `json:"dataset"`
	Partition string  `json:"partition"`
	Seed      uint64  `json:"seed"`
	WallSecs  float64 `json:"wall_seconds"`
	PeakRSS   int64   `json:"peak_rss_bytes"`
	// NodeRoundsPerSecond is peers·rounds / wall seconds.
	NodeRoundsPerSecond float64 `json:"node_rounds_per_second"`
	// NonFinite names the results that were not finite numbers (a
	// diverged model's loss: "final_loss=+Inf"), which JSON cannot
	// carry: they read 0 in this file.
	NonFinite []string `json:"non_finite,omitempty"`
	*Result
}

// JSON is the summary's JSON (indented): non-finite results become 0
// and are named in non_finite.
func (s *Summary) JSON() ([]byte, error) {
	out := *s
	if s.Result != nil {
		r := *s.Result
		out.Result = &r
		v := reflect.ValueOf(&r).Elem()
		t := v.Type()
		for i := range t.NumField() {
			f := v.Field(i)
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			switch {
			case f.Kind() == reflect.Float64 && !isFinite(f.Float()):
				out.NonFinite = append(out.NonFinite, fmt.Sprintf("%s=%v", name, f.Float()))
				f.SetFloat(0)
			case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Float64:
				c := reflect.MakeSlice(f.Type(), f.Len(), f.Len())
				for k := range f.Len() {
					if x := f.Index(k).Float(); isFinite(x) {
						c.Index(k).SetFloat(x)
					} else {
						out.NonFinite = append(out.NonFinite, fmt.Sprintf("%s[%d]=%v", name, k, x))
					}
				}
				f.Set(c)
			}
		}
	}
	return json.MarshalIndent(&out, "", "  ")
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// WriteOutputs writes a run's metrics.csv, its accuracy plots
// (accuracy_vs_time.png, accuracy_vs_bytes.png) and summary.json to dir.
func WriteOutputs(dir string, sum *Summary) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "metrics.csv"))
	if err != nil {
		return err
	}
	if err := WriteCSV(f, sum.Rows); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	title := fmt.Sprintf("%s, %d peers, %s on %s (%s)", sum.Protocol, sum.Peers, sum.Model, sum.Dataset, sum.Partition)
	for _, x := range []Axis{ByTime, ByBytes} {
		var buf bytes.Buffer
		if err := PlotAccuracy(&buf, title, x, []Series{{Label: sum.Protocol, Rows: sum.Rows}}); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "accuracy_vs_"+string(x)+".png"), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	b, err := sum.JSON()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "summary.json"), append(b, '\n'), 0o644)
}

// ParseNetsplits reads scheduled partitions "FROM-TO:GROUPS[,…]" (in
// rounds): during rounds [FROM, TO) peer i can reach peer j only when
// i mod GROUPS = j mod GROUPS.
func ParseNetsplits(spec string) ([]Netsplit, error) {
	if spec == "" {
		return nil, nil
	}
	var out []Netsplit
	for _, part := range strings.Split(spec, ",") {
		var ns Netsplit
		if _, err := fmt.Sscanf(strings.TrimSpace(part), "%d-%d:%d", &ns.From, &ns.To, &ns.Groups); err != nil {
			return nil, fmt.Errorf("%w: netsplit %q, want FROM-TO:GROUPS", ErrConfig, part)
		}
		out = append(out, ns)
	}
	return out, nil
}

// ReadRun reads the metrics.csv a run wrote to dir.
func ReadRun(dir string) ([]Row, error) {
	p := filepath.Join(dir, "metrics.csv")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return ReadCSV(bytes.NewReader(b), p)
}

// ReadChurnTrace reads a churn trace file (ParseChurnTrace, whose errors
// wrap ErrConfig).
func ReadChurnTrace(path string) ([]Interval, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseChurnTrace(b, path)
}

// SetTopology sets the topology from a name (gossip.ParseTopology) or,
// when spec names a file, from its edge list (Topology then names the
// file).
func (c *Config) SetTopology(spec string) error {
	if st, err := os.Stat(spec); err == nil && !st.IsDir() {
		c.Topology = spec // named in errors and the summary
		c.EdgeList, err = os.ReadFile(spec)
		return err
	}
	c.Topology = spec
	return nil
}

// validateTopology checks the topology a protocol with neighbours will
// build, before any data is loaded: an edge list is read (errors name its
// file), a name is checked without building its graph. Under turnover the
// graph is built over the live members, so a degree is checked then.
func (c *Config) validateTopology() error {
	if !gossip.NeedsTopology(c.Protocol) {
		return nil
	}
	n := c.Peers
	if c.Turnover > 0 {
		n = 0 // graphs over the live members
	}
	var err error
	if c.EdgeList == nil {
		err = gossip.CheckTopology(c.Topology, n)
	} else if n > 0 {
		_, err = gossip.EdgeList(c.EdgeList, n)
	}
	if err != nil {
		return fmt.Errorf("%w: --topology %s: %v", ErrConfig, c.Topology, cli.WithoutSentinel(err, gossip.ErrConfig))
	}
	return nil
}
