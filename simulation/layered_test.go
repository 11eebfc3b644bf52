package simulation

import (
	"context"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/job"
)

// smallCNN is a layered model for the 8×8 digits.
const smallCNN = "conv:8:3:1:1,relu,maxpool:2,dense:32,relu,dense"

// TestLayeredModelDeterministic: with a layered model (dropout too) the
// same seed gives the same numbers, another seed others. Learning under
// every protocol is TestEveryProtocolLearns' (over testModels).
func TestLayeredModelDeterministic(t *testing.T) {
	for _, proto := range []string{"randomwalk", "dpsgd"} {
		c := Config{Settings: job.Settings{Protocol: proto, Model: "conv:8:3:1:1,relu,maxpool:2,dense:32,dropout:0.2,relu,dense", LR: 0.2},
			Peers: 4, Rounds: 10, Seed: 1, EvalPeers: 2, EvalExamples: 100, FinalEvalPeers: 4}
		a, _ := csvOf(t, c)
		if b, _ := csvOf(t, c); a != b {
			t.Fatalf("%s: two runs of seed 1 differ:\n%s\n%s", proto, a, b)
		}
		c.Seed = 2
		if b, _ := csvOf(t, c); a == b {
			t.Fatalf("%s: seeds 1 and 2 gave the same numbers", proto)
		}
	}
}

// TestLayeredModelRefused: what a layered model cannot do yet, or a
// shape that does not fit, is an error that says so.
func TestLayeredModelRefused(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Settings: job.Settings{Model: "conv:4:3,relu,dropout:0.5,dense"}, Peers: 4, Rounds: 2, PeerBatch: 4}, "--peer-batch 4: conv:4:3,relu,dropout:0.5,dense has dropout"},
		{Config{Settings: job.Settings{Model: smallCNN}, Data: job.Data{InputShape: "1x7x7"}, Peers: 4, Rounds: 2}, "--input-shape 1x7x7 holds 49 values"},
		{Config{Settings: job.Settings{Model: "lenet5"}, Peers: 4, Rounds: 2}, "kernel does not fit"},
		{Config{Settings: job.Settings{Model: "resnet"}, Peers: 4, Rounds: 2}, "a preset (leaf-cnn, lenet5, small-cnn)"},
	} {
		_, err := Run(context.Background(), c.cfg, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.cfg.Settings, err, c.want)
		}
	}
}

// TestInitFrom: every peer starts from weights PyTorch saved
// (--init-from): the run differs from one drawn from the seed, and a
// file for other layers is refused naming the tensor.
func TestInitFrom(t *testing.T) {
	const file = "../model/testdata/torch_init.safetensors"
	spec := "conv:8:3:1:1,relu,maxpool:2,dense:32,relu,dense"
	c := Config{Settings: job.Settings{Model: spec, LR: 0.2}, Peers: 4, Rounds: 3, Seed: 1, EvalPeers: 2, EvalExamples: 100, FinalEvalPeers: 4}
	a, _ := csvOf(t, c)
	c.InitFrom = file
	b, _ := csvOf(t, c)
	if a == b {
		t.Fatal("--init-from changed nothing")
	}
	c.Model = strings.Replace(spec, "dense:32", "dense:16", 1)
	if _, err := Run(context.Background(), c, nil); err == nil || !strings.Contains(err.Error(), "tensor 4.weight is [32 128] in the file") {
		t.Fatalf("weights of other layers: %v", err)
	}
}

// TestSFBHybrid: SFB with a CNN sends its wide dense layer's weight as
// sufficient factors and the convolution, the biases and the small
// output layer whole (auto), learning as well as with every tensor whole
// on far fewer bytes; forced factors send the output layer's too.
func TestSFBHybrid(t *testing.T) {
	run := func(mode string) *Result {
		_, res := csvOf(t, Config{Settings: job.Settings{Protocol: "sfb", SFBMode: mode, Model: "conv:4:3:1:1,relu,flatten,dense:256,relu,dense", LR: 0.3},
			Peers: 6, Rounds: 100, Seed: 1, EvalPeers: 2, EvalExamples: 100, FinalEvalPeers: 6})
		return res
	}
	dense, auto, factors := run("dense"), run("auto"), run("factors")
	for name, r := range map[string]*Result{"dense": dense, "auto": auto, "factors": factors} {
		if r.FinalAccuracy < 0.85 {
			t.Errorf("sfb-mode %s: accuracy %.3f", name, r.FinalAccuracy)
		}
	}
	if auto.Messages != dense.Messages || 2*auto.Bytes > dense.Bytes {
		t.Errorf("auto: %d messages of %d bytes, dense %d of %d: want the same messages at under half the bytes", auto.Messages, auto.Bytes, dense.Messages, dense.Bytes)
	}
	if factors.Bytes <= auto.Bytes {
		t.Errorf("factors %d bytes, auto %d: the small output layer is cheaper whole", factors.Bytes, auto.Bytes)
	}
}
