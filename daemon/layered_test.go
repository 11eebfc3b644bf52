package daemon_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/daemon/memnet"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
)

// TestLayeredModel: four daemons on memnet train a small CNN on the 8×8
// digits under random walk, D-PSGD (with int8 compression) and push-sum,
// each reaching 0.85; the model they export carries PyTorch's names.
func TestLayeredModel(t *testing.T) {
	cnn := model.Spec{Kind: model.Net, Inputs: 64, Classes: 10, Shape: []int{1, 8, 8},
		Layers: "conv:8:3:1:1,relu,maxpool:2,flatten,dense:32,relu,dense"}
	for _, c := range []struct{ proto, compression string }{{gossip.RandomWalk, ""}, {gossip.DPSGD, "int8"}, {gossip.PushSum, ""}} {
		t.Run(c.proto, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := start(t, memnet.New(), 4, func(i int, cfg *daemon.Config) {
					cfg.Job.Model, cfg.Job.Protocol, cfg.Job.Compression = cnn, c.proto, c.compression
					cfg.Local.LR = 0.2
					cfg.AnnounceInterval = 100 * time.Millisecond
				})
				waitFor(t, c.proto+": every daemon at ≥ 0.85 with the CNN", 180*time.Second, func() bool {
					for _, nd := range r.nodes {
						if nd.Status().Accuracy < 0.85 {
							return false
						}
					}
					return true
				})
				s := r.nodes[0].Status()
				if s.Updates == 0 || s.MessagesIn == 0 {
					t.Fatalf("no exchange: %+v", s)
				}
				var b bytes.Buffer
				if err := r.nodes[0].WriteModel(&b); err != nil {
					t.Fatal(err)
				}
				shapes, values, _, err := model.ReadSafetensors(b.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				if w := shapes["0.weight"]; !slices.Equal(w.Shape, []int{8, 1, 3, 3}) || len(values["6.bias"]) != 10 {
					t.Fatalf("exported tensors %v, want PyTorch's 0.weight [8 1 3 3] … 6.bias [10]", shapes)
				}
			})
		})
	}
}

// TestInitParams: a job started from given weights (--init-from) holds
// them before it trains, the job's hash must match them, and a member
// of such a job without them (not joining) is refused.
func TestInitParams(t *testing.T) {
	spec := model.Spec{Kind: model.Net, Inputs: 64, Classes: 10, Shape: []int{1, 8, 8},
		Layers: "conv:8:3:1:1,relu,maxpool:2,flatten,dense:32,relu,dense"}
	p, err := model.InitFromFile("../model/testdata/torch_init.safetensors", spec)
	if err != nil {
		t.Fatal(err)
	}
	parts, test := shards(t, 1)
	net := memnet.New()
	ep, _ := net.Join("d000", 16)
	j := testJob()
	j.Model, j.InitHash = spec, model.ParamsHash(p)
	nd, err := daemon.New(daemon.Config{Job: j, InitParams: p, Train: parts[0], Test: test, Transport: ep, Logger: quiet(), Backend: virtualCPU()})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(nd.Params(), p) {
		t.Fatal("the daemon does not start from the given weights")
	}
	other := slices.Clone(p)
	other[0]++
	if _, err := daemon.New(daemon.Config{Job: j, InitParams: other, Train: parts[0], Test: test, Transport: ep, Logger: quiet(), Backend: virtualCPU()}); err == nil || !strings.Contains(err.Error(), "hash to") {
		t.Fatalf("other weights for the job's hash: %v", err)
	}
	if _, err := daemon.New(daemon.Config{Job: j, Train: parts[0], Test: test, Transport: ep, Logger: quiet(), Backend: virtualCPU()}); err == nil || !strings.Contains(err.Error(), "--init-from") {
		t.Fatalf("no weights for a job that starts from given ones: %v", err)
	}
	plain := testJob()
	plain.Model = spec
	if plain.ID() == j.ID() {
		t.Fatal("the initial weights' hash is not part of the job's ID")
	}
}
