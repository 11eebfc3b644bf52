//go:build !(cuda && linux && (amd64 || arm64))

package cuda

import (
	"errors"
	"strings"
	"testing"
)

func TestProbeNotBuilt(t *testing.T) {
	if _, err := Probe(); !errors.Is(err, ErrNotBuilt) || !strings.Contains(err.Error(), "make build-cuda") {
		t.Fatalf("err = %v, want ErrNotBuilt saying how to build the CUDA binary", err)
	}
	if Built {
		t.Fatal("Built in a build without the loader")
	}
}
