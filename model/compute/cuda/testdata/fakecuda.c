/* A stand-in for the NVIDIA driver's libcuda.so.1, for the loader's tests
 * (driver_linux_test.go compiles it with gcc): the few driver API calls the
 * probe makes, answering as one GPU would. -DNO_DEVICE makes cuInit fail
 * as on a machine whose driver sees no GPU; -DNO_NAME leaves out
 * cuDeviceGetName. */
#include <string.h>

typedef int CUresult;

CUresult cuInit(unsigned int flags) {
#ifdef NO_DEVICE
	return 100; /* CUDA_ERROR_NO_DEVICE */
#else
	return flags == 0 ? 0 : 1;
#endif
}
CUresult cuDriverGetVersion(int *v) { *v = 12040; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 2; return 0; }
CUresult cuDeviceGet(int *dev, int ordinal) { *dev = ordinal; return ordinal < 2 ? 0 : 101; }
#ifndef NO_NAME
CUresult cuDeviceGetName(char *name, int len, int dev) {
	strncpy(name, dev == 0 ? "Fake GPU A" : "Fake GPU B", len);
	return 0;
}
#endif
CUresult cuDeviceTotalMem_v2(unsigned long long *bytes, int dev) { *bytes = (80ull << 30) >> dev; return 0; }
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
	if (attr == 75) { *v = 9; return 0; }
	if (attr == 76) { *v = dev; return 0; }
	return 1; /* CUDA_ERROR_INVALID_VALUE */
}
CUresult cuGetErrorName(CUresult res, const char **s) {
	*s = res == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_OTHER";
	return 0;
}
