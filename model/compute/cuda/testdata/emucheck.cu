// emucheck.cu: kernels for TestEmulatorBarriers, TestEmulatorBlocks and
// TestEmulatorBounds, which check that the emulator (cudaemu.h) catches a
// missing or divergent __syncthreads, blocks that depend on the order
// they run in, and a write past a buffer's end.
#define EMU_N 1024

// shift writes in[t + d] to out[t] (-1 past the ends) by way of shared
// memory, with the barrier that needs.
extern "C" __global__ void shift(float *out, const float *in, int d) {
    __shared__ float sh[EMU_N];
    int t = threadIdx.x, s = t + d;
    sh[t] = in[t];
    __syncthreads();
    out[t] = s >= 0 && s < (int)blockDim.x ? sh[s] : -1.0f;
}

// shift_racy is shift without its barrier: a thread may read its
// neighbour's slot before the neighbour wrote it.
extern "C" __global__ void shift_racy(float *out, const float *in, int d) {
    __shared__ float sh[EMU_N];
    int t = threadIdx.x, s = t + d;
    sh[t] = in[t];
    out[t] = s >= 0 && s < (int)blockDim.x ? sh[s] : -1.0f;
}

// divergent has half of the block wait at a barrier the others never
// reach.
extern "C" __global__ void divergent(float *out) {
    if (threadIdx.x < blockDim.x / 2) __syncthreads();
    out[threadIdx.x] = 1.0f;
}

// overrun writes one value past the end of out, a buffer of blockDim.x
// values.
extern "C" __global__ void overrun(float *out) { out[threadIdx.x + 1] = 1.0f; }

// blocks_shift is shift with a block for each value, one thread each.
extern "C" __global__ void blocks_shift(float *out, const float *in, int d) {
    int b = blockIdx.x, s = b + d;
    out[b] = s >= 0 && s < (int)gridDim.x ? in[s] : -1.0f;
}

// blocks_racy is blocks_shift that also writes its value over in[b],
// which block b - d reads.
extern "C" __global__ void blocks_racy(float *out, float *in, int d) {
    int b = blockIdx.x, s = b + d;
    float v = s >= 0 && s < (int)gridDim.x ? in[s] : -1.0f;
    in[b] = v;
    out[b] = v;
}
