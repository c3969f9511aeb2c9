// kahan.cu: methods "kahan" (compensated summation on CUDA cores, fp16 and fp32 input) and "tensorcore_kahan"
// (fp16: tensor-core partial sums flushed into compensated fp32 accumulators). Full sums (Flat problems).
//
// Kahan (CACM 1965) / Higham (2002, sec. 4.3) per thread: a running pair (s, c), both starting at +0.0f; adding x is
//     y = x - c;  t = s + y;  c = (t - s) - y;  s = t
// (four round-to-nearest fp32 operations, written with __fsub_rn / __fadd_rn: never contracted or reassociated). The
// thread's value is the pair (hi, lo) = (s, -c), whose real sum hi + lo is its compensated sum.
//
// Pairs are combined by pair_add (a double-word "sloppy" addition, Dekker 1971 / Joldes, Muller and Popescu 2017,
// Algorithm 5 with TwoSum for the final renormalisation):
//     (s, e) = TwoSum(a.hi, b.hi);  e = e + (a.lo + b.lo);  (hi, lo) = TwoSum(s, e)
// TwoSum(a, b): s = a + b; bb = s - a; e = (a - (s - bb)) + (b - bb) (Knuth; exact error, 6 operations). pair_add is
// commutative bit for bit (a + b, the exact TwoSum error and a.lo + b.lo are), so a butterfly leaves every lane with
// the same pair, the "folding in halves" of common.cuh's warp_fold. The folds below are common.cuh's with pairs:
//   pair_warp_fold    xor butterfly over offsets 16, 8, 4, 2, 1 (v = pair_add(v, v[lane ^ off]));
//   pair_block_fold   pair_warp_fold in every warp; lane 0 of warp w stores its pair; warp 0 loads pair[lane]
//                     ((0, 0) for lane >= warps) and pair_warp_folds again;
//   partials          the last block: thread i pair_adds p[i], p[i + BLOCK], ... in order to (0, 0), then
//                     pair_block_fold.
// The output is from_float<OutT>(hi + lo): one fp32 addition, then the conversion.
//
// Infinities and NaN: a Kahan step with an infinite operand makes c = inf - inf = NaN, so beside each pair runs a plain
// fp32 sum p of the same values (p += x with every Kahan step; p adds with + in every fold); when hi + lo is NaN but p
// is not (infinities of one sign, or an overflow), the output is p (+-inf, as NumPy's sum). Finite sums that do not
// overflow never make hi + lo NaN, so p never decides them.
#include "common.cuh"

using tcr::i64;

namespace kahan_detail {

struct Pair {
    float hi, lo, p;  // compensated value hi + lo; p: the plain sum (decides only infinities and overflow)
};

__device__ __forceinline__ void kahan_add(float& s, float& c, float& p, float x) {
    p = __fadd_rn(p, x);
    const float y = __fsub_rn(x, c);
    const float t = __fadd_rn(s, y);
    c = __fsub_rn(__fsub_rn(t, s), y);
    s = t;
}

__device__ __forceinline__ float2 two_sum(float a, float b) {
    const float s = __fadd_rn(a, b);
    const float bb = __fsub_rn(s, a);
    const float e = __fadd_rn(__fsub_rn(a, __fsub_rn(s, bb)), __fsub_rn(b, bb));
    return make_float2(s, e);
}

__device__ __forceinline__ Pair pair_add(Pair a, Pair b) {
    const float2 s = two_sum(a.hi, b.hi);
    const float e = __fadd_rn(s.y, __fadd_rn(a.lo, b.lo));
    const float2 r = two_sum(s.x, e);
    return {r.x, r.y, __fadd_rn(a.p, b.p)};
}

__device__ __forceinline__ Pair shfl_xor(const Pair& v, int off) {
    return {__shfl_xor_sync(0xffffffffu, v.hi, off), __shfl_xor_sync(0xffffffffu, v.lo, off),
            __shfl_xor_sync(0xffffffffu, v.p, off)};
}

// hi + lo, or the plain sum where the compensated one is NaN and the plain one is not (header).
__device__ __forceinline__ float result(const Pair& v) {
    const float r = __fadd_rn(v.hi, v.lo);
    return (r != r && v.p == v.p) ? v.p : r;
}

// Butterfly over offsets 16, 8, ..., LAST (LAST = 4: over the 8 row groups g of an mma's output, as warp_fold_rows).
template <int LAST = 1>
__device__ __forceinline__ Pair pair_warp_fold(Pair v) {
#pragma unroll
    for (int off = 16; off >= LAST; off >>= 1) v = pair_add(v, shfl_xor(v, off));
    return v;
}

// Folds the per-warp pairs of a block (every thread calls it; result valid in warp 0). smem: 96 floats.
template <int BLOCK>
__device__ __forceinline__ Pair pair_block_combine(Pair warp_total, float* smem) {
    constexpr int WARPS = BLOCK / 32;
    if (WARPS == 1) return warp_total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) { smem[warp] = warp_total.hi; smem[32 + warp] = warp_total.lo; smem[64 + warp] = warp_total.p; }
    __syncthreads();
    Pair v = {0.0f, 0.0f, 0.0f};
    if (warp == 0) {
        if (lane < WARPS) v = {smem[lane], smem[32 + lane], smem[64 + lane]};
        v = pair_warp_fold(v);
    }
    return v;
}

// The block's pair to ws[3 * blockIdx.x ..]; the last block folds the grid's pairs and writes the output.
template <int BLOCK, typename OutT>
__device__ __forceinline__ void finish_grid(Pair block_total, OutT* out, float* ws, unsigned* counters, float* smem) {
    if (gridDim.x == 1) {
        if (threadIdx.x == 0) out[0] = tcr::from_float<OutT>(result(block_total));
        return;
    }
    if (threadIdx.x == 0) {
        ws[3 * blockIdx.x] = block_total.hi;
        ws[3 * blockIdx.x + 1] = block_total.lo;
        ws[3 * blockIdx.x + 2] = block_total.p;
    }
    if (tcr::arrive_last(counters, gridDim.x)) {
        Pair acc = {0.0f, 0.0f, 0.0f};
        for (i64 i = threadIdx.x; i < (i64)gridDim.x; i += BLOCK)
            acc = pair_add(acc, Pair{__ldcg(ws + 3 * i), __ldcg(ws + 3 * i + 1), __ldcg(ws + 3 * i + 2)});
        const Pair t = pair_block_combine<BLOCK>(pair_warp_fold(acc), smem);
        if (threadIdx.x == 0) out[0] = tcr::from_float<OutT>(result(t));
    }
}

__device__ __forceinline__ float lo_half(unsigned w) {
    return __half2float(__ushort_as_half((unsigned short)(w & 0xffffu)));
}
__device__ __forceinline__ float hi_half(unsigned w) {
    return __half2float(__ushort_as_half((unsigned short)(w >> 16)));
}

// s, c (and p) += the chunk's elements in increasing address order.
template <typename T>
__device__ __forceinline__ void kahan_chunk(float& s, float& c, float& p, const uint4& v) {
    if constexpr (sizeof(T) == 4) {
        kahan_add(s, c, p, __uint_as_float(v.x)); kahan_add(s, c, p, __uint_as_float(v.y));
        kahan_add(s, c, p, __uint_as_float(v.z)); kahan_add(s, c, p, __uint_as_float(v.w));
    } else {
        kahan_add(s, c, p, lo_half(v.x)); kahan_add(s, c, p, hi_half(v.x));
        kahan_add(s, c, p, lo_half(v.y)); kahan_add(s, c, p, hi_half(v.y));
        kahan_add(s, c, p, lo_half(v.z)); kahan_add(s, c, p, hi_half(v.z));
        kahan_add(s, c, p, lo_half(v.w)); kahan_add(s, c, p, hi_half(v.w));
    }
}

}  // namespace kahan_detail

using namespace kahan_detail;

// =====================================================================================================================
// kahan_flat<T, OutT, BLOCK, UNROLL, MINB>: the compensated full sum of n contiguous elements (method "kahan").
//
// Element order per thread: shuffle_flat's (kernels/shuffle.cu), with each addition a Kahan step. head = elements
// before the first 16-byte boundary (min(n, ...)), nv = (n - head) / VEC whole chunks (VEC = 8 halves / 4 floats),
// tail = the rest. Thread g of T = gridDim.x * BLOCK: (s, c) = (0, 0); thread 0 of block 0 first adds the head
// x[0..head) then the tail x[head + nv*VEC .. n), one element at a time in increasing order; then every thread adds
// its chunks v = g, g + T, g + 2T, ... (v < nv) in increasing v, each chunk's elements in increasing order. Absent
// chunks are skipped (a Kahan step with +0.0 is not a no-op once c != 0). Then (s, -c) goes through pair_block_fold,
// the partials of the grid through the last block (header), and out[0] = from_float<OutT>(hi + lo) (or p: header).
// Workspace: 3 * gridDim.x floats when gridDim.x > 1; counters: 1.
// =====================================================================================================================
template <typename T, typename OutT, int BLOCK, int UNROLL, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB) kahan_flat(const T* __restrict__ x, i64 n, OutT* __restrict__ out,
                                                    float* __restrict__ ws, unsigned* __restrict__ counters) {
    constexpr int N = 16 / (int)sizeof(T);
    __shared__ float smem[96];
    i64 head = (i64)(((16u - (unsigned)(((unsigned long long)x) & 15ull)) & 15u) / (unsigned)sizeof(T));
    if (head > n) head = n;
    const i64 nv = (n - head) / N;
    const uint4* __restrict__ xv = reinterpret_cast<const uint4*>(x + head);
    const i64 threads = (i64)gridDim.x * BLOCK;
    const i64 g = (i64)blockIdx.x * BLOCK + threadIdx.x;

    float s = 0.0f, c = 0.0f, p = 0.0f;
    if (g == 0) {
        for (i64 e = 0; e < head; ++e) kahan_add(s, c, p, tcr::to_float(x[e]));
        for (i64 e = head + nv * N; e < n; ++e) kahan_add(s, c, p, tcr::to_float(x[e]));
    }
    const i64 step = threads * UNROLL;
    i64 base = 0;
    for (; base + step <= nv; base += step) {  // whole rounds: every thread has UNROLL chunks
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = tcr::load16<2>(xv + base + u * threads + g);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) kahan_chunk<T>(s, c, p, v[u]);
    }
    for (i64 i = base + g; i < nv; i += threads) kahan_chunk<T>(s, c, p, tcr::load16<2>(xv + i));  // the last round

    const Pair block_total = pair_block_combine<BLOCK>(pair_warp_fold(Pair{s, -c, p}), smem);
    finish_grid<BLOCK, OutT>(block_total, out, ws, counters, smem);
}

// =====================================================================================================================
// tc_kahan_flat<BLOCK, UNROLL, OutT, MINB>: fp16 full sum, tensor-core partial sums in compensated fp32 accumulators
// (method "tensorcore_kahan").
//
// Loads and mmas exactly as tc_flat (kernels/tensorcore.cu) with CHAIN = 1: each lane's 16-byte load (halves h0..h7)
// is its A fragment (a0 = h0,h1; a1 = h2,h3; a2 = h4,h5; a3 = h6,h7), so mma row g (g = lane >> 2) sums h0,h1,h4,h5 of
// the lanes 4g..4g+3 and row g + 8 their h2,h3,h6,h7, one fused block each, against all-ones B from C = 0. Order:
//  1. head/tail (<= 7 each): if head + tail > 0, warp 0 of block 0 first does one extra mma whose lane l holds
//     extras[8l .. 8l+7] (extras = head elements, then tail elements, zero-padded).
//  2. Vectors v[0..nvec) after the head: thread tid (of T = grid * BLOCK) loads, in iteration it and unroll slot u,
//     v[it*T*UNROLL + u*T + tid] (zero past the end), and the warp does its mmas in (it, u) order.
//  3. After every mma, per lane: kahan_add(lo_s, lo_c, c[0]) and kahan_add(hi_s, hi_c, c[2]) (rows g and g + 8; with
//     the plain sums lo_p, hi_p). Unroll slots in which no lane of the warp has a vector do no mma (a Kahan step with
//     +0.0 is not a no-op); slots in which some lanes have one run the mma with zeros in the others.
//  4. Lane pair = pair_add((lo_s, -lo_c), (hi_s, -hi_c)); pair butterfly over offsets 16, 8, 4 (the 8 row groups);
//     pair_block_combine of the warps; the grid's partials as in kahan_flat; out[0] = from_float<OutT>(hi + lo).
// Workspace: 3 * gridDim.x floats when gridDim.x > 1; counters: 1.
// =====================================================================================================================
template <int BLOCK, int UNROLL, typename OutT, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB)
tc_kahan_flat(const __half* __restrict__ x, i64 n, OutT* __restrict__ out, float* __restrict__ ws,
              unsigned* __restrict__ counters) {
    __shared__ float smem[96];
    const int lane = threadIdx.x & 31;
    const i64 misalign = (i64)(reinterpret_cast<unsigned long long>(x) & 15u);
    const i64 head = min((i64)(((16 - misalign) & 15) >> 1), n);
    const i64 nvec = (n - head) >> 3;
    const i64 tail = n - head - (nvec << 3);
    const uint4* __restrict__ v = reinterpret_cast<const uint4*>(x + head);
    const i64 nthreads = (i64)gridDim.x * BLOCK;
    const i64 tid = (i64)blockIdx.x * BLOCK + threadIdx.x;

    float lo_s = 0.0f, lo_c = 0.0f, lo_p = 0.0f, hi_s = 0.0f, hi_c = 0.0f, hi_p = 0.0f;
    auto mma = [&](unsigned a0, unsigned a1, unsigned a2, unsigned a3) {
        float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        const unsigned a[4] = {a0, a1, a2, a3};
        tcr::mma_rowsum(c, a);
        kahan_add(lo_s, lo_c, lo_p, c[0]);
        kahan_add(hi_s, hi_c, hi_p, c[2]);
    };
    if (blockIdx.x == 0 && threadIdx.x < 32 && head + tail > 0) {
        __half h[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const i64 j = (i64)lane * 8 + i;
            h[i] = j < head ? x[j] : (j < head + tail ? x[n - tail + (j - head)] : __ushort_as_half((unsigned short)0));
        }
        mma(tcr::pack_half2(h[0], h[1]), tcr::pack_half2(h[2], h[3]), tcr::pack_half2(h[4], h[5]),
            tcr::pack_half2(h[6], h[7]));
    }
    // warp-uniform loop bound: every lane of a warp runs the same mmas (mma.sync needs the whole warp)
    for (i64 warp_base = tid - lane; warp_base < nvec; warp_base += nthreads * UNROLL) {
        uint4 q[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const i64 i = warp_base + lane + (i64)u * nthreads;
            q[u] = i < nvec ? tcr::load16<2>(v + i) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            if (warp_base + (i64)u * nthreads >= nvec) break;  // warp-uniform: this slot has no mma in any lane
            mma(q[u].x, q[u].y, q[u].z, q[u].w);
        }
    }
    const Pair lane_pair = pair_add(Pair{lo_s, -lo_c, lo_p}, Pair{hi_s, -hi_c, hi_p});
    const Pair block_total = pair_block_combine<BLOCK>(pair_warp_fold<4>(lane_pair), smem);
    finish_grid<BLOCK, OutT>(block_total, out, ws, counters, smem);
}

// =====================================================================================================================
// kahan_seg<T, OutT, BLOCK, G, MINB>: Kahan sums over a strided axis (method "kahan", Rows and Cols problems). Element
// (i, j, l) at x + i*sa + j*sr + l (i < a, j < r, l < b); output o = i*b + l is the sum over j (a Rows problem is
// a = m, b = 1, sa = ld, sr = 1). The work split is exact_seg's (kernels/exact.cu, planned by plans/exact.py
// seg_work): a group of G threads (a power of two <= 32, or G == BLOCK) per output, tiles of BLOCK / G outputs
// grid-strided over blockIdx.x, the reduced axis cut into `splits` ranges of ceil(r / splits) (blockIdx.y).
// Order per output and split: lane t of the group: (s, c) = (0, 0), then kahan_add of x[i, j, l] for j = begin + t,
// begin + t + G, ... (< end) in increasing j; the lanes' pairs (s, -c) are combined by a butterfly over offsets
// G/2, ..., 1 (G <= 32), or (G == BLOCK) pair_warp_fold then pair_block_combine. splits == 1: out[o] =
// from_float<OutT>(result). splits > 1: the split's pair goes to ws[3 * (o * splits + split) ..] and the last block
// of the tile to arrive (counters[tile]) pair_adds the splits' pairs in split order to (0, 0) and writes out[o].
// Workspace: 3 * a * b * splits floats and ceil(a * b / (BLOCK / G)) counters when splits > 1.
// =====================================================================================================================
template <typename T, typename OutT, int BLOCK, int G, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB) kahan_seg(const T* __restrict__ x, i64 a, i64 r, i64 b, i64 sa, i64 sr,
                                                   OutT* __restrict__ out, float* __restrict__ ws,
                                                   unsigned* __restrict__ counters, i64 splits) {
    static_assert(G == BLOCK || (G >= 1 && G <= 32 && (G & (G - 1)) == 0), "G: a power of two <= 32, or BLOCK");
    constexpr int OPB = BLOCK / G;
    __shared__ float smem[96];
    const i64 outputs = a * b;
    const i64 tiles = (outputs + OPB - 1) / OPB;
    const i64 split = blockIdx.y;
    const i64 per = (r + splits - 1) / splits;
    const i64 jbegin = split * per, jend = min(r, jbegin + per);
    const int t = threadIdx.x % G;

    for (i64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {  // block-uniform
        const i64 o = tile * OPB + threadIdx.x / G;
        const bool ok = o < outputs;
        const i64 i = ok ? o / b : 0, l = ok ? o - (o / b) * b : 0;
        const T* __restrict__ p = x + i * sa + l;
        const i64 jend_o = ok ? jend : jbegin;
        float s = 0.0f, c = 0.0f, ps = 0.0f;
        for (i64 j = jbegin + t; j < jend_o; j += G) kahan_add(s, c, ps, tcr::to_float(__ldg(p + j * sr)));
        Pair v = {s, -c, ps};
        if constexpr (G == BLOCK) {
            v = pair_block_combine<BLOCK>(pair_warp_fold(v), smem);
        } else {
#pragma unroll
            for (int off = G / 2; off > 0; off >>= 1) v = pair_add(v, shfl_xor(v, off));
        }
        const bool leader = t == 0 && ok;
        if (splits == 1) {
            if (leader) out[o] = tcr::from_float<OutT>(result(v));
            continue;
        }
        if (leader) {
            ws[3 * (o * splits + split)] = v.hi;
            ws[3 * (o * splits + split) + 1] = v.lo;
            ws[3 * (o * splits + split) + 2] = v.p;
        }
        if (tcr::arrive_last(counters + tile, (unsigned)splits)) {
            if (leader) {
                Pair acc = {0.0f, 0.0f, 0.0f};
                for (i64 sp = 0; sp < splits; ++sp) {
                    const float* q = ws + 3 * (o * splits + sp);
                    acc = pair_add(acc, Pair{__ldcg(q), __ldcg(q + 1), __ldcg(q + 2)});
                }
                out[o] = tcr::from_float<OutT>(result(acc));
            }
        }
    }
}
