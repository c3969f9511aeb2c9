// minmax.cu: methods "shuffle" of kind "max" and "min" (tcreduce.max / tcreduce.min), fp32 and fp16 input.
//
// Seed 001 reduce_max_x4 / reduce_max_atomic: grid-stride loop with float4 loads, cg::reduce(warp, v,
// cg::greater<float>()) per warp, one shared-memory hop per block. Differences from the seed:
//   - the running value starts at -inf for max (+inf for min). Seed 001 starts from FLT_MIN, the smallest POSITIVE
//     normal float (1.2e-38), so its max of all-negative data is FLT_MIN instead of the largest element.
//   - NaN propagates as in NumPy (any NaN in the reduced set gives NaN): every comparison is PTX max.NaN / min.NaN
//     (sm_80+), which returns the canonical NaN if either input is NaN; fmaxf/fminf (what cg::greater compiles to)
//     would drop NaNs. Both PTX instructions also order the zeros (+0.0 > -0.0), so each operation is IEEE 754-2019
//     maximum/minimum: commutative and associative, and the result does not depend on the order of the comparisons
//     at all (bitwise, except that every NaN comes out as the canonical NaN). Hence no order is documented here:
//     every kernel is exact and deterministic by nature.
//   - fp16 input: the vector loop compares 8 halves per 16-byte load with max.NaN.f16x2 (exact), then widens to fp32
//     (exact) for the warp/block steps; the result is rounded to OutT by tcr::from_float (exact when OutT is the input
//     type, and monotone otherwise, so it commutes with max/min).
//   - partials of several blocks are combined single-pass by the last block to arrive (tcr::arrive_last) instead of
//     seed 001's CAS-loop atomicMax.
// Kernel signatures follow common.cuh's contract (flat / rows / cols); 64-bit indexing throughout.
#include "common.cuh"

using tcr::i64;

namespace mm {

// OP: 0 = max, 1 = min.
template <int OP>
__device__ __forceinline__ float op(float a, float b) {
    float d;
    if (OP == 0) asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
    else asm("min.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
    return d;
}

// Two halves at once (.f16x2 in one 32-bit register).
template <int OP>
__device__ __forceinline__ unsigned op2(unsigned a, unsigned b) {
    unsigned d;
    if (OP == 0) asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    else asm("min.NaN.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

// The identity: -inf for max, +inf for min (fp32 bits 0xff800000 / 0x7f800000; fp16 0xfc00 / 0x7c00).
template <int OP>
__device__ __forceinline__ float identity() { return __uint_as_float(OP == 0 ? 0xff800000u : 0x7f800000u); }
template <int OP>
__device__ __forceinline__ unsigned identity2() { return OP == 0 ? 0xfc00fc00u : 0x7c007c00u; }

__device__ __forceinline__ float lo_half(unsigned w) {
    return __half2float(__ushort_as_half((unsigned short)(w & 0xffffu)));
}
__device__ __forceinline__ float hi_half(unsigned w) {
    return __half2float(__ushort_as_half((unsigned short)(w >> 16)));
}

template <typename T> struct Vec;
template <> struct Vec<float> { static constexpr int N = 4; };
template <> struct Vec<__half> { static constexpr int N = 8; };

// Elements of p before its first 16-byte boundary (at most len).
template <typename T>
__device__ __forceinline__ i64 head_count(const T* p, i64 len) {
    const unsigned mis = (unsigned)((unsigned long long)p & 15ull);
    const i64 h = mis ? (i64)((16u - mis) / sizeof(T)) : 0;
    return h < len ? h : len;
}

// Reduce what worker w of W owns in the contiguous segment p[0..len): the scalar head (elements before the first
// 16-byte boundary, worker e takes element e) if with_head, the 16-byte vectors v0 + w, v0 + w + W, ... < v1 (vector v
// covers p[h + v*V ..]), and the scalar tail after the last whole vector (worker e takes tail element e) if with_tail.
template <int OP>
__device__ __forceinline__ float seg_reduce(const float* __restrict__ p, i64 len, i64 w, i64 W, i64 v0, i64 v1,
                                            bool with_head, bool with_tail) {
    const i64 h = head_count(p, len);
    const i64 t0 = h + ((len - h) / 4) * 4;
    float acc = identity<OP>();
    if (with_head && w < h) acc = op<OP>(acc, p[w]);
    const float4* pv = reinterpret_cast<const float4*>(p + h);
    for (i64 v = v0 + w; v < v1; v += W) {
        const float4 q = __ldg(pv + v);
        acc = op<OP>(acc, op<OP>(op<OP>(q.x, q.y), op<OP>(q.z, q.w)));
    }
    if (with_tail && w < len - t0) acc = op<OP>(acc, p[t0 + w]);
    return acc;
}

template <int OP>
__device__ __forceinline__ float seg_reduce(const __half* __restrict__ p, i64 len, i64 w, i64 W, i64 v0, i64 v1,
                                            bool with_head, bool with_tail) {
    const i64 h = head_count(p, len);
    const i64 t0 = h + ((len - h) / 8) * 8;
    float acc = identity<OP>();
    if (with_head && w < h) acc = op<OP>(acc, __half2float(p[w]));
    const uint4* pv = reinterpret_cast<const uint4*>(p + h);
    unsigned a2 = identity2<OP>();
    for (i64 v = v0 + w; v < v1; v += W) {
        const uint4 q = __ldg(pv + v);
        a2 = op2<OP>(a2, op2<OP>(op2<OP>(q.x, q.y), op2<OP>(q.z, q.w)));
    }
    acc = op<OP>(acc, op<OP>(lo_half(a2), hi_half(a2)));
    if (with_tail && w < len - t0) acc = op<OP>(acc, __half2float(p[t0 + w]));
    return acc;
}

// Number of whole 16-byte vectors of the segment p[0..len) after its scalar head.
template <typename T>
__device__ __forceinline__ i64 seg_vectors(const T* p, i64 len) {
    return (len - head_count(p, len)) / Vec<T>::N;
}

template <int OP>
__device__ __forceinline__ float warp_reduce(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = op<OP>(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// warp_reduce in every warp, lane 0 of warp w -> smem[w], warp 0 reduces smem[0..warps). Every thread must call it;
// smem holds 32 floats; the result is valid in warp 0.
template <int OP, int BLOCK>
__device__ __forceinline__ float block_reduce(float v, float* smem) {
    constexpr int WARPS = BLOCK / 32;
    v = warp_reduce<OP>(v);
    if (WARPS == 1) return v;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // smem may be reused between calls
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (warp == 0) v = warp_reduce<OP>(lane < WARPS ? smem[lane] : identity<OP>());
    return v;
}

// tcr::arrive_last for 2-D blocks: tcr::arrive_last lets every thread with threadIdx.x == 0 take a ticket, which in a
// (TX, TY) block is TY threads; here only the thread of linear index 0 does. Same protocol otherwise (fence, ticket,
// the last block resets the counter to zero).
__device__ __forceinline__ bool arrive_last_2d(unsigned* counter, unsigned expected) {
    __shared__ bool is_last;
    const bool leader = threadIdx.x == 0 && threadIdx.y == 0;
    __threadfence();
    __syncthreads();
    if (leader) {
        const unsigned ticket = atomicAdd(counter, 1u);
        is_last = (ticket == expected - 1);
        if (is_last) *counter = 0u;
    }
    __syncthreads();
    if (is_last) __threadfence();
    return is_last;
}

// Reduce count partials p[0], p[stride], ... (written by other blocks of this launch: read through L2).
template <int OP, int BLOCK>
__device__ __forceinline__ float combine(const float* p, i64 count, i64 stride, float* smem) {
    float acc = identity<OP>();
    for (i64 i = threadIdx.x; i < count; i += BLOCK) acc = op<OP>(acc, __ldcg(p + i * stride));
    return block_reduce<OP, BLOCK>(acc, smem);
}

}  // namespace mm

// =====================================================================================================================
// minmax_flat: max/min of x[0..n). seed 001 reduce_max_x4: a grid-stride 16-byte vector loop (worker g =
// blockIdx.x * BLOCK + threadIdx.x of all gridDim.x * BLOCK threads; scalar head and tail so any address works), warp
// shuffles, one shared-memory hop. One block: it writes out[0]. Several: block b writes ws[b], the last block to
// arrive (counters[0]) reduces ws[0..gridDim.x) and writes out[0]. Workspace: gridDim.x floats; counters: 1.
// =====================================================================================================================
template <int OP, typename T, typename OutT, int BLOCK>
__global__ void __launch_bounds__(BLOCK) minmax_flat(const T* __restrict__ x, i64 n, OutT* __restrict__ out,
                                                     float* __restrict__ ws, unsigned* __restrict__ counters) {
    __shared__ float smem[32];
    const i64 g = (i64)blockIdx.x * BLOCK + threadIdx.x;
    float v = mm::seg_reduce<OP>(x, n, g, (i64)gridDim.x * BLOCK, 0, mm::seg_vectors(x, n), true, true);
    v = mm::block_reduce<OP, BLOCK>(v, smem);
    if (gridDim.x == 1) {
        if (threadIdx.x == 0) out[0] = tcr::from_float<OutT>(v);
        return;
    }
    if (threadIdx.x == 0) ws[blockIdx.x] = v;
    if (tcr::arrive_last(counters, gridDim.x)) {
        v = mm::combine<OP, BLOCK>(ws, gridDim.x, 1, smem);
        if (threadIdx.x == 0) out[0] = tcr::from_float<OutT>(v);
    }
}

// =====================================================================================================================
// minmax_rows_thread: one thread per row, for short rows (k <= 16): thread r reduces x[r*ld + 0 .. k) with scalar
// loads. (Rows: m rows of k contiguous elements, row i at x + i*ld; out[i]; ld may be negative.) splits unused.
// =====================================================================================================================
template <int OP, typename T, typename OutT, int BLOCK>
__global__ void __launch_bounds__(BLOCK) minmax_rows_thread(const T* __restrict__ x, i64 m, i64 k, i64 ld,
                                                            OutT* __restrict__ out, float* ws, unsigned* counters,
                                                            i64 splits) {
    const i64 row = (i64)blockIdx.x * BLOCK + threadIdx.x;
    if (row >= m) return;
    const T* p = x + row * ld;
    float acc = mm::identity<OP>();
    for (i64 e = 0; e < k; ++e) acc = mm::op<OP>(acc, tcr::to_float(p[e]));
    out[row] = tcr::from_float<OutT>(acc);
}

// =====================================================================================================================
// minmax_rows_warp: one warp per row (rows of moderate length): lane l of the warp owns the row's head element l,
// vectors l, l + 32, ... and tail element l (the row's alignment is taken from its own address, so any ld works),
// then warp shuffles; lane 0 writes out[row]. Warps stride over rows by gridDim.x * BLOCK / 32. splits unused.
// =====================================================================================================================
template <int OP, typename T, typename OutT, int BLOCK>
__global__ void __launch_bounds__(BLOCK) minmax_rows_warp(const T* __restrict__ x, i64 m, i64 k, i64 ld,
                                                          OutT* __restrict__ out, float* ws, unsigned* counters,
                                                          i64 splits) {
    constexpr int WARPS = BLOCK / 32;
    const int lane = threadIdx.x & 31;
    for (i64 row = (i64)blockIdx.x * WARPS + (threadIdx.x >> 5); row < m; row += (i64)gridDim.x * WARPS) {
        const T* p = x + row * ld;
        float v = mm::seg_reduce<OP>(p, k, lane, 32, 0, mm::seg_vectors(p, k), true, true);
        v = mm::warp_reduce<OP>(v);
        if (lane == 0) out[row] = tcr::from_float<OutT>(v);
    }
}

// =====================================================================================================================
// minmax_rows_block: block b handles split s = b % splits of row r = b / splits (long rows). The row's vectors are cut
// into splits equal ranges; split 0 also takes the scalar head, split splits-1 the tail. splits == 1: the block writes
// out[r]. Else it writes ws[b] and the last of the row's blocks to arrive (counters[r]) reduces ws[r*splits ..
// r*splits + splits) into out[r]. Workspace: m * splits floats, counters: m (only when splits > 1).
// =====================================================================================================================
template <int OP, typename T, typename OutT, int BLOCK>
__global__ void __launch_bounds__(BLOCK) minmax_rows_block(const T* __restrict__ x, i64 m, i64 k, i64 ld,
                                                           OutT* __restrict__ out, float* __restrict__ ws,
                                                           unsigned* __restrict__ counters, i64 splits) {
    __shared__ float smem[32];
    const i64 row = (i64)blockIdx.x / splits, s = (i64)blockIdx.x % splits;
    const T* p = x + row * ld;
    const i64 nv = mm::seg_vectors(p, k);
    const i64 per = (nv + splits - 1) / splits;
    const i64 v0 = s * per < nv ? s * per : nv;
    const i64 v1 = v0 + per < nv ? v0 + per : nv;
    float v = mm::seg_reduce<OP>(p, k, threadIdx.x, BLOCK, v0, v1, s == 0, s == splits - 1);
    v = mm::block_reduce<OP, BLOCK>(v, smem);
    if (splits == 1) {
        if (threadIdx.x == 0) out[row] = tcr::from_float<OutT>(v);
        return;
    }
    if (threadIdx.x == 0) ws[blockIdx.x] = v;
    if (tcr::arrive_last(counters + row, (unsigned)splits)) {
        v = mm::combine<OP, BLOCK>(ws + row * splits, splits, 1, smem);
        if (threadIdx.x == 0) out[row] = tcr::from_float<OutT>(v);
    }
}

// =====================================================================================================================
// minmax_cols: reduce over j of element (i, j, l) at x + i*sa + j*sr + l into out[i*b + l] (Cols; sa may be negative).
// Block (TX, TY) with TX * TY = 256: thread (tx, ty) owns the VEC consecutive columns l = (bx*TX + tx)*VEC + e of tile
// (i, bx) (blockIdx.x = i * nbx + bx, nbx = ceil(b / VEC / TX)) and the rows j = j0 + ty, j0 + ty + TY, ... < j1 of
// split s = blockIdx.y (rows [j0, j1) = the s-th of splits equal ranges of [0, r)); VEC > 1 only when the plan has
// checked that every (i, j, l) vector is 16-byte aligned and b % VEC == 0 (one 16-byte load per row and thread).
// The TY partials of a column are reduced in shared memory. splits == 1: threads with ty == 0 write the outputs.
// Else the tile's TX*VEC partials of split s go to ws[(tile*splits + s)*TX*VEC ..] and the last of the tile's splits
// to arrive (counters[tile]) reduces them. Workspace: tiles * splits * TX * VEC floats; counters: tiles.
// =====================================================================================================================
template <int OP, typename T, typename OutT, int VEC>
__global__ void __launch_bounds__(256) minmax_cols(const T* __restrict__ x, i64 a, i64 r, i64 b, i64 sa, i64 sr,
                                                   OutT* __restrict__ out, float* __restrict__ ws,
                                                   unsigned* __restrict__ counters, i64 splits) {
    static_assert(VEC == 1 || VEC == mm::Vec<T>::N, "VEC: 1 or one 16-byte vector");
    constexpr int BLOCK = 256;
    __shared__ float sm[BLOCK * VEC];
    const int TX = blockDim.x, TY = blockDim.y;
    const int tx = threadIdx.x, ty = threadIdx.y, t = ty * TX + tx;
    const i64 nl = VEC == 1 ? b : b / VEC;  // column groups
    const i64 nbx = (nl + TX - 1) / TX;
    const i64 tile = blockIdx.x;
    const i64 i = tile / nbx, bx = tile % nbx;
    const i64 lv = bx * TX + tx;
    const i64 s = blockIdx.y;
    const i64 per = (r + splits - 1) / splits;
    const i64 j0 = s * per < r ? s * per : r;
    const i64 j1 = j0 + per < r ? j0 + per : r;

    float acc[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[e] = mm::identity<OP>();
    if (lv < nl) {
        const T* p = x + i * sa + lv * VEC;
        for (i64 j = j0 + ty; j < j1; j += TY) {
            const T* q = p + j * sr;
            if constexpr (VEC == 1) {
                acc[0] = mm::op<OP>(acc[0], tcr::to_float(*q));
            } else if constexpr (sizeof(T) == 4) {
                const float4 v = __ldg(reinterpret_cast<const float4*>(q));
                acc[0] = mm::op<OP>(acc[0], v.x);
                acc[1] = mm::op<OP>(acc[1], v.y);
                acc[2] = mm::op<OP>(acc[2], v.z);
                acc[3] = mm::op<OP>(acc[3], v.w);
            } else {
                const uint4 v = __ldg(reinterpret_cast<const uint4*>(q));
                const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int h = 0; h < 4; ++h) {
                    acc[2 * h] = mm::op<OP>(acc[2 * h], mm::lo_half(w[h]));
                    acc[2 * h + 1] = mm::op<OP>(acc[2 * h + 1], mm::hi_half(w[h]));
                }
            }
        }
    }
#pragma unroll
    for (int e = 0; e < VEC; ++e) sm[t * VEC + e] = acc[e];
    __syncthreads();
    for (int st = TY / 2; st > 0; st >>= 1) {
        if (ty < st) {
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                acc[e] = mm::op<OP>(acc[e], sm[((ty + st) * TX + tx) * VEC + e]);
                sm[t * VEC + e] = acc[e];
            }
        }
        __syncthreads();
    }
    if (splits == 1) {
        if (ty == 0 && lv < nl) {
#pragma unroll
            for (int e = 0; e < VEC; ++e) out[i * b + lv * VEC + e] = tcr::from_float<OutT>(acc[e]);
        }
        return;
    }
    const int width = TX * VEC;  // outputs of one tile
    if (ty == 0) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) ws[(tile * splits + s) * width + tx * VEC + e] = acc[e];
    }
    if (mm::arrive_last_2d(counters + tile, (unsigned)splits)) {
        for (int c = t; c < width; c += BLOCK) {
            float v = mm::identity<OP>();
            for (i64 q = 0; q < splits; ++q) v = mm::op<OP>(v, __ldcg(ws + (tile * splits + q) * width + c));
            const i64 l = bx * width + c;
            if (l < b) out[i * b + l] = tcr::from_float<OutT>(v);
        }
    }
}
