package simulation

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestCommTable: the table counts the bytes up to the first round at the
// target, compares each compression with its protocol's uncompressed run,
// and lists the command of every row; bad runs are refused.
func TestCommTable(t *testing.T) {
	rows := []Row{{Round: 1, Bytes: 10, MeanAcc: 0.5}, {Round: 2, Bytes: 25, MeanAcc: 0.81}, {Round: 3, Bytes: 40, MeanAcc: 0.79}}
	if b, r, ok := BytesToTarget(rows, 0.8); !ok || b != 25 || r != 2 {
		t.Fatalf("BytesToTarget = %d, %d, %v", b, r, ok)
	}
	if _, _, ok := BytesToTarget(rows, 0.9); ok {
		t.Fatal("a target never reached was reached")
	}
	runs, err := ParseCommRuns("dpsgd/none/0.5, dpsgd/topk:0.1/0.5,dpsgd/none/0.5/10")
	if err != nil || len(runs) != 3 || runs[1] != (CommRun{Protocol: "dpsgd", Compression: "topk:0.1", LR: 0.5}) || runs[2].LocalSteps != 10 {
		t.Fatalf("ParseCommRuns: %+v %v", runs, err)
	}
	for _, bad := range []string{"dpsgd/none", "dpsgd/none/x", "dpsgd/none/-1", "", "dpsgd/none/0.5/0", "dpsgd/none/0.5/x"} {
		if _, err := ParseCommRuns(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	table, err := CommTable(context.Background(), CommTableConfig{Dataset: "digits", Peers: 8, Rounds: 30, Target: 0.6, Runs: runs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(table, "\n")
	if len(lines) < 5 || !strings.HasPrefix(lines[2], "| dpsgd | none | — | 0.5 |") || !strings.HasPrefix(lines[3], "| dpsgd | topk:0.1 | — | 0.5 |") ||
		!strings.HasPrefix(lines[4], "| dpsgd | none | 10, outer Nesterov | 0.5 |") {
		t.Fatalf("table:\n%s", table)
	}
	cells := strings.Split(lines[3], "|")
	if !strings.HasSuffix(strings.TrimSpace(cells[6]), "×") || strings.Contains(lines[3], "not reached") {
		t.Fatalf("topk row %q: want bytes to the target and a ratio to none", lines[3])
	}
	if !strings.Contains(table, "gossipd simulate --dataset digits --model softmax --peers 8 --rounds 30 --seed 1 --protocol dpsgd --compression topk:0.1 --lr 0.5\n") || !strings.Contains(table, "--compression none --lr 0.5 --local-steps 10\n") {
		t.Fatalf("table without its commands:\n%s", table)
	}
	// A setting the protocol does not take is a row that says why.
	refused, err := CommTable(context.Background(), CommTableConfig{Dataset: "digits", Peers: 8, Rounds: 2, Runs: []CommRun{{Protocol: "randomwalk", Compression: "topk:0.1", LR: 0.1}}}, nil)
	if err != nil || !strings.Contains(refused, "| randomwalk | topk:0.1 | — | 0.1 | not available: ") || !strings.Contains(refused, "randomwalk takes subsample:S, fp16 or int8") ||
		strings.Contains(refused, "--compression topk:0.1") {
		t.Fatalf("top-k with random walk: %v\n%s", err, refused)
	}
}
