// cudaemu.h runs kernels.cu on the CPU for the tests (emulator_linux_test.go).
//
// A launch runs its blocks one after another: first to last in two
// launches, last to first in the next two. A block that reads what
// another block of the same launch writes (blocks a GPU runs in no set
// order) so reads the old value in one order and the new in the other,
// and a test's numbers go wrong in one of four launches in a row.
//
// A block's threads are fibers on one OS thread: each runs
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
//
// A fiber switch on x86-64 is a few instructions of its own (emu_switch:
// the callee-saved registers and the stack pointer), where glibc's
// swapcontext also sets the signal mask with a system call each time; in
// a virtual machine whose system calls are slow that call was most of the
// tests' time. Elsewhere, or with EMU_UCONTEXT defined (a test builds the
// helper so, to keep that path checked), the fibers are ucontexts.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ucontext.h>

// CUDA's math library declares these with C linkage beside the C library's
// (which <cmath> declares here too). A kernel named like one of them does
// not compile under NVRTC ("more than one instance of overloaded function
// has C linkage"), so the emulator declares them as well, and g++ refuses
// such a kernel the same way.
extern "C" {
double norm(int dim, const double *p);
float normf(int dim, const float *p);
double rnorm(int dim, const double *p);
float rnormf(int dim, const float *p);
double norm3d(double a, double b, double c);
float norm3df(float a, float b, float c);
double norm4d(double a, double b, double c, double d);
float norm4df(float a, float b, float c, float d);
double rnorm3d(double a, double b, double c);
double rnorm4d(double a, double b, double c, double d);
double normcdf(double x);
float normcdff(float x);
double normcdfinv(double x);
float normcdfinvf(float x);
double rcbrt(double x);
double rsqrt(double x);
float rsqrtf(float x);
double sinpi(double x);
double cospi(double x);
void sincospi(double x, double *s, double *c);
double erfinv(double x);
double erfcinv(double x);
double erfcx(double x);
double cyl_bessel_i0(double x);
double cyl_bessel_i1(double x);
}

#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
#define EMU_ASM_SWITCH 1
#endif

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
#ifdef EMU_ASM_SWITCH
    void *sp; // its saved stack pointer, while it does not run
#else
    ucontext_t ctx;
#endif
    char *stack;
    bool done;
};
static const size_t emu_stack = 64 << 10;
// The fibers, in place: a ucontext_t points into itself (its saved
// floating-point state), so it must never move.
static emu_fiber emu_fibers[1024];
static unsigned emu_nfibers; // those with a stack
static emu_fiber *emu_cur;       // the fiber running
static void (*emu_body)(void *); // the launch's kernel call
static void *emu_arg;
static unsigned long emu_launches;
static const void *emu_sched_bottom; // the scheduler's stack, for the sanitizer
static size_t emu_sched_size;

#ifdef EMU_ASM_SWITCH
// emu_switch(save, to) pushes the callee-saved registers (and the SSE and
// x87 control words) on the current stack, stores the stack pointer in
// *save, takes to as the stack pointer and pops the same from it: it
// returns into whatever saved to (or, the first time, into the function
// emu_fiber_init put on a fiber's stack).
extern "C" void emu_switch(void **save, void *to);
asm(R"(
    .text
    .globl emu_switch
    .hidden emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
)");
static void *emu_sched_sp; // the scheduler's stack pointer, while a fiber runs
#else
static ucontext_t emu_sched; // the block's scheduler
#endif

static void emu_entry();

// emu_fiber_init makes fb start at emu_entry when next switched to.
static void emu_fiber_init(emu_fiber &fb) {
#ifdef EMU_ASM_SWITCH
    // What emu_switch pops: the control words (their defaults), six
    // registers (0: a frame pointer of 0 ends a backtrace), and the
    // address it returns to, emu_entry, at a 16-byte boundary as after a
    // call; above it a null return address that emu_entry never takes.
    uintptr_t top = (reinterpret_cast<uintptr_t>(fb.stack) + emu_stack) & ~uintptr_t(15);
    void **ret = reinterpret_cast<void **>(top - 16);
    ret[0] = reinterpret_cast<void *>(emu_entry);
    ret[1] = nullptr;
    void **sp = ret - 7;
    std::memset(sp, 0, 7 * sizeof(void *));
    uint32_t csr = 0x1f80, cw = 0x037f;
    std::memcpy(sp, &csr, 4);
    std::memcpy(reinterpret_cast<char *>(sp) + 4, &cw, 2);
    fb.sp = sp;
#else
    fb.ctx.uc_stack.ss_sp = fb.stack;
    fb.ctx.uc_stack.ss_size = emu_stack;
    fb.ctx.uc_link = nullptr; // emu_entry switches back itself
    makecontext(&fb.ctx, emu_entry, 0);
#endif
}

// emu_to_fiber runs fb from the scheduler until it switches back.
static inline void emu_to_fiber(emu_fiber &fb) {
    void *fake;
    EMU_START_SWITCH(&fake, fb.stack, emu_stack);
#ifdef EMU_ASM_SWITCH
    emu_switch(&emu_sched_sp, fb.sp);
#else
    swapcontext(&emu_sched, &fb.ctx);
#endif
    EMU_FINISH_SWITCH(fake, nullptr, nullptr);
}

// emu_to_sched goes back from the running fiber to the scheduler.
static inline void emu_to_sched() {
#ifdef EMU_ASM_SWITCH
    emu_switch(&emu_cur->sp, emu_sched_sp);
#else
    swapcontext(&emu_cur->ctx, &emu_sched);
#endif
}

// __syncthreads goes back to the scheduler until every thread of the
// block has reached it.
static inline void __syncthreads() {
    void *fake;
    EMU_START_SWITCH(&fake, emu_sched_bottom, emu_sched_size);
    emu_to_sched();
    EMU_FINISH_SWITCH(fake, &emu_sched_bottom, &emu_sched_size);
}
static inline float __int_as_float(unsigned v) { float f; std::memcpy(&f, &v, 4); return f; }
static inline int __float_as_int(float f) { int v; std::memcpy(&v, &f, 4); return v; }
static inline unsigned __float_as_uint(float f) { unsigned v; std::memcpy(&v, &f, 4); return v; }
static inline float __uint_as_float(unsigned v) { float f; std::memcpy(&f, &v, 4); return f; }
// The round-to-nearest intrinsics: each operation rounded on its own, as
// -std=c++20 (no contraction into fused multiply-adds) does anyway.
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __dsqrt_rn(double a) { return std::sqrt(a); }
static inline double atomicAdd(double *a, double v) { double o = *a; *a += v; return o; }
static inline int atomicAdd(int *a, int v) { int o = *a; *a += v; return o; }
using std::exp;
using std::fmaxf;
using std::log;
using std::sqrt;

// emu_entry runs the kernel as the current fiber, which then goes back to
// the scheduler for good (emu_fiber_init starts it anew).
static void emu_entry() {
    EMU_FINISH_SWITCH(nullptr, &emu_sched_bottom, &emu_sched_size);
    emu_body(emu_arg);
    emu_cur->done = true;
    EMU_START_SWITCH(nullptr, emu_sched_bottom, emu_sched_size); // for good
    emu_to_sched();
    fprintf(stderr, "cudaemu: a finished fiber resumed\n");
    abort();
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
#ifndef EMU_ASM_SWITCH
        if (getcontext(&fb.ctx) != 0) {
            perror("cudaemu: a fiber");
            exit(3);
        }
#endif
        if (!(fb.stack = static_cast<char *>(malloc(emu_stack)))) {
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
            emu_fiber_init(fb);
            fb.done = false;
        }
        for (unsigned phase = 0;; phase++) {
            bool reverse = (launch + b + phase) & 1;
            unsigned done = 0;
            for (unsigned i = 0; i < block; i++) {
                unsigned t = reverse ? block - 1 - i : i;
                threadIdx.x = t;
                emu_cur = &emu_fibers[t];
                emu_to_fiber(*emu_cur);
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
