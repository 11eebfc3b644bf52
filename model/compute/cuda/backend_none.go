//go:build !(cuda && linux && (amd64 || arm64))

package cuda

import "github.com/gossipd/gossipd/model/compute"

// Backend is the CUDA compute backend; this build has none.
type Backend struct{ compute.Backend }

// Open reports ErrNotBuilt: this binary has no CUDA loader.
func Open(int) (*Backend, error) { return nil, ErrNotBuilt }

// SelfCheck is the CUDA backend's self-check; this build has no backend.
func (*Backend) SelfCheck() error { return ErrNotBuilt }
