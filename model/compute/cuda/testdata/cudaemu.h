// cudaemu.h runs kernels.cu on the CPU for the tests (emulator_linux_test.go):
// a launch runs blockDim.x threads (std::thread) through the blocks one
// after another, __syncthreads is a barrier among them, __shared__
// arrays are shared by them, and atomicAdd takes a lock. It checks the
// kernels' indexing, reductions and aliasing, not their speed.
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

struct emu_dim3 { unsigned x = 0, y = 1, z = 1; };
static thread_local emu_dim3 threadIdx, blockIdx;
static emu_dim3 blockDim, gridDim;
static std::barrier<> *emu_bar;
static std::mutex emu_atomic;

#define __global__
#define __device__
#define __shared__ static

static inline void __syncthreads() { emu_bar->arrive_and_wait(); }
static inline float __int_as_float(unsigned v) { float f; std::memcpy(&f, &v, 4); return f; }
static inline double atomicAdd(double *a, double v) { std::lock_guard<std::mutex> l(emu_atomic); double o = *a; *a += v; return o; }
static inline int atomicAdd(int *a, int v) { std::lock_guard<std::mutex> l(emu_atomic); int o = *a; *a += v; return o; }
using std::exp;
using std::fmaxf;
using std::log;
using std::sqrt;

// emu_launch runs f as grid blocks of block threads.
template <class F> static void emu_launch(unsigned grid, unsigned block, F f) {
    gridDim.x = grid;
    blockDim.x = block;
    std::barrier<> bar(block);
    emu_bar = &bar;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < block; t++)
        ts.emplace_back([&, t] {
            threadIdx.x = t;
            for (unsigned b = 0; b < grid; b++) {
                blockIdx.x = b;
                f();
                bar.arrive_and_wait(); // the block ends before the next starts
            }
        });
    for (auto &t : ts) t.join();
}
