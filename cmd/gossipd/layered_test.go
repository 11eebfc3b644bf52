package main

import (
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gossipd/gossipd/model"
)

// TestDaemonLayeredModel: three real daemons train a small CNN on the
// 8×8 digits by D-PSGD, each reaching 0.85, and /model hands out its
// weights under PyTorch's state_dict names.
func TestDaemonLayeredModel(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	ds := startCluster(t, bin, t.TempDir(), 3, "200ms", "--protocol", "dpsgd", "--lr", "0.2",
		"--model", "conv:8:3:1:1,relu,maxpool:2,dense:32,relu,dense")
	for _, d := range ds {
		poll(t, d, "daemon learning the CNN (≥ 0.85)", 120*time.Second, func(s status) bool { return s.Accuracy >= 0.85 })
	}
	c := http.Client{Timeout: 5 * time.Second}
	req, _ := http.NewRequest("GET", "http://"+ds[0].api+"/model", nil)
	if ds[0].token != "" {
		req.Header.Set("Authorization", "Bearer "+ds[0].token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /model: %d, %v", resp.StatusCode, err)
	}
	shapes, _, meta, err := model.ReadSafetensors(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(shapes["0.weight"].Shape, []int{8, 1, 3, 3}) || !slices.Equal(shapes["6.weight"].Shape, []int{10, 32}) {
		t.Fatalf("/model tensors %v, want PyTorch's names and layouts", shapes)
	}
	if meta == nil {
		t.Fatal("/model has no metadata")
	}
}
