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

// ---- Kernels fed by asynchronous copies (sm_90). Inline PTX for the
// copies and mbarriers, as CUDA C++ without CUTLASS writes them. A tensor
// map comes in global memory with its box's element count (the Vigil
// kernels' lowering: rustc cannot pass a 64-byte-aligned
// __grid_constant__ parameter), acquired through the tensor-map proxy at
// entry as CUDA requires for a map copied there by the host.

#define SG_BLOCK 64
#define SG_K 16
#define SG_STAGES 3
#define SG_THREADS 16
#define SG_PER 4
#define SG_STAGE (SG_BLOCK * SG_K)
#define TMA_TILE 32
#define TMA_ROWS 8

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void cp_async16_zfill(void* smem, const void* gmem, unsigned src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(smem)), "l"(gmem),
                 "r"(src_bytes)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// All but the newest SG_STAGES - 2 groups.
__device__ __forceinline__ void cp_async_wait_stage() {
    asm volatile("cp.async.wait_group %0;" ::"n"(SG_STAGES - 2) : "memory");
}

__device__ __forceinline__ void tensormap_acquire(const void* map) {
    asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;" ::"l"(map) : "memory");
}

__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(smem_addr(bar)), "r"(parity)
            : "memory");
    } while (!done);
}

__device__ __forceinline__ void tma_load_2d(void* dst, const void* map, int x, int y, unsigned long long* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            smem_addr(dst)),
        "l"(map), "r"(x), "r"(y), "r"(smem_addr(bar))
        : "memory");
}

__device__ __forceinline__ void tma_store_2d(const void* map, int x, int y, const void* src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(map), "r"(x),
                 "r"(y), "r"(smem_addr(src))
                 : "memory");
}

__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

__device__ __forceinline__ void bulk_wait_read0() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }

// One stage's contribution to a thread's 4 x 4 outputs (rows ty + 16 i,
// columns tx + 16 j).
__device__ __forceinline__ void sgemm_stage(const float* as, const float* bs, unsigned tx, unsigned ty,
                                            float acc[SG_PER][SG_PER]) {
#pragma unroll
    for (int kk = 0; kk < SG_K; ++kk) {
        float av[SG_PER], bv[SG_PER];
        for (int i = 0; i < SG_PER; ++i) av[i] = as[(ty + SG_THREADS * i) * SG_K + kk];
        for (int j = 0; j < SG_PER; ++j) bv[j] = bs[kk * SG_BLOCK + tx + SG_THREADS * j];
        for (int i = 0; i < SG_PER; ++i)
            for (int j = 0; j < SG_PER; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
}

__device__ __forceinline__ void sgemm_store(float* c, unsigned long long m, unsigned long long n,
                                            unsigned long long row0, unsigned long long col0, unsigned tx,
                                            unsigned ty, float acc[SG_PER][SG_PER]) {
    for (int i = 0; i < SG_PER; ++i) {
        unsigned long long r = row0 + ty + SG_THREADS * i;
        for (int j = 0; j < SG_PER; ++j) {
            unsigned long long col = col0 + tx + SG_THREADS * j;
            if (r < m && col < n) c[r * n + col] = acc[i][j];
        }
    }
}

// Thread `l`'s 16-byte pieces of step `step`'s tiles of `a` and `b`
// (zero-filled past the edges), then a commit.
__device__ __forceinline__ void sgemm_async_load(float* ta, float* tb, const float* a, const float* b,
                                                 unsigned long long m, unsigned long long n, unsigned long long k,
                                                 unsigned long long row0, unsigned long long col0, unsigned l,
                                                 unsigned long long step, unsigned long long steps) {
    if (step < steps) {
        unsigned ar = l / 4, ac = 4 * (l % 4), br = l / 16, bc = 4 * (l % 16);
        unsigned s = (step % SG_STAGES) * SG_STAGE;
        unsigned long long k0 = step * SG_K;
        unsigned long long left = k > k0 + ac ? k - (k0 + ac) : 0;
        unsigned valid = row0 + ar < m ? (unsigned)(left < 4 ? left : 4) : 0;
        cp_async16_zfill(&ta[s + ar * SG_K + ac], valid ? a + (row0 + ar) * k + k0 + ac : a, 4 * valid);
        left = n > col0 + bc ? n - (col0 + bc) : 0;
        valid = k0 + br < k ? (unsigned)(left < 4 ? left : 4) : 0;
        cp_async16_zfill(&tb[s + br * SG_BLOCK + bc], valid ? b + (k0 + br) * n + col0 + bc : b, 4 * valid);
    }
    cp_async_commit();
}

extern "C" __global__ void sgemm_async(unsigned long long m, unsigned long long n, unsigned long long k,
                                       const float* __restrict__ a, unsigned long long a_len,
                                       const float* __restrict__ b, unsigned long long b_len,
                                       float* __restrict__ c, unsigned long long c_len) {
    __shared__ __align__(128) float ta[SG_STAGES * SG_STAGE];
    __shared__ __align__(128) float tb[SG_STAGES * SG_STAGE];
    unsigned tx = threadIdx.x % SG_THREADS, ty = threadIdx.y % SG_THREADS;
    unsigned l = ty * SG_THREADS + tx;
    unsigned long long row0 = (unsigned long long)blockIdx.y * SG_BLOCK, col0 = (unsigned long long)blockIdx.x * SG_BLOCK;
    unsigned long long steps = (k + SG_K - 1) / SG_K;
    for (int step = 0; step < SG_STAGES - 1; ++step)
        sgemm_async_load(ta, tb, a, b, m, n, k, row0, col0, l, step, steps);
    float acc[SG_PER][SG_PER] = {};
    for (unsigned long long step = 0; step < steps; ++step) {
        cp_async_wait_stage();
        __syncthreads();
        sgemm_async_load(ta, tb, a, b, m, n, k, row0, col0, l, step + SG_STAGES - 1, steps);
        unsigned s = (step % SG_STAGES) * SG_STAGE;
        sgemm_stage(ta + s, tb + s, tx, ty, acc);
    }
    sgemm_store(c, m, n, row0, col0, tx, ty, acc);
}

// Step `step`'s boxes of `a` and `b` into its stage, on its mbarrier.
__device__ __forceinline__ void sgemm_tma_load(float* ta, float* tb, unsigned long long* full, const void* a_map,
                                               const void* b_map, unsigned bytes, unsigned long long row0,
                                               unsigned long long col0, unsigned long long step,
                                               unsigned long long steps) {
    if (step < steps) {
        unsigned s = step % SG_STAGES;
        int k0 = (int)(step * SG_K);
        mbar_arrive_expect_tx(&full[s], bytes);
        tma_load_2d(&ta[s * SG_STAGE], a_map, k0, (int)row0, &full[s]);
        tma_load_2d(&tb[s * SG_STAGE], b_map, (int)col0, k0, &full[s]);
    }
}

extern "C" __global__ void sgemm_tma(unsigned long long m, unsigned long long n, unsigned long long k,
                                     const void* a_map, unsigned long long a_box, const void* b_map,
                                     unsigned long long b_box, float* __restrict__ c, unsigned long long c_len) {
    tensormap_acquire(a_map);
    tensormap_acquire(b_map);
    __shared__ __align__(128) float ta[SG_STAGES * SG_STAGE];
    __shared__ __align__(128) float tb[SG_STAGES * SG_STAGE];
    __shared__ __align__(8) unsigned long long full[SG_STAGES];
    unsigned tx = threadIdx.x % SG_THREADS, ty = threadIdx.y % SG_THREADS;
    bool producer = tx == 0 && ty == 0;
    unsigned long long row0 = (unsigned long long)blockIdx.y * SG_BLOCK, col0 = (unsigned long long)blockIdx.x * SG_BLOCK;
    unsigned long long steps = (k + SG_K - 1) / SG_K;
    unsigned bytes = (unsigned)((a_box + b_box) * sizeof(float));
    if (producer) {
        for (int s = 0; s < SG_STAGES; ++s) mbar_init(&full[s], 1);
        fence_proxy_async();
        for (int step = 0; step < SG_STAGES; ++step)
            sgemm_tma_load(ta, tb, full, a_map, b_map, bytes, row0, col0, step, steps);
    }
    __syncthreads();
    float acc[SG_PER][SG_PER] = {};
    for (unsigned long long step = 0; step < steps; ++step) {
        unsigned s = step % SG_STAGES;
        mbar_wait(&full[s], (unsigned)((step / SG_STAGES) & 1));
        sgemm_stage(ta + s * SG_STAGE, tb + s * SG_STAGE, tx, ty, acc);
        __syncthreads();
        if (producer) sgemm_tma_load(ta, tb, full, a_map, b_map, bytes, row0, col0, step + SG_STAGES, steps);
    }
    sgemm_store(c, m, n, row0, col0, tx, ty, acc);
}

// Where the 4-byte element at unswizzled byte offset `o` of a box lands
// with the 128-byte swizzle.
__device__ __forceinline__ unsigned swizzle128(unsigned o) { return o ^ (((o >> 7) & 7) << 4); }

extern "C" __global__ void transpose_tma(const void* x_map, unsigned long long x_box, const void* y_map,
                                         unsigned long long y_box) {
    tensormap_acquire(x_map);
    tensormap_acquire(y_map);
    __shared__ __align__(1024) float tiles[2 * TMA_TILE * TMA_TILE];
    float* tile = tiles;
    float* out = tiles + TMA_TILE * TMA_TILE;
    __shared__ __align__(8) unsigned long long bar;
    unsigned tx = threadIdx.x % TMA_TILE, ty = threadIdx.y;
    bool first = tx == 0 && ty == 0;
    int bx = (int)(TMA_TILE * blockIdx.x), by = (int)(TMA_TILE * blockIdx.y);
    if (first) {
        mbar_init(&bar, 1);
        fence_proxy_async();
        mbar_arrive_expect_tx(&bar, (unsigned)(x_box * sizeof(float)));
        tma_load_2d(tile, x_map, bx, by, &bar);
    }
    __syncthreads();
    mbar_wait(&bar, 0);
    for (unsigned r = ty; r < TMA_TILE; r += TMA_ROWS)
        out[swizzle128(4 * (r * TMA_TILE + tx)) / 4] = tile[swizzle128(4 * (tx * TMA_TILE + r)) / 4];
    fence_proxy_async();
    __syncthreads();
    if (first) {
        tma_store_2d(y_map, by, bx, out);
        bulk_commit();
        bulk_wait_read0();
    }
}
