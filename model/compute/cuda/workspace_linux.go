//go:build cuda && linux && (amd64 || arm64)

package cuda

import "fmt"

// workspaceBytes is the device memory the backend gives cuBLAS to work
// in, by the GPU's compute capability major: NVIDIA's recommendation
// for cublasSetWorkspace, 32 MiB from Hopper (9.x) on and 4 MiB before.
func workspaceBytes(major int) uintptr {
	if major >= 9 {
		return 32 << 20
	}
	return 4 << 20
}

// newWorkspace allocates the backend's cuBLAS workspace (counted with
// its other device memory) and gives it to cuBLAS, where cuBLAS has
// cublasSetWorkspace. With its own workspace cuBLAS allocates nothing
// while a training step is captured (it would otherwise add allocation
// nodes to each graph), and a GEMM works in the same memory captured or
// not. newBackend calls it.
func (b *Backend) newWorkspace() error {
	if b.blas.setWorkspace == nil {
		return nil
	}
	n := workspaceBytes(b.dev.Major)
	var p uint64
	if err := b.a.check("cuMemAlloc (cuBLAS's workspace)", b.a.alloc(&p, n)); err != nil {
		return err
	}
	b.mem.count(p, n)
	b.workspace = devBuf{p: p, bytes: n}
	return b.useWorkspace()
}

// useWorkspace gives cuBLAS the backend's workspace again: every
// cublasSetStream takes it back to cuBLAS's own pool.
func (b *Backend) useWorkspace() error {
	if b.workspace.p == 0 {
		return nil
	}
	if r := b.blas.setWorkspace(b.bh, b.workspace.p, b.workspace.bytes); r != 0 {
		return fmt.Errorf("cuda: cublasSetWorkspace (%d bytes): status %d", b.workspace.bytes, r)
	}
	return nil
}
