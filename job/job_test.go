package job

import (
	"crypto/sha256"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
)

func parse(t *testing.T, cmd Command, args ...string) (*Settings, *flag.FlagSet) {
	t.Helper()
	var s Settings
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s.RegisterJob(fs, cmd)
	s.RegisterTraining(fs)
	s.RegisterPrivacy(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &s, fs
}

// TestDefaultSpec: the flags' defaults make the job a daemon has always
// made from no flags (the same spec, so the same job ID), and options
// of other protocols stay out of it.
func TestDefaultSpec(t *testing.T) {
	s, _ := parse(t, Daemon)
	got, err := s.Spec(64, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{Name: "gossipd", Model: model.Spec{Kind: model.Softmax, Inputs: 64, Classes: 10}, Scale: "global",
		Protocol: gossip.RandomWalk, DeltaMillis: 1000, Variant: "mu", Compression: "none", InitSeed: 1}
	if got.ID() != want.ID() {
		t.Errorf("spec %s, want %s", got.Canonical(), want.Canonical())
	}
	s, _ = parse(t, Daemon, "--protocol", "sfb", "--batch", "16", "--sfb-mode", "dense", "--local-steps", "4", "--outer", "average")
	got, err = s.Spec(64, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.FactorBatch != 16 || got.SFBMode != "dense" || got.Outer == nil || *got.Outer != (gossip.OuterConfig{Steps: 4, Method: "average"}) {
		t.Errorf("sfb spec %s", got.Canonical())
	}
}

// TestSpecRoundTrip: a spec reads back from its canonical encoding;
// another encoding of it, or a spec lacking defaults, is refused.
func TestSpecRoundTrip(t *testing.T) {
	s, _ := parse(t, Daemon, "--protocol", "dpsgd", "--model", "mlp", "--hidden", "32,16", "--delta", "250ms")
	j, err := s.Spec(8, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseSpec(j.Canonical())
	if err != nil || back.ID() != j.ID() || back.Topology != "ring" {
		t.Fatalf("round trip: %v, %s", err, back.Canonical())
	}
	if _, err := ParseSpec([]byte(" " + string(j.Canonical()))); err == nil {
		t.Error("a non-canonical encoding was taken")
	}
	j.Topology = ""
	if _, err := ParseSpec(j.Canonical()); err == nil {
		t.Error("a spec lacking its default topology was taken")
	}
}

// TestCheckScopes: an option given for a job it does not apply to is
// refused, naming what it applies to; given where it applies, it passes.
func TestCheckScopes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" for no error
	}{
		{[]string{"--hidden", "8"}, "--hidden applies to --model mlp"},
		{[]string{"--model", "mlp", "--hidden", "8"}, ""},
		{[]string{"--topology", "torus"}, "--topology applies to dpsgd, adpsgd and pushsum"},
		{[]string{"--protocol", "pushsum", "--topology", "torus"}, ""},
		{[]string{"--outer-lr", "0.5"}, "--outer-lr applies to --local-steps with --outer nesterov"},
		{[]string{"--local-steps", "2", "--outer", "average", "--outer-momentum", "0.5"}, "--outer-momentum applies"},
		{[]string{"--dp-delta", "1e-6"}, "--dp-delta applies to DP-SGD"},
		{[]string{"--dp-clip", "1", "--dp-noise", "1", "--dp-epsilon", "3"}, ""},
		{[]string{"--compression", "topk:0.1"}, "--compression applies to"},
		{[]string{"--protocol", "dpsgd", "--compression", "topk:0.1"}, ""},
		{[]string{"--protocol", "dpsgd", "--local-epochs", "2"}, "--local-epochs applies to randomwalk without --local-steps"},
		{[]string{"--staleness", "2"}, "--staleness applies to sfb"},
	} {
		s, fs := parse(t, Daemon, c.args...)
		var set []string
		fs.Visit(func(f *flag.Flag) { set = append(set, f.Name) })
		err := Check(set, s.Shape())
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestScaleAuto: auto scales a daemon's job globally and a simulation by
// min-max; a named scaling is kept.
func TestScaleAuto(t *testing.T) {
	if ScaleFor(ScaleAuto, Daemon) != "global" || ScaleFor(ScaleAuto, Simulator) != DefaultSimScale || ScaleFor("none", Daemon) != "none" {
		t.Error("ScaleFor")
	}
	s, _ := parse(t, Simulator)
	if s.Delta != time.Second || s.Name != "" {
		t.Errorf("simulator settings: delta %v, name %q (the simulator has no job name)", s.Delta, s.Name)
	}
}

// FuzzParseSpec: any bytes (an announcement's spec) parse to a valid spec
// whose canonical form they are, or give an error; never a panic.
func FuzzParseSpec(f *testing.F) {
	j := Spec{Name: "j", Model: model.Spec{Kind: model.MLP, Inputs: 4, Classes: 3, Hidden: []int{5}}, Protocol: "pushsum"}
	if err := j.Validate(); err != nil {
		f.Fatal(err)
	}
	f.Add(j.Canonical())
	f.Add([]byte(`{"name":"x","model":{"kind":"mlp"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSpec(b)
		if err != nil {
			return
		}
		if string(s.Canonical()) != string(b) || s.ID() != sha256.Sum256(b) {
			t.Fatalf("accepted a spec that is not its own canonical form: %q", b)
		}
	})
}
