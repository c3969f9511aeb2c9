// tensorcore_f32.cuh: the forms of the float32 tensor-core sums (full sums, last-axis sums, other-axis sums), shared
// by tensorcore_fp32.cu (each value split into three bf16 pieces, m16n8k16.bf16) and tensorcore_tf32.cu (each value
// rounded to tf32, m16n8k8.tf32). Every kernel is templated on a format policy FMT that turns the 8 values a lane
// holds into mmas against an all-ones operand:
//
//   FMT::Acc                        per-lane state (fp32 registers); starts at zero
//   FMT::step(acc, v)               v[0..7] are the lane's 8 values in A-fragment order: (v0, v1) and (v4, v5) belong
//                                   to mma row g = lane >> 2, (v2, v3) and (v6, v7) to row g + 8. So row g of one
//                                   step holds v0, v1, v4, v5 of the 4 lanes 4g..4g+3 (16 values) and row g + 8 their
//                                   v2, v3, v6, v7; the format documents how it sums a row. Every lane of the warp
//                                   calls it (it may shuffle within the quad 4g..4g+3 and vote across the warp).
//   FMT::row_lo(acc), row_hi(acc)   the lane's value of row g and of row g + 8 as an F2 (the 4 lanes of a quad hold
//                                   copies)
//
// Values travel as F2 pairs (s, e) meaning s + e: from the lanes through every fold and combination to the output,
// which is value2 (s + e, or s alone when s is infinite). Pairs are added with add2 (Knuth's TwoSum on the s parts,
// the e parts and the TwoSum error added to e), so the combination itself loses almost nothing.
//
// The order of additions of each form is written above its kernel; the format's own order (inside step and the row
// values) is written in the format's file. tcreduce/emulate/tensorcore_fp32.py replays both.
#pragma once
#include "common.cuh"

namespace tcr32 {

using tcr::i64;
using tcr::u64;
using tcr::SplitRange;
using tcr::split_range;

__device__ __forceinline__ void unpack8(const uint4& a, const uint4& b, float (&v)[8]) {
    v[0] = __uint_as_float(a.x); v[1] = __uint_as_float(a.y); v[2] = __uint_as_float(a.z); v[3] = __uint_as_float(a.w);
    v[4] = __uint_as_float(b.x); v[5] = __uint_as_float(b.y); v[6] = __uint_as_float(b.z); v[7] = __uint_as_float(b.w);
}

// ------------------------------------------------------------------------------------------------ F2 pairs
struct F2 {
    float s, e;  // the value s + e
};

}  // namespace tcr32

// A pair in two flagged slots of tcr::combine_grid_values: its s part, then its e part.
template <> struct tcr::SlotFloats<tcr32::F2> {
    enum : int { W = 2 };
    static __device__ __forceinline__ float get(tcr32::F2 v, int c) { return c == 0 ? v.s : v.e; }
    static __device__ __forceinline__ tcr32::F2 make(const float (&f)[2]) { return {f[0], f[1]}; }
};

namespace tcr32 {

// Knuth's TwoSum: s = RN(a + b) and t with s + t = a + b exactly (no overflow): bb = s - a,
// t = (a - (s - bb)) + (b - bb). The same s and t for (a, b) and (b, a).
__device__ __forceinline__ void two_sum(float a, float b, float& s, float& t) {
    s = __fadd_rn(a, b);
    const float bb = __fsub_rn(s, a);
    t = __fadd_rn(__fsub_rn(a, __fsub_rn(s, bb)), __fsub_rn(b, bb));
}

// x + y: (s, t) = two_sum(x.s, y.s); e = (x.e + y.e) + t. Commutative, bit for bit.
__device__ __forceinline__ F2 add2(F2 x, F2 y) {
    F2 r;
    float t;
    two_sum(x.s, y.s, r.s, t);
    r.e = __fadd_rn(__fadd_rn(x.e, y.e), t);
    return r;
}

// add2(x, F2{y, -0.0f}) with one addition fewer, bit for bit: x.e + (-0) is x.e for every x.e (+0 + -0 = +0 in
// round-to-nearest; a NaN stays the canonical NaN every addition makes).
__device__ __forceinline__ F2 add2_c(F2 x, float y) {
    F2 r;
    float t;
    two_sum(x.s, y, r.s, t);
    r.e = __fadd_rn(x.e, t);
    return r;
}

// The float a pair stands for: s + e, or s alone when s is +-inf (e is then NaN or meaningless: an infinite input
// makes the TwoSum errors and the split remainders NaN; a NaN input makes s NaN).
__device__ __forceinline__ float value2(F2 x) {
    return fabsf(x.s) == __uint_as_float(0x7F800000u) ? x.s : __fadd_rn(x.s, x.e);
}

// The last block's combination of n pairs w[2j], w[2j + 1] (j = 0 .. n-1, written by other blocks of this launch):
// add2 from (0, 0) in increasing j, 8 pairs loaded ahead (tcr::ordered_fold).
__device__ __forceinline__ F2 ordered_sum2_ldcg(const float* w, i64 n) {
    return tcr::ordered_fold<8>(F2{0.0f, 0.0f}, n, [w](i64 j) { return F2{__ldcg(w + 2 * j), __ldcg(w + 2 * j + 1)}; },
                                [](F2 a, F2 v) { return add2(a, v); });
}

__device__ __forceinline__ F2 shfl_xor2(F2 v, int off) {
    return {__shfl_xor_sync(0xffffffffu, v.s, off), __shfl_xor_sync(0xffffffffu, v.e, off)};
}

// common.cuh's folds on pairs: warp_fold_rows2 (xor 16, 8, 4), warp_fold2 (xor 16 .. 1): v = add2(v, v[lane ^ off]).
__device__ __forceinline__ F2 warp_fold_rows2(F2 v) {
#pragma unroll
    for (int off = 16; off >= 4; off >>= 1) v = add2(v, shfl_xor2(v, off));
    return v;
}
__device__ __forceinline__ F2 warp_fold2(F2 v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = add2(v, shfl_xor2(v, off));
    return v;
}

// common.cuh's block_combine on pairs: lane 0 of warp w stores its pair in smem[w], smem[32 + w]; warp 0 loads
// pair `lane` ((0, 0) for lane >= warps) and warp_fold2s. smem: 64 floats. Valid in warp 0.
template <int BLOCK>
__device__ __forceinline__ F2 block_combine2(F2 warp_total, float* smem) {
    constexpr int WARPS = BLOCK / 32;
    if (WARPS == 1) return warp_total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) { smem[warp] = warp_total.s; smem[32 + warp] = warp_total.e; }
    __syncthreads();
    F2 v = {0.0f, 0.0f};
    if (warp == 0) {
        if (lane < WARPS) v = F2{smem[lane], smem[32 + lane]};
        v = warp_fold2(v);
    }
    return v;
}

// common.cuh's combine_grid_slots on pairs (tcr::combine_grid_values: a pair in two flagged slots, its s part then
// its e part): thread i add2s the pairs i, i + BLOCK, ... to (0, 0) in order, then warp_fold2 and block_combine2; in
// two levels for TWO_LEVEL. Returns true in the block holding the result (*total, valid in thread 0). Counters pool:
// the counters (1, or groups + 1), then two 64-bit slots per block pair and group total (plans/_common.py's
// flagged_counters with two slots per value).
template <int BLOCK, bool TWO_LEVEL>
__device__ __forceinline__ bool combine_grid2(F2 value, unsigned* counters, float* smem, F2* total) {
    return tcr::combine_grid_values<BLOCK, TWO_LEVEL>(
        value, counters, smem, total, F2{0.0f, 0.0f}, [](F2 a, F2 v) { return add2(a, v); },
        [](F2 a, float* sm) { return block_combine2<BLOCK>(warp_fold2(a), sm); });
}

// ------------------------------------------------------------------------------------------------ geometries
// The tiled kernel sums 16 segments at once, one per mma row. A geometry says where segment r (0..15) of a tile
// starts, whether it exists, its element stride and where its sum goes.

// Rows problem: segment = row (m rows of k elements, row stride ld); tile t = rows 16t .. 16t + 15.
struct RowsGeom {
    static constexpr bool UNIT_STRIDE = true;
    const float* x;
    i64 m, k, ld;
    __device__ __forceinline__ i64 tiles() const { return (m + 15) >> 4; }
    __device__ __forceinline__ i64 length() const { return k; }
    __device__ __forceinline__ i64 stride() const { return 1; }
    __device__ __forceinline__ bool segment(i64 tile, int r, const float*& p) const {
        const i64 row = tile * 16 + r;
        const bool ok = row < m;
        p = x + (ok ? row * ld : 0);
        return ok;
    }
    __device__ __forceinline__ i64 out_index(i64 tile, int r) const { return tile * 16 + r; }
    __device__ __forceinline__ bool whole_tile(i64 tile) const { return tile * 16 + 16 <= m; }  // its 16 rows exist
};

// load4's 16-byte load where the caller knows all four elements present: p = the segment's start + e.
__device__ __forceinline__ void load_whole4(const float* __restrict__ p, float (&w)[4]) {
    const float4 q = __ldg(reinterpret_cast<const float4*>(p));
    w[0] = q.x; w[1] = q.y; w[2] = q.z; w[3] = q.w;
}

// Elements e .. e+3 of a segment starting at p (stride s): zero where the segment does not exist or the element is at
// or past `end`. One 16-byte load when VECTOR (unit stride, 16-byte aligned segments and e a multiple of 4) and all
// four are present, else four scalar loads.
template <bool VECTOR>
__device__ __forceinline__ void load4(const float* __restrict__ p, bool ok, i64 e, i64 end, i64 s, float (&w)[4]) {
    if (VECTOR && ok && e + 4 <= end) {
        load_whole4(p + e, w);
        return;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = (ok && e + i < end) ? __ldg(p + (e + i) * s) : 0.0f;
}

}  // namespace tcr32

// -------------------------------------------------------------------------------------------------- tc32_flat
// Full sum of n float32 values (Flat problem). As tc_flat (tensorcore.cu) with two 16-byte vectors per step: lane l
// takes the 8 values of its two vectors as v0..v7 (first vector v0..v3), so mma row g of a step sums values 0, 1 of
// both vectors of lanes 4g..4g+3 and row g + 8 values 2, 3.
// Order of additions:
//  1. head = elements before the first 16-byte boundary (<= 3), tail = the < 4 elements after the last whole vector.
//     If head + tail > 0, warp 0 of block 0 first does one extra step whose lane l holds extras[8l .. 8l+7]
//     (extras = head elements then tail elements, zero-padded: only lane 0 holds any).
//  2. Vectors w[0..nvec) after the head: thread tid (of T = grid * BLOCK) loads, in iteration it and unroll slot u,
//     w[it*T*UNROLL + u*T + tid] (zero past the end); the warp runs steps s = 0 .. UNROLL/2 - 1 of the iteration on
//     slots 2s and 2s + 1. Every warp runs whole iterations while 32 * (its warp index) + it*T*UNROLL < nvec.
//     ROUNDS > 0 (a one-pass grid of short blocks, as tc_flat's ROUNDS): block b owns vectors [b*P, min((b+1)*P,
//     nvec)), P = BLOCK*UNROLL*ROUNDS, and thread t of it loads w[b*P + it*BLOCK*UNROLL + u*BLOCK + t] (zero past
//     the block's end), the steps in the same order.
//  3. Lane pair = add2(row_lo, row_hi); warp_fold_rows2 sums the 8 quads; the warp pairs are block_combine2'd; the
//     block pairs travel in flagged slots to the last block (combine_grid2: thread i add2s pairs i, i + BLOCK, ... to
//     (0, 0), warp_fold2, block_combine2); out = value2. ROUNDS > 0: in two levels (combine_grid2's TWO_LEVEL): each
//     group of BLOCK consecutive blocks' pairs, then the groups'.
// No workspace; when gridDim.x > 1, counters: 1 (ROUNDS > 0: groups + 1), then two flagged 64-bit slots per pair.
template <class FMT, int BLOCK, int UNROLL, typename OutT, int LOAD, int MINB, int ROUNDS = 0>
__global__ void __launch_bounds__(BLOCK, MINB)
tc32_flat(const float* __restrict__ x, tcr::i64 n, OutT* __restrict__ out, unsigned* counters) {
    using namespace tcr;
    using tcr32::F2;
    static_assert(UNROLL % 2 == 0 && UNROLL >= 2, "a step takes two 16-byte vectors");
    __shared__ float smem[64];
    const int lane = threadIdx.x & 31;
    const i64 misalign = (i64)(reinterpret_cast<u64>(x) & 15u);
    const i64 head = min((i64)(((16 - misalign) & 15) >> 2), n);
    const i64 nvec = (n - head) >> 2;
    const i64 tail = n - head - (nvec << 2);
    const uint4* __restrict__ v = reinterpret_cast<const uint4*>(x + head);
    const i64 step = ROUNDS > 0 ? (i64)BLOCK : (i64)gridDim.x * BLOCK;  // between a thread's unroll slots
    const i64 end = ROUNDS > 0 ? min((i64)(blockIdx.x + 1) * BLOCK * UNROLL * ROUNDS, nvec) : nvec;

    typename FMT::Acc acc;
    if (blockIdx.x == 0 && threadIdx.x < 32 && head + tail > 0) {  // warp-uniform
        float e[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const i64 j = (i64)lane * 8 + i;
            e[i] = j < head ? x[j] : (j < head + tail ? x[n - tail + (j - head)] : 0.0f);
        }
        FMT::step(acc, e);
    }
    // warp-uniform loop bounds: every lane of a warp runs the same mmas (mma.sync needs the whole warp). The whole
    // iterations (every load of the warp in range) run unmasked; then at most one partial iteration, masked.
    i64 warp_base = (ROUNDS > 0 ? (i64)blockIdx.x * BLOCK * UNROLL * ROUNDS : (i64)blockIdx.x * BLOCK)
                    + (threadIdx.x - lane);
    const i64 iter_step = step * UNROLL;
    for (; warp_base + 31 + (UNROLL - 1) * step < end; warp_base += iter_step) {
        const uint4* __restrict__ p = v + warp_base + lane;
        uint4 q[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) q[u] = load16<LOAD>(p + (i64)u * step);
#pragma unroll
        for (int s = 0; s < UNROLL / 2; ++s) {
            float e[8];
            tcr32::unpack8(q[2 * s], q[2 * s + 1], e);
            FMT::step(acc, e);
        }
    }
    if (warp_base < end) {
        uint4 q[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const i64 i = warp_base + lane + (i64)u * step;
            q[u] = i < end ? load16<LOAD>(v + i) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int s = 0; s < UNROLL / 2; ++s) {
            float e[8];
            tcr32::unpack8(q[2 * s], q[2 * s + 1], e);
            FMT::step(acc, e);
        }
    }
    const F2 warp_total = tcr32::warp_fold_rows2(tcr32::add2(FMT::row_lo(acc), FMT::row_hi(acc)));
    const F2 block_total = tcr32::block_combine2<BLOCK>(warp_total, smem);
    if (gridDim.x == 1) {
        if (threadIdx.x == 0) out[0] = from_float<OutT>(tcr32::value2(block_total));
        return;
    }
    F2 total;
    if (tcr32::combine_grid2<BLOCK, (ROUNDS > 0)>(block_total, counters, smem, &total) && threadIdx.x == 0) {
        out[0] = from_float<OutT>(tcr32::value2(total));
    }
}

// -------------------------------------------------------------------------------------------------- tiles
// Segment sums, 16 segments per tile, one per mma row (Reduction16/16n with the segments as the rows of A): last-axis
// sums (RowsGeom: 16 rows; tc32_cols below steps on the same mapping with columns for segments). A chunk is 16
// elements [e0, e0 + 16) of each segment; lane (g, t) loads elements e0 + 4t .. e0 + 4t + 3 of segment g (lo) and
// of segment g + 8 (hi) and steps on v = (lo0, lo1, hi0, hi1, lo2, lo3, hi2, hi3): mma row g then sums 16 elements of
// segment g, row g + 8 of g + 8.
// Work split: tiles go to groups of WPT warps (tile = blockIdx.x*GROUPS + group, + gridDim.x*GROUPS per round);
// elements are cut into `splits` ranges of whole chunks (blockIdx.y picks one); warp q of a group takes chunks
// q, q + WPT, q + 2 WPT, ... of its range in that order, UNROLL chunks loaded per step of the loop (SHORT: the plan
// guarantees at most SHORT_CHUNKS chunks per tile (1, or 2-8 where TILE_SHORT_MAX_CHUNKS says), WPT = 1, no splits,
// and a warp loads every chunk of UNROLL tiles, gridDim.x*GROUPS apart, before it steps on them).
// Order: per warp the format's order (one step per chunk); per segment, the group's warps' pairs are add2'ed in q
// order starting from (0, 0) (one warp: its pair); with splits > 1 the per-split pairs go to
// ws[2((tile*16 + r) * splits + s)] (s part, e part after it) and the last block of the tile add2s them in s order
// starting from (0, 0). out = value2.
namespace tcr32 {

template <class FMT, class GEOM, int BLOCK, int WPT, bool VECTOR, int UNROLL, typename OutT, bool SHORT,
          int SHORT_CHUNKS = 1>
__device__ __forceinline__ void tiles_body(const GEOM& geo, OutT* __restrict__ out, float* __restrict__ ws,
                                           unsigned* counters, i64 splits) {
    using namespace tcr;
    constexpr int WARPS = BLOCK / 32, GROUPS = WARPS / WPT, CHUNK = 16;
    static_assert(WARPS % WPT == 0, "WPT must divide the warps of a block");
    static_assert(!VECTOR || GEOM::UNIT_STRIDE, "16-byte loads need unit-stride segments");
    __shared__ float red[2][WARPS][16];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int group = warp / WPT, q = warp % WPT;
    const i64 ntiles = geo.tiles();
    const i64 split = blockIdx.y;
    const SplitRange range = split_range<CHUNK>(geo.length(), splits, split);
    const i64 e_begin = range.begin, e_end = range.end, nchunks = range.nchunks;
    const i64 tile_step = (i64)gridDim.x * GROUPS;
    const i64 s = geo.stride();

    // Adds the group's warps, then writes the segment sums (or the split partials and, if last, the final sums).
    auto finish_tile = [&](i64 tile, F2 lo_value, F2 hi_value) {
        if (WPT > 1) {
            __syncthreads();
            if (t == 0) {
                red[0][warp][g] = lo_value.s; red[1][warp][g] = lo_value.e;
                red[0][warp][g + 8] = hi_value.s; red[1][warp][g + 8] = hi_value.e;
            }
            __syncthreads();
        }
        // lane r < 16 of the group's first warp owns segment r
        F2 seg_total = {0.0f, 0.0f};
        if (WPT > 1) {
            if (q == 0 && lane < 16) {
#pragma unroll
                for (int w = 0; w < WPT; ++w)
                    seg_total = add2(seg_total, F2{red[0][group * WPT + w][lane], red[1][group * WPT + w][lane]});
            }
        } else {
            // segments g and g + 8 sit in lanes 4g (t = 0): move them to lanes g and g + 8
            const int src = (lane & 7) * 4;
            const F2 lo = {__shfl_sync(0xffffffffu, lo_value.s, src), __shfl_sync(0xffffffffu, lo_value.e, src)};
            const F2 hi = {__shfl_sync(0xffffffffu, hi_value.s, src), __shfl_sync(0xffffffffu, hi_value.e, src)};
            seg_total = lane < 8 ? lo : hi;
        }
        const float* unused;
        const bool mine = q == 0 && lane < 16 && tile < ntiles && geo.segment(tile, lane & 15, unused);
        if (SHORT || splits == 1) {
            if (mine) out[geo.out_index(tile, lane)] = from_float<OutT>(value2(seg_total));
            return;
        }
        if constexpr (!SHORT) {
            if (q == 0 && lane < 16 && tile < ntiles) {
                float* w = ws + 2 * ((tile * 16 + lane) * splits + split);
                w[0] = seg_total.s;
                w[1] = seg_total.e;
            }
            if (arrive_last(counters + tile, (unsigned)splits)) {  // block-uniform (splits > 1: WPT = WARPS)
                const int r = threadIdx.x;
                if (r < 16 && geo.segment(tile, r & 15, unused)) {
                    const F2 v = ordered_sum2_ldcg(ws + 2 * (tile * 16 + r) * splits, splits);
                    out[geo.out_index(tile, r)] = from_float<OutT>(value2(v));
                }
            }
        }
    };

    if constexpr (SHORT) {
        static_assert(WPT == 1, "the short path has one warp per tile");
        constexpr int SC = SHORT_CHUNKS;  // chunks per tile (the plan: segments of at most SC * 16 elements)
        // segments of SC whole chunks, vector loads: the trips whose UNROLL tiles all have their 16 segments (every
        // trip but the last) load without load4's checks (the same loads)
        const bool whole_chunk = VECTOR && e_end - e_begin == CHUNK * SC;
        for (i64 tile0 = (i64)blockIdx.x * GROUPS + group; tile0 < ntiles; tile0 += tile_step * UNROLL) {
            float lo[UNROLL * SC][4], hi[UNROLL * SC][4];  // tile u's chunk c at u * SC + c
            if (whole_chunk && geo.whole_tile(tile0 + (UNROLL - 1) * tile_step)) {  // warp-uniform
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    const float *plo, *phi;
                    geo.segment(tile0 + u * tile_step, g, plo);
                    geo.segment(tile0 + u * tile_step, g + 8, phi);
#pragma unroll
                    for (int c = 0; c < SC; ++c) {
                        load_whole4(plo + e_begin + c * CHUNK + 4 * t, lo[u * SC + c]);
                        load_whole4(phi + e_begin + c * CHUNK + 4 * t, hi[u * SC + c]);
                    }
                }
            } else {
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    const i64 tile = tile0 + u * tile_step;
                    const float *plo, *phi;
                    const bool olo = tile < ntiles && geo.segment(tile, g, plo);
                    const bool ohi = tile < ntiles && geo.segment(tile, g + 8, phi);
#pragma unroll
                    for (int c = 0; c < SC; ++c) {
                        load4<VECTOR>(plo, olo, e_begin + c * CHUNK + 4 * t, e_end, s, lo[u * SC + c]);
                        load4<VECTOR>(phi, ohi, e_begin + c * CHUNK + 4 * t, e_end, s, hi[u * SC + c]);
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const i64 tile = tile0 + u * tile_step;
                if (tile >= ntiles) break;  // warp-uniform
                typename FMT::Acc acc;
                {
                    const float(&l)[4] = lo[u * SC], (&h)[4] = hi[u * SC];
                    const float e[8] = {l[0], l[1], h[0], h[1], l[2], l[3], h[2], h[3]};
                    FMT::step(acc, e);
                }
#pragma unroll
                for (int c = 1; c < SC; ++c) {  // the tile's later chunks in order, a step each (one may be
                    if (c * CHUNK >= e_end - e_begin) break;  // absent: warp-uniform)
                    const float(&l)[4] = lo[u * SC + c], (&h)[4] = hi[u * SC + c];
                    const float e[8] = {l[0], l[1], h[0], h[1], l[2], l[3], h[2], h[3]};
                    FMT::step(acc, e);
                }
                finish_tile(tile, FMT::row_lo(acc), FMT::row_hi(acc));
            }
        }
        return;
    } else {
        // block-uniform tile loop (the group combination may synchronise the block)
        for (i64 tile_base = (i64)blockIdx.x * GROUPS; tile_base < ntiles; tile_base += tile_step) {
            const i64 tile = tile_base + group;
            const float *plo, *phi;
            const bool olo = tile < ntiles && geo.segment(tile, g, plo);
            const bool ohi = tile < ntiles && geo.segment(tile, g + 8, phi);
            typename FMT::Acc acc;
            const bool both = VECTOR && olo && ohi;  // both segments present (all but the last tile's lanes)
            for (i64 ch = q; ch < nchunks; ch += (i64)WPT * UNROLL) {
                float lo[UNROLL][4], hi[UNROLL][4];
                if (both && e_begin + (ch + (i64)(UNROLL - 1) * WPT + 1) * CHUNK <= e_end) {
                    // every chunk of this trip whole: load4's 16-byte loads without its end checks
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u) {
                        const i64 e = e_begin + (ch + (i64)u * WPT) * CHUNK + 4 * t;
                        load_whole4(plo + e, lo[u]);
                        load_whole4(phi + e, hi[u]);
                    }
                } else {
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u) {
                        const i64 e = e_begin + (ch + (i64)u * WPT) * CHUNK + 4 * t;
                        load4<VECTOR>(plo, olo, e, e_end, s, lo[u]);
                        load4<VECTOR>(phi, ohi, e, e_end, s, hi[u]);
                    }
                }
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    if (ch + (i64)u * WPT >= nchunks) break;  // warp-uniform
                    const float e[8] = {lo[u][0], lo[u][1], hi[u][0], hi[u][1],
                                        lo[u][2], lo[u][3], hi[u][2], hi[u][3]};
                    FMT::step(acc, e);
                }
            }
            finish_tile(tile, FMT::row_lo(acc), FMT::row_hi(acc));
        }
    }
}

}  // namespace tcr32

template <class FMT, int BLOCK, int WPT, bool VECTOR, int UNROLL, typename OutT, bool SHORT, int MINB,
          int SHORT_CHUNKS = 1>
__global__ void __launch_bounds__(BLOCK, MINB)
tc32_rows(const float* __restrict__ x, tcr::i64 m, tcr::i64 k, tcr::i64 ld, OutT* __restrict__ out,
          float* __restrict__ ws, unsigned* counters, tcr::i64 splits) {
    const tcr32::RowsGeom geo{x, m, k, ld};
    tcr32::tiles_body<FMT, tcr32::RowsGeom, BLOCK, WPT, VECTOR, UNROLL, OutT, SHORT, SHORT_CHUNKS>(geo, out, ws,
                                                                                                 counters, splits);
}

// -------------------------------------------------------------------------------------------------- tc32_cols
// Sums over a non-last axis (Cols problem: element (i, j, l) at i*sa + j*sr + l; out[i*b + l] = sum over j). tc_cols'
// design (tensorcore.cu) on the format's steps: the data are the A operand read transposed, B is all ones, and the
// fragments come straight from 16-byte row loads (no transposes, no shared memory). A warp owns a strip of 32 columns
// l0 .. l0+31 of one i and walks j in chunks of 16 rows. Lane (g, t) loads the 4 elements at columns l0 + 4g ..
// l0 + 4g + 3 of the rows j0 + 4t .. j0 + 4t + 3 (one 16-byte load per row when ALIGNED, else masked scalar loads;
// rows at or past the split's end and columns at or past b read as zero): each load instruction reads 4 rows x 128
// contiguous bytes. With y[d][c] = row j0 + 4t + d, column l0 + 4g + c, step h (0, 1) of a chunk takes
//   v = (y[0][2h], y[1][2h], y[0][2h+1], y[1][2h+1], y[2][2h], y[3][2h], y[2][2h+1], y[3][2h+1]):
// mma row g sums column l0 + 4g + 2h and row g + 8 column l0 + 4g + 2h + 1 over the chunk's 16 rows, lane t holding
// the column's chunk elements 4t .. 4t + 3 in the slots where tc32_rows holds a segment's (v0, v1, v4, v5; v2, v3,
// v6, v7). So step h is tc32_rows' step on the 16 segments l0 + 4s + 2h (mma row s < 8) and l0 + 4(s - 8) + 2h + 1
// (s >= 8), and every column has an accumulator of its own (acc[h], row g or g + 8).
// Work split: strips (i, l0) go to groups of WPS warps (strip = blockIdx.x*GROUPS + group, + gridDim.x*GROUPS per
// round); rows are cut into `splits` ranges of whole 16-row chunks (blockIdx.y); warp q of a group takes chunks q,
// q + WPS, ... of its range, UNROLL chunks loaded per step of the loop (PREFETCH: one chunk loaded ahead instead, the
// next chunk's loads issued before the current chunk steps; tc32_cols_tma, sm_90: the warp's chunks arrive as TMA
// boxes (tcr::tma_load_3d) in a ring of STAGES shared-memory buffers, STAGES chunks in flight while it steps and no
// registers holding data in flight). SHORT_UNROLL > 0 (the plan: r <= 16, so one
// chunk per strip, WPS = 1, no splits): each warp loads SHORT_UNROLL adjacent strips before stepping on them.
// Order, per column: the format's order over its chunks, one step per chunk; the group's warps' pairs add2'ed in q
// order from (0, 0) (one warp: its pair); with splits > 1 the split pairs go to ws[2((strip*32 + c)*splits + s)] (s
// part, e part after it) and the strip's last block add2s them in s order from (0, 0). out = value2.
namespace tcr32 {

// Lane (g, t)'s 4 rows j0 + d (d = 0..3; the caller passes j0 = chunk start + 4t) at columns col .. col + 3, zero at
// or past j_end or bend. VEC: floats per load where a row's 4 columns are all present (4: rows 16-byte aligned, 2: 8,
// 1: scalar loads); the rest masked scalar loads.
template <int VEC>
__device__ __forceinline__ void load_col_chunk(const float* __restrict__ xs, i64 j0, i64 j_end, i64 sr, i64 col,
                                               i64 bend, float (&y)[4][4]) {
    static_assert(VEC == 1 || VEC == 2 || VEC == 4, "16-, 8- or 4-byte loads");
#pragma unroll
    for (int d = 0; d < 4; ++d) {
        const i64 j = j0 + d;
        const float* p = xs + j * sr + col;
        if (VEC == 4 && j < j_end && col + 4 <= bend) {
            const float4 q = __ldg(reinterpret_cast<const float4*>(p));
            y[d][0] = q.x; y[d][1] = q.y; y[d][2] = q.z; y[d][3] = q.w;
        } else if (VEC == 2 && j < j_end && col + 4 <= bend) {
            const float2 q0 = __ldg(reinterpret_cast<const float2*>(p));
            const float2 q1 = __ldg(reinterpret_cast<const float2*>(p + 2));
            y[d][0] = q0.x; y[d][1] = q0.y; y[d][2] = q1.x; y[d][3] = q1.y;
        } else {
#pragma unroll
            for (int c = 0; c < 4; ++c) y[d][c] = (j < j_end && col + c < bend) ? __ldg(p + c) : 0.0f;
        }
    }
}

// load_col_chunk's loads for a whole chunk of an aligned strip (its 4 rows before the end, its 4 columns before b):
// the same 16-byte loads without the end checks. p: the lane's first row and column of the chunk.
__device__ __forceinline__ void load_whole_col_chunk(const float* __restrict__ p, i64 sr, float (&y)[4][4]) {
#pragma unroll
    for (int d = 0; d < 4; ++d) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(p + d * sr));
        y[d][0] = v.x; y[d][1] = v.y; y[d][2] = v.z; y[d][3] = v.w;
    }
}

// Steps 0 and 1 of a loaded chunk (the mapping above).
template <class FMT>
__device__ __forceinline__ void step_col_chunk(typename FMT::Acc (&acc)[2], const float (&y)[4][4]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float v[8] = {y[0][2 * h], y[1][2 * h], y[0][2 * h + 1], y[1][2 * h + 1],
                            y[2][2 * h], y[3][2 * h], y[2][2 * h + 1], y[3][2 * h + 1]};
        FMT::step(acc[h], v);
    }
}

// Lane (g, t) holds the pairs of columns 4g .. 4g + 3 (acc[h]: row g is column 4g + 2h, row g + 8 column
// 4g + 2h + 1) and answers for column 4g + t, its lane index. Every lane calls it (the rows may shuffle).
template <class FMT>
__device__ __forceinline__ F2 lane_column(const typename FMT::Acc (&acc)[2], int t) {
    const F2 c0 = FMT::row_lo(acc[0]), c1 = FMT::row_hi(acc[0]), c2 = FMT::row_lo(acc[1]), c3 = FMT::row_hi(acc[1]);
    return t == 0 ? c0 : t == 1 ? c1 : t == 2 ? c2 : c3;
}

}  // namespace tcr32

// cols_body's group combination, written once for its two strip loops: total = the column pair of a strip's group of
// WPS warps, their pairs (mine) add2'ed in q order from (0, 0), in warp q == 0 (one warp: its pair). Block-uniform:
// every warp of the block runs it (it synchronises the block). A macro, not a function: wrapped in a function or a
// lambda, the register loop's SASS changes (ptxas allocates its epilogue differently), and that loop's instances are
// the ones the GPU suite and the segment study measured.
#define TCR32_GROUP_PAIR(mine, total)                                                                                  \
    F2 total = (mine);                                                                                                 \
    if (WPS > 1) {                                                                                                     \
        __syncthreads();                                                                                               \
        red[0][warp][lane] = (mine).s;                                                                                 \
        red[1][warp][lane] = (mine).e;                                                                                 \
        __syncthreads();                                                                                               \
        total = {0.0f, 0.0f};                                                                                          \
        if (q == 0) {                                                                                                  \
            _Pragma("unroll") for (int w = 0; w < WPS; ++w)                                                            \
                total = tcr32::add2(total, F2{red[0][group * WPS + w][lane], red[1][group * WPS + w][lane]});          \
        }                                                                                                              \
    }

namespace tcr32 {
template <class FMT, int BLOCK, int WPS, bool ALIGNED, int UNROLL, typename OutT, int SHORT_UNROLL, bool PREFETCH,
          int STAGES, bool WHOLE_CHUNKS = true, int FEW = 0, bool ALIGNED8 = false, bool FEW_LOOP = false>
__device__ __forceinline__ void cols_body(const float* __restrict__ x, i64 a, i64 r, i64 b, i64 sa, i64 sr,
                                          OutT* __restrict__ out, float* __restrict__ ws, unsigned* counters,
                                          i64 splits, const tcr::TensorMap* tmap) {
    using namespace tcr;
    using tcr32::F2;
    constexpr int WARPS = BLOCK / 32, GROUPS = WARPS / WPS, SW = 32;  // SW: columns per warp strip
    constexpr int VEC = ALIGNED ? 4 : ALIGNED8 ? 2 : 1;  // floats per load of a row's 4 columns (load_col_chunk)
    static_assert(WARPS % WPS == 0, "WPS must divide the warps of a block");
    __shared__ float red[2][WARPS][SW];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int group = warp / WPS, q = warp % WPS;
    const i64 strips_per_i = (b + SW - 1) / SW;
    const i64 nstrips = a * strips_per_i;
    const i64 split = blockIdx.y;
    const SplitRange rows = split_range<16>(r, splits, split);
    const i64 j_begin = rows.begin, j_end = rows.end, nchunks = rows.nchunks;
#if TCR_HAS_TMA
    // STAGES > 0 (tc32_cols_tma): warp w's ring of STAGES chunk buffers (16 rows x SW floats each) in the dynamic
    // shared memory, and a barrier per buffer; `issued` / `used` count the warp's chunks over all its strips (buffer =
    // count % STAGES, barrier phase parity = (count / STAGES) & 1)
    extern __shared__ __align__(128) float tma_ring[];
    __shared__ __align__(8) u64 tma_bars[WARPS][STAGES > 0 ? STAGES : 1];
    [[maybe_unused]] unsigned issued = 0, used = 0;
    if constexpr (STAGES > 0) {
        if (lane == 0) {
#pragma unroll
            for (int k = 0; k < STAGES; ++k) mbar_init(&tma_bars[warp][k], 1);
            mbar_init_fence();
        }
        __syncwarp();
    }
#else
    static_assert(STAGES == 0, "TMA needs sm_90");
#endif

    if constexpr (SHORT_UNROLL > 0) {
        static_assert(WPS == 1, "the short-column path has one warp per strip");
        const i64 step = (i64)gridDim.x * GROUPS;
        // a warp takes SHORT_UNROLL adjacent strips at a time: each row it reads is one contiguous run. Columns of
        // 16 rows, aligned: trips whose strips are all whole (32 columns before b) load without the end checks (the
        // same loads)
        const bool whole_chunk = ALIGNED && r == 16;
        for (i64 s0 = ((i64)blockIdx.x * GROUPS + group) * SHORT_UNROLL; s0 < nstrips; s0 += step * SHORT_UNROLL) {
            float y[SHORT_UNROLL][4][4];
            const i64 i0 = s0 / strips_per_i, k0 = s0 - i0 * strips_per_i;  // the first strip: i, l0 = k0 * SW
            // every strip of the trip in i0, the last one (so every one) whole
            if (whole_chunk && k0 + SHORT_UNROLL <= strips_per_i && (k0 + SHORT_UNROLL) * SW <= b) {  // warp-uniform
#pragma unroll
                for (int u = 0; u < SHORT_UNROLL; ++u)
                    tcr32::load_whole_col_chunk(x + i0 * sa + 4 * t * sr + (k0 + u) * SW + 4 * g, sr, y[u]);
            } else {
#pragma unroll
                for (int u = 0; u < SHORT_UNROLL; ++u) {
                    const i64 strip = s0 + u;
                    const bool ok = strip < nstrips;
                    const i64 i = ok ? strip / strips_per_i : 0, l0 = ok ? (strip % strips_per_i) * SW : 0;
                    tcr32::load_col_chunk<VEC>(x + i * sa, 4 * t, r, sr, l0 + 4 * g, ok ? b : 0, y[u]);
                }
            }
#pragma unroll
            for (int u = 0; u < SHORT_UNROLL; ++u) {
                const i64 strip = s0 + u;
                if (strip >= nstrips) break;  // warp-uniform
                const i64 i = strip / strips_per_i, l0 = (strip % strips_per_i) * SW;
                typename FMT::Acc acc[2];
                tcr32::step_col_chunk<FMT>(acc, y[u]);
                const F2 v = tcr32::lane_column<FMT>(acc, t);
                if (l0 + lane < b) out[i * b + l0 + lane] = from_float<OutT>(tcr32::value2(v));
            }
        }
        return;
    } else if constexpr (FEW > 0) {
        // strips of at most FEW * WPS chunks (the plan: 2 .. COLS_FEW_PATH_MAX_CHUNKS chunks, no splits): warp q of a
        // strip's group loads all of its chunks (q, q + WPS, ..: the register loop's) at once, then steps them in
        // order, and the group's pairs combine as there: the register loop's sums, in one round trip and without its
        // per-strip state; a whole aligned strip of whole chunks loads without the end checks. FEW_LOOP (longer
        // strips, no splits): the same in trips of FEW chunks per warp while chunks remain, so FEW chunks in flight
        // where the register loop has one. A trip of warp q: its chunks c0 + u WPS (u < FEW) of strip (i, l0) loaded
        // at once (bend = 0 masks every load: a group past the last strip), then stepped in order
        auto load_trip = [&](float (&y)[FEW][4][4], i64 i, i64 l0, i64 bend, auto c0) {
            if (FEW_LOOP ? ALIGNED && l0 + SW <= bend && (c0 + (FEW - 1) * WPS + 1) * 16 <= r
                         : ALIGNED && r == FEW * WPS * 16 && l0 + SW <= bend) {  // warp-uniform
#pragma unroll
                for (int u = 0; u < FEW; ++u)
                    tcr32::load_whole_col_chunk(x + i * sa + (16 * (c0 + u * WPS) + 4 * t) * sr + l0 + 4 * g, sr,
                                                y[u]);
            } else {
#pragma unroll
                for (int u = 0; u < FEW; ++u)  // rows past r read as zeros (no memory access)
                    tcr32::load_col_chunk<VEC>(x + i * sa, 16 * (c0 + u * WPS) + 4 * t, r, sr, l0 + 4 * g, bend, y[u]);
            }
        };
        auto step_trip = [&](typename FMT::Acc (&acc)[2], const float (&y)[FEW][4][4], auto c0) {
#pragma unroll
            for (int u = 0; u < FEW; ++u) {
                if (16 * (c0 + u * WPS) >= r) break;  // warp-uniform
                tcr32::step_col_chunk<FMT>(acc, y[u]);
            }
        };
        auto few_strip = [&](i64 i, i64 l0, i64 bend) -> F2 {  // the lane's column pair of warp q's chunks
            if constexpr (FEW_LOOP) {  // trips while chunks remain (the plan: more than FEW * WPS chunks)
                typename FMT::Acc acc[2];
                for (i64 c0 = q; c0 < nchunks; c0 += FEW * WPS) {
                    float y[FEW][4][4];
                    load_trip(y, i, l0, bend, c0);
                    step_trip(acc, y, c0);
                }
                return tcr32::lane_column<FMT>(acc, t);
            } else {  // one trip (at most FEW * WPS chunks), whole when every warp's chunks are
                float y[FEW][4][4];
                load_trip(y, i, l0, bend, q);
                typename FMT::Acc acc[2];
                step_trip(acc, y, q);
                return tcr32::lane_column<FMT>(acc, t);
            }
        };
        if constexpr (WPS == 1) {  // no block synchronisation: a warp-uniform strip loop
            for (i64 strip = (i64)blockIdx.x * GROUPS + group; strip < nstrips; strip += (i64)gridDim.x * GROUPS) {
                const i64 i = strip / strips_per_i, l0 = (strip % strips_per_i) * SW;
                const F2 v = few_strip(i, l0, b);
                if (l0 + lane < b) out[i * b + l0 + lane] = from_float<OutT>(tcr32::value2(v));
            }
        } else {  // block-uniform (the group combination synchronises the block)
            for (i64 base = (i64)blockIdx.x * GROUPS; base < nstrips; base += (i64)gridDim.x * GROUPS) {
                const i64 strip = base + group;
                const bool strip_ok = strip < nstrips;
                const i64 i = strip_ok ? strip / strips_per_i : 0, l0 = strip_ok ? (strip % strips_per_i) * SW : 0;
                const F2 mine = few_strip(i, l0, strip_ok ? b : 0);
                TCR32_GROUP_PAIR(mine, total)
                if (q == 0 && strip_ok && l0 + lane < b)
                    out[i * b + l0 + lane] = from_float<OutT>(tcr32::value2(total));
            }
        }
        return;
    } else {
        // block-uniform strip loop (the group combination and the split combination synchronise the block)
        for (i64 strip_base = (i64)blockIdx.x * GROUPS; strip_base < nstrips; strip_base += (i64)gridDim.x * GROUPS) {
            const i64 strip = strip_base + group;
            const bool strip_ok = strip < nstrips;
            const i64 i = strip_ok ? strip / strips_per_i : 0;
            const i64 l0 = strip_ok ? (strip % strips_per_i) * SW : 0;
            const i64 bend = strip_ok ? b : 0;  // masks every load of a strip past the end
            const float* __restrict__ xs = x + i * sa;
            typename FMT::Acc acc[2];
#if TCR_HAS_TMA
            if constexpr (STAGES > 0) {
                // the warp's chunks k = 0 .. mine-1 (chunk q + k*WPS: rows j0 .. j0+15, columns l0 .. l0+31 of this i)
                // arrive as TMA boxes, STAGES in flight; lane 0 arms the buffer's barrier and issues the copy. The
                // box's columns at or past b read as zeros (TMA's fill); its rows at or past j_end (this split's end)
                // are read as zero here.
                const i64 mine = (strip_ok && q < nchunks) ? (nchunks - 1 - q) / WPS + 1 : 0;
                float* ring = tma_ring + warp * (STAGES * 16 * SW);
                auto issue = [&](i64 k) {
                    const unsigned slot = issued++ % STAGES;
                    if (lane == 0) {
                        mbar_arrive_expect_tx(&tma_bars[warp][slot], 16 * SW * 4);
                        tma_load_3d(ring + slot * 16 * SW, tmap, (int)l0, (int)(j_begin + (q + k * WPS) * 16), (int)i,
                                    &tma_bars[warp][slot]);
                    }
                };
                for (i64 k = 0; k < mine && k < STAGES; ++k) issue(k);
                for (i64 k = 0; k < mine; ++k) {
                    const unsigned slot = used % STAGES, parity = (used / STAGES) & 1u;
                    ++used;
                    mbar_wait(&tma_bars[warp][slot], parity);
                    const i64 nrows = min((i64)16, j_end - (j_begin + (q + k * WPS) * 16));
                    float y[4][4];
#pragma unroll
                    for (int d = 0; d < 4; ++d) {
                        const int row = 4 * t + d;
                        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                        if (row < nrows) v = *reinterpret_cast<const float4*>(ring + (slot * 16 + row) * SW + 4 * g);
                        y[d][0] = v.x; y[d][1] = v.y; y[d][2] = v.z; y[d][3] = v.w;
                    }
                    tcr32::step_col_chunk<FMT>(acc, y);
                    // refill the buffer: every lane's reads of it have returned (the step's mma.sync consumed them)
                    if (k + STAGES < mine) {  // warp-uniform
                        __syncwarp();
                        issue(k + STAGES);
                    }
                }
            } else
#endif
                if constexpr (PREFETCH) {
                // a software pipeline of one chunk (UNROLL unused): chunk ch + WPS is loaded before chunk ch steps,
                // so a load is in flight while the warp computes (the same chunks in the same order); in a strip of
                // 32 columns before b, aligned, whole chunks load without the end checks (the same loads)
                const bool whole_width = WHOLE_CHUNKS && ALIGNED && l0 + SW <= bend;
                const i64 chunk_stride = (i64)WPS * 16 * sr;  // elements from one of the warp's chunks to its next
                // the lane's row 4t of the warp's chunk ch + WPS, column l0 + 4g (advanced with ch)
                const float* __restrict__ p = xs + (j_begin + (i64)q * 16 + 4 * t) * sr + l0 + 4 * g + chunk_stride;
                float y[4][4];
                tcr32::load_col_chunk<VEC>(xs, j_begin + (i64)q * 16 + 4 * t, j_end, sr, l0 + 4 * g, bend, y);
                for (i64 ch = q; ch < nchunks; ch += WPS, p += chunk_stride) {
                    float z[4][4];
                    if (whole_width && j_begin + (ch + WPS + 1) * 16 <= j_end)  // warp-uniform
                        tcr32::load_whole_col_chunk(p, sr, z);
                    else
                        tcr32::load_col_chunk<VEC>(xs, j_begin + (ch + WPS) * 16 + 4 * t, j_end, sr, l0 + 4 * g,
                                                       bend, z);
                    tcr32::step_col_chunk<FMT>(acc, y);
#pragma unroll
                    for (int d = 0; d < 4; ++d)
#pragma unroll
                        for (int c = 0; c < 4; ++c) y[d][c] = z[d][c];
                }
            } else {
                // a strip of 32 columns before b (every lane's 4 columns present), aligned: its whole chunks load
                // without the end checks (the same loads)
                const bool whole_width = WHOLE_CHUNKS && ALIGNED && l0 + SW <= bend;
                const i64 chunk_stride = (i64)WPS * 16 * sr;  // elements from one of the warp's chunks to its next
                // the lane's row 4t of the warp's chunk ch, column l0 + 4g (advanced with ch)
                const float* __restrict__ p = xs + (j_begin + (i64)q * 16 + 4 * t) * sr + l0 + 4 * g;
                for (i64 ch = q; ch < nchunks; ch += (i64)WPS * UNROLL, p += UNROLL * chunk_stride) {
                    float y[UNROLL][4][4];
                    if (whole_width && j_begin + (ch + (i64)(UNROLL - 1) * WPS + 1) * 16 <= j_end) {  // warp-uniform
#pragma unroll
                        for (int u = 0; u < UNROLL; ++u) tcr32::load_whole_col_chunk(p + u * chunk_stride, sr, y[u]);
                    } else {
#pragma unroll
                        for (int u = 0; u < UNROLL; ++u) {
                            // rows past j_end read as zeros (no memory access): chunks past the end cost no traffic
                            tcr32::load_col_chunk<VEC>(xs, j_begin + (ch + (i64)u * WPS) * 16 + 4 * t, j_end, sr,
                                                           l0 + 4 * g, bend, y[u]);
                        }
                    }
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u) {
                        if (ch + (i64)u * WPS >= nchunks) break;  // warp-uniform
                        tcr32::step_col_chunk<FMT>(acc, y[u]);
                    }
                }
            }
            const F2 mine = tcr32::lane_column<FMT>(acc, t);
            TCR32_GROUP_PAIR(mine, total)
            const i64 col = l0 + lane;
            if (splits == 1) {
                if (q == 0 && strip_ok && col < b) out[i * b + col] = from_float<OutT>(tcr32::value2(total));
                continue;
            }
            // splits > 1: the plan makes WPS = WARPS (one strip per block), so arrive_last is block-uniform
            if (q == 0 && strip_ok) {
                float* w = ws + 2 * ((strip * SW + lane) * splits + split);
                w[0] = total.s;
                w[1] = total.e;
            }
            if (arrive_last(counters + strip, (unsigned)splits)) {
                if (threadIdx.x < SW && l0 + threadIdx.x < b) {
                    const F2 v = tcr32::ordered_sum2_ldcg(ws + 2 * (strip * SW + threadIdx.x) * splits, splits);
                    out[i * b + l0 + threadIdx.x] = from_float<OutT>(tcr32::value2(v));
                }
            }
        }
    }
}
}  // namespace tcr32
#undef TCR32_GROUP_PAIR

template <class FMT, int BLOCK, int WPS, bool ALIGNED, int UNROLL, typename OutT, int SHORT_UNROLL, int MINB,
          bool PREFETCH = false, int FEW = 0, bool ALIGNED8 = false, bool FEW_LOOP = false>
__global__ void __launch_bounds__(BLOCK, MINB)
tc32_cols(const float* __restrict__ x, tcr::i64 a, tcr::i64 r, tcr::i64 b, tcr::i64 sa, tcr::i64 sr,
          OutT* __restrict__ out, float* __restrict__ ws, unsigned* counters, tcr::i64 splits) {
    // the whole-chunk loads would spill at 4 blocks per SM (64 registers), and in the register loop of one warp per
    // strip at 3 on sm_90 (4 bytes): the checked loads alone there. ALIGNED8 (rows 8-byte aligned, not 16): 8-byte
    // loads where ALIGNED would take 16-byte ones (the same values). FEW > 0: the few-chunk path (FEW_LOOP: in trips)
    static_assert(!(ALIGNED && ALIGNED8), "ALIGNED8 is for rows that are not 16-byte aligned");
    static_assert(!FEW_LOOP || FEW > 0, "FEW_LOOP is the few-chunk path's");
    tcr32::cols_body<FMT, BLOCK, WPS, ALIGNED, UNROLL, OutT, SHORT_UNROLL, PREFETCH, 0,
                     (MINB < 4 && (PREFETCH || WPS > 1)), FEW, ALIGNED8, FEW_LOOP>(
        x, a, r, b, sa, sr, out, ws, counters, splits, nullptr);
}

// tc32_cols with its chunks brought by TMA (sm_90): tmap describes x as [a][r][b] floats (innermost first: b, r, a),
// boxes of 16 rows x 32 columns; every strip has more than one chunk and 16-byte aligned rows (the plan).
template <class FMT, int BLOCK, int WPS, typename OutT, int MINB, int STAGES>
__global__ void __launch_bounds__(BLOCK, MINB)
tc32_cols_tma(const float* __restrict__ x, tcr::i64 a, tcr::i64 r, tcr::i64 b, tcr::i64 sa, tcr::i64 sr,
              OutT* __restrict__ out, float* __restrict__ ws, unsigned* counters, tcr::i64 splits,
              const __grid_constant__ tcr::TensorMap tmap) {
    tcr32::cols_body<FMT, BLOCK, WPS, true, 1, OutT, 0, false, STAGES>(x, a, r, b, sa, sr, out, ws, counters, splits,
                                                                       &tmap);
}

// -------------------------------------------------------------------------------------------------- tc32_rows_stream
// Last-axis sums of long rows (Rows problem with every row start 16-byte aligned): a warp streams one row the way
// tc32_flat streams the whole array. The elements [c_begin, c_end) of a split are cut into chunks of 256; in chunk c
// lane l loads elements c_begin + 256c + 4l .. +3 and c_begin + 256c + 128 + 4l .. +3 (zero past c_end) as its two
// vectors, tc32_flat's step: one step adds 256 values of one row. Work split as the tiles kernel with a row for a
// tile: rows go to groups of WPT warps (row = blockIdx.x*GROUPS + group, + gridDim.x*GROUPS per round), elements to
// `splits` ranges of whole chunks (blockIdx.y); warp q of a group takes chunks q, q + WPT, ..., UNROLL chunks loaded
// per step of the loop.
// Order: per warp the format's order (one step per chunk); lane pair = add2(row_lo, row_hi); warp_fold_rows2; per row
// the group's warps' pairs are add2'ed in q order from (0, 0) (one warp: its pair); with splits > 1 the split pairs go
// to ws[2(row * splits + s)] (s part, e part after it) and the last block of the row add2s them in s order from
// (0, 0). out = value2.
template <class FMT, int BLOCK, int WPT, int UNROLL, typename OutT, int LOAD, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB)
tc32_rows_stream(const float* __restrict__ x, tcr::i64 m, tcr::i64 k, tcr::i64 ld, OutT* __restrict__ out,
                 float* __restrict__ ws, unsigned* counters, tcr::i64 splits) {
    using namespace tcr;
    using tcr32::F2;
    constexpr int WARPS = BLOCK / 32, GROUPS = WARPS / WPT, CHUNK = 256;
    static_assert(WARPS % WPT == 0, "WPT must divide the warps of a block");
    __shared__ float red[2][WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int group = warp / WPT, q = warp % WPT;
    const i64 split = blockIdx.y;
    const SplitRange cols = split_range<CHUNK>(k, splits, split);
    const i64 c_begin = cols.begin, c_end = cols.end, nchunks = cols.nchunks;
    // the 4 floats of a row at column col (zero past c_end) as one vector
    auto load_vec = [&](const float* __restrict__ xr, i64 col) -> uint4 {
        if (col + 4 <= c_end) return load16<LOAD>(reinterpret_cast<const uint4*>(xr + col));
        unsigned w[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) w[e] = col + e < c_end ? __float_as_uint(xr[col + e]) : 0u;
        return make_uint4(w[0], w[1], w[2], w[3]);
    };

    const i64 nwhole = (c_end - c_begin) / CHUNK;  // chunks [0, nwhole) end at or before c_end

    // block-uniform row loop (the group combination synchronises the block)
    for (i64 row_base = (i64)blockIdx.x * GROUPS; row_base < m; row_base += (i64)gridDim.x * GROUPS) {
        const i64 row = row_base + group;
        typename FMT::Acc acc;
        if (row < m) {  // warp-uniform
            const float* __restrict__ xr = x + row * ld;
            const float* __restrict__ xl = xr + c_begin + 4 * lane;  // the lane's first vector of chunk 0
            for (i64 ch = q; ch < nchunks; ch += (i64)WPT * UNROLL) {
                uint4 va[UNROLL], vb[UNROLL];
                if (ch + (i64)(UNROLL - 1) * WPT < nwhole) {  // warp-uniform: every chunk of this trip is whole
                    const float* __restrict__ p = xl + ch * CHUNK;
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u) {  // the same loads as below, without the end checks
                        va[u] = load16<LOAD>(reinterpret_cast<const uint4*>(p + u * WPT * CHUNK));
                        vb[u] = load16<LOAD>(reinterpret_cast<const uint4*>(p + u * WPT * CHUNK + 128));
                    }
                } else {
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u) {
                        const i64 col = c_begin + (ch + (i64)u * WPT) * CHUNK + 4 * lane;
                        va[u] = load_vec(xr, col);
                        vb[u] = load_vec(xr, col + 128);
                    }
                }
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    if (ch + (i64)u * WPT >= nchunks) break;  // warp-uniform
                    float e[8];
                    tcr32::unpack8(va[u], vb[u], e);
                    FMT::step(acc, e);
                }
            }
        }
        const F2 warp_total = tcr32::warp_fold_rows2(tcr32::add2(FMT::row_lo(acc), FMT::row_hi(acc)));
        F2 row_total = warp_total;
        if (WPT > 1) {
            __syncthreads();
            if (lane == 0) { red[0][warp] = warp_total.s; red[1][warp] = warp_total.e; }
            __syncthreads();
            row_total = {0.0f, 0.0f};
#pragma unroll
            for (int w = 0; w < WPT; ++w)
                row_total = tcr32::add2(row_total, F2{red[0][group * WPT + w], red[1][group * WPT + w]});
        }
        const bool writer = q == 0 && lane == 0 && row < m;
        if (splits == 1) {
            if (writer) out[row] = from_float<OutT>(tcr32::value2(row_total));
            continue;
        }
        // splits > 1: the plan makes WPT = WARPS (one row per block), so arrive_last is block-uniform
        if (writer) { ws[2 * (row * splits + split)] = row_total.s; ws[2 * (row * splits + split) + 1] = row_total.e; }
        if (arrive_last(counters + row, (unsigned)splits)) {
            if (threadIdx.x == 0) {
                const F2 v = tcr32::ordered_sum2_ldcg(ws + 2 * row * splits, splits);
                out[row] = from_float<OutT>(tcr32::value2(v));
            }
        }
    }
}

// -------------------------------------------------------------------------------------------------- tc32_rows4
// Last-axis sums of rows with 16-byte aligned starts, 4 rows per warp (planned for many rows whose length falls in a
// ROWS4_K range: tcreduce/plans/tensorcore_fp32.py). tc32_rows puts 16 rows in the 16 mma rows and so reads
// 64 bytes of each row per load; here each row takes 4 mma rows and a load reads 256 contiguous bytes of it.
// Warp w of block b sums rows 4T .. 4T + 3, T = b * WARPS + w (a one-pass grid, no splits). The elements are cut into
// chunks of 64; in chunk c lane (g, t) loads elements 64c + 16(g & 3) + 4t .. +3 (zero past k) of row 4T + (g >> 2)
// as lo and of row 4T + 2 + (g >> 2) as hi, and steps on v = (lo0, lo1, hi0, hi1, lo2, lo3, hi2, hi3): mma row g sums
// 16 elements of row 4T + (g >> 2), mma row g + 8 16 elements of row 4T + 2 + (g >> 2). UNROLL chunks are loaded per
// step of the loop.
// Order: the format's order over the chunks (one step each); then row 4T + j (j = 0, 1; lanes with g >> 2 = j) is
// add2(add2(m0, m1), add2(m2, m3)) of its 4 mma rows' pairs m_i = row_lo of quad 4j + i (xor 4, then xor 8), and row
// 4T + 2 + j the same of row_hi; out = value2.
template <class FMT, int BLOCK, int UNROLL, typename OutT, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB)
tc32_rows4(const float* __restrict__ x, tcr::i64 m, tcr::i64 k, tcr::i64 ld, OutT* __restrict__ out,
           float* __restrict__ /*ws*/, unsigned* /*counters*/, tcr::i64 /*splits*/) {
    using namespace tcr;
    using tcr32::F2;
    constexpr int WARPS = BLOCK / 32, CHUNK = 64;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const i64 tile = (i64)blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (tile >= (m + 3) >> 2) return;  // warp-uniform; the kernel never synchronises the block
    const i64 row_lo = tile * 4 + (g >> 2), row_hi = row_lo + 2;
    const bool ok_lo = row_lo < m, ok_hi = row_hi < m;
    const float* __restrict__ plo = x + (ok_lo ? row_lo * ld : 0);
    const float* __restrict__ phi = x + (ok_hi ? row_hi * ld : 0);
    const i64 off = 16 * (g & 3) + 4 * t;
    const i64 nchunks = (k + CHUNK - 1) / CHUNK;
    typename FMT::Acc acc;
    const bool both = ok_lo && ok_hi;  // per lane: false only in the last tile's lanes past m (no mma in the branch)
    const float* __restrict__ qlo = plo + off;
    const float* __restrict__ qhi = phi + off;
    for (i64 c = 0; c < nchunks; c += UNROLL) {
        float lo[UNROLL][4], hi[UNROLL][4];
        if (both && (c + UNROLL) * CHUNK <= k) {  // whole chunks of present rows: no end checks
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const float4 a = __ldg(reinterpret_cast<const float4*>(qlo + (c + u) * CHUNK));
                const float4 b = __ldg(reinterpret_cast<const float4*>(qhi + (c + u) * CHUNK));
                lo[u][0] = a.x; lo[u][1] = a.y; lo[u][2] = a.z; lo[u][3] = a.w;
                hi[u][0] = b.x; hi[u][1] = b.y; hi[u][2] = b.z; hi[u][3] = b.w;
            }
        } else {
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const i64 e = (c + u) * CHUNK + off;
                tcr32::load4<true>(plo, ok_lo, e, k, 1, lo[u]);
                tcr32::load4<true>(phi, ok_hi, e, k, 1, hi[u]);
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            if (c + u >= nchunks) break;  // warp-uniform
            const float v[8] = {lo[u][0], lo[u][1], hi[u][0], hi[u][1], lo[u][2], lo[u][3], hi[u][2], hi[u][3]};
            FMT::step(acc, v);
        }
    }
    F2 a = FMT::row_lo(acc), b = FMT::row_hi(acc);
    a = tcr32::add2(a, tcr32::shfl_xor2(a, 4));
    b = tcr32::add2(b, tcr32::shfl_xor2(b, 4));
    a = tcr32::add2(a, tcr32::shfl_xor2(a, 8));
    b = tcr32::add2(b, tcr32::shfl_xor2(b, 8));
    if ((lane & 15) == 0) {
        if (ok_lo) out[row_lo] = from_float<OutT>(tcr32::value2(a));
        if (ok_hi) out[row_hi] = from_float<OutT>(tcr32::value2(b));
    }
}
