// CUDA C++ twins of the benchmark suite's Vigil kernels: the
// same work, written the same way, as a CUDA programmer writes it.
// vigil-bench loads the cubin that `nvcc -O3 -arch=sm_90 -cubin` makes of
// this file and launches these entries through the driver, so both sides
// are timed by one piece of code. Parameters follow the Vigil kernels'
// lowering order: a slice is (pointer, length), sizes are 64-bit.
//
// Plain CUDA C++: no templates, no headers beyond what nvcc includes.

#define TILE 32
#define SGEMM_TILE 16
#define FULL_MASK 0xffffffffu

extern "C" __global__ void copy(const float* __restrict__ x, unsigned long long x_len,
                                float* __restrict__ y, unsigned long long y_len) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < y_len) y[i] = x[i];
}

extern "C" __global__ void axpy(float a, const float* __restrict__ x, unsigned long long x_len,
                                float* __restrict__ y, unsigned long long y_len) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < y_len) y[i] = a * x[i] + y[i];
}

__device__ __forceinline__ float warp_sum_down(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(FULL_MASK, v, offset);
    return v;
}

// One partial per block; grid-stride loads; needs blockDim.x % 32 == 0.
extern "C" __global__ void reduce_sum(const float* __restrict__ x, unsigned long long x_len,
                                      float* __restrict__ partials, unsigned long long partials_len) {
    __shared__ float warp_sums[32];
    float acc = 0.0f;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < x_len; i += stride)
        acc += x[i];
    acc = warp_sum_down(acc);
    unsigned t = threadIdx.x, lane = t % 32;
    if (lane == 0) warp_sums[t / 32] = acc;
    __syncthreads();
    if (t < 32) {
        unsigned warps = (blockDim.x + 31) / 32;
        float v = t < warps ? warp_sums[t] : 0.0f;
        float total = warp_sum_down(v);
        if (t == 0) partials[blockIdx.x] = total;
    }
}

extern "C" __global__ void histogram(const unsigned* __restrict__ data, unsigned long long data_len,
                                     unsigned* bins, unsigned long long bins_len) {
    unsigned n = (unsigned)bins_len;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < data_len; i += stride)
        atomicAdd(&bins[data[i] % n], 1u);
}

extern "C" __global__ void counter(unsigned long long n, unsigned* counter, unsigned long long counter_len) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(counter, 1u);
}

extern "C" __global__ void stencil5(unsigned long long width, unsigned long long height,
                                    const float* __restrict__ x, unsigned long long x_len,
                                    float* __restrict__ y, unsigned long long y_len) {
    unsigned long long col = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long row = (unsigned long long)blockIdx.y * blockDim.y + threadIdx.y;
    if (row < height && col < width) {
        unsigned long long i = row * width + col;
        float v;
        if (row == 0 || col == 0 || row + 1 == height || col + 1 == width) {
            v = x[i];
        } else {
            float around = x[i - 1] + x[i + 1] + x[i - width] + x[i + width];
            v = 0.5f * x[i] + 0.125f * around;
        }
        y[i] = v;
    }
}

extern "C" __global__ void transpose(unsigned long long width, unsigned long long height,
                                     const float* __restrict__ x, unsigned long long x_len,
                                     float* __restrict__ y, unsigned long long y_len) {
    __shared__ float tile[TILE][TILE + 1];
    unsigned tx = threadIdx.x, ty = threadIdx.y;
    unsigned long long bx = (unsigned long long)blockIdx.x * TILE, by = (unsigned long long)blockIdx.y * TILE;
    for (unsigned j = ty; j < TILE; j += blockDim.y) {
        unsigned long long r = by + j, c = bx + tx;
        if (r < height && c < width) tile[j][tx] = x[r * width + c];
    }
    __syncthreads();
    for (unsigned j = ty; j < TILE; j += blockDim.y) {
        unsigned long long r = bx + j, c = by + tx;
        if (r < width && c < height) y[r * height + c] = tile[tx][j];
    }
}

extern "C" __global__ void sgemm(unsigned long long m, unsigned long long n, unsigned long long k,
                                 const float* __restrict__ a, unsigned long long a_len,
                                 const float* __restrict__ b, unsigned long long b_len,
                                 float* __restrict__ c, unsigned long long c_len) {
    __shared__ float ta[SGEMM_TILE][SGEMM_TILE];
    __shared__ float tb[SGEMM_TILE][SGEMM_TILE];
    unsigned tx = threadIdx.x, ty = threadIdx.y;
    unsigned long long row = (unsigned long long)blockIdx.y * SGEMM_TILE + ty;
    unsigned long long col = (unsigned long long)blockIdx.x * SGEMM_TILE + tx;
    float acc = 0.0f;
    for (unsigned long long t = 0; t < k; t += SGEMM_TILE) {
        ta[ty][tx] = (row < m && t + tx < k) ? a[row * k + t + tx] : 0.0f;
        tb[ty][tx] = (t + ty < k && col < n) ? b[(t + ty) * n + col] : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < SGEMM_TILE; ++kk) acc += ta[ty][kk] * tb[kk][tx];
        __syncthreads();
    }
    if (row < m && col < n) c[row * n + col] = acc;
}

__device__ __forceinline__ float op_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ float op_add(float a, float b) { return a + b; }

// Butterfly within warps, then every thread folds the warps' partials in
// order (the Vigil kernel's block_reduce).
#define BLOCK_REDUCE(v, partials, op)                                              \
    do {                                                                           \
        for (int offset = 16; offset > 0; offset /= 2)                             \
            v = op(v, __shfl_xor_sync(FULL_MASK, v, offset));                      \
        if (threadIdx.x % 32 == 0) partials[threadIdx.x / 32] = v;                \
        __syncthreads();                                                           \
        unsigned warps = (blockDim.x + 31) / 32;                                   \
        float all = partials[0];                                                   \
        for (unsigned w = 1; w < warps; ++w) all = op(all, partials[w]);           \
        __syncthreads();                                                           \
        v = all;                                                                   \
    } while (0)

extern "C" __global__ void softmax(unsigned long long cols, const float* __restrict__ x, unsigned long long x_len,
                                   float* __restrict__ y, unsigned long long y_len) {
    __shared__ float partials[32];
    unsigned long long base = (unsigned long long)blockIdx.x * cols;
    float m = -INFINITY;
    for (unsigned long long c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[base + c]);
    BLOCK_REDUCE(m, partials, op_max);
    float sum = 0.0f;
    for (unsigned long long c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(x[base + c] - m);
    BLOCK_REDUCE(sum, partials, op_add);
    float inv = 1.0f / sum;
    for (unsigned long long c = threadIdx.x; c < cols; c += blockDim.x) y[base + c] = expf(x[base + c] - m) * inv;
}

__device__ __forceinline__ unsigned warp_inclusive_scan(unsigned v, unsigned lane) {
    for (unsigned delta = 1; delta < 32; delta *= 2) {
        unsigned below = __shfl_up_sync(FULL_MASK, v, delta);
        if (lane >= delta) v += below;
    }
    return v;
}

extern "C" __global__ void scan(const unsigned* __restrict__ x, unsigned long long x_len,
                                unsigned* __restrict__ y, unsigned long long y_len) {
    __shared__ unsigned warp_totals[32];
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned t = threadIdx.x, lane = t % 32;
    unsigned v = i < x_len ? x[i] : 0u;
    v = warp_inclusive_scan(v, lane);
    if (lane == 31) warp_totals[t / 32] = v;
    __syncthreads();
    if (t < 32) {
        unsigned warps = (blockDim.x + 31) / 32;
        unsigned total = t < warps ? warp_totals[t] : 0u;
        warp_totals[t] = warp_inclusive_scan(total, lane);
    }
    __syncthreads();
    if (t >= 32) v += warp_totals[t / 32 - 1];
    if (i < y_len) y[i] = v;
}
