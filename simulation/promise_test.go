package simulation

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// TestPromisedResults: on a device, a random walk's updates are handed
// over before their batches compute them (promise.go) and the run is
// the CPU's, byte for byte. Where the models diverge past the norm bound
// (a learning rate of 10⁶), a promise breaks: the run is simulated
// again, each update handed over once computed, says so, gives the CPU's
// numbers and files each row once. D-PSGD's, push-sum's, GoSGD's and AD-PSGD's
// gradients and mixes are promised as well (a receiver may find a mix
// computed by the time it checks it, and check its real sum: a diverged
// run may then keep its promises).
func TestPromisedResults(t *testing.T) {
	defer func() { testDevice, testPoison = nil, false }()
	for _, tc := range []struct {
		protocol string
		lr       float64
	}{{gossip.RandomWalk, 0}, {gossip.RandomWalk, 1e6}, {gossip.DPSGD, 0}, {gossip.DPSGD, 1e6},
		{gossip.PushSum, 0}, {gossip.PushSum, 1e6}, {gossip.GoSGD, 0}, {gossip.GoSGD, 1e6}, {gossip.ADPSGD, 0}, {gossip.ADPSGD, 1e6}} {
		lr := tc.lr
		c := Config{Settings: job.Settings{Protocol: tc.protocol, LR: lr, Model: "mlp"}, Hidden: []int{8}, Peers: 12, Rounds: 4, Seed: 3, EvalPeers: 4, EvalExamples: 200, FinalEvalPeers: 12, PeerBatch: 8, Device: "cpu"}
		want, wantRes := csvOf(t, c)
		testDevice, testPoison = backendtest.NewDevice(), true
		c.Device = "cuda"
		var filed []Row
		res, err := Run(context.Background(), c, func(r Row) { filed = append(filed, r) })
		testDevice, testPoison = nil, false
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := WriteCSV(&got, res.Rows); err != nil {
			t.Fatal(err)
		}
		again := strings.Contains(res.Device.Note, "simulated twice")
		rejected := wantRes.Stats.Rejected["norm"] + wantRes.Stats.Rejected["non_finite"]
		switch {
		case got.String() != want:
			t.Fatalf("%s lr %g: on the device:\n%s\non the CPU:\n%s", tc.protocol, lr, got.String(), want)
		case csvString(t, filed) != want:
			t.Fatalf("%s lr %g: the rows filed as the run went:\n%s\non the CPU:\n%s", tc.protocol, lr, csvString(t, filed), want)
		case res.DeviceTime == nil || (res.DeviceTime.Promised == 0) != again: // the second run promises none
			t.Fatalf("%s lr %g: device time %+v, simulated twice: %v", tc.protocol, lr, res.DeviceTime, again)
		case (lr > 1) != (rejected > 0) || (lr > 1) != again && (tc.protocol == gossip.RandomWalk || !(lr > 1)):
			// A D-PSGD receiver checks a mix's real sum where the mix ran
			// by then, so a diverged run need not break a promise.
			t.Fatalf("%s lr %g: %d models refused on the CPU; the note says %q", tc.protocol, lr, rejected, res.Device.Note)
		case again && !strings.Contains(res.Device.Note, "handed over before it was computed, has Σx²"):
			t.Fatalf("%s lr %g: the note does not say why: %q", tc.protocol, lr, res.Device.Note)
		}
	}
}

// csvString is rows as metrics.csv.
func csvString(t *testing.T, rows []Row) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
