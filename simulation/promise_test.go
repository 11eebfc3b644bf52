package simulation

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/job"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// TestPromisedResults: on a device, a random walk's updates are handed
// over before their batches compute them (promise.go) and the run is
// the CPU's, byte for byte. Where the models diverge past the norm bound
// (a learning rate of 10⁶), a promise breaks: the run is simulated
// again, each update handed over once computed, says so, gives the CPU's
// numbers and files each row once.
func TestPromisedResults(t *testing.T) {
	defer func() { testDevice, testPoison = nil, false }()
	for _, lr := range []float64{0, 1e6} {
		c := Config{Settings: job.Settings{LR: lr, Model: "mlp"}, Hidden: []int{8}, Peers: 16, Rounds: 4, Seed: 3, EvalPeers: 4, EvalExamples: 200, FinalEvalPeers: 16, PeerBatch: 8, Device: "cpu"}
		want, wantRes := csvOf(t, c)
		testDevice, testPoison = backendtest.NewDevice(), true
		c.Device = "cuda"
		filed := 0
		res, err := Run(context.Background(), c, func(Row) { filed++ })
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
			t.Fatalf("lr %g: on the device:\n%s\non the CPU:\n%s", lr, got.String(), want)
		case filed != len(res.Rows):
			t.Fatalf("lr %g: %d rows filed, %d in the result", lr, filed, len(res.Rows))
		case res.DeviceTime == nil || (res.DeviceTime.Promised == 0) != again: // the second run promises none
			t.Fatalf("lr %g: device time %+v, simulated twice: %v", lr, res.DeviceTime, again)
		case (lr > 1) != again || (lr > 1) != (rejected > 0):
			t.Fatalf("lr %g: %d models refused on the CPU; the note says %q", lr, rejected, res.Device.Note)
		case again && !strings.Contains(res.Device.Note, "handed over before it was computed, has a model of Σx²"):
			t.Fatalf("lr %g: the note does not say why: %q", lr, res.Device.Note)
		}
	}
}
