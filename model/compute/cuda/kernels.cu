// gossipd's element-wise, loss and update kernels, compiled at run time
// with NVRTC (backend_linux.go). Each is the CUDA form of a CPU kernel in
// model/compute (cpu.go, update.go); backendtest holds both to the same
// tolerances. Matrices are row-major float32; one thread per value, or
// one block per row where a row is reduced. extern "C" keeps the names
// unmangled for cuModuleGetFunction.

#define ROW_THREADS 128 // the block size of the row kernels: a power of two

extern "C" __global__ void broadcast_rows(float *dst, const float *v, int m, int n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long)m * n) dst[i] = v[i % n];
}

extern "C" __global__ void relu(float *x, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] < 0.0f) x[i] = 0.0f;
}

// relu_into is a copy then relu, in one launch: dst = max(src, 0), NaN
// and −0 kept as relu keeps them.
extern "C" __global__ void relu_into(float *dst, const float *src, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = src[i];
        dst[i] = v < 0.0f ? 0.0f : v;
    }
}

extern "C" __global__ void relu_backward(float *g, const float *z, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && !(z[i] > 0.0f)) g[i] = 0.0f;
}

// column_sums: a block of COL_GROUPS warps per 32 columns. Lane l of
// warp g sums rows g, g + COL_GROUPS, … of column 32·block + l (a warp
// reads 32 adjacent values of a row at once), and the first warp adds the
// groups' sums in order: a minibatch of 512 rows takes 64 steps, not 512.
#define COL_GROUPS 8
// column_sum returns, to the first warp's lanes, the sums of the block's
// columns (0 to the other warps and past n).
__device__ float column_sum(const float *src, int m, int n, float *sh) {
    int lane = threadIdx.x % 32, g = threadIdx.x / 32;
    int j = blockIdx.x * 32 + lane;
    float s = 0.0f;
    if (j < n)
        for (int i = g; i < m; i += COL_GROUPS) s += src[(long)i * n + j];
    sh[g * 32 + lane] = s;
    __syncthreads();
    float t = 0.0f;
    if (g == 0 && j < n)
        for (int k = 0; k < COL_GROUPS; k++) t += sh[k * 32 + lane];
    return t;
}

extern "C" __global__ void column_sums(float *dst, const float *src, int m, int n) {
    __shared__ float sh[COL_GROUPS * 32];
    float t = column_sum(src, m, n, sh);
    int j = blockIdx.x * 32 + threadIdx.x % 32;
    if (threadIdx.x < 32 && j < n) dst[j] = t;
}

// column_sums_axpby is column_sums then axpby on its sums, in one launch:
// a layer's bias step, y ← b·y + a·Σ_i src[i].
extern "C" __global__ void column_sums_axpby(float *y, float a, const float *src, float b, int m, int n) {
    __shared__ float sh[COL_GROUPS * 32];
    float t = column_sum(src, m, n, sh);
    int j = blockIdx.x * 32 + threadIdx.x % 32;
    if (threadIdx.x < 32 && j < n) y[j] = b == 1.0f ? y[j] + a * t : b * y[j] + a * t;
}

// gather_rows copies rows[i] of src (row stride ld, cols values) to row i
// of dst (stride cols).
extern "C" __global__ void gather_rows(float *dst, const float *src, const int *rows, int nrows, int cols, int ld) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)nrows * cols) return;
    long r = i / cols, c = i % cols;
    dst[i] = src[(long)rows[r] * ld + c];
}

// block_max and block_sum reduce over the threads of one block.
__device__ float block_max(float v, float *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

__device__ double block_sum(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

// row_max is the largest of the n values of z, found by the block.
__device__ float row_max(const float *z, int n, float *sh) {
    float mx = __int_as_float(0xff800000); // -inf
    for (int j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, z[j]);
    return block_max(mx, sh);
}

// row_argmax is the index of the first largest of the n values of z.
__device__ int row_argmax(const float *z, int n) {
    int arg = 0;
    for (int j = 1; j < n; j++)
        if (z[j] > z[arg]) arg = j;
    return arg;
}

// softmax_xent: one block per row. probs may alias logits; grad may be
// null. out[0] accumulates the loss, count[0] the rows whose arg-max (the
// first maximum) is the label; rows, when not null, gets each row's loss.
extern "C" __global__ void softmax_xent(float *probs, float *grad, const float *logits, const int *y, int m, int n,
                                        float scale, double *out, int *count, double *rows) {
    __shared__ float shf[ROW_THREADS];
    __shared__ double shd[ROW_THREADS];
    int row = blockIdx.x;
    if (row >= m) return;
    const float *z = logits + (long)row * n;
    float mx = row_max(z, n, shf);
    double s = 0.0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += exp((double)(z[j] - mx));
    s = block_sum(s, shd);
    int label = y[row];
    float zl = z[label];
    if (threadIdx.x == 0) {
        double l = log(s) - (double)(zl - mx);
        atomicAdd(out, l);
        if (rows) rows[row] = l;
        if (row_argmax(z, n) == label) atomicAdd(count, 1);
    }
    __syncthreads(); // every thread has read z before probs overwrites it
    float *p = probs + (long)row * n;
    float *g = grad ? grad + (long)row * n : 0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float pj = (float)(exp((double)(z[j] - mx)) / s);
        if (g) g[j] = scale * (pj - (j == label ? 1.0f : 0.0f));
        p[j] = pj;
    }
}

// hinge_ovr: one block per row, as softmax_xent; grad may be null.
extern "C" __global__ void hinge_ovr(float *grad, const float *scores, const int *y, int m, int n, float scale,
                                     double *out, int *count, double *rows) {
    __shared__ double shd[ROW_THREADS];
    int row = blockIdx.x;
    if (row >= m) return;
    const float *s = scores + (long)row * n;
    int label = y[row];
    double loss = 0.0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float t = j == label ? 1.0f : -1.0f;
        float g = 0.0f;
        if (t * s[j] < 1.0f) {
            loss += (double)(1.0f - t * s[j]);
            g = -t * scale;
        }
        if (grad) grad[(long)row * n + j] = g;
    }
    loss = block_sum(loss, shd);
    if (threadIdx.x == 0) {
        atomicAdd(out, loss);
        if (rows) rows[row] = loss;
        if (row_argmax(s, n) == label) atomicAdd(count, 1);
    }
}

extern "C" __global__ void axpby(float *y, float a, const float *x, float b, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = b == 1.0f ? y[i] + a * x[i] : b * y[i] + a * x[i];
}

// sgd_update is torch.optim.SGD (update.go's SGDUpdate); v is null
// without momentum.
extern "C" __global__ void sgd_update(float *w, const float *g, float *v, float lr, float mu, float wd, int first, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (mu == 0.0f) {
        w[i] -= wd == 0.0f ? lr * g[i] : lr * (g[i] + wd * w[i]);
        return;
    }
    float vi = first ? g[i] + wd * w[i] : mu * v[i] + g[i] + wd * w[i];
    v[i] = vi;
    w[i] -= lr * vi;
}

extern "C" __global__ void adam_update(float *w, const float *g, float *m, float *v, float step, float b1, float b2,
                                       float sc2, float eps, float wd, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float gi = g[i] + wd * w[i];
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    w[i] -= step * m[i] / ((float)sqrt((double)v[i]) * sc2 + eps);
}

// sum_squares adds w·Σ x² (in double) to out[0].
extern "C" __global__ void sum_squares(const float *x, long n, double w, double *out) {
    __shared__ double shd[ROW_THREADS];
    double s = 0.0;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        s += (double)x[i] * (double)x[i];
    s = block_sum(s, shd);
    if (threadIdx.x == 0) atomicAdd(out, w * s);
}

// row_sum_squares: one block per row, out[row] = Σ_j x[row,j]² in double.
extern "C" __global__ void row_sum_squares(double *out, const float *x, int m, int n) {
    __shared__ double shd[ROW_THREADS];
    int row = blockIdx.x;
    if (row >= m) return;
    double s = 0.0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        double v = x[(long)row * n + j];
        s += v * v;
    }
    s = block_sum(s, shd);
    if (threadIdx.x == 0) out[row] = s;
}

extern "C" __global__ void scale_rows(float *x, const float *s, int m, int n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)m * n) return;
    float f = s[i / n];
    if (f != 1.0f) x[i] *= f;
}

// softmax: one block per row; dst may alias logits.
extern "C" __global__ void softmax(float *dst, const float *logits, int m, int n) {
    __shared__ float shf[ROW_THREADS];
    __shared__ double shd[ROW_THREADS];
    int row = blockIdx.x;
    if (row >= m) return;
    const float *z = logits + (long)row * n;
    float mx = row_max(z, n, shf);
    double s = 0.0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += (double)(float)exp((double)(z[j] - mx));
    s = block_sum(s, shd);
    __syncthreads();
    for (int j = threadIdx.x; j < n; j += blockDim.x) dst[(long)row * n + j] = (float)((double)(float)exp((double)(z[j] - mx)) / s);
}

// ---- Layers of convolutional networks (compute.Layers; the CPU's are
// model/compute/conv.go, pool.go and layers_cpu.go). One thread per value
// written; a value that sums several terms sums them in the CPU's order.

// im2col: cols (m × C·K·K × OH·OW) from x (m × C×H×W), zeros where a
// window reaches into the padding.
extern "C" __global__ void im2col(float *cols, const float *x, int m, int C, int H, int W, int K, int S, int P, int OH,
                                  int OW) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long pos = (long)OH * OW, rows = (long)C * K * K;
    if (i >= m * rows * pos) return;
    long e = i / (rows * pos), r = i / pos % rows, p = i % pos;
    int c = r / (K * K), ki = r / K % K, kj = r % K;
    int ih = p / OW * S - P + ki, iw = p % OW * S - P + kj;
    float v = 0.0f;
    if (ih >= 0 && ih < H && iw >= 0 && iw < W) v = x[((e * C + c) * H + ih) * W + iw];
    cols[i] = v;
}

// col2im: dx (m × C×H×W) the sum of dcols' entries over the windows that
// read each input value, in row (ki, kj) then position order.
extern "C" __global__ void col2im(float *dx, const float *dcols, int m, int C, int H, int W, int K, int S, int P, int OH,
                                  int OW) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)m * C * H * W) return;
    long e = i / ((long)C * H * W);
    int c = i / ((long)H * W) % C, ih = i / W % H, iw = i % W;
    long pos = (long)OH * OW;
    const float *col = dcols + (e * C + c) * K * K * pos;
    float s = 0.0f;
    for (int ki = 0; ki < K; ki++) {
        int oh = ih + P - ki;
        if (oh < 0 || oh % S != 0 || oh / S >= OH) continue;
        for (int kj = 0; kj < K; kj++) {
            int ow = iw + P - kj;
            if (ow < 0 || ow % S != 0 || ow / S >= OW) continue;
            s += col[(long)(ki * K + kj) * pos + (oh / S) * OW + ow / S];
        }
    }
    dx[i] = s;
}

// channel_bias: x[e, c, :] += b[c] over m × ch × pos values.
extern "C" __global__ void channel_bias(float *x, const float *b, int m, int ch, int pos) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long)m * ch * pos) x[i] += b[i / pos % ch];
}

// channel_sums: dst[e·stride + c] += Σ_j src[e, c, j]; with stride 0 one
// thread per channel adds every example's sum, in example order.
extern "C" __global__ void channel_sums(float *dst, const float *src, int m, int ch, int pos, int stride) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    int lo = 0, hi = m, c = i;
    if (stride > 0) {
        if (i >= (long)m * ch) return;
        lo = i / ch, hi = lo + 1, c = i % ch;
    } else if (i >= ch) {
        return;
    }
    for (int e = lo; e < hi; e++) {
        float s = 0.0f;
        const float *v = src + ((long)e * ch + c) * pos;
        for (int j = 0; j < pos; j++) s += v[j];
        dst[(long)e * stride + c] += s;
    }
}

// pool_key orders floats as the CPU's key does: −0 below +0.
__device__ int pool_key(float f) {
    int b = __float_as_int(f);
    return b ^ ((b >> 31) & 0x7fffffff);
}

// pool_argmax is the index in x (one channel, W wide) of the first
// largest value of the window at (oh, ow).
__device__ int pool_argmax(const float *x, int W, int K, int S, int oh, int ow) {
    int at = oh * S * W + ow * S, best = pool_key(x[at]);
    for (int ki = 0; ki < K; ki++)
        for (int kj = 0; kj < K; kj++) {
            int j = (oh * S + ki) * W + ow * S + kj, k = pool_key(x[j]);
            if (k > best) best = k, at = j;
        }
    return at;
}

// pool: out (m × C × OH×OW) the max or the mean of each K×K window.
extern "C" __global__ void pool(float *out, const float *in, int m, int C, int H, int W, int K, int S, int OH, int OW,
                                int isMax) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)m * C * OH * OW) return;
    long ec = i / ((long)OH * OW);
    int oh = i / OW % OH, ow = i % OW;
    const float *x = in + ec * H * W;
    if (isMax) {
        out[i] = x[pool_argmax(x, W, K, S, oh, ow)];
        return;
    }
    float s = 0.0f;
    for (int ki = 0; ki < K; ki++)
        for (int kj = 0; kj < K; kj++) s += x[(oh * S + ki) * W + ow * S + kj];
    out[i] = s * (1.0f / (float)(K * K));
}

// pool_backward: din from dout, each input value adding what the
// windows that took it (max) or read it (mean) pass back, in output
// order.
extern "C" __global__ void pool_backward(float *din, const float *dout, const float *in, int m, int C, int H, int W,
                                         int K, int S, int OH, int OW, int isMax) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)m * C * H * W) return;
    long ec = i / ((long)H * W);
    int ih = i / W % H, iw = i % W, self = ih * W + iw;
    const float *x = in + ec * H * W, *d = dout + ec * OH * OW;
    float inv = 1.0f / (float)(K * K), s = 0.0f;
    int oh0 = ih - K + 1 > 0 ? (ih - K + 1 + S - 1) / S : 0, ow0 = iw - K + 1 > 0 ? (iw - K + 1 + S - 1) / S : 0;
    for (int oh = oh0; oh < OH && oh * S <= ih; oh++)
        for (int ow = ow0; ow < OW && ow * S <= iw; ow++) {
            if (isMax) {
                if (pool_argmax(x, W, K, S, oh, ow) == self) s += d[oh * OW + ow];
            } else {
                s += d[oh * OW + ow] * inv;
            }
        }
    din[i] = s;
}

// gelu and its derivative, in double as the CPU computes them.
__device__ double gelu(double z) { return 0.5 * z * (1.0 + erf(z / 1.4142135623730951)); }
__device__ double gelu_grad(double z) {
    return 0.5 * (1.0 + erf(z / 1.4142135623730951)) + z * exp(-z * z / 2.0) / 2.5066282746310002;
}

// activate: out = f(in); f 0 ReLU (NaN kept, −0 to +0), 1 tanh, 2 GELU.
extern "C" __global__ void activate(float *out, const float *in, long n, int f) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = in[i];
    if (f == 0) out[i] = (v > 0.0f || v != v) ? v : 0.0f;
    else if (f == 1) out[i] = (float)tanh((double)v);
    else out[i] = (float)gelu((double)v);
}

// activate_backward: din = dout·f′(in), from out = f(in) where it says.
extern "C" __global__ void activate_backward(float *din, const float *dout, const float *in, const float *out, long n,
                                             int f) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (f == 0) din[i] = __float_as_uint(out[i]) == 0u ? 0.0f : dout[i];
    else if (f == 1) din[i] = dout[i] * (1.0f - out[i] * out[i]);
    else din[i] = dout[i] * (float)gelu_grad((double)in[i]);
}

// norm_forward: one thread per (example, group): mean and 1/σ in double, then
// the scaled and shifted values (weight and bias per hw values).
extern "C" __global__ void norm_forward(float *out, float *stats, const float *in, const float *w, const float *b, int m,
                                int groups, int size, int hw) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)m * groups) return;
    int q = i % groups;
    const float *x = in + i * size;
    double mean = 0.0, sq = 0.0;
    for (int j = 0; j < size; j++) mean += (double)x[j];
    mean /= size;
    for (int j = 0; j < size; j++) sq += ((double)x[j] - mean) * ((double)x[j] - mean);
    double rstd = 1.0 / sqrt(sq / size + 1e-5);
    stats[2 * i] = (float)mean, stats[2 * i + 1] = (float)rstd;
    float *o = out + i * size;
    for (int j = 0; j < size; j++) {
        int ch = (q * size + j) / hw;
        o[j] = (float)(((double)x[j] - mean) * rstd) * w[ch] + b[ch];
    }
}

// norm_input_grad: din, one thread per (example, group).
extern "C" __global__ void norm_input_grad(float *din, const float *dout, const float *in, const float *w,
                                           const float *stats, int m, int groups, int size, int hw) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)m * groups) return;
    int q = i % groups;
    const float *x = in + i * size, *d = dout + i * size;
    double mean = stats[2 * i], rstd = stats[2 * i + 1], sg = 0.0, sgx = 0.0;
    for (int j = 0; j < size; j++) {
        int ch = (q * size + j) / hw;
        double xh = ((double)x[j] - mean) * rstd, gj = (double)d[j] * (double)w[ch];
        sg += gj, sgx += gj * xh;
    }
    sg /= size, sgx /= size;
    float *dx = din + i * size;
    for (int j = 0; j < size; j++) {
        int ch = (q * size + j) / hw;
        double xh = ((double)x[j] - mean) * rstd;
        dx[j] = (float)(rstd * ((double)d[j] * (double)w[ch] - sg - xh * sgx));
    }
}

// norm_param_grads: the weight's and bias's gradients, one thread per
// weight (and example, with stride > 0; with stride 0 each thread adds
// every example's, in example order).
extern "C" __global__ void norm_param_grads(float *dw, float *db, const float *dout, const float *in,
                                            const float *stats, int m, int groups, int size, int hw, int stride) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    int nw = groups * size / hw, lo = 0, hi = m, ch = i;
    if (stride > 0) {
        if (i >= (long)m * nw) return;
        lo = i / nw, hi = lo + 1, ch = i % nw;
    } else if (i >= nw) {
        return;
    }
    int q = ch * hw / size; // the group holding the weight's values
    for (int e = lo; e < hi; e++) {
        long g = (long)e * groups + q;
        double mean = stats[2 * g], rstd = stats[2 * g + 1];
        float sw = 0.0f, sb = 0.0f;
        for (int j = ch * hw - q * size; j < (ch + 1) * hw - q * size; j++) {
            float dj = dout[g * size + j];
            sw += (float)((double)dj * (((double)in[g * size + j] - mean) * rstd));
            sb += dj;
        }
        dw[(long)e * stride + ch] += sw, db[(long)e * stride + ch] += sb;
    }
}

extern "C" __global__ void mul(float *dst, const float *a, const float *b, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = a[i] * b[i];
}

extern "C" __global__ void zero(float *x, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 0.0f;
}

// ---- Rows of one matrix (compute.Rows; the CPU's are model/compute/rows.go):
// one thread per value written, every product and sum rounded on its own
// (the _rn intrinsics, which the compiler never fuses), so that the rows
// come out as the CPU's, bit for bit.

// interpolate_rows: row rows[i] of dst = a + w[i]·(b − a) for i < count,
// a and b rows of src, where idx holds rows, a and b (count each).
extern "C" __global__ void interpolate_rows(float *dst, const float *src, const int *idx, const float *w, int count, int n) {
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long)count * n) return;
    int i = (int)(t / n), j = (int)(t % n);
    float av = src[(long)idx[count + i] * n + j], bv = src[(long)idx[2 * count + i] * n + j];
    dst[(long)idx[i] * n + j] = __fadd_rn(av, __fmul_rn(w[i], __fsub_rn(bv, av)));
}

// combine_rows: row rows[i] of dst = Σ_k w[k]·(row from[k] of src) over
// k in [start[i], start[i+1]), in the order of k, where idx holds rows
// (count), start (count + 1) and from.
extern "C" __global__ void combine_rows(float *dst, const float *src, const int *idx, const float *w, int count, int n) {
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long)count * n) return;
    int i = (int)(t / n), j = (int)(t % n);
    const int *start = idx + count, *from = idx + 2 * count + 1;
    int lo = start[i], hi = start[i + 1];
    float acc = 0.0f;
    if (lo < hi) acc = __fmul_rn(w[lo], src[(long)from[lo] * n + j]);
    for (int k = lo + 1; k < hi; k++) acc = __fadd_rn(acc, __fmul_rn(w[k], src[(long)from[k] * n + j]));
    dst[(long)idx[i] * n + j] = acc;
}

// trimmed_rows: value j of row rows[i] of dst = compute.Trimmed of value
// j of the rows from[k] of src, k in [start[i], start[i+1]) (at most
// MAX_TRIMMED of them), with trim[i] (−1: the median), one thread a value:
// the values sorted stably, NaNs first whatever their sign, then the
// numbers by their bits' total order (sort_key: −0 before +0), the kept
// ones summed in double from 0 in ascending order and divided by their
// count; idx holds rows (count), start (count + 1), trim (count) and
// from.
#define MAX_TRIMMED 64 // compute.MaxTrimmedInputs
__device__ unsigned sort_key(float v) {
    unsigned b = __float_as_uint(v);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ bool sorts_before(float a, float b) {
    if (a != a || b != b) return a != a && b == b;
    return sort_key(a) < sort_key(b);
}
extern "C" __global__ void trimmed_rows(float *dst, const float *src, const int *idx, int count, int n) {
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long)count * n) return;
    int i = (int)(t / n), j = (int)(t % n);
    const int *start = idx + count, *trim = idx + 2 * count + 1, *from = idx + 3 * count + 1;
    int lo = start[i], k = start[i + 1] - lo, tr = trim[i];
    float vals[MAX_TRIMMED];
    for (int a = 0; a < k; a++) { // insertion sort, as the data come
        float v = src[(long)from[lo + a] * n + j];
        int b = a;
        for (; b > 0 && sorts_before(v, vals[b - 1]); b--) vals[b] = vals[b - 1];
        vals[b] = v;
    }
    float out;
    if (tr < 0 && k % 2 == 1) {
        out = vals[k / 2];
    } else if (tr < 0) {
        out = (float)__ddiv_rn(__dadd_rn((double)vals[k / 2 - 1], (double)vals[k / 2]), 2.0);
    } else {
        double s = 0.0;
        for (int a = tr; a < k - tr; a++) s = __dadd_rn(s, (double)vals[a]);
        out = (float)__ddiv_rn(s, (double)(k - 2 * tr));
    }
    dst[(long)idx[i] * n + j] = out;
}

// quantize_rows: row rows[i] of dst = row from[i] of src as
// compute.RoundTrip rounds it, one thread a chunk of a row: q 1 (fp16)
// each value to the nearest binary16, ties to even, and back (to_half,
// from_half: compute.ToHalf and FromHalf, bit for bit); q 2 (int8) each
// value at its chunk's scale (its largest magnitude / 127, NaN if a value
// is), v / scale rounded half away from zero, times the scale. idx holds
// rows (count) and from (count).
__device__ unsigned to_half(float f) {
    unsigned b = __float_as_uint(f);
    unsigned sign = (b >> 16) & 0x8000u;
    int exp = (int)((b >> 23) & 0xffu);
    unsigned mant = b & 0x7fffffu;
    if (exp == 0xff) return sign | (mant != 0 ? 0x7e00u : 0x7c00u);
    if (exp - 127 > 15) return sign | 0x7c00u;
    if (exp - 127 >= -14) {
        unsigned h = (unsigned)(exp - 127 + 15) << 10 | mant >> 13;
        unsigned rest = mant & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
        return sign | h;
    }
    if (exp - 127 >= -25) {
        unsigned m = mant | 0x800000u;
        unsigned shift = (unsigned)(-14 - (exp - 127)) + 13;
        unsigned h = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rest > half || (rest == half && (h & 1u))) h++;
        return sign | h;
    }
    return sign;
}
__device__ float from_half(unsigned h) {
    unsigned sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | mant << 13);
    if (exp == 0) {
        if (mant == 0) return __uint_as_float(sign);
        float v = __fmul_rn((float)mant, 1.0f / 16777216.0f); // mant·2^-24, exact
        return sign ? -v : v;
    }
    return __uint_as_float(sign | (exp + 127 - 15) << 23 | mant << 13);
}
extern "C" __global__ void quantize_rows(float *dst, const float *src, const int *idx, int count, int n, int q, int chunk) {
    int chunks = (n + chunk - 1) / chunk;
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long)count * chunks) return;
    int i = (int)(t / chunks), c = (int)(t % chunks);
    int lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;
    const float *s = src + (long)idx[count + i] * n;
    float *d = dst + (long)idx[i] * n;
    if (q == 1) {
        for (int j = lo; j < hi; j++) d[j] = from_half(to_half(s[j]));
        return;
    }
    float mx = 0.0f;
    for (int j = lo; j < hi; j++) {
        float a = __uint_as_float(__float_as_uint(s[j]) & 0x7fffffffu);
        if (a != a || mx != mx) mx = __uint_as_float(0x7fc00000u);
        else if (a > mx) mx = a;
    }
    float scale = __fdiv_rn(mx, 127.0f);
    for (int j = lo; j < hi; j++) {
        float v = 0.0f;
        if (scale > 0.0f) v = (float)(signed char)(int)round((double)__fdiv_rn(s[j], scale));
        d[j] = __fmul_rn(v, scale);
    }
}

// mask_rows: row rows[i] of dst = row from[i] of src at the indices
// keep[start[i]..start[i+1]) (ascending), 0 elsewhere: one thread a
// value, which looks for its index among its row's (rand-k's step as its
// receivers decompress it).
extern "C" __global__ void mask_rows(float *dst, const float *src, const int *idx, int count, int n) {
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long)count * n) return;
    int i = (int)(t / n), j = (int)(t % n);
    const int *start = idx + count, *from = idx + 2 * count + 1, *keep = idx + 3 * count + 1;
    int lo = start[i], hi = start[i + 1];
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (keep[mid] < j) lo = mid + 1; else hi = mid;
    }
    float v = src[(long)from[i] * n + j];
    dst[(long)idx[i] * n + j] = (lo < start[i + 1] && keep[lo] == j) ? v : 0.0f;
}

// uvarint_len is the length of v's uvarint encoding.
__device__ int uvarint_len(unsigned v) {
    int n = 1;
    while (v >= 0x80u) { v >>= 7; n++; }
    return n;
}

// block_scan sets sh[t] to the sum (op 0) or the largest (op 1) of the
// block's values v up to thread t, itself included, and returns it
// (Hillis-Steele over ROW_THREADS, a power of two).
__device__ int block_scan(int v, int *sh, int op) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = 1; s < blockDim.x; s <<= 1) {
        int o = threadIdx.x >= s ? sh[threadIdx.x - s] : (op ? -1 : 0);
        __syncthreads();
        int c = sh[threadIdx.x];
        sh[threadIdx.x] = op ? (o > c ? o : c) : c + o;
        __syncthreads();
    }
    int r = sh[threadIdx.x];
    __syncthreads();
    return r;
}

// top_k_rows: one block per listed row; row rows[i] of dst = row from[i]
// of src at its k largest magnitudes, ties to the lower index, 0
// elsewhere (compute.TopKInto: magnitudes by the bits of |x|, a NaN
// above +Inf), and bytes[i] = the uvarint bytes of the kept indices'
// gaps. The k-th largest key by a radix select, a byte a pass from the
// highest (a histogram in shared memory), then the row in tiles of a
// block's values in index order: kept above the key, or at it among the
// first ties (a prefix sum), each kept index's gap from the last kept
// before it (a prefix maximum). In place too: every read of the row
// comes before its writes, each value written by the thread that read it.
extern "C" __global__ void top_k_rows(float *dst, const float *src, const int *idx, int count, int n, int k, int *bytes) {
    __shared__ int hist[256];
    __shared__ int shi[ROW_THREADS];
    __shared__ unsigned sel[2];
    __shared__ double shd[ROW_THREADS];
    int i = blockIdx.x;
    if (i >= count) return;
    const float *s = src + (long)idx[count + i] * n;
    float *d = dst + (long)idx[i] * n;
    unsigned t = 0, mask = 0;
    int want = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
        __syncthreads();
        for (int j = threadIdx.x; j < n; j += blockDim.x) {
            unsigned key = __float_as_uint(s[j]) & 0x7fffffffu;
            if ((key & mask) == t) atomicAdd(&hist[(key >> shift) & 255], 1);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int dg = 255, w = want;
            for (; dg > 0 && hist[dg] < w; dg--) w -= hist[dg];
            sel[0] = t | ((unsigned)dg << shift);
            sel[1] = (unsigned)w;
        }
        __syncthreads();
        t = sel[0];
        want = (int)sel[1];
        mask |= 255u << shift;
        __syncthreads();
    }
    int ties = want, last = -1;
    double nb = 0.0;
    for (int base = 0; base < n; base += blockDim.x) {
        int j = base + threadIdx.x;
        float v = 0.0f;
        unsigned key = 0;
        if (j < n) { v = s[j]; key = __float_as_uint(v) & 0x7fffffffu; }
        int at = j < n && key == t;
        int rank = block_scan(at, shi, 0);        // ties up to j, j included
        int total = shi[blockDim.x - 1];
        __syncthreads();
        int kept = j < n && (key > t || (at && rank <= ties));
        block_scan(kept ? j : -1, shi, 1); // the last kept index up to each thread's
        int tileLast = shi[blockDim.x - 1];
        if (kept) {
            int before = threadIdx.x > 0 ? shi[threadIdx.x - 1] : -1;
            int prev = before > last ? before : last;
            nb += uvarint_len((unsigned)(j - prev - 1));
        }
        __syncthreads();
        if (j < n) d[j] = kept ? v : 0.0f;
        ties -= total < ties ? total : ties;
        if (tileLast > last) last = tileLast;
    }
    nb = block_sum(nb, shd);
    if (threadIdx.x == 0) bytes[i] = (int)nb;
}

// sum_squares_rows: one block per listed row, out[i] = Σ x² over row
// rows[i] in double (NaN or +Inf where the row holds one).
extern "C" __global__ void sum_squares_rows(double *out, const float *x, const int *rows, int count, int n) {
    __shared__ double shd[ROW_THREADS];
    int i = blockIdx.x;
    if (i >= count) return;
    const float *r = x + (long)rows[i] * n;
    double s = 0.0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        double v = r[j];
        s += v * v;
    }
    s = block_sum(s, shd);
    if (threadIdx.x == 0) out[i] = s;
}

// mean_rows: dst[j] = (float)(Σ_i src[rows[i], j] · (1/count)) for j < n,
// summed in double in the order of i (one thread a value).
extern "C" __global__ void mean_rows(float *dst, const float *src, const int *rows, int count, int n) {
    long j = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    double s = 0.0;
    for (int i = 0; i < count; i++) s = __dadd_rn(s, (double)src[(long)rows[i] * n + j]);
    dst[j] = (float)__dmul_rn(s, 1.0 / (double)count);
}

// moments_rows: out[j] and out[n + j] = the mean and the standard
// deviation of value j over the rows rows of src, one thread a value, as
// compute.Moments: Σ x in double in the order of i, divided by count;
// Σ (x − mean)², each square rounded on its own, in the same order,
// divided by count, and its square root (all rounded to nearest).
extern "C" __global__ void moments_rows(double *out, const float *src, const int *rows, int count, int n) {
    long j = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    double m = 0.0;
    for (int i = 0; i < count; i++) m = __dadd_rn(m, (double)src[(long)rows[i] * n + j]);
    m = __ddiv_rn(m, (double)count);
    double d = 0.0;
    for (int i = 0; i < count; i++) {
        double e = __dsub_rn((double)src[(long)rows[i] * n + j], m);
        d = __dadd_rn(d, __dmul_rn(e, e));
    }
    out[j] = m;
    out[n + j] = __dsqrt_rn(__ddiv_rn(d, (double)count));
}

// squared_distance4: Σ (r − ref)² over values [lo, hi), each difference
// rounded to float, then squared and summed in double with four running
// sums, as compute.SquaredDistance4.
__device__ double squared_distance4(const float *r, const float *ref, int lo, int hi) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int j = lo;
    for (; j + 4 <= hi; j += 4) {
        double d0 = __fsub_rn(r[j], ref[j]), d1 = __fsub_rn(r[j + 1], ref[j + 1]);
        double d2 = __fsub_rn(r[j + 2], ref[j + 2]), d3 = __fsub_rn(r[j + 3], ref[j + 3]);
        s0 = __dadd_rn(s0, __dmul_rn(d0, d0));
        s1 = __dadd_rn(s1, __dmul_rn(d1, d1));
        s2 = __dadd_rn(s2, __dmul_rn(d2, d2));
        s3 = __dadd_rn(s3, __dmul_rn(d3, d3));
    }
    for (; j < hi; j++) {
        double d = __fsub_rn(r[j], ref[j]);
        s0 = __dadd_rn(s0, __dmul_rn(d, d));
    }
    return __dadd_rn(__dadd_rn(__dadd_rn(s0, s1), s2), s3);
}

// distance_rows: out[i·chunks + k] = Σ (x − ref)² over chunk k (chunk
// values) of row rows[i] of x, one thread a chunk of a row: each
// difference rounded to float, then squared and summed in double with
// four running sums, as compute.SquaredDistance4.
extern "C" __global__ void distance_rows(double *out, const float *x, const float *ref, const int *rows, int count, int n, int chunk) {
    int chunks = (n + chunk - 1) / chunk;
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long)count * chunks) return;
    int i = (int)(t / chunks), k = (int)(t % chunks);
    int lo = k * chunk, hi = lo + chunk < n ? lo + chunk : n;
    out[t] = squared_distance4(x + (long)rows[i] * n, ref, lo, hi);
}

// pair_distance_rows: out[i] = Σ (x − y)² over rows a[i] and b[i] of x,
// one thread a pair, summed as squared_distance4 sums (Krum's and
// clipped gossip's distances); idx holds a (count) and b (count).
extern "C" __global__ void pair_distance_rows(double *out, const float *x, const int *idx, int count, int n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    out[i] = squared_distance4(x + (long)idx[i] * n, x + (long)idx[count + i] * n, 0, n);
}

// average_rows: value j of row rows[i] of dst = (float)(Σ_k src[from[k],
// j] / m) over the m rows k in [start[i], start[i+1]), summed in double
// from 0 in the order of k (multi-Krum's mean); idx holds rows (count),
// start (count + 1) and from.
extern "C" __global__ void average_rows(float *dst, const float *src, const int *idx, int count, int n) {
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long)count * n) return;
    int i = (int)(t / n), j = (int)(t % n);
    const int *start = idx + count, *from = idx + 2 * count + 1;
    int lo = start[i], hi = start[i + 1];
    double s = 0.0;
    for (int k = lo; k < hi; k++) s = __dadd_rn(s, (double)src[(long)from[k] * n + j]);
    dst[(long)idx[i] * n + j] = (float)__ddiv_rn(s, (double)(hi - lo));
}

// clip_rows: value j of row rows[i] of dst = (float)(v + Σ_k scale[k]·
// (src[from[k], j] − v)) over k in (start[i], start[i+1]), v the value
// of the first row from[start[i]], in double, each product rounded apart
// from its sum (clipped gossip, compute.ClipValue); idx holds rows
// (count), start (count + 1) and from.
extern "C" __global__ void clip_rows(float *dst, const float *src, const int *idx, const double *scale, int count, int n) {
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long)count * n) return;
    int i = (int)(t / n), j = (int)(t % n);
    const int *start = idx + count, *from = idx + 2 * count + 1;
    int lo = start[i], hi = start[i + 1];
    double v = (double)src[(long)from[lo] * n + j], acc = 0.0;
    for (int k = lo + 1; k < hi; k++) acc = __dadd_rn(acc, __dmul_rn(scale[k], __dsub_rn((double)src[(long)from[k] * n + j], v)));
    dst[(long)idx[i] * n + j] = (float)__dadd_rn(v, acc);
}

// tally_rows: one block per row of k·m, model row / m's: rows[row] gets
// the row's softmax cross-entropy (with hinge, its one-vs-rest hinge
// loss), count[row / m] one where the row's first arg-max is its label
// y[row % m] (compute.Batched's TallyRows; the host adds each model's
// rows in order, so that the sums do not depend on the blocks' order).
extern "C" __global__ void tally_rows(const float *z, const int *y, int k, int m, int n, int hinge, double *rows, int *count) {
    __shared__ float shf[ROW_THREADS];
    __shared__ double shd[ROW_THREADS];
    int row = blockIdx.x;
    if (row >= k * m) return;
    const float *r = z + (long)row * n;
    int label = y[row % m];
    double l;
    if (hinge) {
        double h = 0.0;
        for (int j = threadIdx.x; j < n; j += blockDim.x) {
            float t = j == label ? 1.0f : -1.0f;
            if (t * r[j] < 1.0f) h += (double)(1.0f - t * r[j]);
        }
        l = block_sum(h, shd);
    } else {
        float mx = row_max(r, n, shf);
        double s = 0.0;
        for (int j = threadIdx.x; j < n; j += blockDim.x) s += exp((double)(r[j] - mx));
        s = block_sum(s, shd);
        l = log(s) - (double)(r[label] - mx);
    }
    if (threadIdx.x == 0) {
        rows[row] = l;
        if (row_argmax(r, n) == label) atomicAdd(count + row / m, 1);
    }
}
