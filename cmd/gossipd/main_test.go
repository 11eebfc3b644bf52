package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/daemon/p2p"
	"github.com/gossipd/gossipd/privacy"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := mainExit(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestTrainJSONDigits(t *testing.T) {
	code, out, errs := run(t, "train", "--dataset", "digits", "--model", "softmax", "--epochs", "20", "--scale", "standard", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"test_accuracy", "test_loss", "samples_per_second", "epochs", "model", "dataset"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if acc := rep["test_accuracy"].(float64); acc < 0.93 {
		t.Errorf("digits softmax test accuracy %.4f, want ≥ 0.93", acc)
	}
	if rep["model"] != "softmax" || rep["dataset"] != "digits" || rep["epochs"].(float64) != 20 {
		t.Errorf("report %v", rep)
	}
}

func TestTrainHumanOutputAndCSV(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("x1,x2,kind\n")
	for i := 0; i < 60; i++ {
		if i%2 == 0 {
			b.WriteString("0.1,0.9,small\n")
		} else {
			b.WriteString("0.9,0.1,large\n")
		}
	}
	p := filepath.Join(dir, "toy.csv")
	os.WriteFile(p, []byte(b.String()), 0o644)
	code, out, errs := run(t, "train", "--dataset", p, "--label-column", "kind", "--model", "mlp", "--hidden", "8", "--epochs", "30")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "accuracy 1.0000") || !strings.Contains(out, "mlp 2-8-2") || !strings.Contains(out, "confusion") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestCLIErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "no command"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"train", "--epochs", "x"}, 2, `--epochs "x": want an integer`},
		{[]string{"simulate", "--sampling", "newscast", "--peers", "2", "--rounds", "1", "--protocol", "dpsgd"}, 2, "--sampling applies to randomwalk"},
		{[]string{"train", "--model", "tree"}, 2, `model "tree"`},
		{[]string{"train", "--hidden", "12,a", "--model", "mlp"}, 2, "--hidden"},
		{[]string{"train", "--optimizer", "rmsprop"}, 2, "rmsprop"},
		{[]string{"train", "--scale", "log"}, 2, "--scale"},
		{[]string{"train", "stray"}, 2, `unexpected argument "stray"`},
		{[]string{"train", "--dataset", "nonesuch"}, 1, "not a named dataset"},
		{[]string{"bench", "--what", "disk"}, 2, "--what"},
		{[]string{"simulate", "--compute", "fast"}, 2, `compute "fast"`},
		{[]string{"simulate", "--protocol", "fedavg", "--compute", "1G"}, 2, "do not model compute time"},
		{[]string{"simulate", "--compute-trace", "/nonexistent/speeds"}, 2, "--compute-trace"},
		{[]string{"run", "--join", "0123456789ab", "--protocol", "dpsgd", "--init-seed", "3"}, 2, "--protocol, --init-seed: part of the job"},
		{[]string{"jobs", "--listen-for", "1s"}, 2, "need --bootstrap"},
		{[]string{"privacy", "ledger", "--delta", "2"}, 2, "--delta"},
		{[]string{"train", "--shard", "3/2"}, 2, "--shard"},
		{[]string{"train", "--shard", "0/2", "--partition", "zipf"}, 2, "--partition"},
		{[]string{"simulate", "--variant", "xx"}, 2, `variant "xx"`},
		{[]string{"simulate", "--sampling", "xx"}, 2, `sampling "xx"`},
		{[]string{"simulate", "--scale", "log"}, 2, `scaling "log"`},
		{[]string{"simulate", "--attack", "xx", "--byzantine", "0.1"}, 2, `attack "xx"`},
		{[]string{"simulate", "--byzantine", "0.1"}, 2, "without an attack"},
		{[]string{"simulate", "--attack", "ipm"}, 2, "attack ipm needs a byzantine fraction"},
	} {
		code, _, errs := run(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errs, c.code, c.want)
		}
	}
}

func TestHelp(t *testing.T) {
	code, out, _ := run(t, "help")
	if code != 0 || !strings.Contains(out, "train") || !strings.Contains(out, "bench") {
		t.Fatalf("help: %d %q", code, out)
	}
	for _, c := range []string{"train", "bench", "version"} {
		code, _, errs := run(t, c, "--help")
		if code != 0 || !strings.Contains(errs, "Usage: gossipd "+c) {
			t.Errorf("%s --help: exit %d, %q", c, code, errs)
		}
	}
	code, out, _ = run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "gossipd ") {
		t.Fatalf("version: %d %q", code, out)
	}
}

func TestSimulateJSONAndScenario(t *testing.T) {
	dir := t.TempDir()
	sc := filepath.Join(dir, "s.yaml")
	os.WriteFile(sc, []byte("peers: 6\nprotocol: dpsgd\nrounds: 5\ntopology: ring\neval-peers: 2\nfinal-eval-peers: 2\n"), 0o644)
	code, out, errs := run(t, "simulate", "--scenario", sc, "--rounds", "4", "--out", dir, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var sum map[string]any
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"final_accuracy", "rounds", "peers", "messages", "bytes", "wall_seconds", "peak_rss_bytes"} {
		if _, ok := sum[k]; !ok {
			t.Errorf("summary lacks %q", k)
		}
	}
	if sum["peers"].(float64) != 6 || sum["rounds"].(float64) != 4 || sum["protocol"] != "dpsgd" {
		t.Errorf("scenario/flag precedence wrong: %v", sum)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "metrics.csv"))
	if err != nil || strings.Count(string(csv), "\n") != 5 {
		t.Fatalf("metrics.csv: %v\n%s", err, csv)
	}
	os.WriteFile(sc, []byte("pears: 6\n"), 0o644)
	if code, _, errs := run(t, "simulate", "--scenario", sc); code != 2 || !strings.Contains(errs, `unknown key "pears"`) {
		t.Errorf("bad scenario key: exit %d, %q", code, errs)
	}
	if code, _, errs := run(t, "simulate", "--protocol", "gossipsub"); code != 2 || !strings.Contains(errs, "gossipsub") {
		t.Errorf("bad protocol: exit %d, %q", code, errs)
	}
}

// TestPrivacyCommands: `privacy epsilon` reproduces the accountant (and
// `noise` inverts it) through the CLI, with JSON and clear usage errors.
func TestPrivacyCommands(t *testing.T) {
	code, out, _ := run(t, "privacy", "epsilon", "--sampling-rate", "0.01", "--noise-multiplier", "1.1", "--steps", "1000", "--delta", "1e-5", "--json")
	var e struct {
		Epsilon float64 `json:"epsilon"`
		Order   float64 `json:"order"`
	}
	if err := json.Unmarshal([]byte(out), &e); code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	want, order, _ := privacy.SpentEpsilon(0.01, 1.1, 1000, 1e-5)
	if e.Epsilon != want || e.Order != order || !(e.Epsilon > 0) {
		t.Fatalf("CLI says ε %v at order %v; accountant %v at %v", e.Epsilon, e.Order, want, order)
	}
	code, out, _ = run(t, "privacy", "noise", "--target-epsilon", fmt.Sprint(want), "--sampling-rate", "0.01", "--steps", "1000", "--json")
	var n struct {
		Sigma float64 `json:"noise_multiplier"`
	}
	if err := json.Unmarshal([]byte(out), &n); code != 0 || err != nil || math.Abs(n.Sigma-1.1) > 1e-3 {
		t.Fatalf("exit %d, %v: noise for ε %v is %v, want 1.1", code, err, want, n.Sigma)
	}
	for _, args := range [][]string{
		{"privacy"},
		{"privacy", "delta"},
		{"privacy", "epsilon", "--sampling-rate", "1.5", "--noise-multiplier", "1", "--steps", "1"},
		{"privacy", "epsilon", "--sampling-rate", "0.1", "--noise-multiplier", "0", "--steps", "1"},
		{"privacy", "noise", "--sampling-rate", "0.1", "--steps", "10"},
	} {
		if code, _, errOut := run(t, args...); code != 2 || !strings.Contains(errOut, "privacy") {
			t.Errorf("%v: exit %d, %q", args, code, errOut)
		}
	}
}

// TestRobustnessCommand: a small grid writes a table per protocol with a
// row per aggregator and a column per attack and fraction.
func TestRobustnessCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ROBUSTNESS.md")
	if code, _, errOut := run(t, "robustness", "--peers", "10", "--rounds", "3", "--out", out); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| aggregator") {
			rows = append(rows, line)
		}
	}
	if len(rows) != 18 || strings.Count(rows[0], "|") != 13 || !strings.HasPrefix(rows[3], "| krum:2 |") || !strings.HasPrefix(rows[16], "| multikrum:2 |") {
		t.Fatalf("table rows:\n%s", strings.Join(rows, "\n"))
	}
}

// TestConsortiumInitFromFiles: members given as @FILE (a keygen --addr-out
// address or a bare ID); --keep adds to an existing file and keeps its key.
func TestConsortiumInitFromFiles(t *testing.T) {
	dir := t.TempDir()
	const (
		id1 = "12D3KooWRP1m4r8V9EQp11BeqcJ3PkHPDDGCBWJZ8zjBByH5Ncah"
		id2 = "12D3KooWKYydqc8xkTc7fhV2LYRTBFFh8GWNG8nscp9xUHN2hQ9p"
	)
	a1, a2, bad := filepath.Join(dir, "a1.addr"), filepath.Join(dir, "a2.addr"), filepath.Join(dir, "bad.addr")
	os.WriteFile(a1, []byte("/dns4/a0/tcp/4001/p2p/"+id1+"\n"), 0o644)
	os.WriteFile(a2, []byte(id2+"\n"), 0o644)
	os.WriteFile(bad, []byte("/dns4/a0/tcp/4001/p2p/not-an-id\n"), 0o644)
	f := filepath.Join(dir, "c.yaml")
	if code, _, stderr := run(t, "consortium", "init", "--out", f, "@"+a1); code != 0 {
		t.Fatalf("init: %d %s", code, stderr)
	}
	before, err := p2p.LoadConsortium(f)
	if err != nil || len(before.Members) != 1 || before.Members[0] != id1 {
		t.Fatalf("after init: %+v, %v", before, err)
	}
	if code, _, _ := run(t, "consortium", "init", "--out", f, "@"+a2); code == 0 {
		t.Fatal("init over an existing file without --keep succeeded")
	}
	if code, _, stderr := run(t, "consortium", "init", "--keep", "--out", f, "@"+a1, "@"+a2); code != 0 {
		t.Fatalf("init --keep: %d %s", code, stderr)
	}
	after, err := p2p.LoadConsortium(f)
	if err != nil || len(after.Members) != 2 || !bytes.Equal(after.PSK, before.PSK) {
		t.Fatalf("after init --keep: %d members, same key %v, %v", len(after.Members), bytes.Equal(after.PSK, before.PSK), err)
	}
	code, _, stderr := run(t, "consortium", "add-member", "--file", f, "@"+bad)
	if code == 0 || !strings.Contains(stderr, "@"+bad) {
		t.Fatalf("a bad member file: exit %d, %q", code, stderr)
	}
	if code, _, stderr := run(t, "consortium", "add-member", "--file", f, "@"+filepath.Join(dir, "missing")); code == 0 || !strings.Contains(stderr, "missing") {
		t.Fatalf("a missing member file: exit %d, %q", code, stderr)
	}
}

// TestSimulateRefusesWhatItDoesNotModel: an option for another protocol or
// model, a network model for a baseline, and a count of 0 that would
// silently become the default are usage errors (exit 2) naming the flag;
// --final-eval-peers 0 evaluates every peer.
func TestSimulateRefusesWhatItDoesNotModel(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--protocol", "fedavg", "--drop", "0.5"}, "--drop applies to the gossip protocols"},
		{[]string{"--protocol", "allreduce", "--latency", "2s"}, "--latency"},
		{[]string{"--protocol", "centralized", "--churn", "0.5"}, "--churn"},
		{[]string{"--protocol", "fedavg", "--bandwidth", "1000"}, "--bandwidth"},
		{[]string{"--protocol", "allreduce", "--netsplit", "2-4:2"}, "--netsplit"},
		{[]string{"--protocol", "randomwalk", "--topology", "ring"}, "--topology applies to dpsgd"},
		{[]string{"--hidden", "64"}, "--hidden applies to --model mlp"},
		{[]string{"--protocol", "dpsgd", "--sampling", "oracle"}, "--sampling applies to randomwalk"},
		{[]string{"--protocol", "dpsgd", "--fedavg-fraction", "0.5"}, "--fedavg-fraction applies to fedavg"},
		{[]string{"--protocol", "sfb", "--topology", "ring"}, "--topology"},
		{[]string{"--churn-session", "5s"}, "--churn-session applies to --churn"},
		{[]string{"--peers", "0"}, "--peers 0"},
		{[]string{"--rounds", "0"}, "--rounds 0"},
		{[]string{"--eval-peers", "0"}, "--eval-peers 0"},
		{[]string{"--protocol", "randomwalk", "--secure-aggregation"}, "random walk moves one whole model"},
		{[]string{"--protocol", "randomwalk", "--round-timeout", "1s"}, "--round-timeout applies to dpsgd and sfb"},
		{[]string{"--protocol", "dpsgd", "--dp-distributed", "4"}, "--dp-distributed needs --secure-aggregation"},
		{[]string{"--protocol", "dpsgd", "--secure-aggregation", "--dp-clip", "1", "--dp-noise", "1", "--dp-distributed", "1"}, "--dp-distributed 1"},
		{[]string{"--protocol", "dpsgd", "--secure-aggregation", "--dp-clip", "1", "--dp-noise", "1", "--dp-colluders", "2"}, "--dp-colluders without --dp-distributed"},
		{[]string{"--protocol", "dpsgd", "--secure-aggregation", "--compression", "int8"}, "compression"},
	} {
		args := append([]string{"simulate", "--out", t.TempDir(), "--quiet"}, c.args...)
		code, _, errs := run(t, args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("simulate %v: exit %d, %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
	// A scenario file's keys count as given flags.
	sc := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(sc, []byte("protocol: fedavg\ndrop: 0.3\n"), 0o644)
	if code, _, errs := run(t, "simulate", "--scenario", sc, "--quiet"); code != 2 || !strings.Contains(errs, "--drop") {
		t.Errorf("scenario with a network model for fedavg: exit %d, %q", code, errs)
	}
	code, out, errs := run(t, "simulate", "--peers", "7", "--rounds", "2", "--final-eval-peers", "0", "--out", t.TempDir(), "--quiet", "--json")
	var sum struct {
		EvaluatedPeers int `json:"evaluated_peers"`
	}
	if err := json.Unmarshal([]byte(out), &sum); code != 0 || err != nil || sum.EvaluatedPeers != 7 {
		t.Errorf("--final-eval-peers 0: exit %d, %v, evaluated %d of 7 peers; %s", code, err, sum.EvaluatedPeers, errs)
	}
}

// TestRunRefusesBadFlagsFirst: run refuses a malformed or inapplicable
// flag as a usage error naming it before it creates its identity key,
// opens its store, loads its data or joins the network: the store's
// directory is never made.
func TestRunRefusesBadFlagsFirst(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "tcp://0.0.0.0:4001"}, `listen address "tcp://0.0.0.0:4001"`},
		{[]string{"--bootstrap", "10.0.0.1:4001"}, `bootstrap address "10.0.0.1:4001"`},
		{[]string{"--relays", "/ip4/10.0.0.1/tcp/4001"}, `relay address "/ip4/10.0.0.1/tcp/4001"`},
		{[]string{"--dht", "full"}, `dht mode "full"`},
		{[]string{"--join", "xyz"}, "--join"},
		{[]string{"--variant", "xx"}, `variant "xx"`},
		{[]string{"--protocol", "gossip"}, `protocol "gossip"`},
		{[]string{"--compression", "zip"}, `compression "zip"`},
		{[]string{"--topology", "star", "--protocol", "dpsgd"}, "star"},
		{[]string{"--scale", "log"}, "--scale"},
		{[]string{"--staleness", "2"}, "--staleness applies to sfb"},
		{[]string{"--dp-clip", "1"}, "noise multiplier"},
		{[]string{"--dp-epsilon", "0"}, "--dp-epsilon applies to DP-SGD"},
		{[]string{"--keep", "0"}, "--keep 0"},
		{[]string{"--max-conns", "-5"}, "--max-conns -5"},
		{[]string{"--model", "conv:8:0,dense"}, "kernel 0"},
		{[]string{"--model", "resnet50"}, `model "resnet50"`},
		{[]string{"--input-shape", "1x8x8"}, "--input-shape applies to a layered --model"},
		{[]string{"--secure-aggregation"}, "random walk moves one whole model"},
		{[]string{"--protocol", "dpsgd", "--secure-aggregation", "--sampling", "hyparview"}, "sampling hyparview"},
		{[]string{"--protocol", "dpsgd", "--secure-aggregation", "--aggregator", "median"}, "a robust rule must see each neighbour's model"},
		{[]string{"--protocol", "dpsgd", "--secure-aggregation", "--dp-distributed", "4"}, "--dp-distributed applies to DP-SGD"},
		{[]string{"--protocol", "dpsgd", "--secure-aggregation", "--dp-clip", "1", "--dp-noise", "1", "--dp-colluders", "1"}, "colluders (1) are distributed DP's"},
		{[]string{"--protocol", "dpsgd", "--secure-threshold", "0.4", "--secure-aggregation"}, "--secure-threshold 0.4"},
	} {
		store := filepath.Join(t.TempDir(), "store")
		args := append([]string{"run", "--store", store, "--api", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0", "--mdns=false"}, c.args...)
		code, _, errs := run(t, args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("run %v: exit %d, stderr %q; want exit 2 mentioning %q", c.args, code, errs, c.want)
		}
		if _, err := os.Stat(store); err == nil {
			t.Errorf("run %v: made its store before refusing the flag", c.args)
		}
	}
	// $GOSSIPD_CONFIG names the settings file, as --config does (it was
	// applied after the file had been read: silently ignored).
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	os.WriteFile(empty, nil, 0o600)
	t.Setenv("GOSSIPD_CONFIG", empty)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // were the file ignored, the daemon would stop at once
	var errb bytes.Buffer
	code := mainExit(ctx, []string{"run", "--store", filepath.Join(t.TempDir(), "store"), "--api", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0", "--mdns=false"}, io.Discard, &errb)
	if code != 2 || !strings.Contains(errb.String(), empty+" holds no settings") {
		t.Errorf("$GOSSIPD_CONFIG of an empty file: exit %d, stderr %q", code, errb.String())
	}
	os.Unsetenv("GOSSIPD_CONFIG")
	// A misspelt variable in a unit file or a container's environment.
	t.Setenv("GOSSIPD_CHECKPOINT_EVRY", "5")
	store := filepath.Join(t.TempDir(), "store")
	code, _, errs := run(t, "run", "--store", store, "--api", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0", "--mdns=false")
	if want := "did you mean $GOSSIPD_CHECKPOINT_EVERY"; code != 2 || !strings.Contains(errs, want) {
		t.Errorf("$GOSSIPD_CHECKPOINT_EVRY: exit %d, stderr %q; want exit 2 mentioning %q", code, errs, want)
	}
	if _, err := os.Stat(store); err == nil {
		t.Error("$GOSSIPD_CHECKPOINT_EVRY: made its store before refusing it")
	}
}
