//go:build !(cuda && linux && (amd64 || arm64))

package cuda

// Built reports whether this binary has the CUDA loader.
const Built = false

// Probe loads the CUDA driver and lists its devices; in this build it
// returns ErrNotBuilt.
func Probe() (*Info, error) { return nil, ErrNotBuilt }
