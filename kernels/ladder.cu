// ladder.cu: the seeds' CUDA-core reduction ladder, one kernel per rung (full sums of fp32 or fp16 input, fp32
// accumulation, fp32 round to nearest). The plans live in tcreduce/plans/ladder.py; the rung names there are the
// registered method names.
//
// Seeds (../shared/seeds/): 001 (reduce sum naive/opt/shuffle/cg, reduce_max_x4, one atomic per block), 002 (V2-V6
// and the templated kernel with `fold`), 003 (v0-v7, H100 table, Hopper cluster reduce), 004 (cuda-samples
// reduce0-reduce7). The cuda-samples/Harris kernels are the common ancestor of all four.
//
// Conventions shared by every kernel below:
//   - signature (const T* x, long long n, OutT* out, float* ws, unsigned* counters) (kernels/common.cuh contract);
//     the multi-kernel rungs are relaunched by the plan on their own partials (x = ws region, T = float) and only the
//     last launch (one block) writes `out` in OutT; earlier launches write one float partial per block.
//   - 64-bit element indices everywhere (tcr::i64).
//   - loads convert to fp32 exactly (tcr::to_float); every addition is an fp32 add rounded to nearest.
//   - "tree(v[0..B))" below names the shared-memory sequential-addressing tree: for s = B/2, B/4, ..., 1:
//     v[t] = v[t] + v[t + s] for t < s; the result is v[0]. "itree(v[0..B))" is the interleaved tree: for s = 1, 2,
//     ..., B/2: v[t] = v[t] + v[t + s] for t % (2s) == 0. "block_fold" and "serial partials" are the canonical folds
//     of common.cuh.
#include <cooperative_groups.h>
#include "common.cuh"

namespace cg = cooperative_groups;
using tcr::i64;

namespace lad {

// ------------------------------------------------------------------------------------------------ helpers

// Elements of x before its first 16-byte boundary (the scalar head of a vectorized loop), at most n.
template <typename T>
__device__ __forceinline__ i64 head_count(const T* x, i64 n) {
    const unsigned mis = (unsigned)((unsigned long long)x & 15ull);
    const i64 h = mis ? (i64)((16u - mis) / sizeof(T)) : 0;
    return h < n ? h : n;
}

// 16-byte vectors: 4 floats or 8 halves.
template <typename T> struct Vec;
template <> struct Vec<float> { static constexpr int N = 4; };
template <> struct Vec<__half> { static constexpr int N = 8; };

// Sum of one aligned 16-byte vector, pairwise in memory order: (e0 + e1) + (e2 + e3) for float4,
// ((e0 + e1) + (e2 + e3)) + ((e4 + e5) + (e6 + e7)) for 8 halves (each converted to fp32 exactly first).
__device__ __forceinline__ float vec_sum(const float* p) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    return (v.x + v.y) + (v.z + v.w);
}
__device__ __forceinline__ float vec_sum(const __half* p) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
    const float2 c = __half22float2(*reinterpret_cast<const __half2*>(&u.z));
    const float2 d = __half22float2(*reinterpret_cast<const __half2*>(&u.w));
    return ((a.x + a.y) + (b.x + b.y)) + ((c.x + c.y) + (d.x + d.y));
}

// The per-thread partial of every vectorized rung (float4 onward). Worker g of W (g = global thread index, W = all
// threads of the grid). With h = head_count(x, n), V = Vec<T>::N, nv = (n - h) / V vectors and r = n - h - nv * V tail
// elements, worker g computes, left to right from acc = 0.0f:
//   acc += x[g]                              if g < h          (scalar head: x need not be 16-byte aligned)
//   acc += vec_sum(x + h + v * V)            for v = g, g + W, g + 2W, ... < nv
//   acc += x[h + nv * V + g]                 if g < r          (scalar tail)
template <typename T>
__device__ __forceinline__ float thread_sum_vec(const T* __restrict__ x, i64 n, i64 g, i64 W) {
    constexpr int V = Vec<T>::N;
    const i64 h = head_count(x, n);
    const i64 nv = (n - h) / V;
    const i64 t0 = h + nv * V;
    float acc = 0.0f;
    if (g < h) acc += tcr::to_float(x[g]);
    const T* xv = x + h;
    for (i64 v = g; v < nv; v += W) acc += vec_sum(xv + v * V);
    if (g < n - t0) acc += tcr::to_float(x[t0 + g]);
    return acc;
}

// The last warp of the sequential tree with the loop unrolled and no __syncthreads (seed 002 V4 `reduceWarp`, seed 004
// reduce4). Called by threads 0..31 after s[0..64) holds the tree at s = 32. The seeds rely on the warp running in
// lockstep through a volatile pointer; since Volta (independent thread scheduling) that is a race, so every step reads
// both operands, __syncwarp()s, then writes (the form NVIDIA's Volta tuning guide gives). The additions are exactly
// those of tree(): s[t] = s[t] + s[t + off] for off = 32 (if BLOCK >= 64), 16, 8, 4, 2, 1. Lanes t >= off compute
// values nobody reads (seed 002 explains why they may). Returns s[0]'s final value in lane 0.
template <int BLOCK>
__device__ __forceinline__ float warp_tree_smem(volatile float* s, unsigned tid) {
    float v = s[tid];
#pragma unroll
    for (int off = 32; off > 0; off >>= 1) {
        if (BLOCK >= 2 * off) {
            v += s[tid + off];
            __syncwarp();
            s[tid] = v;
            __syncwarp();
        }
    }
    return v;
}

// The completely unrolled sequential tree of a BLOCK-thread block (seed 002 V5 / seed 004 reduce5): v is this
// thread's value; computes tree(v[0..BLOCK)) in smem (BLOCK floats) and returns it in thread 0. Seed 002's templated
// kernel puts __syncthreads() inside `if (tid < s)`, which is undefined behaviour (a barrier not reached by the whole
// block); here every barrier is outside the branch.
template <int BLOCK>
__device__ __forceinline__ float tree_unrolled(float v, float* sdata) {
    static_assert(BLOCK >= 64 && BLOCK <= 1024 && (BLOCK & (BLOCK - 1)) == 0, "BLOCK: power of two in [64, 1024]");
    const unsigned tid = threadIdx.x;
    sdata[tid] = v;
    __syncthreads();
    if (BLOCK >= 1024) { if (tid < 512) sdata[tid] = v = v + sdata[tid + 512]; __syncthreads(); }
    if (BLOCK >= 512) { if (tid < 256) sdata[tid] = v = v + sdata[tid + 256]; __syncthreads(); }
    if (BLOCK >= 256) { if (tid < 128) sdata[tid] = v = v + sdata[tid + 128]; __syncthreads(); }
    if (BLOCK >= 128) { if (tid < 64) sdata[tid] = v = v + sdata[tid + 64]; __syncthreads(); }
    if (tid < 32) v = warp_tree_smem<BLOCK>(sdata, tid);
    return v;
}

}  // namespace lad

// ================================================================================================= small kernels

// Zeroes the fp32 accumulator of the atomic rungs (a launch of their plan, before the atomics).
__global__ void ladder_zero(float* acc) { *acc = 0.0f; }

// Rounds the fp32 accumulator of the atomic rungs to the output dtype (only planned when out is not float32).
template <typename OutT>
__global__ void ladder_convert(const float* acc, OutT* out) { out[0] = tcr::from_float<OutT>(*acc); }

// ================================================================================================= the rungs

// Rung "ladder_atomic". seed 003 v0 (naive): one global atomicAdd per element.
// Thread i (grid of ceil(n / blockDim) blocks) does atomicAdd(acc, x[i]) on an fp32 accumulator that the plan
// zeroed first. Order of additions: whatever order the memory system serialises the n atomics in; NOT deterministic
// (the atomic order is the point of this rung: seed 003 measures it at 1.5% of peak).
template <typename T>
__global__ void ladder_atomic(const T* __restrict__ x, i64 n, float* acc, float* ws, unsigned* counters) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(acc, tcr::to_float(x[i]));
}

// Rung "ladder_interleaved_divergent". seed 004 reduce0 / seed 003 v1: interleaved addressing with `tid % (2*s)`
// (divergent branches: at step s only every 2s-th thread works). One element per thread, block of blockDim threads
// (a power of two; dynamic shared memory of blockDim floats).
// Order: block b computes itree(v[0..B)) with v[t] = x[b*B + t] (0.0f past n) and writes it as partial b.
template <typename T, typename OutT>
__global__ void ladder_reduce0(const T* __restrict__ x, i64 n, OutT* out, float* ws, unsigned* counters) {
    extern __shared__ float sdata[];
    const unsigned tid = threadIdx.x;
    const i64 i = (i64)blockIdx.x * blockDim.x + tid;
    sdata[tid] = (i < n) ? tcr::to_float(x[i]) : 0.0f;
    __syncthreads();
    for (unsigned s = 1; s < blockDim.x; s *= 2) {
        if ((tid % (2 * s)) == 0) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = tcr::from_float<OutT>(sdata[0]);
}

// Rung "ladder_interleaved". seed 004 reduce1: interleaved addressing with a strided index (index = 2*s*tid): no
// divergence within warps any more, but shared-memory bank conflicts (seed 002 V1's analysis).
// Order: identical to reduce0 (itree: the same additions, only which thread performs them changed).
template <typename T, typename OutT>
__global__ void ladder_reduce1(const T* __restrict__ x, i64 n, OutT* out, float* ws, unsigned* counters) {
    extern __shared__ float sdata[];
    const unsigned tid = threadIdx.x;
    const i64 i = (i64)blockIdx.x * blockDim.x + tid;
    sdata[tid] = (i < n) ? tcr::to_float(x[i]) : 0.0f;
    __syncthreads();
    for (unsigned s = 1; s < blockDim.x; s *= 2) {
        const unsigned index = 2 * s * tid;
        if (index < blockDim.x) sdata[index] += sdata[index + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = tcr::from_float<OutT>(sdata[0]);
}

// Rung "ladder_sequential". seed 004 reduce2 / seed 002 V2 / seed 003 v2: sequential addressing (thread t adds
// v[t + s]): conflict-free, the working threads are contiguous.
// Order: block b computes tree(v[0..B)) with v[t] = x[b*B + t] (0.0f past n).
template <typename T, typename OutT>
__global__ void ladder_reduce2(const T* __restrict__ x, i64 n, OutT* out, float* ws, unsigned* counters) {
    extern __shared__ float sdata[];
    const unsigned tid = threadIdx.x;
    const i64 i = (i64)blockIdx.x * blockDim.x + tid;
    sdata[tid] = (i < n) ? tcr::to_float(x[i]) : 0.0f;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = tcr::from_float<OutT>(sdata[0]);
}

// Rung "ladder_first_add". seed 004 reduce3 / seed 002 V3 / seed 003 v3: first add during load (each block covers
// 2*B elements, half the blocks; no thread idles in the first step).
// Order: v[t] = x[b*2B + t] + x[b*2B + t + B] (one load, or 0.0f, where past n); then tree(v[0..B)).
template <typename T, typename OutT>
__global__ void ladder_reduce3(const T* __restrict__ x, i64 n, OutT* out, float* ws, unsigned* counters) {
    extern __shared__ float sdata[];
    const unsigned tid = threadIdx.x;
    const i64 i = (i64)blockIdx.x * (2 * (i64)blockDim.x) + tid;
    float v = (i < n) ? tcr::to_float(x[i]) : 0.0f;
    if (i + blockDim.x < n) v += tcr::to_float(x[i + blockDim.x]);
    sdata[tid] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = tcr::from_float<OutT>(sdata[0]);
}

// Rung "ladder_unroll_last_warp". seed 004 reduce4 / seed 002 V4: as reduce3, but the loop stops at s = 64 and the
// last warp's six steps are unrolled without __syncthreads (lad::warp_tree_smem; needs blockDim >= 64).
// Order: identical to reduce3 (the same tree).
template <typename T, typename OutT>
__global__ void ladder_reduce4(const T* __restrict__ x, i64 n, OutT* out, float* ws, unsigned* counters) {
    extern __shared__ float sdata[];
    const unsigned tid = threadIdx.x;
    const i64 i = (i64)blockIdx.x * (2 * (i64)blockDim.x) + tid;
    float v = (i < n) ? tcr::to_float(x[i]) : 0.0f;
    if (i + blockDim.x < n) v += tcr::to_float(x[i + blockDim.x]);
    sdata[tid] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 32; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid < 32) v = lad::warp_tree_smem<64>(sdata, tid);
    if (tid == 0) out[blockIdx.x] = tcr::from_float<OutT>(v);
}

// Rung "ladder_unroll_complete". seed 004 reduce5 / seed 002 V5: the block size is a template parameter (the planner
// picks it per launch, like seed 002's `switch (block_size)`), so every step of the tree is unrolled and the dead ones
// are removed at compile time. Seed 002's `fold`: each thread first folds FOLD elements strided by BLOCK (FOLD = 2 is
// reduce3-5's first add; the plan uses 2 so that the unrolling is the only change from reduce4).
// Order: v[t] = x[i0]; v[t] += x[i0 + f*BLOCK] for f = 1..FOLD-1 (i0 = b*BLOCK*FOLD + t; absent terms skipped, 0.0f
// if i0 >= n); then tree(v[0..BLOCK)).
template <typename T, typename OutT, int BLOCK, int FOLD>
__global__ void __launch_bounds__(BLOCK) ladder_reduce5(const T* __restrict__ x, i64 n, OutT* out, float* ws,
                                                        unsigned* counters) {
    __shared__ float sdata[BLOCK];
    const unsigned tid = threadIdx.x;
    const i64 i0 = (i64)blockIdx.x * ((i64)BLOCK * FOLD) + tid;
    float v = (i0 < n) ? tcr::to_float(x[i0]) : 0.0f;
#pragma unroll
    for (int f = 1; f < FOLD; ++f) {
        const i64 i = i0 + (i64)f * BLOCK;
        if (i < n) v += tcr::to_float(x[i]);
    }
    v = lad::tree_unrolled<BLOCK>(v, sdata);
    if (tid == 0) out[blockIdx.x] = tcr::from_float<OutT>(v);
}

// Rung "ladder_multi_element". seed 004 reduce6 / seed 001 "opt" / seed 002 V6 (algorithm cascading): a grid-stride
// loop, so each thread adds many elements before the tree; the plan sizes the grid to fill the GPU once (seed 001:
// SMs x resident blocks per SM, which removes the tail effect), then one more single-block launch of this kernel sums
// the per-block partials.
// Order: with G = gridDim.x, thread t of block b starts v = 0.0f and for i = b*2*BLOCK + t, i + 2*BLOCK*G, ... < n
// does v += x[i], then v += x[i + BLOCK] if i + BLOCK < n; then tree(v[0..BLOCK)) as in reduce5.
template <typename T, typename OutT, int BLOCK>
__global__ void __launch_bounds__(BLOCK) ladder_reduce6(const T* __restrict__ x, i64 n, OutT* out, float* ws,
                                                        unsigned* counters) {
    __shared__ float sdata[BLOCK];
    const unsigned tid = threadIdx.x;
    const i64 step = 2 * (i64)BLOCK * gridDim.x;
    float v = 0.0f;
    for (i64 i = (i64)blockIdx.x * (2 * BLOCK) + tid; i < n; i += step) {
        v += tcr::to_float(x[i]);
        if (i + BLOCK < n) v += tcr::to_float(x[i + BLOCK]);
    }
    v = lad::tree_unrolled<BLOCK>(v, sdata);
    if (tid == 0) out[blockIdx.x] = tcr::from_float<OutT>(v);
}

// Rung "ladder_warp_shuffle". seed 004 reduce7 / seed 001 reduce_sum_shuffle and reduce_sum_shuffle_cg: reduce6's
// grid-stride loop, then the block reduces in registers with warp shuffles (one __syncthreads instead of one per
// step). Seed 001's cg::reduce(warp, v, cg::plus<float>()) leaves the order to the library; here the fold is
// tcr::block_fold (xor butterfly), whose order common.cuh fixes (lane 0 gets the same bits as a shfl_down ladder).
// Order: the per-thread loop of reduce6, then block_fold.
template <typename T, typename OutT, int BLOCK>
__global__ void __launch_bounds__(BLOCK) ladder_reduce7(const T* __restrict__ x, i64 n, OutT* out, float* ws,
                                                        unsigned* counters) {
    __shared__ float smem[32];
    const unsigned tid = threadIdx.x;
    const i64 step = 2 * (i64)BLOCK * gridDim.x;
    float v = 0.0f;
    for (i64 i = (i64)blockIdx.x * (2 * BLOCK) + tid; i < n; i += step) {
        v += tcr::to_float(x[i]);
        if (i + BLOCK < n) v += tcr::to_float(x[i + BLOCK]);
    }
    v = tcr::block_fold<BLOCK>(v, smem);
    if (tid == 0) out[blockIdx.x] = tcr::from_float<OutT>(v);
}

// Rung "ladder_float4". seed 003 v4-v5 (float4 loads + warp shuffle) in seed 001's reduce_max_x4 form: reduce7 with
// 16-byte vector loads (float4, or 8 halves) in the GPU-filling grid-stride loop, scalar head and tail so that any
// start address works (x[1:]). Seed 003 v4/v5 give each thread one float4 and launch n/(4B) blocks; keeping reduce7's
// grid makes the vector width the only change. Two launches (the second: one block over the partials).
// Order: lad::thread_sum_vec with g = b*BLOCK + t, W = G*BLOCK; then block_fold.
template <typename T, typename OutT, int BLOCK>
__global__ void __launch_bounds__(BLOCK) ladder_float4(const T* __restrict__ x, i64 n, OutT* out, float* ws,
                                                       unsigned* counters) {
    __shared__ float smem[32];
    const i64 g = (i64)blockIdx.x * BLOCK + threadIdx.x;
    float v = lad::thread_sum_vec(x, n, g, (i64)BLOCK * gridDim.x);
    v = tcr::block_fold<BLOCK>(v, smem);
    if (threadIdx.x == 0) out[blockIdx.x] = tcr::from_float<OutT>(v);
}

// Rung "ladder_atomic_per_block". seed 003 v6 / seed 001 reduce_max_atomic (for sums): ladder_float4's single
// launch, then one float atomicAdd per block into the fp32 accumulator (zeroed by the plan first) instead of a second
// kernel. Order: per block as ladder_float4; the G block sums are then added in whatever order the atomics land: NOT
// deterministic (the atomic order is the point of this rung).
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) ladder_atomic_block(const T* __restrict__ x, i64 n, float* acc, float* ws,
                                                             unsigned* counters) {
    __shared__ float smem[32];
    const i64 g = (i64)blockIdx.x * BLOCK + threadIdx.x;
    float v = lad::thread_sum_vec(x, n, g, (i64)BLOCK * gridDim.x);
    v = tcr::block_fold<BLOCK>(v, smem);
    if (threadIdx.x == 0) atomicAdd(acc, v);
}

// Rung "ladder_last_block". Single pass, deterministic (cuda-samples threadFenceReduction): ladder_float4's block
// sums go to ws[b]; each block fences and takes a ticket (tcr::arrive_last on counters[0]); the last one sums the G
// partials in a fixed order.
// Order: per block as ladder_float4, partial b -> ws[b]; then "serial partials" of common.cuh over ws[0..G)
// (tcr::combine_partials: thread t sums ws[t], ws[t + BLOCK], ... from 0.0f, then block_fold).
template <typename T, typename OutT, int BLOCK>
__global__ void __launch_bounds__(BLOCK) ladder_last_block(const T* __restrict__ x, i64 n, OutT* out, float* ws,
                                                           unsigned* counters) {
    __shared__ float smem[32];
    const i64 g = (i64)blockIdx.x * BLOCK + threadIdx.x;
    float v = lad::thread_sum_vec(x, n, g, (i64)BLOCK * gridDim.x);
    v = tcr::block_fold<BLOCK>(v, smem);
    if (threadIdx.x == 0) ws[blockIdx.x] = v;
    if (tcr::arrive_last(counters, gridDim.x)) {
        v = tcr::combine_partials<BLOCK>(ws, gridDim.x, 1, smem);
        if (threadIdx.x == 0) out[0] = tcr::from_float<OutT>(v);
    }
}

// Rung "ladder_grid_sync". Single pass, deterministic, with a cooperative launch (cuda-samples reductionMultiBlockCG):
// every block writes its partial, cg::this_grid().sync() makes them visible, block 0 sums them. The plan launches
// at most (SMs x MINB) blocks so that all of them are co-resident (MINB = resident blocks per SM that
// __launch_bounds__ guarantees registers for).
// Order: identical to ladder_last_block for the same grid (block 0 does the serial-partials combine).
template <typename T, typename OutT, int BLOCK, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB) ladder_grid_sync(const T* __restrict__ x, i64 n, OutT* out,
                                                                float* ws, unsigned* counters) {
    __shared__ float smem[32];
    const i64 g = (i64)blockIdx.x * BLOCK + threadIdx.x;
    float v = lad::thread_sum_vec(x, n, g, (i64)BLOCK * gridDim.x);
    v = tcr::block_fold<BLOCK>(v, smem);
    if (threadIdx.x == 0) ws[blockIdx.x] = v;
    cg::this_grid().sync();
    if (blockIdx.x == 0) {
        v = tcr::combine_partials<BLOCK>(ws, gridDim.x, 1, smem);
        if (threadIdx.x == 0) out[0] = tcr::from_float<OutT>(v);
    }
}

// Rung "ladder_cluster". seed 003 v7: Hopper thread-block clusters (sm_90). Blocks of a cluster of CLUSTER (1-D,
// compile-time __cluster_dims__; 8 is the portable maximum, seed 003's 16 needs an opt-in launch attribute) publish
// their block sums in shared memory; warp 0 of the cluster's rank-0 block reads them through distributed shared memory
// (map_shared_rank) and folds them. Seed 003 then does one float atomicAdd per cluster; this rung finishes
// DETERMINISTICALLY instead: cluster sums go to ws[cluster] and the last cluster (tcr::arrive_last over the rank-0
// blocks) combines them. Seed 003's kernel also lets blocks exit before rank 0 has read their shared memory; a second
// cluster.sync() keeps it alive.
// Order: per block as ladder_float4 (g = b*BLOCK + t over the whole grid); cluster c's sum = warp_fold over lanes
// r = 0..31 holding block sum of rank r (block c*CLUSTER + r) for r < CLUSTER, 0.0f otherwise; then "serial partials"
// over the G / CLUSTER cluster sums.
// Compiled for sm_90 and newer only (__cluster_dims__ is an error before Hopper); the Method's requires_cc=(9, 0)
// refuses to plan it elsewhere.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
template <typename T, typename OutT, int BLOCK, int CLUSTER>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(BLOCK)
    ladder_cluster(const T* __restrict__ x, i64 n, OutT* out, float* ws, unsigned* counters) {
    static_assert(CLUSTER >= 1 && CLUSTER <= 32, "cluster sums are folded by one warp");
    __shared__ float smem[32];
    __shared__ float block_sum;
    cg::cluster_group cluster = cg::this_cluster();
    const i64 g = (i64)blockIdx.x * BLOCK + threadIdx.x;
    float v = lad::thread_sum_vec(x, n, g, (i64)BLOCK * gridDim.x);
    v = tcr::block_fold<BLOCK>(v, smem);
    if (threadIdx.x == 0) block_sum = v;
    cluster.sync();  // every block of the cluster has published block_sum
    const unsigned rank = cluster.block_rank();
    float c = 0.0f;
    if (rank == 0 && threadIdx.x < 32) {
        c = threadIdx.x < CLUSTER ? *cluster.map_shared_rank(&block_sum, threadIdx.x) : 0.0f;
        c = tcr::warp_fold(c);
    }
    cluster.sync();  // peers keep their shared memory until rank 0 has read it
    if (rank == 0) {
        const unsigned clusters = gridDim.x / CLUSTER;
        if (threadIdx.x == 0) ws[blockIdx.x / CLUSTER] = c;
        if (tcr::arrive_last(counters, clusters)) {
            v = tcr::combine_partials<BLOCK>(ws, clusters, 1, smem);
            if (threadIdx.x == 0) out[0] = tcr::from_float<OutT>(v);
        }
    }
}
#endif  // __CUDA_ARCH__ >= 900
