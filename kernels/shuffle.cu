// shuffle.cu: method "shuffle", the modern CUDA-core baseline (fp16, bf16, fp8 e4m3/e5m2 and fp32 input, fp32
// accumulation).
//
// Seeds: 003 v4-v6 (16-byte vector loads, __shfl_xor_sync warp reduction, one shared-memory hop per block), 001/004
// reduce7 (many elements per thread, warp shuffle), CUB-like two-level combination made deterministic and single-pass
// with the last-block-done pattern (cuda-samples threadFenceReduction) instead of v6's float atomics.
//
// Common to every kernel here:
//   - VEC = 16 / sizeof(T) elements (16 fp8, 8 fp16 or bf16, 4 floats) form a "chunk"; a chunk is read with one
//     16-byte load when the plan says the addresses allow it (ALIGNED) and the chunk is whole, else with VEC masked
//     scalar loads. The order of additions never depends on how a chunk was loaded.
//   - Every addition is a round-to-nearest fp32 add (no FMA contraction: there are no products; no fast-math).
//     Elements are converted to fp32 exactly (tcr::bits_to_float; fp8 chunks two at a time, chunk_pair). An
//     accumulator starts at +0.0f and the elements of a chunk are added in increasing address order. Masked
//     (absent) elements are added as +0.0f, which never changes an accumulator that started at +0.0f, so "skipped"
//     and "added as +0.0f" are the same bits.
//   - UNROLL only decides how many chunks are in flight per thread; it never changes the order of additions.
//     MINB is the blocks per SM passed to __launch_bounds__ (a register cap the planner relies on for its grids);
//     it does not change the order either.
//   - The canonical folds (tcr::warp_fold, tcr::block_fold, serial partials) are documented in common.cuh.
//   - 64-bit indexing everywhere. Deterministic: no float atomics; the last block combines partials in a fixed order
//     and resets its counter to zero.
//   - The result (fp32) is rounded once to OutT (float, __half, double) by tcr::from_float.
#include "common.cuh"

using tcr::i64;

namespace shuffle_detail {

template <typename T>
struct Vec {
    static constexpr int N = 16 / (int)sizeof(T);
};

// The raw bits of the element at p, in the low sizeof(T) * 8 bits.
template <typename T>
__device__ __forceinline__ unsigned load_bits(const T* p) {
    if constexpr (sizeof(T) == 4) return __ldg(reinterpret_cast<const unsigned*>(p));
    else if constexpr (sizeof(T) == 2) return (unsigned)__ldg(reinterpret_cast<const unsigned short*>(p));
    else return (unsigned)__ldg(reinterpret_cast<const unsigned char*>(p));
}

__device__ __forceinline__ uint4 zero4() { return make_uint4(0u, 0u, 0u, 0u); }

// The chunk p[0 .. min(valid, VEC)) as raw bits; elements at or past `valid` are +0.0. valid >= 1. A whole chunk is
// one 16-byte load: ld.global.nc (LOAD 0) or, LOAD 1, evict-first in L1 and L2 (tcr::load16's MODE 3 under `policy`).
template <typename T, bool VECTOR, int LOAD = 0>
__device__ __forceinline__ uint4 load_chunk(const T* __restrict__ p, i64 valid, unsigned long long policy = 0ull) {
    constexpr int N = Vec<T>::N, S = (int)sizeof(T);
    if (VECTOR && valid >= N) return tcr::load16<LOAD == 1 ? 3 : 0>(reinterpret_cast<const uint4*>(p), policy);
    unsigned w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int e = 0; e < N; ++e)
        if (e < valid) w[(e * S) / 4] |= load_bits(p + e) << (8 * ((e * S) % 4));
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// Element e of a chunk, converted to fp32 exactly (e a compile-time constant after unrolling).
template <typename T>
__device__ __forceinline__ float chunk_elem(const uint4& v, int e) {
    constexpr int S = (int)sizeof(T);
    const unsigned w4[4] = {v.x, v.y, v.z, v.w};
    return tcr::bits_to_float<T>(w4[(e * S) / 4] >> (8 * ((e * S) % 4)));
}

// Elements 2p and 2p + 1 of a chunk, converted to fp32 exactly (p a compile-time constant after unrolling). fp8
// pairs take one cvt.rn.f16x2.e4m3x2 and two fp16 -> fp32 conversions: the same values as chunk_elem's one conversion
// per element, in half the conversion instructions. The pair comes from tcr::fp8x4_to_half2x2, which reads an e4m3
// word's high half as a 16-bit register, without a shift (the other half's conversion is dead code, removed).
template <typename T>
__device__ __forceinline__ float2 chunk_pair(const uint4& v, int p) {
    if constexpr (tcr::is_fp8<T>::value) {
        const unsigned w4[4] = {v.x, v.y, v.z, v.w};
        unsigned lo, hi;
        tcr::fp8x4_to_half2x2<T>(w4[p / 2], lo, hi);
        const unsigned h2 = p % 2 ? hi : lo;
        return make_float2(tcr::bits_to_float<__half>(h2), tcr::bits_to_float<__half>(h2 >> 16));
    } else {
        return make_float2(chunk_elem<T>(v, 2 * p), chunk_elem<T>(v, 2 * p + 1));
    }
}

// acc += element 0, then element 1, ..., element VEC-1 of the chunk (increasing address order).
template <typename T>
__device__ __forceinline__ void add_chunk(float& acc, const uint4& v) {
#pragma unroll
    for (int p = 0; p < Vec<T>::N / 2; ++p) {
        const float2 f = chunk_pair<T>(v, p);
        acc += f.x;
        acc += f.y;
    }
}

// acc[e] += element e of the chunk, for e = 0..VEC-1 (one accumulator per column).
template <typename T>
__device__ __forceinline__ void add_cols(float (&acc)[Vec<T>::N], const uint4& v) {
#pragma unroll
    for (int p = 0; p < Vec<T>::N / 2; ++p) {
        const float2 f = chunk_pair<T>(v, p);
        acc[2 * p] += f.x;
        acc[2 * p + 1] += f.y;
    }
}

// shuffle_cols' step 1: acc[e] += element e of the chunks q[0], q[step], q[2 step], ... (`left` of them, in that
// order), UNROLL loads in flight; the last partial round loads its chunks together. VECTOR: every chunk is whole and
// 16-byte aligned (else masked scalar loads of `valid` elements).
template <typename T, int UNROLL, bool VECTOR, int LOAD>
__device__ __forceinline__ void walk_column(float (&acc)[Vec<T>::N], const T* __restrict__ q, i64 step, i64 left,
                                            i64 valid, unsigned long long policy) {
    for (; left >= UNROLL; left -= UNROLL, q += UNROLL * step) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = load_chunk<T, VECTOR, LOAD>(q + u * step, valid, policy);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) add_cols<T>(acc, v[u]);
    }
    if (left > 0) {  // an absent row adds +0.0f (acc is never -0.0f)
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            v[u] = u < left ? load_chunk<T, VECTOR, LOAD>(q + u * step, valid, policy) : zero4();
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) add_cols<T>(acc, v[u]);
    }
}

// Bytes 16q .. 16q + 15 of the run of N outputs from_float<OutT>(v[0..N)) (N * sizeof(OutT) a multiple of 16): its
// pairs q * PAIRS .. q * PAIRS + PAIRS - 1 (tcr::output_pair), PAIRS = 16 / (2 * sizeof(OutT)).
template <typename OutT, int N>
__device__ __forceinline__ uint4 run_word(const float (&v)[N], int q) {
    constexpr int PAIRS = 16 / (2 * (int)sizeof(OutT));
    unsigned w[4];
#pragma unroll
    for (int k = 0; k < PAIRS; ++k) {
        const int e = 2 * (PAIRS * q + k);
        tcr::pair_bits(tcr::output_pair<OutT>(v[e], v[e + 1]), w + k * (4 / PAIRS));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// Stores N consecutive outputs dst[0..valid): one or more 16-byte stores when all N are valid and dst is 16-byte
// aligned, scalar stores otherwise. Rounding to OutT (tcr::from_float) is the same either way.
template <typename OutT, int N>
__device__ __forceinline__ void store_run(OutT* __restrict__ dst, const float (&v)[N], i64 valid) {
    constexpr int BYTES = N * (int)sizeof(OutT);
    if constexpr (BYTES % 16 == 0) {
        if (valid >= N && (((unsigned long long)dst) & 15ull) == 0ull) {
#pragma unroll
            for (int q = 0; q < BYTES / 16; ++q) reinterpret_cast<uint4*>(dst)[q] = run_word<OutT, N>(v, q);
            return;
        }
    }
#pragma unroll
    for (int e = 0; e < N; ++e)
        if (e < valid) dst[e] = tcr::from_float<OutT>(v[e]);
}

// A warp's 32 runs of N outputs, lane L's at dst + L * N (dst 16-byte aligned, every run whole), stored through
// `stage` (32 * P 16-byte words of shared memory, P = N * sizeof(OutT) / 16) so that each of the P store
// instructions writes 512 contiguous bytes (16 bytes per lane) instead of 32 pieces P * 16 bytes apart. Slot of lane
// L's word q: L * P + (q ^ swz(L)), swz(L) = (L / (8 / P)) % P, so that the 8 lanes of each 128-bit shared-memory
// phase hit 8 distinct 16-byte bank groups on the way in and on the way out. The same values and rounding as
// store_run's.
template <typename OutT, int N>
__device__ __forceinline__ void store_warp_runs(OutT* __restrict__ dst, const float (&v)[N], uint4* __restrict__ stage,
                                                int lane) {
    constexpr int P = N * (int)sizeof(OutT) / 16;
    static_assert(P >= 1 && P <= 8 && (P & (P - 1)) == 0, "runs of 16, 32, 64 or 128 bytes");
    constexpr int GROUP = 8 / P;  // lanes per swizzle value
#pragma unroll
    for (int q = 0; q < P; ++q) stage[lane * P + (q ^ ((lane / GROUP) % P))] = run_word<OutT, N>(v, q);
    __syncwarp();
#pragma unroll
    for (int q = 0; q < P; ++q) {
        const int g = q * 32 + lane;  // the warp's 16-byte word g: lane g / P's word g % P
        const int o = g / P;
        reinterpret_cast<uint4*>(dst)[g] = stage[o * P + ((g % P) ^ ((o / GROUP) % P))];
    }
    __syncwarp();  // stage is reused by the next work item
}

}  // namespace shuffle_detail

using namespace shuffle_detail;

// =====================================================================================================================
// shuffle_flat<T, OutT, BLOCK, UNROLL, ALIGNED, MINB, ROUNDS = 0>: full sum of n contiguous elements x[0..n).
//
// Variant: seed 003 v5 (vector loads, warp shuffle, one smem hop) made single-pass and deterministic (v6 without its
// float atomic: last-block-done), with reduce7's grid-stride "many elements per thread"; ROUNDS > 0: a one-pass grid
// of short blocks instead (the walk of Triton's and inductor's kernels, as tc_flat's ROUNDS).
//
// Order of additions (Tg = gridDim.x * BLOCK threads, thread g = blockIdx.x * BLOCK + threadIdx.x):
//   head = 0 if ALIGNED, else min(n, ((16 - (address of x) % 16) % 16) / sizeof(T)) elements before the first
//   16-byte boundary; nv = (n - head) / VEC whole chunks start at x + head (chunk v = x[head + v*VEC ..]); the tail
//   is x[head + nv*VEC .. n).
//   Per thread: acc = +0.0f. Thread 0 of block 0 first adds the head x[0], ..., x[head-1], then the tail
//   x[head + nv*VEC], ..., x[n-1], one at a time in increasing order. Then every thread adds its chunks
//   v = g, g + Tg, g + 2*Tg, ... (v < nv) in increasing v, each chunk's VEC elements in increasing order, into the
//   same acc (UNROLL chunks of one thread are loaded together: v = it*Tg*UNROLL + u*Tg + g, u = 0..UNROLL-1).
//   ROUNDS > 0: block b owns chunks [b*P, min((b+1)*P, nv)), P = BLOCK*UNROLL*ROUNDS, and its thread t adds chunks
//   b*P + t, b*P + t + BLOCK, b*P + t + 2*BLOCK, ... of that range in increasing order instead (loaded UNROLL at a
//   time: b*P + it*BLOCK*UNROLL + u*BLOCK + t).
//   Per block: tcr::block_fold<BLOCK>(acc) (warp_fold in each warp, lane 0 of warp w -> smem[w], warp 0 folds
//   smem[0..32) with 0.0f past the last warp).
//   Across blocks: if gridDim.x == 1 the block's value is the result. Else block b's value p[b] goes to the last
//   block to arrive (counters[0]; tcr::combine_grid_slots), which computes combine_partials' order: thread i adds
//   p[i], p[i + BLOCK], ... to +0.0f in increasing index, then block_fold. That value is the result. ROUNDS > 0: in
//   two levels (combine_grid_slots' TWO_LEVEL): each group of BLOCK consecutive blocks' partials, then the groups'
//   totals. out[0] = from_float<OutT>(result).
// No workspace; when gridDim.x > 1, counters: 1 (ROUNDS > 0: groups + 1), then the partials' flagged 64-bit slots.
// =====================================================================================================================
// Everything up to the block's total (valid in thread 0).
template <typename T, int BLOCK, int UNROLL, bool ALIGNED, int ROUNDS>
__device__ __forceinline__ float shuffle_flat_block_total(const T* __restrict__ x, i64 n, float* smem) {
    static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: a multiple of 32, at most 1024");
    constexpr int N = Vec<T>::N;

    i64 head = 0;
    if constexpr (!ALIGNED) {
        head = (i64)(((16u - (unsigned)(((unsigned long long)x) & 15ull)) & 15u) / (unsigned)sizeof(T));
        if (head > n) head = n;
    }
    const i64 nv_all = (n - head) / N;
    // ROUNDS > 0: this block's range of chunks, walked as a grid of one block (threads = BLOCK, g = threadIdx.x)
    const i64 first = ROUNDS > 0 ? (i64)blockIdx.x * BLOCK * UNROLL * ROUNDS : 0;
    const i64 nv = ROUNDS > 0 ? min((i64)BLOCK * UNROLL * ROUNDS, nv_all - first) : nv_all;
    const uint4* __restrict__ xv = reinterpret_cast<const uint4*>(x + head) + first;
    const i64 threads = ROUNDS > 0 ? (i64)BLOCK : (i64)gridDim.x * BLOCK;
    const i64 g = ROUNDS > 0 ? (i64)threadIdx.x : (i64)blockIdx.x * BLOCK + threadIdx.x;

    float acc = 0.0f;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (i64 e = 0; e < head; ++e) acc += tcr::bits_to_float<T>(load_bits(x + e));
        for (i64 e = head + nv_all * N; e < n; ++e) acc += tcr::bits_to_float<T>(load_bits(x + e));
    }
    const i64 step = threads * UNROLL;
    i64 base = 0;
    for (; base + step <= nv; base += step) {  // whole rounds: every thread has UNROLL chunks
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = __ldg(xv + base + u * threads + g);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) add_chunk<T>(acc, v[u]);
    }
    if (base < nv) {  // the last partial round (chunks past nv are absent)
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const i64 i = base + u * threads + g;
            v[u] = i < nv ? __ldg(xv + i) : zero4();
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) add_chunk<T>(acc, v[u]);
    }

    return tcr::block_fold<BLOCK>(acc, smem);
}

template <typename T, typename OutT, int BLOCK, int UNROLL, bool ALIGNED, int MINB, int ROUNDS = 0>
__global__ void __launch_bounds__(BLOCK, MINB) shuffle_flat(const T* __restrict__ x, i64 n, OutT* __restrict__ out,
                                                      unsigned* __restrict__ counters) {
    __shared__ float smem[32];
    float s = shuffle_flat_block_total<T, BLOCK, UNROLL, ALIGNED, ROUNDS>(x, n, smem);
    if (gridDim.x == 1) {
        if (threadIdx.x == 0) out[0] = tcr::from_float<OutT>(s);
        return;
    }
    if (tcr::combine_grid_slots<BLOCK, (ROUNDS > 0)>(s, counters, smem, &s) && threadIdx.x == 0) {
        out[0] = tcr::from_float<OutT>(s);
    }
}

// shuffle_flat_cluster: shuffle_flat's walk (ROUNDS = 0) on a grid of one thread-block cluster of CLUSTER blocks
// (2..16; sm_90), the partials combined through distributed shared memory (tcr::combine_cluster: the same additions
// in the same order as combine_partials), no workspace or counters: the same bits as shuffle_flat on the same grid.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
template <typename T, typename OutT, int BLOCK, int UNROLL, bool ALIGNED, int MINB, int CLUSTER>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(BLOCK, MINB)
    shuffle_flat_cluster(const T* __restrict__ x, i64 n, OutT* __restrict__ out) {
    static_assert(CLUSTER >= 2 && CLUSTER <= 16, "a cluster of 2..16 blocks");
    __shared__ float smem[32];
    float s = shuffle_flat_block_total<T, BLOCK, UNROLL, ALIGNED, 0>(x, n, smem);
    if (tcr::combine_cluster<BLOCK>(s, smem, &s) && threadIdx.x == 0) out[0] = tcr::from_float<OutT>(s);
}
#endif

// One thread's part of a row (shuffle_rows, G >= 32): acc = +0.0f, then the chunks c, c + Q, c + 2Q, ... (< chunks)
// in increasing c, each chunk's elements in increasing order; rounds of UNROLL loads, then one last partial round
// with its loads issued together (an absent chunk adds +0.0f, and acc is never -0.0f: the same sums).
template <typename T, int UNROLL, bool ALIGNED, int LOAD>
__device__ __forceinline__ float walk_row(const T* __restrict__ rp, i64 k, i64 chunks, i64 c, i64 Q,
                                         unsigned long long policy) {
    constexpr int N = Vec<T>::N;
    float acc = 0.0f;
    for (; c + (UNROLL - 1) * Q < chunks; c += UNROLL * Q) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const i64 cc = c + u * Q;
            v[u] = load_chunk<T, ALIGNED, LOAD>(rp + cc * N, k - cc * N, policy);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) add_chunk<T>(acc, v[u]);
    }
    if (c < chunks) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const i64 cc = c + u * Q;
            v[u] = cc < chunks ? load_chunk<T, ALIGNED, LOAD>(rp + cc * N, k - cc * N, policy) : zero4();
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) add_chunk<T>(acc, v[u]);
    }
    return acc;
}

// Combines per-warp totals across groups of G consecutive threads (G a multiple of 32 below BLOCK, dividing it):
// lane 0 of warp w stores smem[w]; the first warp of each group loads its group's G/32 totals (0.0f for lanes past
// them) and warp_folds, as tcr::block_combine does for a whole block. Every thread of the block calls it; the result
// is valid in the first warp of each group.
template <int G, int BLOCK>
__device__ __forceinline__ float group_combine(float warp_total, float* smem) {
    static_assert(G % 32 == 0 && G < BLOCK && BLOCK % G == 0, "G: a multiple of 32 dividing BLOCK, below it");
    constexpr int GW = G / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // smem is reused across rows
    if (lane == 0) smem[warp] = warp_total;
    __syncthreads();
    float v = 0.0f;
    if (warp % GW == 0) {
        v = lane < GW ? smem[warp + lane] : 0.0f;
        v = tcr::warp_fold(v);
    }
    return v;
}

// =====================================================================================================================
// shuffle_rows<T, OutT, BLOCK, UNROLL, G, ALIGNED, MINB, LOAD>: m rows of k elements, row i at x + i*ld;
// out[i] = sum of row i. LOAD: whole chunks through ld.global.nc (0) or with an L1 and L2 evict-first hint (1; the
// same values, so the same sums).
//
// Variant: seed 003 v5 / reduce7 per row: a row is a segment reduced by a group of G lanes (segmented
// __shfl_xor_sync, G a power of two <= 32: short rows, no shared memory), by a group of G/32 warps of a block (G = 64
// .. BLOCK/2: rows of a few hundred chunks, several rows per block) or by a whole block (G == BLOCK: long rows,
// block_fold, optionally split over `splits` blocks combined by the row's last block).
// ALIGNED: x and ld * sizeof(T) are multiples of 16 bytes (whole chunks use 16-byte loads); otherwise scalar loads.
// Chunk c of a row is its elements [c*VEC, min(k, c*VEC + VEC)); chunks = ceil(k / VEC).
//
// Order of additions, G <= 32 (splits must be 1):
//   Row i is owned by the group of G consecutive lanes; lane l (0 <= l < G) of the group: acc = +0.0f, then adds the
//   chunks c = l, l + G, l + 2G, ... (c < chunks) in increasing c, each chunk's elements in increasing order.
//   Then the group folds with __shfl_xor_sync over offsets G/2, G/4, ..., 1: v[l] = v[l] + v[l ^ off] (the G values
//   folded in halves: v[:G/2] + v[G/2:], then [:G/4] + [G/4:], ...). out[i] = from_float<OutT>(v[0]).
//   (Which block and which UNROLL slot handle row i: rows are dealt in tiles of UNROLL * BLOCK/G rows, grid-strided
//   over blocks; row = tile*UNROLL*(BLOCK/G) + u*(BLOCK/G) + threadIdx.x/G. This does not affect the order.)
// Order of additions, G a multiple of 32 (G == BLOCK: split s = 0..splits-1 of row i is handled by one block;
// G < BLOCK: splits must be 1, and BLOCK / G rows share a block, row = tile*(BLOCK/G) + threadIdx.x/G):
//   Thread t (0 <= t < G) of split s, with q = s*G + t and Q = splits*G: acc = +0.0f, then adds the chunks
//   c = q, q + Q, q + 2Q, ... (c < chunks) in increasing c, each chunk's elements in increasing order.
//   Then the G threads fold: tcr::warp_fold in each warp, then the group's G/32 warp totals are combined as
//   tcr::block_combine does for a block (the group's first warp loads them, 0.0f for lanes >= G/32, and
//   warp_folds): group_combine for G < BLOCK, tcr::block_fold<BLOCK> for G == BLOCK. If splits == 1 that is the
//   row's sum. Else the split's value
//   goes to ws[i*splits + s] and the last of the row's blocks to arrive (counters[i]) computes
//   tcr::combine_partials<BLOCK>(ws + i*splits, splits): thread t adds ws[i*splits + t], ws[i*splits + t + BLOCK],
//   ... to +0.0f in increasing index, then block_fold; that is the row's sum. out[i] = from_float<OutT>(sum).
//   (Work items (i, s) = (item / splits, item % splits) are grid-strided over blocks.)
// Workspace: m * splits floats and m counters when splits > 1, none otherwise.
// =====================================================================================================================
template <typename T, typename OutT, int BLOCK, int UNROLL, int G, bool ALIGNED, int MINB, int LOAD = 0>
__global__ void __launch_bounds__(BLOCK, MINB) shuffle_rows(const T* __restrict__ x, i64 m, i64 k, i64 ld,
                                                      OutT* __restrict__ out, float* __restrict__ ws,
                                                      unsigned* __restrict__ counters, i64 splits) {
    static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: a multiple of 32, at most 1024");
    static_assert(G >= 1 && G <= BLOCK && (G & (G - 1)) == 0 && BLOCK % G == 0,
                  "G: a power of two dividing BLOCK");
    constexpr int N = Vec<T>::N;
    const i64 chunks = (k + N - 1) / N;
    unsigned long long policy = 0ull;
    if constexpr (LOAD == 1) policy = tcr::evict_first_policy();

    if constexpr (G <= 32) {
        constexpr int RPB = BLOCK / G;                // rows per block per UNROLL slot
        constexpr i64 TILE = (i64)UNROLL * RPB;       // rows per block per round
        const int l = threadIdx.x & (G - 1);
        const i64 rib = threadIdx.x / G;
        for (i64 tile = blockIdx.x; tile * TILE < m; tile += gridDim.x) {  // block-uniform: shuffles see all lanes
            float acc[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) acc[u] = 0.0f;
            const i64 row0 = tile * TILE + rib;
            for (i64 c = l; c < chunks; c += G) {
                const i64 valid = k - c * N < N ? k - c * N : (i64)N;
                const T* __restrict__ p = x + c * N;
                uint4 v[UNROLL];
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    const i64 row = row0 + (i64)u * RPB;
                    v[u] = row < m ? load_chunk<T, ALIGNED, LOAD>(p + row * ld, valid, policy) : zero4();
                }
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) add_chunk<T>(acc[u], v[u]);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                float s = acc[u];
#pragma unroll
                for (int off = G / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
                const i64 row = row0 + (i64)u * RPB;
                if (l == 0 && row < m) out[row] = tcr::from_float<OutT>(s);
            }
        }
    } else if constexpr (G < BLOCK) {  // G/32 warps per row, BLOCK/G rows per block (splits must be 1)
        __shared__ float smem[32];
        constexpr int RPB = BLOCK / G;
        const int t = threadIdx.x % G;
        const i64 gi = threadIdx.x / G;
        for (i64 tile = blockIdx.x; tile * RPB < m; tile += gridDim.x) {  // block-uniform: __syncthreads inside
            const i64 row = tile * RPB + gi;
            const bool live = row < m;
            const float acc =
                walk_row<T, UNROLL, ALIGNED, LOAD>(x + (live ? row : 0) * ld, k, live ? chunks : 0, t, G, policy);
            const float r = group_combine<G, BLOCK>(tcr::warp_fold(acc), smem);
            if (live && t == 0) out[row] = tcr::from_float<OutT>(r);
        }
    } else {
        __shared__ float smem[32];
        const i64 items = m * splits;
        const i64 Q = splits * BLOCK;
        for (i64 item = blockIdx.x; item < items; item += gridDim.x) {
            const i64 row = item / splits;
            const i64 s = item - row * splits;
            const float acc =
                walk_row<T, UNROLL, ALIGNED, LOAD>(x + row * ld, k, chunks, s * BLOCK + threadIdx.x, Q, policy);

            float r = tcr::block_fold<BLOCK>(acc, smem);
            if (splits == 1) {
                if (threadIdx.x == 0) out[row] = tcr::from_float<OutT>(r);
            } else {
                if (threadIdx.x == 0) ws[row * splits + s] = r;
                if (tcr::arrive_last(counters + row, (unsigned)splits)) {
                    r = tcr::combine_partials<BLOCK>(ws + row * splits, splits, 1, smem);
                    if (threadIdx.x == 0) out[row] = tcr::from_float<OutT>(r);
                }
            }
        }
    }
}

// =====================================================================================================================
// shuffle_cols<T, OutT, BLOCK, UNROLL, CT, ALIGNED, MINB, ONE_ITEM, LOAD>: element (i, j, l) at x + i*sa + j*sr + l
// (i < a, j < r, l < b); out[i*b + l] = sum over j.
//
// Variant: seed 003 v4/v5 turned sideways: each thread owns VEC consecutive columns (one chunk, VEC fp32
// accumulators) and walks j; j is split over threads of a block (warp shuffle + one smem hop) and, when there are
// too few columns to fill the GPU, over `splits` blocks (combined by the last block of the column strip).
// ALIGNED: x, sa * sizeof(T) (when a > 1) and sr * sizeof(T) are multiples of 16 bytes; otherwise scalar loads.
// ONE_ITEM: the plan has no splits and a block per strip (one pass): compiled without the work-item loop and step 4's
// combination, which frees the registers for more blocks per SM (UNROLL and MINB never change the sums).
// LOAD: whole chunks through ld.global.nc (0) or with an L1 and L2 evict-first hint (1; the same values).
//
// Layout: a row i has cvecs = ceil(b / VEC) column chunks; chunk cv = i*cvecs + c (0 <= cv < a*cvecs) holds columns
// l = c*VEC + e, e < VEC, l < b. A strip is CT consecutive chunks (strip*CT .. strip*CT + CT - 1). Thread t of a block
// has ct = t % CT (its chunk in the strip) and jt = t / CT (its j lane, JT = BLOCK / CT lanes); a work item is
// (strip, s) = (item / splits, item % splits), grid-strided over blocks.
//
// Order of additions, for column l = c*VEC + e of chunk cv = strip*CT + ct, and split s:
//   1. Thread (jt, ct): acc[e] = +0.0f, then acc[e] += x[i, j, l] for j = s*JT + jt, then + splits*JT, then
//      + 2*splits*JT, ... (j < r), in increasing j.
//   2. If CT < 32 (a warp holds 32/CT j lanes of each chunk): __shfl_xor_sync over offsets 16, 8, ..., CT:
//      v = v + v[lane ^ off], i.e. the warp's 32/CT j lanes (jt = 32w/CT + 0 .. 32/CT - 1) folded in halves.
//   3. Let the block's j groups be: the warps (CT < 32, NJ = BLOCK/32 groups, group w = warp w's folded value) or
//      the j lanes (CT >= 32, NJ = BLOCK/CT groups, group jt = thread (jt, ct)'s value). If NJ > 1 the groups'
//      values go through shared memory and the block's value is red[0] + red[1] + ... + red[NJ-1], added left to
//      right starting from red[0] (no +0.0f). If NJ == 1 (CT == BLOCK) the block's value is the thread's acc[e].
//   4. If splits == 1 the block's value is the column sum. Else split s writes it to
//      ws[(strip*CT*VEC + e*CT + ct)*splits + s], and the strip's last block to arrive (counters[strip]) combines
//      each column with one warp: lane L adds ws[.. + L], ws[.. + L + 32], ... (split indices L, L+32, ...) to
//      +0.0f in increasing split index, then tcr::warp_fold (offsets 16, 8, 4, 2, 1); that is the column sum.
//   out[i*b + l] = from_float<OutT>(column sum).
// Workspace: strips * CT * VEC * splits floats and `strips` counters when splits > 1, none otherwise.
// =====================================================================================================================
template <typename T, typename OutT, int BLOCK, int UNROLL, int CT, bool ALIGNED, int MINB, bool ONE_ITEM,
          int LOAD = 0>
__global__ void __launch_bounds__(BLOCK, MINB) shuffle_cols(const T* __restrict__ x, i64 a, i64 r, i64 b, i64 sa,
                                                      i64 sr, OutT* __restrict__ out, float* __restrict__ ws,
                                                      unsigned* __restrict__ counters, i64 splits) {
    static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: a multiple of 32, at most 1024");
    static_assert(CT >= 1 && CT <= BLOCK && (CT & (CT - 1)) == 0, "CT: a power of two <= BLOCK");
    constexpr int N = Vec<T>::N;
    constexpr int JT = BLOCK / CT;
    constexpr int GW = CT < 32 ? 32 : CT;  // threads per j group after step 2
    constexpr int NJ = BLOCK / GW;         // j groups per block
    constexpr int NCOL = CT * N;           // columns per strip
    constexpr int WARPS = BLOCK / 32;
    static_assert(NJ > 1 || CT == BLOCK, "a single j group per block only when CT == BLOCK");
    __shared__ float red[NJ > 1 ? NJ * NCOL : 1];
    // CT == BLOCK with runs wider than 16 bytes (fp8 and fp16 chunks into float or double): each warp's 32 runs are
    // stored through shared memory, every store instruction writing 512 contiguous bytes (store_warp_runs)
    constexpr int RUN_WORDS = (int)(N * sizeof(OutT)) / 16;
    constexpr bool WARP_STORES = NJ == 1 && (int)(N * sizeof(OutT)) % 16 == 0 && RUN_WORDS > 1;
    __shared__ uint4 stage[WARP_STORES ? BLOCK * RUN_WORDS : 1];

    unsigned long long policy = 0ull;
    if constexpr (LOAD == 1) policy = tcr::evict_first_policy();
    const int ct = threadIdx.x % CT;
    const int jt = threadIdx.x / CT;
    const int lane = threadIdx.x & 31;
    const i64 cvecs = (b + N - 1) / N;
    const i64 ncv = a * cvecs;
    const i64 strips = (ncv + CT - 1) / CT;
    if constexpr (ONE_ITEM) splits = 1;  // the plan passes 1 (see ONE_ITEM above)
    const i64 items = strips * splits;
    const i64 QJ = splits * JT;

    for (i64 item = blockIdx.x; item < items; item += gridDim.x) {
        const i64 strip = item / splits;
        const i64 s = item - strip * splits;

        // ---- 1. walk j for this thread's chunk
        const i64 cv = strip * CT + ct;
        i64 i = 0, c = 0, valid = 0, rr = 0;
        if (cv < ncv) {
            i = cv / cvecs;
            c = cv - i * cvecs;
            valid = b - c * N < N ? b - c * N : (i64)N;
            rr = r;
        }
        const T* __restrict__ p = x + i * sa + c * N;
        float acc[N];
#pragma unroll
        for (int e = 0; e < N; ++e) acc[e] = 0.0f;
        const i64 j0 = s * JT + jt;
        const i64 left = j0 < rr ? (rr - j0 + QJ - 1) / QJ : 0;  // this thread's j to add
        if (ALIGNED && valid >= N)  // whole chunks: 16-byte loads only (a loop of its own: fewer registers)
            walk_column<T, UNROLL, true, LOAD>(acc, p + j0 * sr, QJ * sr, left, valid, policy);
        else  // masked scalar loads; in an aligned kernel only the last chunk of a row: one row in flight
            walk_column<T, ALIGNED ? 1 : UNROLL, false, 0>(acc, p + j0 * sr, QJ * sr, left, valid, 0ull);

        // ---- 2. fold the j lanes within a warp
        if constexpr (CT < 32) {
#pragma unroll
            for (int e = 0; e < N; ++e) {
#pragma unroll
                for (int off = 16; off >= CT; off >>= 1) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], off);
            }
        }

        // ---- 3 + 4. combine the block's j groups, then the splits
        if constexpr (NJ > 1) {
            __syncthreads();  // red[] is reused across work items
            if (CT >= 32 || lane < CT) {
                const int jg = threadIdx.x / GW;
#pragma unroll
                for (int e = 0; e < N; ++e) red[(jg * N + e) * CT + ct] = acc[e];
            }
            __syncthreads();
            for (int col = threadIdx.x; col < NCOL; col += BLOCK) {
                float v = red[col];
#pragma unroll
                for (int gi = 1; gi < NJ; ++gi) v += red[gi * NCOL + col];
                const int e = col / CT, cc = col % CT;
                const i64 cv2 = strip * CT + cc;
                if (splits == 1) {
                    if (cv2 < ncv) {
                        const i64 i2 = cv2 / cvecs, c2 = cv2 - i2 * cvecs;
                        if (c2 * N + e < b) out[i2 * b + c2 * N + e] = tcr::from_float<OutT>(v);
                    }
                } else {
                    ws[(strip * NCOL + col) * splits + s] = v;
                }
            }
        } else {  // CT == BLOCK: one j lane, every thread holds its chunk's N column sums
            if (splits == 1) {
                OutT* const dst = out + i * b + c * N;
                bool stored = false;
                if constexpr (WARP_STORES) {  // the warp's runs back to back from a 16-byte aligned start
                    const unsigned long long d0 = __shfl_sync(0xffffffffu, (unsigned long long)dst, 0);
                    const bool run_ok = cv < ncv && valid >= N && (d0 & 15ull) == 0ull &&
                                        (unsigned long long)dst == d0 + (unsigned long long)lane * N * sizeof(OutT);
                    if (__all_sync(0xffffffffu, run_ok)) {
                        store_warp_runs<OutT, N>(reinterpret_cast<OutT*>(d0), acc,
                                                 stage + (threadIdx.x >> 5) * 32 * RUN_WORDS, lane);
                        stored = true;
                    }
                }
                if (!stored && cv < ncv) store_run<OutT, N>(dst, acc, valid);
            } else {
#pragma unroll
                for (int e = 0; e < N; ++e) ws[(strip * NCOL + e * CT + ct) * splits + s] = acc[e];
            }
        }

        if (!ONE_ITEM && splits > 1) {
            if (tcr::arrive_last(counters + strip, (unsigned)splits)) {
                // a warp takes KC columns at once, their lane chains side by side: KC * QB loads in flight per lane
                // (each column's additions as in step 4)
                constexpr int KC = NCOL < 8 ? NCOL : 8, QB = 4;
                const int warp = threadIdx.x >> 5;
                for (int col0 = warp * KC; col0 < NCOL; col0 += WARPS * KC) {
                    const float* __restrict__ pp = ws + (strip * NCOL + col0) * splits;
                    float v[KC];
#pragma unroll
                    for (int k = 0; k < KC; ++k) v[k] = 0.0f;
                    for (i64 q0 = lane; q0 < splits; q0 += 32 * QB) {
                        float w[QB][KC];
#pragma unroll
                        for (int u = 0; u < QB; ++u) {
#pragma unroll
                            for (int k = 0; k < KC; ++k)
                                w[u][k] = q0 + 32 * u < splits ? __ldcg(pp + k * splits + q0 + 32 * u) : 0.0f;
                        }
#pragma unroll
                        for (int u = 0; u < QB; ++u) {
                            if (q0 + 32 * u < splits) {
#pragma unroll
                                for (int k = 0; k < KC; ++k) v[k] += w[u][k];
                            }
                        }
                    }
#pragma unroll
                    for (int k = 0; k < KC; ++k) {
                        const float tot = tcr::warp_fold(v[k]);
                        const int col = col0 + k, e = col / CT, cc = col % CT;
                        const i64 cv2 = strip * CT + cc;
                        if (lane == 0 && cv2 < ncv) {
                            const i64 i2 = cv2 / cvecs, c2 = cv2 - i2 * cvecs;
                            if (c2 * N + e < b) out[i2 * b + c2 * N + e] = tcr::from_float<OutT>(tot);
                        }
                    }
                }
            }
        }
        if constexpr (ONE_ITEM) break;
    }
}
