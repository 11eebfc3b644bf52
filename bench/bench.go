// Package bench is `gossipd bench`: float32 GEMM against gonum and the
// pure-Go kernels (GEMM), one epoch of training against the pure-Go
// kernels or the PyTorch reference beside gossipd in the same run, on the
// CPU or a GPU (Train), and the simulator's reference runs as whole
// processes (Sim). Config (its flags and their checks) and Run are the
// command.
// The PyTorch reference (torch_reference.py) is embedded so that a
// machine with the binary alone can run it.
package bench

import _ "embed"

// TorchReference is torch_reference.py.
//
//go:embed torch_reference.py
var TorchReference []byte
