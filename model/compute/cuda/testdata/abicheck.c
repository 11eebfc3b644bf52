/* Stand-ins for every driver API and cuBLAS function the backend calls,
 * for TestBindingsABI (abi_linux_test.go compiles it with gcc): each one
 * checks that the arguments it received through purego are exactly the
 * values the test passes (all 64 bits of a pointer or a size, the sign of
 * an int, a float behind a pointer, arguments passed on the stack) and
 * returns 0, or the position (1-based) of the first that differs; those
 * with an output write a value the test checks in turn. The values are
 * the ones abi_linux_test.go names. */
#include "fakecuda.c"

#include <stddef.h>
#include <stdint.h>

typedef unsigned long long CUdeviceptr;
typedef void *ptr;

#define DPTR 0x1122334455667788ull   /* a device address */
#define SIZE ((size_t)0x0000000987654321ull)
#define STREAM ((ptr)0x0123456789abcdefull)
#define HANDLE ((ptr)0x00007f0011223344ull)
#define CHECK(i, cond) \
	do { \
		if (!(cond)) return (i); \
	} while (0)

static char pinned[64];

CUresult cuDevicePrimaryCtxRetain(ptr *ctx, int dev) {
	CHECK(2, dev == -3);
	*ctx = HANDLE;
	return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { return dev == -3 ? 0 : 1; }
CUresult cuCtxSetCurrent(ptr ctx) { return ctx == HANDLE ? 0 : 1; }
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	CHECK(2, n == SIZE);
	*p = DPTR;
	return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) { return p == DPTR ? 0 : 1; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	CHECK(1, dst == DPTR);
	CHECK(2, src != NULL && ((const uint32_t *)src)[0] == 0xcafef00du);
	CHECK(3, n == SIZE);
	return 0;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, ptr stream) {
	CHECK(1, dst == DPTR);
	CHECK(2, src != NULL && ((const uint32_t *)src)[0] == 0xcafef00du);
	CHECK(3, n == SIZE);
	CHECK(4, stream == STREAM);
	return 0;
}
CUresult cuMemAllocHost_v2(void **p, size_t n) {
	CHECK(2, n == SIZE);
	*p = pinned;
	pinned[0] = 'p';
	return 0;
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	CHECK(2, src == DPTR);
	CHECK(3, n == SIZE);
	((uint32_t *)dst)[0] = 0xbeefcafeu;
	return 0;
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
	CHECK(1, dst == DPTR);
	CHECK(2, src == ~DPTR);
	CHECK(3, n == SIZE);
	return 0;
}
CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n) {
	CHECK(1, dst == DPTR);
	CHECK(2, v == 0xfedcba98u);
	CHECK(3, n == SIZE);
	return 0;
}
CUresult cuModuleLoadData(ptr *mod, const void *image) {
	CHECK(2, image != NULL && strcmp((const char *)image, "IMAGE") == 0);
	*mod = HANDLE;
	return 0;
}
CUresult cuModuleGetFunction(ptr *fn, ptr mod, const char *name) {
	CHECK(2, mod == HANDLE);
	CHECK(3, strcmp(name, "softmax_xent") == 0);
	*fn = STREAM;
	return 0;
}
CUresult cuLaunchKernel(ptr fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, ptr stream, void **params, void **extra) {
	CHECK(1, fn == STREAM);
	CHECK(2, gx == 0x80000001u);
	CHECK(3, gy == 2);
	CHECK(4, gz == 3);
	CHECK(5, bx == 1024);
	CHECK(6, by == 5);
	CHECK(7, bz == 6);
	CHECK(8, shared == 0x7fff0000u);
	CHECK(9, stream == HANDLE);
	CHECK(10, params != NULL && *(const uint64_t *)params[0] == DPTR && *(const float *)params[1] == -2.5f &&
	              *(const long *)params[2] == -5000000000l);
	CHECK(11, extra == NULL);
	return 0;
}
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuModuleUnload(ptr mod) { return mod == HANDLE ? 0 : 1; }

/* The graph API (graph_linux.go). */
CUresult cuStreamCreate(ptr *s, unsigned flags) {
	CHECK(2, flags == 1u);
	*s = STREAM;
	return 0;
}
CUresult cuStreamDestroy_v2(ptr s) { return s == STREAM ? 0 : 1; }
CUresult cuStreamBeginCapture_v2(ptr s, int mode) {
	CHECK(1, s == STREAM);
	CHECK(2, mode == 1);
	return 0;
}
CUresult cuStreamEndCapture(ptr s, ptr *g) {
	CHECK(1, s == STREAM);
	*g = HANDLE;
	return 0;
}
CUresult cuGraphInstantiateWithFlags(ptr *exec, ptr g, unsigned long long flags) {
	CHECK(2, g == HANDLE);
	CHECK(3, flags == 0x8000000000000001ull);
	*exec = STREAM;
	return 0;
}
CUresult cuGraphLaunch(ptr exec, ptr s) {
	CHECK(1, exec == STREAM);
	CHECK(2, s == HANDLE);
	return 0;
}
CUresult cuGraphDestroy(ptr g) { return g == HANDLE ? 0 : 1; }
CUresult cuGraphExecDestroy(ptr exec) { return exec == STREAM ? 0 : 1; }
CUresult cuEventCreate(ptr *ev, unsigned flags) {
	CHECK(2, flags == 2u);
	*ev = HANDLE;
	return 0;
}
CUresult cuEventRecord(ptr ev, ptr s) {
	CHECK(1, ev == HANDLE);
	CHECK(2, s == STREAM);
	return 0;
}
CUresult cuEventSynchronize(ptr ev) { return ev == HANDLE ? 0 : 1; }
CUresult cuEventDestroy_v2(ptr ev) { return ev == HANDLE ? 0 : 1; }
CUresult cuMemFreeHost(ptr p) { return p == pinned ? 0 : 1; }

/* cuBLAS */
int cublasSetStream_v2(ptr h, ptr s) {
	CHECK(1, h == HANDLE);
	CHECK(2, s == STREAM);
	return 0;
}
int cublasSetWorkspace_v2(ptr h, ptr ws, size_t n) {
	CHECK(1, h == HANDLE);
	CHECK(2, (CUdeviceptr)ws == DPTR);
	CHECK(3, n == SIZE);
	return 0;
}
int cublasCreate_v2(ptr *h) {
	*h = HANDLE;
	return 0;
}
int cublasDestroy_v2(ptr h) { return h == HANDLE ? 0 : 1; }
int cublasSgemm_v2(ptr h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                   const float *b, int ldb, const float *beta, float *c, int ldc) {
	CHECK(1, h == HANDLE);
	CHECK(2, ta == 1);
	CHECK(3, tb == 0);
	CHECK(4, m == 7);
	CHECK(5, n == -8);
	CHECK(6, k == 9);
	CHECK(7, *alpha == 1.5f);
	CHECK(8, (CUdeviceptr)a == DPTR);
	CHECK(9, lda == 11);
	CHECK(10, (CUdeviceptr)b == ~DPTR);
	CHECK(11, ldb == 12);
	CHECK(12, *beta == -0.25f);
	CHECK(13, (CUdeviceptr)c == (DPTR ^ 0xffff));
	CHECK(14, ldc == 13);
	return 0;
}
int cublasSgemmStridedBatched(ptr h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                              long long sa, const float *b, int ldb, long long sb, const float *beta, float *c, int ldc,
                              long long sc, int count) {
	CHECK(1, h == HANDLE);
	CHECK(2, ta == 0);
	CHECK(3, tb == 1);
	CHECK(4, m == 7);
	CHECK(5, n == 8);
	CHECK(6, k == -9);
	CHECK(7, *alpha == 1.5f);
	CHECK(8, (CUdeviceptr)a == DPTR);
	CHECK(9, lda == 11);
	CHECK(10, sa == -0x123456789ll);
	CHECK(11, (CUdeviceptr)b == ~DPTR);
	CHECK(12, ldb == 12);
	CHECK(13, sb == 0x7edcba987ll);
	CHECK(14, *beta == -0.25f);
	CHECK(15, (CUdeviceptr)c == (DPTR ^ 0xffff));
	CHECK(16, ldc == 13);
	CHECK(17, sc == 0x100000000ll);
	CHECK(18, count == 4097);
	return 0;
}
