// cudaemu.h runs kernels.cu on the CPU for the tests (emulator_linux_test.go).
//
// A launch runs its blocks one after another: first to last in two
// launches, last to first in the next two. A block that reads what
// another block of the same launch writes (blocks a GPU runs in no set
// order) so reads the old value in one order and the new in the other,
// and a test's numbers go wrong in one of four launches in a row.
//
// A block's threads are fibers (ucontext) on one OS thread: each runs
// until it reaches __syncthreads or its end, one at a time; when all have,
// the next phase starts. The order of the threads in a phase alternates,
// first to last or last to first, from one block to the next, one launch
// to the next and one phase to the next, so a thread that reads another's
// write with no barrier between them reads the old value in one of any two
// blocks in a row (or, with one block, of two launches). Every thread of a
// block must reach the same barriers, as on a GPU, which hangs or goes
// wrong otherwise: a thread that ends while others wait at a barrier stops
// the helper with an error.
//
// __shared__ arrays are statics, shared by a block's threads; atomicAdd
// needs no lock, one thread running at a time. It checks the kernels'
// indexing, reductions, barriers and aliasing, not their speed.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ucontext.h>

// Under AddressSanitizer (the tests build with it, so that a kernel that
// reads or writes past its buffers stops the helper with a report), the
// fibers' stack switches are announced to it.
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/common_interface_defs.h>
extern "C" const char *__asan_default_options() { return "detect_leaks=0"; }
#define EMU_START_SWITCH(save, bottom, size) __sanitizer_start_switch_fiber(save, bottom, size)
#define EMU_FINISH_SWITCH(save, bottom, size) __sanitizer_finish_switch_fiber(save, bottom, size)
#else
#define EMU_START_SWITCH(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define EMU_FINISH_SWITCH(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#endif

struct emu_dim3 { unsigned x = 0, y = 1, z = 1; };
static emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

#define __global__
#define __device__
#define __shared__ static

// emu_fiber is a CUDA thread of the running block.
struct emu_fiber {
    ucontext_t ctx;
    char *stack;
    bool done;
};
static const size_t emu_stack = 64 << 10;
// The fibers, in place: a ucontext_t points into itself (its saved
// floating-point state), so it must never move.
static emu_fiber emu_fibers[1024];
static unsigned emu_nfibers; // those with a stack
static ucontext_t emu_sched;     // the block's scheduler, where fibers return
static emu_fiber *emu_cur;       // the fiber running
static void (*emu_body)(void *); // the launch's kernel call
static void *emu_arg;
static unsigned long emu_launches;
static const void *emu_sched_bottom; // the scheduler's stack, for the sanitizer
static size_t emu_sched_size;

// __syncthreads goes back to the scheduler until every thread of the
// block has reached it.
static inline void __syncthreads() {
    void *fake;
    EMU_START_SWITCH(&fake, emu_sched_bottom, emu_sched_size);
    swapcontext(&emu_cur->ctx, &emu_sched);
    EMU_FINISH_SWITCH(fake, &emu_sched_bottom, &emu_sched_size);
}
static inline float __int_as_float(unsigned v) { float f; std::memcpy(&f, &v, 4); return f; }
static inline double atomicAdd(double *a, double v) { double o = *a; *a += v; return o; }
static inline int atomicAdd(int *a, int v) { int o = *a; *a += v; return o; }
using std::exp;
using std::fmaxf;
using std::log;
using std::sqrt;

// emu_entry runs the kernel as the current fiber, which then goes back to
// the scheduler (uc_link).
static void emu_entry() {
    EMU_FINISH_SWITCH(nullptr, &emu_sched_bottom, &emu_sched_size);
    emu_body(emu_arg);
    emu_cur->done = true;
    EMU_START_SWITCH(nullptr, emu_sched_bottom, emu_sched_size); // for good
}

// emu_launch runs f as grid blocks of block threads.
template <class F> static void emu_launch(unsigned grid, unsigned block, F f) {
    gridDim.x = grid;
    blockDim.x = block;
    emu_body = [](void *p) { (*static_cast<F *>(p))(); };
    emu_arg = &f;
    if (block > 1024) {
        fprintf(stderr, "cudaemu: a block of %u threads; a GPU takes 1024 at most\n", block);
        exit(3);
    }
    for (; emu_nfibers < block; emu_nfibers++) {
        emu_fiber &fb = emu_fibers[emu_nfibers];
        if (getcontext(&fb.ctx) != 0 || !(fb.stack = static_cast<char *>(malloc(emu_stack)))) {
            perror("cudaemu: a fiber");
            exit(3);
        }
    }
    unsigned long launch = emu_launches++;
    bool blocks_reversed = (launch >> 1) & 1;
    for (unsigned bi = 0; bi < grid; bi++) {
        unsigned b = blocks_reversed ? grid - 1 - bi : bi;
        blockIdx.x = b;
        for (unsigned t = 0; t < block; t++) {
            emu_fiber &fb = emu_fibers[t];
            fb.ctx.uc_stack.ss_sp = fb.stack;
            fb.ctx.uc_stack.ss_size = emu_stack;
            fb.ctx.uc_link = &emu_sched;
            makecontext(&fb.ctx, emu_entry, 0);
            fb.done = false;
        }
        for (unsigned phase = 0;; phase++) {
            bool reverse = (launch + b + phase) & 1;
            unsigned done = 0;
            for (unsigned i = 0; i < block; i++) {
                unsigned t = reverse ? block - 1 - i : i;
                threadIdx.x = t;
                emu_cur = &emu_fibers[t];
                void *fake;
                EMU_START_SWITCH(&fake, emu_cur->stack, emu_stack);
                swapcontext(&emu_sched, &emu_cur->ctx);
                EMU_FINISH_SWITCH(fake, nullptr, nullptr);
                done += emu_cur->done;
            }
            if (done == block) break;
            if (done != 0) {
                fprintf(stderr, "cudaemu: block %u of %u: %u of its %u threads ended while the others wait at __syncthreads %u\n",
                        b, grid, done, block, phase + 1);
                exit(3);
            }
        }
    }
}
