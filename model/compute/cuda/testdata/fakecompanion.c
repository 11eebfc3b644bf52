/* Stand-ins for a CUDA library and the companion it needs from its own
 * directory (libs_linux_test.go compiles each with gcc into a directory
 * that is not on the loader's search path):
 * -DLT         a cuBLASLt: the library cuBLAS links;
 * -DCUBLAS     a cuBLAS linked to it (gcc -l:libcublasLt.so.N);
 * -DBUILTINS   NVRTC's builtins;
 * -DNVRTC      an NVRTC that opens its builtins by name, as NVRTC does when
 *              it compiles (-DBUILTINS_NAME names them). */
#include <dlfcn.h>

#ifdef LT
int fakeLtVersion(void) { return 99; }
#endif
#ifdef CUBLAS
int fakeLtVersion(void);
int fakeCublasLt(void) { return fakeLtVersion(); }
#endif
#ifdef BUILTINS
int fakeBuiltins(void) { return 1; }
#endif
#ifdef NVRTC
int fakeNvrtcBuiltins(void) {
	void *h = dlopen(BUILTINS_NAME, RTLD_NOW);
	return h != 0;
}
#endif
