// Package bench holds the PyTorch reference that `gossipd bench --against
// torch` runs beside gossipd in the same run, on the CPU or a GPU
// (torch_reference.py, embedded so that a machine with the binary alone
// can run it).
package bench

import _ "embed"

// TorchReference is torch_reference.py.
//
//go:embed torch_reference.py
var TorchReference []byte
