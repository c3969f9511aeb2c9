// tensorcore.cu: fp16, bf16 and fp8 sums on tensor cores with inline-PTX mma.sync.aligned.m16n8k16 (f32 += f16 * f16,
// or bf16 * bf16).
//
// Input formats (template parameter T): __half and __nv_bfloat16 go to the tensor core as stored (the .f16 or .bf16
// instruction); __nv_fp8_e4m3 and __nv_fp8_e5m2 are converted to fp16 in registers (exact) and use the .f16
// instruction. On Hopper that is what mma.sync.m16n8k32.e4m3 itself compiles to (F2FP conversions and two fp16
// HMMA.16816: tcreduce/emulate/mma_model.py); doing it here lets every 16 values flush like fp16. tc_flat and
// tc_rows_stream read 16 fp8 values per lane (one 16-byte load, two A fragments); tc_rows and tc_cols read 8 elements
// per lane where they read 8 halves for fp16 (8-byte fp8 loads, kept raw while in flight), so the order of additions,
// and the emulator twin, are the fp16 ones on the converted values.
//
// The idea of Dakkak et al. (ICS 2019) and Navarro et al. (TPDS 2021): a sum is a product with a matrix of ones.
// Unlike both, every partial sum here is fp32, and the tensor core's own accumulation (aligned, truncated, rounded
// toward zero: facts.md) is used for at most CHAIN consecutive mmas before the accumulator C is flushed into a
// round-to-nearest fp32 register sum and restarted from zero. CHAIN = 1 (the default method) keeps each mma's
// rounding to one 16-term fused block; a huge CHAIN reproduces the long-chain drift the prototype showed.
//
// Flush rule (all kernels): per warp, mmas are counted in issue order; after every CHAIN-th mma, and once after the
// last mma if any are pending, acc_lo += c[0] and acc_hi += c[2] (round to nearest), then c = 0.
#include "common.cuh"

using namespace tcr;

namespace {

template <typename T, int CHAIN>
struct RowAccumulator {
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float lo = 0.0f, hi = 0.0f;  // round-to-nearest sums of mma rows g and g + 8
    int pending = 0;

    __device__ __forceinline__ void flush() {
        lo += c[0];
        hi += c[2];
        c[0] = c[1] = c[2] = c[3] = 0.0f;
        pending = 0;
    }
    __device__ __forceinline__ void mma(unsigned a0, unsigned a1, unsigned a2, unsigned a3) {
        const unsigned a[4] = {a0, a1, a2, a3};
        mma_rowsum<T>(c, a);
        if (++pending == CHAIN) flush();
    }
    __device__ __forceinline__ void finish() {
        if (pending) flush();
    }
};

// The mmas of one raw 16-byte vector: one A fragment for 16-bit formats (tc_flat's mapping, below), two for fp8 (its
// 16 values converted to fp16: values 0..7, then 8..15, each mapped the same way).
template <typename T, int CHAIN>
__device__ __forceinline__ void mma_vector16(RowAccumulator<T, CHAIN>& acc, const uint4& q) {
    if constexpr (is_fp8<T>::value) {
        const uint4 a = raw8_pairs<T>(make_uint2(q.x, q.y));
        acc.mma(a.x, a.y, a.z, a.w);
        const uint4 b = raw8_pairs<T>(make_uint2(q.z, q.w));
        acc.mma(b.x, b.y, b.z, b.w);
    } else {
        acc.mma(q.x, q.y, q.z, q.w);
    }
}

// VEC elements of one row as loaded: their raw bits, so fp8 keeps 1 byte per element in registers while loads are in
// flight (twice the pieces in flight for the same registers); pairs() hands out the VEC/2 registers of 16-bit pairs
// an A fragment takes (fp8 converted to fp16, exactly).
template <typename T, int VEC>
struct RowPiece {
    static constexpr int WORDS = VEC * (int)sizeof(T) / 4;
    unsigned w[WORDS];
    // the VEC elements at p with one 4-, 8- or 16-byte load (p aligned to it); MODE: tcr::load16's (16-byte loads
    // only; 0 is __ldg)
    template <int MODE = 0>
    __device__ __forceinline__ void load(const T* __restrict__ p, unsigned long long policy = 0ull) {
        static_assert(MODE == 0 || WORDS == 4, "load modes other than __ldg for 16-byte loads only");
        if constexpr (WORDS == 4) {
            const uint4 q = load16<MODE>(reinterpret_cast<const uint4*>(p), policy);
            w[0] = q.x; w[1] = q.y; w[2] = q.z; w[3] = q.w;
        } else if constexpr (WORDS == 2) {
            const uint2 q = __ldg(reinterpret_cast<const uint2*>(p));
            w[0] = q.x; w[1] = q.y;
        } else {
            w[0] = __ldg(reinterpret_cast<const unsigned*>(p));
        }
    }
    __device__ __forceinline__ void pairs(unsigned (&p)[VEC / 2]) const {
#pragma unroll
        for (int i = 0; i < WORDS; ++i) {
            if constexpr (is_fp8<T>::value) {
                fp8x4_to_half2x2<T>(w[i], p[2 * i], p[2 * i + 1]);
            } else {
                p[i] = w[i];
            }
        }
    }
};

// Loads the VEC elements of row `row` at columns col .. col+VEC-1, masked: zero beyond cend or past the last row m.
// ALIGNED: the plan checked that VEC-element loads are aligned (one 4-, 8- or 16-byte load).
template <typename T, int VEC, bool ALIGNED>
__device__ __forceinline__ void load_row_piece(const T* __restrict__ x, i64 row, i64 m, i64 ld, i64 col, i64 cend,
                                               RowPiece<T, VEC>& piece) {
    constexpr int WORDS = RowPiece<T, VEC>::WORDS;
    const bool row_ok = row < m;
    const T* p = x + row * ld + col;
    if (ALIGNED && row_ok && col + VEC <= cend) {
        piece.load(p);
        return;
    }
    constexpr int PER_WORD = 4 / (int)sizeof(T);  // elements per 32-bit word
#pragma unroll
    for (int i = 0; i < WORDS; ++i) {
        unsigned word = 0u;
#pragma unroll
        for (int e = 0; e < PER_WORD; ++e) {
            const int c = i * PER_WORD + e;
            if (row_ok && col + c < cend) {
                const unsigned bits = sizeof(T) == 1 ? (unsigned)*reinterpret_cast<const unsigned char*>(p + c)
                                                     : (unsigned)__ldg(reinterpret_cast<const unsigned short*>(p + c));
                word |= bits << (8 * (int)sizeof(T) * e);
            }
        }
        piece.w[i] = word;
    }
}

}  // namespace

// -------------------------------------------------------------------------------------------------- tc_flat
// Full sum of n fp16 values (Flat problem). Reduction256 in spirit: each lane's 16-byte load (halves h0..h7) is one
// A fragment as is: a0 = (h0,h1), a1 = (h2,h3), a2 = (h4,h5), a3 = (h6,h7); so mma row g (g = lane >> 2) sums
// h0,h1,h4,h5 of the 4 lanes 4g..4g+3 and row g + 8 sums their h2,h3,h6,h7 (16 values per row, one fused block).
// fp8: a lane's 16-byte load holds 16 values, converted to fp16 as two A fragments (values 0..7, then 8..15), each
// mapped to rows as above: two mmas per load.
// Order of additions (a vector = the VEC = 16 / sizeof(T) elements of one 16-byte load):
//  1. head = elements before the first 16-byte boundary (< VEC), tail = the < VEC elements after the last whole
//     vector. If head + tail > 0, warp 0 of block 0 first does one extra mma whose lane l holds extras[8l .. 8l+7]
//     (extras = head elements then tail elements, zero-padded), mapped to rows as above.
//  2. Vectors v[0..nvec) after the head: thread tid (of T = grid * BLOCK) loads, in iteration it and unroll slot u,
//     v[it*T*UNROLL + u*T + tid] (zero past the end), and the warp does its mmas in (it, u[, fragment]) order.
//     ROUNDS > 0 (a one-pass grid of short blocks, the walk of Triton's and inductor's kernels): block b owns vectors
//     [b*P, min((b+1)*P, nvec)), P = BLOCK*UNROLL*ROUNDS, and thread t of it loads v[b*P + it*BLOCK*UNROLL +
//     u*BLOCK + t] (zero past the block's end), the warp's mmas in the same (it, u[, fragment]) order.
//  3. Flush rule above. Lane value = acc_lo + acc_hi; warp_fold_rows (xor 16, 8, 4) sums the 8 quads; the warp
//     totals are block_combine'd; block partials p[0..grid) are combined by the last block (combine_grid_slots,
//     common.cuh: combine_partials' order). ROUNDS > 0: in two levels instead (its TWO_LEVEL), so that no block adds
//     more than one partial per thread: each group of BLOCK consecutive blocks' partials, then the groups' totals.
// No workspace; counters: 1 (ROUNDS > 0: groups + 1), then the partials' flagged 64-bit slots (combine_grid_slots).
// tc_flat_cluster: the same walk (ROUNDS = 0) on a grid of one thread-block cluster of CLUSTER blocks (2..16; sm_90),
// its partials combined through distributed shared memory (combine_cluster, common.cuh: the same additions in the
// same order as combine_partials), no workspace or counters: the same bits as tc_flat on the same grid.

// Steps 1-2 and the block's part of step 3: this block's total (valid in thread 0).
template <typename T, int BLOCK, int UNROLL, int CHAIN, int LOAD, int ROUNDS>
__device__ __forceinline__ float tc_flat_block_total(const T* __restrict__ x, i64 n, float* smem) {
    constexpr i64 VEC = 16 / sizeof(T);  // elements of one 16-byte vector: 8, or 16 for fp8 (two A fragments)
    const int lane = threadIdx.x & 31;
    const i64 misalign = (i64)(reinterpret_cast<u64>(x) & 15);
    const i64 head = min((i64)(((16 - misalign) & 15) / (i64)sizeof(T)), n);
    const i64 nvec = (n - head) / VEC;
    const i64 tail = n - head - nvec * VEC;
    const T* __restrict__ v = x + head;
    const i64 nthreads = (i64)gridDim.x * BLOCK;
    const i64 tid = (i64)blockIdx.x * BLOCK + threadIdx.x;

    RowAccumulator<T, CHAIN> acc;
    if (blockIdx.x == 0 && threadIdx.x < 32 && head + tail > 0) {
        unsigned h[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const i64 j = (i64)lane * 8 + i;
            h[i] = j < head ? load1_as_bits16(x + j) : (j < head + tail ? load1_as_bits16(x + n - tail + (j - head)) : 0u);
        }
        acc.mma(h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4] | (h[5] << 16), h[6] | (h[7] << 16));
    }
    // warp-uniform loop bounds: every lane of a warp runs the same mmas (mma.sync needs the whole warp)
    const i64 step = ROUNDS > 0 ? (i64)BLOCK : nthreads;  // between a thread's unroll slots
    const i64 begin = ROUNDS > 0 ? (i64)blockIdx.x * BLOCK * UNROLL * ROUNDS + (threadIdx.x - lane) : tid - lane;
    const i64 end = ROUNDS > 0 ? min((i64)(blockIdx.x + 1) * BLOCK * UNROLL * ROUNDS, nvec) : nvec;
    for (i64 warp_base = begin; warp_base < end; warp_base += step * UNROLL) {
        uint4 q[UNROLL];  // raw 16-byte vectors
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const i64 i = warp_base + lane + (i64)u * step;
            q[u] = i < end ? load16<LOAD>(reinterpret_cast<const uint4*>(v + VEC * i)) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) mma_vector16(acc, q[u]);
    }
    acc.finish();
    const float warp_total = warp_fold_rows(acc.lo + acc.hi);
    return block_combine<BLOCK>(warp_total, smem);
}

template <typename T, int BLOCK, int UNROLL, int CHAIN, typename OutT, int LOAD = 1, int MINB = 4, int ROUNDS = 0>
__global__ void __launch_bounds__(BLOCK, MINB)
tc_flat(const T* __restrict__ x, i64 n, OutT* __restrict__ out, unsigned* counters) {
    __shared__ float smem[32];
    const float block_total = tc_flat_block_total<T, BLOCK, UNROLL, CHAIN, LOAD, ROUNDS>(x, n, smem);
    if (gridDim.x == 1) {
        if (threadIdx.x == 0) out[0] = from_float<OutT>(block_total);
        return;
    }
    float total;
    if (combine_grid_slots<BLOCK, (ROUNDS > 0)>(block_total, counters, smem, &total) && threadIdx.x == 0) {
        out[0] = from_float<OutT>(total);
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
template <typename T, int BLOCK, int UNROLL, int CHAIN, typename OutT, int LOAD, int MINB, int CLUSTER>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(BLOCK, MINB)
tc_flat_cluster(const T* __restrict__ x, i64 n, OutT* __restrict__ out) {
    static_assert(CLUSTER >= 2 && CLUSTER <= 16, "a cluster of 2..16 blocks");
    __shared__ float smem[32];
    const float block_total = tc_flat_block_total<T, BLOCK, UNROLL, CHAIN, LOAD, 0>(x, n, smem);
    float total;
    if (combine_cluster<BLOCK>(block_total, smem, &total) && threadIdx.x == 0) out[0] = from_float<OutT>(total);
}
#endif

// -------------------------------------------------------------------------------------------------- tc_rows
// Last-axis sums (Rows problem: m rows of k halves, row stride ld). Reduction16/16n with mma.m16n8k16: the 16 rows
// of a row tile are the 16 rows of A, so one mma adds 16 columns of 16 segments. Lane (g, t) loads VEC halves of
// row g (lo) and of row g + 8 (hi) at column c + VEC*t, where c steps by CHUNK = 4*VEC columns:
//   VEC = 4: one mma per chunk, a = {lo.x, hi.x, lo.y, hi.y}: mma row g sums columns c .. c+15.
//   VEC = 8: two mmas per chunk, {lo.x, hi.x, lo.y, hi.y} then {lo.z, hi.z, lo.w, hi.w}: the first sums columns
//            c + 8t + {0..3}, the second c + 8t + {4..7}, t = 0..3.
// Work split: row tiles go to groups of WPT warps (tile = blockIdx.x*GROUPS + group, + gridDim.x*GROUPS per round);
// columns are cut into `splits` ranges of whole chunks (blockIdx.y picks one); warp q of a group takes chunks
// q, q + WPT, q + 2 WPT, ... of its range, UNROLL chunks per step (when every tile is SHORT > 0 chunks, UNROLL whole
// row tiles per step instead: the SHORT instantiations). Order: per warp the flush rule; per row, the group's warps
// are added in q order starting from 0.0f (one warp: the value itself); with splits > 1 the per-split values go to
// ws[row * splits + s] and the last block of the tile adds them in s order starting from 0.0f.
template <typename T, int BLOCK, int WPT, int VEC, bool ALIGNED, int UNROLL, int CHAIN, typename OutT, int SHORT>
__global__ void __launch_bounds__(BLOCK, SHORT ? 4 : 2)
tc_rows(const T* __restrict__ x, i64 m, i64 k, i64 ld, OutT* __restrict__ out, float* __restrict__ ws,
        unsigned* counters, i64 splits) {
    constexpr int WARPS = BLOCK / 32, GROUPS = WARPS / WPT, CHUNK = 4 * VEC, W = VEC / 2;
    static_assert(WARPS % WPT == 0, "WPT must divide the warps of a block");
    __shared__ float red[WARPS][16];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int group = warp / WPT, q = warp % WPT;
    const i64 ntiles = (m + 15) >> 4;
    const i64 split = blockIdx.y;
    const SplitRange cols = split_range<CHUNK>(k, splits, split);
    const i64 c_begin = cols.begin, c_end = cols.end, nchunks = cols.nchunks;
    const i64 tile_step = (i64)gridDim.x * GROUPS;

    auto mma_piece = [](RowAccumulator<T, CHAIN>& acc, const RowPiece<T, VEC>& lo_raw,
                        const RowPiece<T, VEC>& hi_raw) {
        unsigned lo[W], hi[W];
        lo_raw.pairs(lo);
        hi_raw.pairs(hi);
        acc.mma(lo[0], hi[0], lo[1], hi[1]);
        if constexpr (VEC == 8) acc.mma(lo[2], hi[2], lo[3], hi[3]);
    };
    // Adds the group's warps, then writes the row sums (or the split partials and, if last, the final sums).
    auto finish_tile = [&](i64 tile, float lo_sum, float hi_sum) {
        const i64 row0 = tile * 16;
        float total_lo = lo_sum, total_hi = hi_sum;
        if (WPT > 1) {
            __syncthreads();
            if (t == 0) { red[warp][g] = lo_sum; red[warp][g + 8] = hi_sum; }
            __syncthreads();
        }
        // lane r < 16 of the group's first warp owns row row0 + r
        float row_total = 0.0f;
        if (WPT > 1) {
            if (q == 0 && lane < 16) {
#pragma unroll
                for (int w = 0; w < WPT; ++w) row_total += red[group * WPT + w][lane];
            }
        } else {
            // rows g and g + 8 sit in lanes 4g (t = 0): move them to lanes g and g + 8
            const float a = __shfl_sync(0xffffffffu, total_lo, (lane & 7) * 4);
            const float b = __shfl_sync(0xffffffffu, total_hi, (lane & 7) * 4);
            row_total = lane < 8 ? a : b;
        }
        const i64 row = row0 + lane;
        if (SHORT || splits == 1) {
            if (q == 0 && lane < 16 && tile < ntiles && row < m) out[row] = from_float<OutT>(row_total);
            return;
        }
        if constexpr (!SHORT) {
        if (q == 0 && lane < 16 && tile < ntiles) ws[row * splits + split] = row_total;
        if (arrive_last(counters + tile, (unsigned)splits)) {
            if (threadIdx.x < 16 && row0 + threadIdx.x < m) {
                out[row0 + threadIdx.x] = from_float<OutT>(ordered_sum_ldcg(ws + (row0 + threadIdx.x) * splits, splits));
            }
        }
        }
    };

    if constexpr (SHORT > 0) {
        // short rows (the plan guarantees SHORT chunks per tile, WPT = 1, no splits): UNROLL whole row tiles in
        // flight; each tile's chunks go through the accumulator in order, as in the long path
        static_assert(WPT == 1, "the short-row path has one warp per tile");
        for (i64 tile0 = (i64)blockIdx.x * GROUPS + group; tile0 < ntiles; tile0 += tile_step * UNROLL) {
            RowPiece<T, VEC> lo[UNROLL][SHORT], hi[UNROLL][SHORT];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const i64 r = (tile0 + u * tile_step) * 16 + g;
#pragma unroll
                for (int c = 0; c < SHORT; ++c) {
                    load_row_piece<T, VEC, ALIGNED>(x, r, m, ld, c_begin + c * CHUNK + VEC * t, c_end, lo[u][c]);
                    load_row_piece<T, VEC, ALIGNED>(x, r + 8, m, ld, c_begin + c * CHUNK + VEC * t, c_end, hi[u][c]);
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const i64 tile = tile0 + u * tile_step;
                if (tile >= ntiles) break;  // warp-uniform
                RowAccumulator<T, CHAIN> acc;
#pragma unroll
                for (int c = 0; c < SHORT; ++c) mma_piece(acc, lo[u][c], hi[u][c]);
                acc.finish();
                finish_tile(tile, acc.lo, acc.hi);
            }
        }
        return;
    } else {
    // long rows: block-uniform tile loop (the group combination may synchronise the block)
    for (i64 tile_base = (i64)blockIdx.x * GROUPS; tile_base < ntiles; tile_base += tile_step) {
        const i64 tile = tile_base + group;
        const i64 r = tile * 16 + g;  // >= m for a tile past the end: loads are masked to zero
        RowAccumulator<T, CHAIN> acc;
        for (i64 ch = q; ch < nchunks; ch += (i64)WPT * UNROLL) {
            RowPiece<T, VEC> lo[UNROLL], hi[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const i64 col = c_begin + (ch + (i64)u * WPT) * CHUNK + VEC * t;
                load_row_piece<T, VEC, ALIGNED>(x, r, m, ld, col, c_end, lo[u]);
                load_row_piece<T, VEC, ALIGNED>(x, r + 8, m, ld, col, c_end, hi[u]);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                if (ch + (i64)u * WPT >= nchunks) break;  // warp-uniform
                mma_piece(acc, lo[u], hi[u]);
            }
        }
        acc.finish();
        finish_tile(tile, acc.lo, acc.hi);
    }
    }
}

// -------------------------------------------------------------------------------------------------- tc_rows16
// One mma of two words of 4 fp8 values each (converted to fp16 exactly): `even` as A row g (a[0]: values 0-1, a[2]:
// 2-3), `odd` as A row g + 8 (a[1], a[3]), where tc_rows16 puts a lane's 4 values of rows 2g and 2g + 1.
template <typename T, int CHAIN>
__device__ __forceinline__ void mma_fp8_words(RowAccumulator<T, CHAIN>& acc, unsigned even, unsigned odd) {
    unsigned e[2], o[2];
    fp8x4_to_half2x2<T>(even, e[0], e[1]);
    fp8x4_to_half2x2<T>(odd, o[0], o[1]);
    acc.mma(e[0], o[0], e[1], o[1]);
}

// The walk of tc_rows16's whole-row path and of tc_rows32 (tc_rows16's 8-element path writes the same walk out for
// 16-bit rows' SASS, below): units of UNIT_ROWS rows go to warps (unit = blockIdx.x*WARPS + warp, UNROLL
// units gridDim.x*WARPS apart in flight per warp, the next round gridDim.x*WARPS*UNROLL on); in each unit this lane
// loads VEC elements of row `row` from column col (aligned loads, masked at k and m), all UNROLL loads before the
// first body(unit, piece) call.
template <typename T, int BLOCK, int VEC, int UNROLL, int UNIT_ROWS, typename Body>
__device__ __forceinline__ void walk_row_units(const T* __restrict__ x, i64 m, i64 k, i64 ld, int row, i64 col,
                                               Body&& body) {
    static_assert(UNIT_ROWS == 16 || UNIT_ROWS == 32, "units of 16 or 32 rows");
    constexpr int WARPS = BLOCK / 32, SHIFT = UNIT_ROWS == 16 ? 4 : 5;
    const i64 units = (m + UNIT_ROWS - 1) >> SHIFT;
    const i64 step = (i64)gridDim.x * WARPS;
    for (i64 unit0 = (i64)blockIdx.x * WARPS + (threadIdx.x >> 5); unit0 < units; unit0 += step * UNROLL) {
        RowPiece<T, VEC> piece[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            load_row_piece<T, VEC, true>(x, (unit0 + u * step) * UNIT_ROWS + row, m, ld, col, k, piece[u]);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const i64 unit = unit0 + u * step;
            if (unit >= units) break;  // warp-uniform
            body(unit, piece[u]);
        }
    }
}

// Last-axis sums of rows of at most 16 elements, every row start aligned to 8 elements (the plan: k <= 16, no
// splits). tc_rows' SHORT path (VEC = 4: Reduction16 with a row per mma row) with one load of 8 elements per lane
// (16 bytes of fp16 or bf16, 8 of fp8) instead of two of 4: lane l loads the 8 elements at columns 8 (l & 1) .. +7 of
// row tile*16 + (l >> 1) (zero past k or m), so quad g (lanes 4g + t) holds rows 2g (t < 2) and 2g + 1 (t >= 2);
// lanes t and t ^ 2 swap half of their loads (the 4 elements of one row each: shuffles of 2 words, fp8 of 1), after
// which lane t holds 4 elements of row 2g as A row g's and 4 of row 2g + 1 as A row g + 8's (fp8 converted to fp16
// exactly). One mma then sums each of the 16 rows as one 16-term block of the same 16 values as tc_rows' VEC = 4
// mapping (where a product sits in a block does not change its sum: tcreduce/emulate/mma_model.py), so the sums, and
// the emulator twin, are tc_rows'. Row tiles go to warps as in the SHORT path: tile = blockIdx.x*WARPS + warp,
// UNROLL tiles gridDim.x*WARPS apart in flight per warp, the next round gridDim.x*WARPS*UNROLL on. This repository's
// variant, not in the paper. ws, counters and splits: tc_rows' argument list (no splits here), unused.
// WHOLE_ROWS (fp8 only; the plan: every row start 16-byte aligned): rows16_whole_rows below instead, 32 rows per warp
// and unit, UNROLL units in flight.
template <typename T, int BLOCK, int UNROLL, typename OutT>
__device__ __forceinline__ void rows16_whole_rows(const T* __restrict__ x, i64 m, i64 k, i64 ld,
                                                  OutT* __restrict__ out);

template <typename T, int BLOCK, int UNROLL, typename OutT, bool WHOLE_ROWS = false>
__global__ void __launch_bounds__(BLOCK, 4)
tc_rows16(const T* __restrict__ x, i64 m, i64 k, i64 ld, OutT* __restrict__ out, float* __restrict__ ws,
          unsigned* counters, i64 splits) {
    if constexpr (WHOLE_ROWS) {
        rows16_whole_rows<T, BLOCK, UNROLL, OutT>(x, m, k, ld, out);
        return;
    }
    constexpr int WARPS = BLOCK / 32, HALF = RowPiece<T, 8>::WORDS / 2;  // HALF: words of 4 elements (fp8: 1)
    const int lane = threadIdx.x & 31;
    const bool first_row = (lane & 2) == 0;  // t < 2: this lane loaded part of row 2g
    const i64 ntiles = (m + 15) >> 4;
    const i64 tile_step = (i64)gridDim.x * WARPS;
    // the walk of walk_row_units (units of 16 rows, 8 elements per lane), written out: through the helper the
    // masked loads' addresses compile to 32 more instructions for 16-bit rows (nvcc sm_90)
    for (i64 tile0 = (i64)blockIdx.x * WARPS + (threadIdx.x >> 5); tile0 < ntiles; tile0 += tile_step * UNROLL) {
        RowPiece<T, 8> piece[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            load_row_piece<T, 8, true>(x, (tile0 + u * tile_step) * 16 + (lane >> 1), m, ld, 8 * (lane & 1), k,
                                       piece[u]);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const i64 tile = tile0 + u * tile_step;
            if (tile >= ntiles) break;  // warp-uniform
            // t < 2 keeps its first 4 elements (row 2g) and gives the last 4; t >= 2 keeps its last 4 (row 2g + 1)
            // and gives the first 4
            const unsigned* w = piece[u].w;
            unsigned got[HALF];
#pragma unroll
            for (int i = 0; i < HALF; ++i) got[i] = __shfl_xor_sync(0xffffffffu, first_row ? w[HALF + i] : w[i], 2);
            RowAccumulator<T, 1> acc;  // A rows g and g + 8: rows 2g and 2g + 1
            if constexpr (is_fp8<T>::value) {
                mma_fp8_words(acc, first_row ? w[0] : got[0], first_row ? got[0] : w[1]);
            } else {  // fp16 pairs
                acc.mma(first_row ? w[0] : got[0], first_row ? got[0] : w[2], first_row ? w[1] : got[1],
                        first_row ? got[1] : w[3]);
            }
            acc.finish();
            // rows 2g and 2g + 1 sit in lane 4g (acc.lo, acc.hi): lane j < 16 writes row tile*16 + j
            const int src = ((lane >> 1) & 7) * 4;
            const float lo = __shfl_sync(0xffffffffu, acc.lo, src), hi = __shfl_sync(0xffffffffu, acc.hi, src);
            const i64 row = tile * 16 + lane;
            if (lane < 16 && row < m) out[row] = from_float<OutT>((lane & 1) ? hi : lo);
        }
    }
}

// tc_rows16's WHOLE_ROWS walk, for fp8 rows of at most 16 elements whose starts are 16-byte aligned: lane l loads the
// whole row unit*32 + l with one 16-byte load (zero past k or m), so a warp reads 32 rows (512 contiguous bytes when
// ld = 16) where the 8-element loads read 16 rows of 8 bytes per lane. Quad g (lanes 4g + t) then holds rows 4g ..
// 4g + 3 of the unit; a 4 x 4 transpose of 32-bit words within the quad (shuffles xor 2, then xor 1, two words each)
// gives lane t word t (elements 4t .. 4t + 3) of each of the quad's 4 rows. Two mmas follow: the first takes rows 4g
// and 4g + 1 as A rows g and g + 8, the second rows 4g + 2 and 4g + 3 (fp8 converted to fp16 exactly, each word as
// tc_rows16's: elements 0-1 in a0/a1, 2-3 in a2/a3). Every A row holds the 16 values of one row, so each row is one
// 16-term block of the same values as tc_rows' SHORT mapping (where a value sits in a block does not change its sum:
// tcreduce/emulate/mma_model.py), added to 0.0f: the same sums, and emulator twin, as tc_rows16. Lane 4g + t then holds
// its own row's sum (the first mma's rows g, g + 8 for t = 0, 1, the second's for t = 2, 3), so the warp writes 32
// consecutive sums without a shuffle. Units of 32 rows go to warps as tc_rows16's row tiles. This repository's variant.
template <typename T, int BLOCK, int UNROLL, typename OutT>
__device__ __forceinline__ void rows16_whole_rows(const T* __restrict__ x, i64 m, i64 k, i64 ld,
                                                  OutT* __restrict__ out) {
    static_assert(is_fp8<T>::value, "whole-row loads of 16 elements are 16 bytes for fp8 only");
    const int lane = threadIdx.x & 31, t = lane & 3;
    const auto unit_sums = [&](i64 unit, const RowPiece<T, 16>& piece) {
        const unsigned* w = piece.w;
        // xor 2: keep words 2 (t >> 1), +1 of this row, give the other two; then this lane holds those two words
        // of rows t (a) and t ^ 2 (b)
        const bool upper = t & 2;
        const unsigned a0 = upper ? w[2] : w[0], a1 = upper ? w[3] : w[1];
        const unsigned b0 = __shfl_xor_sync(0xffffffffu, upper ? w[0] : w[2], 2);
        const unsigned b1 = __shfl_xor_sync(0xffffffffu, upper ? w[1] : w[3], 2);
        // xor 1: keep word t of rows t and t ^ 2, give the other; receive word t of rows t ^ 1 and t ^ 3
        const bool odd = t & 1;
        const unsigned mine = odd ? a1 : a0, mine2 = odd ? b1 : b0;
        const unsigned got = __shfl_xor_sync(0xffffffffu, odd ? a0 : a1, 1);
        const unsigned got2 = __shfl_xor_sync(0xffffffffu, odd ? b0 : b1, 1);
        // word t of quad row r sits in slot r ^ t: rows t (mine), t ^ 1 (got), t ^ 2 (mine2), t ^ 3 (got2)
        const unsigned s0 = odd ? got : mine, s1 = odd ? mine : got;      // rows t & 2, (t & 2) + 1
        const unsigned s2 = odd ? got2 : mine2, s3 = odd ? mine2 : got2;  // rows (t & 2) ^ 2, ((t & 2) ^ 2) + 1
        const unsigned r0 = upper ? s2 : s0, r1 = upper ? s3 : s1, r2 = upper ? s0 : s2, r3 = upper ? s1 : s3;
        RowAccumulator<T, 1> first, second;
        mma_fp8_words(first, r0, r1);
        mma_fp8_words(second, r2, r3);
        first.finish();
        second.finish();
        const float own = upper ? (odd ? second.hi : second.lo) : (odd ? first.hi : first.lo);
        const i64 row = unit * 32 + lane;
        if (row < m) out[row] = from_float<OutT>(own);
    };
    walk_row_units<T, BLOCK, 16, UNROLL, 32>(x, m, k, ld, lane, 0, unit_sums);
}

// -------------------------------------------------------------------------------------------------- tc_rows32
// fp8 rows of 17-32 elements, every row start 16-byte aligned (the plan: where tc_rows takes them in its SHORT = 1
// path with VEC = 8, one chunk per tile, no splits). tc_rows' lane (g, t) loads elements 8t .. 8t + 7 of rows g and
// g + 8 (two 8-byte loads), and its two mmas per tile sum each row's 16-term blocks B1 = elements {0-3, 8-11, 16-19,
// 24-27}, then B2 = {4-7, 12-15, 20-23, 28-31}, through the flush rule of CHAIN. Here lane (g, t) loads half t & 1
// (elements 16 (t & 1) .. +15) of row 2g + (t >> 1) of the tile with one 16-byte load (zero past k or m), so a warp
// reads the tile's 16 rows as 512 contiguous bytes when ld = 32. A half's words 0 and 2 are B1's, words 1 and 3 B2's;
// lanes t and t ^ 2 (the same half of the quad's two rows) swap their words 2 and 3, after which every lane holds one
// B1 word and one B2 word of each of the quad's rows. The first mma takes the B1 words (row 2g as A row g, row 2g + 1
// as A row g + 8; fp8 converted to fp16 exactly, each word as tc_rows16's), the second the B2 words, into one
// RowAccumulator<CHAIN>: the same blocks (where a value sits in a block does not change its sum:
// tcreduce/emulate/mma_model.py) in the same order, so the same sums, and emulator twin, as tc_rows. Lanes t = 0 and
// 2 hold rows 2g and 2g + 1 and write them, without a shuffle. Row tiles go to warps as in tc_rows16; UNROLL in
// flight. This repository's variant, not in the paper. ws, counters and splits: tc_rows' argument list, unused.
template <typename T, int BLOCK, int UNROLL, int CHAIN, typename OutT>
__global__ void __launch_bounds__(BLOCK, 4)
tc_rows32(const T* __restrict__ x, i64 m, i64 k, i64 ld, OutT* __restrict__ out, float* __restrict__ ws,
          unsigned* counters, i64 splits) {
    static_assert(is_fp8<T>::value, "half-row loads of 16 elements are 16 bytes for fp8 only");
    const int lane = threadIdx.x & 31;
    const bool first_row = (lane & 2) == 0;  // t < 2: this lane loaded half of row 2g
    const auto tile_sums = [&](i64 tile, const RowPiece<T, 16>& piece) {
        const unsigned* w = piece.w;
        const unsigned got1 = __shfl_xor_sync(0xffffffffu, w[2], 2);  // the other row's B1 word
        const unsigned got2 = __shfl_xor_sync(0xffffffffu, w[3], 2);  // ... and its B2 word
        const unsigned e1 = first_row ? w[0] : got1, o1 = first_row ? got1 : w[0];  // B1: rows 2g, 2g + 1
        const unsigned e2 = first_row ? w[1] : got2, o2 = first_row ? got2 : w[1];  // B2
        RowAccumulator<T, CHAIN> acc;
        mma_fp8_words(acc, e1, o1);
        mma_fp8_words(acc, e2, o2);
        acc.finish();
        const i64 row = tile * 16 + (lane >> 1);
        if ((lane & 1) == 0 && row < m) out[row] = from_float<OutT>(first_row ? acc.lo : acc.hi);
    };
    walk_row_units<T, BLOCK, 16, UNROLL, 16>(x, m, k, ld, lane >> 1, 16 * (lane & 1), tile_sums);
}

// -------------------------------------------------------------------------------------------------- tc_rows_stream
// Last-axis sums of long rows (Rows problem with every row start 16-byte aligned; the plan uses it for k >= 256):
// a warp streams one row the way tc_flat streams the whole array, instead of tc_rows' 16 rows per warp. The columns
// [c_begin, c_end) of a split are cut into chunks of CHUNK = 32 * VEC elements (VEC = 16 / sizeof(T): 256 halves, or
// 512 fp8 values); in chunk c lane l loads elements c_begin + CHUNK*c + VEC*l .. +VEC-1 with one 16-byte load (zero
// past c_end, so masked elements add +0) as its A fragment, tc_flat's mapping: mma row g sums halves 0, 1, 4, 5 of
// lanes 4g..4g+3 and row g + 8 their halves 2, 3, 6, 7, one fused block each, so one mma adds 256 values of one
// row (fp8: two mmas per chunk, the lanes' values 0..7, then 8..15, as in tc_flat). Work split as tc_rows with a row for a row tile: rows go to groups of WPT warps
// (row = blockIdx.x*GROUPS + group, + gridDim.x*GROUPS per round), columns to `splits` ranges of whole chunks
// (blockIdx.y); warp q of a group takes chunks q, q + WPT, ..., UNROLL chunks in flight per step.
// Order: per warp the flush rule; lane value = acc_lo + acc_hi; warp_fold_rows; per row the group's warps are added
// in q order from 0.0f (one warp: its value); with splits > 1 the split values go to ws[row * splits + s] and the
// last block of the row adds them in s order from 0.0f.
// CPR > 0 (plan: rows of at most 4 chunks, WPT = 1, no splits): the warp's rows are taken RIF at a time, all their
// CPR chunks loaded before any mma, so short rows still keep RIF * CPR loads in flight; same arithmetic per row.
// RPC > 1 (plan: CPR = 1, rows packed back to back, ld = k = CHUNK / RPC, k a multiple of a quad's 4 * VEC elements):
// packed short rows. The unit a warp takes is a chunk of RPC whole rows, the contiguous CHUNK elements u * CHUNK ..
// (zero past the last row), loaded and mma'd as a long row's chunk, so a warp load reads 512 contiguous bytes where
// tc_rows reads 16 rows; every quad's mma rows g and g + 8 lie in one row (row lane / (32 / RPC) of the chunk). Order
// per row: lane value = acc_lo + acc_hi (one mma each: its fused block sums, added to 0); then the butterfly over the
// row's 8 / RPC quads, lane xor 16 / RPC first, down to xor 4 (warp_fold_rows restricted to the row's lanes).
template <typename T, int BLOCK, int WPT, int UNROLL, int CHAIN, typename OutT, int MINB, int CPR = 0, int RIF = 1,
          int RPC = 1>
__global__ void __launch_bounds__(BLOCK, MINB)
tc_rows_stream(const T* __restrict__ x, i64 m, i64 k, i64 ld, OutT* __restrict__ out, float* __restrict__ ws,
               unsigned* counters, i64 splits) {
    constexpr int WARPS = BLOCK / 32, GROUPS = WARPS / WPT, VEC = 16 / (int)sizeof(T), CHUNK = 32 * VEC;
    static_assert(WARPS % WPT == 0, "WPT must divide the warps of a block");
    __shared__ float red[WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int group = warp / WPT, q = warp % WPT;
    const i64 split = blockIdx.y;
    const SplitRange cols = split_range<CHUNK>(k, splits, split);
    const i64 c_begin = cols.begin, c_end = cols.end, nchunks = cols.nchunks;
    // the VEC elements of a row at column col (zero past c_end), raw: mma_vector16 makes them A fragments
    auto load_piece = [&](const T* __restrict__ xr, i64 col) -> uint4 {
        if (col + VEC <= c_end) return load16<2>(reinterpret_cast<const uint4*>(xr + col));
        return load16_raw_masked<T>(xr + col, c_end - col);
    };

    if constexpr (CPR > 0) {
        static_assert(WPT == 1 && RIF >= 1, "the short-row path has one warp per row");
        static_assert(RPC == 1 || (CPR == 1 && CHUNK % RPC == 0 && (CHUNK / RPC) % (4 * VEC) == 0),
                      "packed rows: whole quads per row, whole rows per chunk");
        constexpr int ROW_LANES = 32 / RPC;  // the lanes of one packed row
        const i64 units = RPC > 1 ? (m + RPC - 1) / RPC : m;  // the warps' units: rows, or chunks of RPC rows
        const i64 step = (i64)gridDim.x * GROUPS;
        for (i64 row0 = (i64)blockIdx.x * GROUPS + group; row0 < units; row0 += step * RIF) {
            uint4 v[RIF][CPR];
#pragma unroll
            for (int u = 0; u < RIF; ++u) {
                const i64 row = row0 + u * step;
#pragma unroll
                for (int c = 0; c < CPR; ++c) {
                    if constexpr (RPC > 1) {  // a lane holds whole elements of one row, or lies past the last row
                        const i64 e = row * CHUNK + VEC * lane;
                        v[u][c] = row < units && e < m * k ? load16<2>(reinterpret_cast<const uint4*>(x + e))
                                                           : make_uint4(0u, 0u, 0u, 0u);
                    } else {
                        v[u][c] = row < m ? load_piece(x + row * ld, (i64)c * CHUNK + VEC * lane)
                                          : make_uint4(0u, 0u, 0u, 0u);
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < RIF; ++u) {
                const i64 row = row0 + u * step;
                if (row >= units) break;  // warp-uniform
                RowAccumulator<T, CHAIN> acc;
#pragma unroll
                for (int c = 0; c < CPR; ++c) mma_vector16(acc, v[u][c]);
                acc.finish();
                if constexpr (RPC > 1) {
                    float total = acc.lo + acc.hi;
#pragma unroll
                    for (int off = ROW_LANES / 2; off >= 4; off >>= 1)
                        total += __shfl_xor_sync(0xffffffffu, total, off);
                    const i64 r = row * RPC + lane / ROW_LANES;
                    if (lane % ROW_LANES == 0 && r < m) out[r] = from_float<OutT>(total);
                } else {
                    const float total = warp_fold_rows(acc.lo + acc.hi);
                    if (lane == 0) out[row] = from_float<OutT>(total);
                }
            }
        }
    } else {
    // block-uniform row loop (the group combination synchronises the block)
    for (i64 row_base = (i64)blockIdx.x * GROUPS; row_base < m; row_base += (i64)gridDim.x * GROUPS) {
        const i64 row = row_base + group;
        RowAccumulator<T, CHAIN> acc;
        if (row < m) {  // warp-uniform
            const T* __restrict__ xr = x + row * ld;
            for (i64 ch = q; ch < nchunks; ch += (i64)WPT * UNROLL) {
                uint4 v[UNROLL];
#pragma unroll
                for (int u = 0; u < UNROLL; ++u)
                    v[u] = load_piece(xr, c_begin + (ch + (i64)u * WPT) * CHUNK + VEC * lane);
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    if (ch + (i64)u * WPT >= nchunks) break;  // warp-uniform
                    mma_vector16(acc, v[u]);
                }
            }
        }
        acc.finish();
        const float warp_total = warp_fold_rows(acc.lo + acc.hi);
        float row_total = warp_total;
        if (WPT > 1) {
            __syncthreads();
            if (lane == 0) red[warp] = warp_total;
            __syncthreads();
            row_total = 0.0f;
#pragma unroll
            for (int w = 0; w < WPT; ++w) row_total += red[group * WPT + w];
        }
        const bool writer = q == 0 && lane == 0 && row < m;
        if (splits == 1) {
            if (writer) out[row] = from_float<OutT>(row_total);
            continue;
        }
        // splits > 1: the plan makes WPT = WARPS (one row per block), so arrive_last is block-uniform
        if (writer) ws[row * splits + split] = row_total;
        if (arrive_last(counters + row, (unsigned)splits)) {
            if (threadIdx.x == 0) {
                out[row] = from_float<OutT>(ordered_sum_ldcg(ws + row * splits, splits));
            }
        }
    }
    }
}

// -------------------------------------------------------------------------------------------------- tc_cols
// Sums over a non-last axis (Cols problem: element (i, j, l) at i*sa + j*sr + l; out[i*b + l] = sum_j). Dakkak et
// al.'s product with ones along the other axis: the data are the A operand read transposed, B is all ones, so every
// mma row is one column's sum of 16 rows, and a fragment comes straight from 16-byte row loads and byte permutes (no
// transposing instruction, no shared memory). A warp owns a strip of 64 columns l0 .. l0+63 of one i and walks j in
// chunks of 16 rows. Lane (g, t) loads 8 elements of each of the rows j0 + 2t, j0 + 2t + 1, j0 + 2t + 8, j0 + 2t + 9
// at columns l0 + 8g .. l0 + 8g + 7 (one 16-byte load per row when aligned; fp8: 8-byte loads, converted to fp16 before the mma): each
// load instruction reads 4 rows x 128 contiguous bytes. For w = 0..3, prmt pairs the rows' halves 2w (and 2w + 1) into
// the A fragment of mma w: mma row g is column l0 + 8g + 2w and row g + 8 is column l0 + 8g + 2w + 1, k = the 16 rows
// in order (a[0]: rows 2t, 2t+1; a[2]: rows 2t+8, 2t+9). So every lane of quad g receives the sums of the 8 columns it
// loaded, and each mma output is one fused block of the 16 values x[j0 .. j0+15][col], k in row order.
// Work split: strips (i, l0) go to groups of WPS warps; rows are cut into `splits` ranges of whole 16-row chunks
// (blockIdx.y); warp q of a group takes chunks q, q + WPS, ... of its range. Order: per warp and column, the flush
// rule (per mma w; acc[2w] += c_w[row g], acc[2w+1] += c_w[row g+8]); per column, the group's warps in q order from
// 0.0f; with splits > 1 the split values go to ws[col_global * splits + s] and the last block of the strip adds them in
// s order from 0.0f.
// SHORT_UNROLL > 0 (plan: r <= 16, so one chunk per strip, WPS = 1, no splits): each warp loads SHORT_UNROLL adjacent
// strips before computing them, same arithmetic per strip (LE = 16: the mmas from a zero C into zero sums, the same
// flush). Otherwise a warp loads UNROLL of its chunks (q, q + WPS, ...) before computing them in that order: more
// bytes in flight, the same additions in the same order as one chunk at a time. ONE_ITEM (plan: no splits, a strip
// per warp group in one pass): col_strip_one_item, the same chunks in
// the same order and the same combination of a group's warps with nothing else compiled (no grid stride, no
// combination of splits) and, for CHAIN = 1, each mma from a zero C (the same bits as a zeroed c), so few registers
// at MINB blocks per SM (__launch_bounds__(BLOCK, MINB)); this repository's variant, not in the paper. LOAD (one-item
// path, 16-byte loads: 16-bit data, or fp8 at LE = 16): tcr::load16's mode for its whole chunks (0: __ldg; 3:
// evict-first in L1 and L2): the same values.
// LE (fp8 only, the one-item and general paths): elements each lane loads per row, 8 (64-column strips) or 16 (strips
// of SW = 128 columns: lane (g, t) loads columns l0 + 16g .. l0 + 16g + 15 with one 16-byte load per row, so a load
// instruction reads 4 rows x 128 bytes as fp16's does, and runs 8 mmas per chunk, mma w taking columns 16g + 2w and
// 16g + 2w + 1; in the general path each mma from a zero C for CHAIN = 1); every column's additions are the same as
// in a 64-column strip with the same splits and warps per strip, so the same sums.
namespace {
// The 4 rows lane (g, t) loads for a 16-row chunk starting at j0 (masked at j_end and at column bend); LE elements of
// each row (8, or 16 in fp8's wide strips).
template <typename T, bool ALIGNED, int LE = 8>
__device__ __forceinline__ void load_col_chunk(const T* __restrict__ xs, i64 j0, i64 j_end, i64 sr, i64 col, i64 bend,
                                               int t, RowPiece<T, LE> (&v)[4]) {
    load_row_piece<T, LE, ALIGNED>(xs, j0 + 2 * t, j_end, sr, col, bend, v[0]);
    load_row_piece<T, LE, ALIGNED>(xs, j0 + 2 * t + 1, j_end, sr, col, bend, v[1]);
    load_row_piece<T, LE, ALIGNED>(xs, j0 + 2 * t + 8, j_end, sr, col, bend, v[2]);
    load_row_piece<T, LE, ALIGNED>(xs, j0 + 2 * t + 9, j_end, sr, col, bend, v[3]);
}

// mma w (0 .. LE/2 - 1) of a loaded chunk: c[w] += the column sums of columns LE g + 2w (mma row g) and LE g + 2w + 1
// (row g + 8); FROM_ZERO (the flush after every mma): the mmas start from +0.0f instead of c (the same bits as a
// zeroed c) and their rows g and g + 8 go straight into acc[2w] and acc[2w + 1], so no C fragment is held across a
// walk. LE: elements per lane and row (8; 16 in fp8's wide strips: 8 mmas per chunk). fp8 A fragments: by default
// each word's two row pairs are interleaved, then converted (fp8_column_pairs: 2 byte permutes and 4 conversions per 4
// registers); CONVERT_FIRST (the short path's, whose 16-row strips load everything before the first mma: there the
// interleaved form held 84 registers against 72, 2 blocks per SM instead of 3, and read 10% slower on an H200) converts
// each row's pairs first, then permutes (4 and 4). The same A fragments either way.
template <typename T, bool FROM_ZERO = false, int LE = 8, bool CONVERT_FIRST = false>
__device__ __forceinline__ void mma_col_chunk(float (&c)[LE / 2][4], const RowPiece<T, LE> (&raw)[4],
                                              float (&acc)[LE]) {
    constexpr bool PAIRS_FIRST = is_fp8<T>::value && !CONVERT_FIRST;
    unsigned v[4][LE / 2];
    if constexpr (!is_fp8<T>::value || (CONVERT_FIRST && LE == 8)) {
#pragma unroll
        for (int row = 0; row < 4; ++row) raw[row].pairs(v[row]);
    }
    unsigned p01[4], p23[4];  // fp8: the column pairs of rows (0, 1) and (2, 3) of one word, elements 4k .. 4k + 3
#pragma unroll
    for (int w = 0; w < LE / 2; ++w) {
        unsigned a[4];
        if constexpr (PAIRS_FIRST) {  // each word's rows interleaved, then converted, just before its mmas
            if (w % 2 == 0) {
                fp8_column_pairs<T>(raw[0].w[w / 2], raw[1].w[w / 2], p01);
                fp8_column_pairs<T>(raw[2].w[w / 2], raw[3].w[w / 2], p23);
            }
            a[0] = p01[2 * (w % 2)];
            a[1] = p01[2 * (w % 2) + 1];
            a[2] = p23[2 * (w % 2)];
            a[3] = p23[2 * (w % 2) + 1];
        } else {
            if constexpr (is_fp8<T>::value && LE != 8) {  // each mma's pairs converted just before it
#pragma unroll
                for (int row = 0; row < 4; ++row) v[row][w] = fp8x2_to_half2<T>(raw[row].w[w / 2] >> (16 * (w % 2)));
            }
            a[0] = __byte_perm(v[0][w], v[1][w], 0x5410);
            a[1] = __byte_perm(v[0][w], v[1][w], 0x7632);
            a[2] = __byte_perm(v[2][w], v[3][w], 0x5410);
            a[3] = __byte_perm(v[2][w], v[3][w], 0x7632);
        }
        if constexpr (FROM_ZERO) {
            float d[4];
            mma_rowsum_from_zero<T>(d, a);
            acc[2 * w] += d[0];
            acc[2 * w + 1] += d[2];
        } else {
            mma_rowsum<T>(c[w], a);
        }
    }
}

// Lane (g, t) holds acc[e] = column 8g + e; it writes columns 8g + 2t and 8g + 2t + 1 (a warp: 64 in a row). BASE:
// the same from acc[BASE .. BASE + 7] (a wide strip's lane holds 16 columns, pick_pairs).
template <int N = 8, int BASE = 0>
__device__ __forceinline__ void pick_pair(const float (&acc)[N], int t, float& v0, float& v1) {
    v0 = acc[BASE];
    v1 = acc[BASE + 1];
#pragma unroll
    for (int e = 1; e < 4; ++e) {
        if (t == e) { v0 = acc[BASE + 2 * e]; v1 = acc[BASE + 2 * e + 1]; }
    }
}

// Lane (g, t) holds acc[e] = column LE g + e (e < LE); it writes columns LE g + 8k + 2t and LE g + 8k + 2t + 1 for
// k < LE / 8 (LE 8 or 16), as v[2k] and v[2k + 1].
template <int LE>
__device__ __forceinline__ void pick_pairs(const float (&acc)[LE], int t, float (&v)[LE / 4]) {
    pick_pair<LE, 0>(acc, t, v[0], v[1]);
    if constexpr (LE == 16) pick_pair<LE, 8>(acc, t, v[2], v[3]);
}

// Stores pick_pairs' v (columns col + 8k and col + 8k + 1 as v[2k] and v[2k + 1], k < LE / 8) into row i of out (b
// columns), the columns at or past b dropped. A pair that lies whole in the row at an address aligned to its size goes
// in one store (float2, double2 or two halves in 32 bits: a warp's store then covers its 8 LE columns back to back,
// where two stores of every other column each covered half of them); the same values either way.
template <int LE, typename OutT>
__device__ __forceinline__ void store_pairs(OutT* __restrict__ out, i64 i, i64 b, i64 col, const float (&v)[LE / 4]) {
    OutT* const row = out + i * b;
#pragma unroll
    for (int k = 0; k < LE / 8; ++k) {
        OutT* const dst = row + col + 8 * k;
        if (col + 8 * k + 1 < b && (reinterpret_cast<unsigned long long>(dst) & (2 * sizeof(OutT) - 1)) == 0) {
            *reinterpret_cast<typename PairWord<OutT>::type*>(dst) = output_pair<OutT>(v[2 * k], v[2 * k + 1]);
        } else {
            if (col + 8 * k < b) dst[0] = from_float<OutT>(v[2 * k]);
            if (col + 8 * k + 1 < b) dst[1] = from_float<OutT>(v[2 * k + 1]);
        }
    }
}

// The 4 rows lane (g, t) loads of a 16-row chunk of a strip of 8 LE whole columns, p pointing at its row 2t, column
// l0 + LE g (one vector load per row): rows 2t, 2t + 1, 2t + 8, 2t + 9, those at or past `rows_left` rows from p as
// zeros (a partial last chunk; whole chunks pass 16, which masks nothing).
template <typename T, int LOAD, int LE = 8>
__device__ __forceinline__ void load_col_chunk_rows(const T* __restrict__ p, i64 sr, int rows_left,
                                                    RowPiece<T, LE> (&v)[4], unsigned long long policy) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int row = (k & 1) + (k >> 1) * 8;
#pragma unroll
        for (int w = 0; w < RowPiece<T, LE>::WORDS; ++w) v[k].w[w] = 0u;
        if (row < rows_left) v[k].template load<LOAD>(p + (k & 1) * sr + (k >> 1) * 8 * sr, policy);
    }
}

// One chunk of tc_cols' walk: its 4 mmas into c, then the flush rule (every CHAIN chunks: acc += c, c = 0); with
// FROM_ZERO (CHAIN 1 only) the mmas start from zero and flush at once (mma_col_chunk).
template <typename T, int CHAIN, bool FROM_ZERO = false, int LE = 8>
__device__ __forceinline__ void col_chunk_step(float (&c)[LE / 2][4], float (&acc)[LE], int& pending,
                                               const RowPiece<T, LE> (&v)[4]) {
    static_assert(!FROM_ZERO || CHAIN == 1, "mmas from zero are the flush after every mma");
    mma_col_chunk<T, FROM_ZERO, LE>(c, v, acc);
    if (!FROM_ZERO && ++pending == CHAIN) {
#pragma unroll
        for (int w = 0; w < LE / 2; ++w) {
            acc[2 * w] += c[w][0];
            acc[2 * w + 1] += c[w][2];
            c[w][0] = c[w][1] = c[w][2] = c[w][3] = 0.0f;
        }
        pending = 0;
    }
}

// tc_cols' ONE_ITEM path: one strip per group of WPS warps (no splits, one pass); warp q walks the strip's chunks q,
// q + WPS, ... in order, as the general path does. A strip of SW = 8 LE whole columns (ALIGNED) walks its whole chunks
// from one pointer with unmasked loads, UNROLL in flight, then the partial last chunk (its warp's) with its rows
// masked; other strips mask every load. With WPS > 1 the group's warps combine through red in q order from 0.0f, as
// the general path does. Written to hold nothing but the walk across it (the strip's place is read again for the
// store). LE: elements per lane and row, 8 (64-column strips) or, for fp8, 16 (128-column strips: every load 16 bytes,
// 8 mmas per chunk); every column's additions are the same either way.
template <typename T, int BLOCK, int WPS, bool ALIGNED, int CHAIN, typename OutT, int UNROLL, int LOAD, int LE>
__device__ __forceinline__ void col_strip_one_item(const T* __restrict__ x, i64 r, i64 b, i64 sa, i64 sr,
                                                   OutT* __restrict__ out, i64 strips_per_i, i64 nstrips,
                                                   float (&red)[BLOCK / 32][8 * LE]) {
    constexpr int SW = 8 * LE, GROUPS = BLOCK / 32 / WPS;
    // this warp's strip, q and lane (g, t), read again for the store rather than held across the walk
    const auto strip_of = []() { return (i64)blockIdx.x * GROUPS + (threadIdx.x >> 5) / WPS; };
    float c[LE / 2][4] = {};
    float acc[LE] = {};
    int pending = 0;
    // warp-uniform; WPS 1: the caller returned past the last strip (a group there with WPS > 1 meets the barrier)
    if (WPS == 1 || strip_of() < nstrips) {
        const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3, q = (threadIdx.x >> 5) % WPS;
        const i64 strip = strip_of(), i = strip / strips_per_i, l0 = (strip - i * strips_per_i) * SW;
        const T* __restrict__ xs = x + i * sa;
        const i64 nchunks = (r + 15) / 16, whole = r / 16;
        if (ALIGNED && l0 + SW <= b) {  // warp-uniform
            unsigned long long policy = 0ull;
            if constexpr (LOAD == 3) policy = evict_first_policy();
            const i64 cstep = 16 * WPS * sr;  // from chunk ch to ch + WPS
            const T* __restrict__ p = xs + (16 * q + 2 * t) * sr + l0 + LE * g;
            i64 left = q < whole ? (whole - q + WPS - 1) / WPS : 0;  // chunks q, q + WPS, ... below whole
#pragma unroll 1
            for (; left >= UNROLL; left -= UNROLL, p += UNROLL * cstep) {
                RowPiece<T, LE> v[UNROLL][4];
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    load_col_chunk_rows<T, LOAD, LE>(p + u * cstep, sr, 16, v[u], policy);
                }
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) col_chunk_step<T, CHAIN, CHAIN == 1, LE>(c, acc, pending, v[u]);
            }
#pragma unroll 1
            for (; left > 0; --left, p += cstep) {
                RowPiece<T, LE> v[4];
                load_col_chunk_rows<T, LOAD, LE>(p, sr, 16, v, policy);
                col_chunk_step<T, CHAIN, CHAIN == 1, LE>(c, acc, pending, v);
            }
            if ((r & 15) && whole % WPS == q) {  // the partial last chunk, where this warp's walk stopped (p: row
                RowPiece<T, LE> v[4];             // 16 * whole + 2t)
                load_col_chunk_rows<T, LOAD, LE>(p, sr, (int)(r & 15) - 2 * t, v, policy);
                col_chunk_step<T, CHAIN, CHAIN == 1, LE>(c, acc, pending, v);
            }
        } else {  // every chunk masked: an unaligned view's walk, or an aligned one's partial last strip (rare: one
                  // chunk in flight, element loads, so few registers; the same values)
            constexpr int U = ALIGNED ? 1 : UNROLL;
#pragma unroll 1
            for (i64 ch = q; ch < nchunks; ch += (i64)WPS * U) {
                RowPiece<T, LE> v[U][4];
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    load_col_chunk<T, false, LE>(xs, (ch + (i64)u * WPS) * 16, r, sr, l0 + LE * g, b, t, v[u]);
                }
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    if (ch + (i64)u * WPS >= nchunks) break;  // warp-uniform
                    col_chunk_step<T, CHAIN, CHAIN == 1, LE>(c, acc, pending, v[u]);
                }
            }
        }
    }
    if (pending) {
#pragma unroll
        for (int w = 0; w < LE / 2; ++w) { acc[2 * w] += c[w][0]; acc[2 * w + 1] += c[w][2]; }
    }
    float v[LE / 4];  // this lane's columns c0(k) = LE g + 8k + 2t and c0(k) + 1 (k < LE / 8) as v[2k], v[2k + 1]
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3, c0 = LE * g + 2 * t;
    pick_pairs<LE>(acc, t, v);
    if constexpr (WPS > 1) {
        const int warp = threadIdx.x >> 5, first = warp - warp % WPS;
#pragma unroll
        for (int k = 0; k < LE / 8; ++k) {
            red[warp][c0 + 8 * k] = v[2 * k];
            red[warp][c0 + 8 * k + 1] = v[2 * k + 1];
        }
        __syncthreads();
        if (warp != first) return;
#pragma unroll
        for (int k = 0; k < LE / 8; ++k) {
            v[2 * k] = v[2 * k + 1] = 0.0f;
#pragma unroll
            for (int w = 0; w < WPS; ++w) {
                v[2 * k] += red[first + w][c0 + 8 * k];
                v[2 * k + 1] += red[first + w][c0 + 8 * k + 1];
            }
        }
    }
    const i64 strip = strip_of(), i = strip / strips_per_i;
    const i64 col = (strip - i * strips_per_i) * SW + c0;
    if (WPS > 1 && strip >= nstrips) return;
    store_pairs<LE>(out, i, b, col, v);
}
}  // namespace

template <typename T, int BLOCK, int WPS, bool ALIGNED, int CHAIN, typename OutT, int SHORT_UNROLL, int UNROLL,
          int MINB, bool ONE_ITEM, int LOAD = 0, int LE = 8>
__global__ void __launch_bounds__(BLOCK, MINB)
tc_cols(const T* __restrict__ x, i64 a, i64 r, i64 b, i64 sa, i64 sr, OutT* __restrict__ out,
        float* __restrict__ ws, unsigned* counters, i64 splits) {
    constexpr int WARPS = BLOCK / 32, GROUPS = WARPS / WPS, SW = 8 * LE;  // SW: columns per warp strip
    static_assert(WARPS % WPS == 0, "WPS must divide the warps of a block");
    static_assert(LE == 8 || (LE == 16 && is_fp8<T>::value),
                  "LE: 8 elements per lane and row, or 16 (128-column strips) for fp8");
    __shared__ float red[WARPS][SW];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int group = warp / WPS, q = warp % WPS;
    const i64 strips_per_i = (b + SW - 1) / SW;
    const i64 nstrips = a * strips_per_i;
    const i64 split = blockIdx.y;
    const SplitRange rows = split_range<16>(r, splits, split);
    const i64 j_begin = rows.begin, j_end = rows.end, nchunks = rows.nchunks;

    if constexpr (ONE_ITEM) {  // one pass, no splits
        static_assert(SHORT_UNROLL == 0, "the one-item path walks 16-row chunks");
        if (WPS == 1 && (i64)blockIdx.x * GROUPS + group >= nstrips) return;  // (no barrier for WPS 1)
        col_strip_one_item<T, BLOCK, WPS, ALIGNED, CHAIN, OutT, UNROLL, LOAD, LE>(x, r, b, sa, sr, out,
                                                                                  strips_per_i, nstrips, red);
        return;
    } else if constexpr (SHORT_UNROLL > 0) {
        static_assert(WPS == 1, "the short-column path has one warp per strip");
        const i64 step = (i64)gridDim.x * GROUPS;
        // a warp takes SHORT_UNROLL adjacent strips at a time: each row it reads is one contiguous run of
        // SHORT_UNROLL * SW elements
        for (i64 s0 = ((i64)blockIdx.x * GROUPS + group) * SHORT_UNROLL; s0 < nstrips; s0 += step * SHORT_UNROLL) {
            RowPiece<T, LE> v[SHORT_UNROLL][4];
#pragma unroll
            for (int u = 0; u < SHORT_UNROLL; ++u) {
                const i64 strip = s0 + u;
                const bool ok = strip < nstrips;
                const i64 i = ok ? strip / strips_per_i : 0, l0 = ok ? (strip % strips_per_i) * SW : 0;
                load_col_chunk<T, ALIGNED, LE>(x + i * sa, 0, r, sr, l0 + LE * g, ok ? b : 0, t, v[u]);
            }
#pragma unroll
            for (int u = 0; u < SHORT_UNROLL; ++u) {
                const i64 strip = s0 + u;
                if (strip >= nstrips) break;  // warp-uniform
                const i64 i = strip / strips_per_i, l0 = (strip % strips_per_i) * SW;
                float c[LE / 2][4] = {};
                float acc[LE];
                if constexpr (LE == 8) {
                    mma_col_chunk<T, false, 8, true>(c, v[u], acc);
#pragma unroll
                    for (int w = 0; w < 4; ++w) {
                        acc[2 * w] = 0.0f + c[w][0];  // the flush of the general path: acc (0) += c
                        acc[2 * w + 1] = 0.0f + c[w][2];
                    }
                } else {  // fp8's 128-column strips: the mmas from a zero C into acc (0): the same flush
#pragma unroll
                    for (int e = 0; e < LE; ++e) acc[e] = 0.0f;
                    mma_col_chunk<T, true, LE, true>(c, v[u], acc);
                }
                float tot[LE / 4];  // columns l0 + LE g + 8k + 2t, + 1 (k < LE / 8)
                pick_pairs<LE>(acc, t, tot);
                store_pairs<LE>(out, i, b, l0 + LE * g + 2 * t, tot);
            }
        }
        return;
    } else {
    // LE = 16 (fp8's 128-column strips): 8 mmas per chunk and, for CHAIN = 1, each from a zero C (the same bits as a
    // zeroed c: the flush after every mma), so no C fragment is held across the walk
    constexpr bool FROM_ZERO = LE != 8 && CHAIN == 1;
    for (i64 strip_base = (i64)blockIdx.x * GROUPS; strip_base < nstrips; strip_base += (i64)gridDim.x * GROUPS) {
        const i64 strip = strip_base + group;
        const bool strip_ok = strip < nstrips;
        const i64 i = strip_ok ? strip / strips_per_i : 0;
        const i64 l0 = strip_ok ? (strip % strips_per_i) * SW : 0;
        const i64 bend = strip_ok ? b : 0;  // masks every load of a strip past the end
        const T* __restrict__ xs = x + i * sa;
        float c[LE / 2][4] = {};
        float acc[LE] = {};
        int pending = 0;
        for (i64 ch = q; ch < nchunks; ch += (i64)WPS * UNROLL) {
            RowPiece<T, LE> v[UNROLL][4];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                // rows past j_end load zeros (no memory access): chunks past the end cost no traffic
                load_col_chunk<T, ALIGNED, LE>(xs, j_begin + (ch + (i64)u * WPS) * 16, j_end, sr, l0 + LE * g, bend, t,
                                               v[u]);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                if (ch + (i64)u * WPS >= nchunks) break;  // warp-uniform
                col_chunk_step<T, CHAIN, FROM_ZERO, LE>(c, acc, pending, v[u]);
            }
        }
        if (pending) {
#pragma unroll
            for (int w = 0; w < LE / 2; ++w) { acc[2 * w] += c[w][0]; acc[2 * w + 1] += c[w][2]; }
        }
        // lane (g, t) holds columns l0 + LE g + 0 .. LE - 1; it answers for l0 + LE g + 8k + 2t, + 1 (k < LE / 8)
        float tot[LE / 4];
        pick_pairs<LE>(acc, t, tot);
        const int c0 = LE * g + 2 * t;  // this lane's first column in the strip
        if (WPS > 1) {
            __syncthreads();
#pragma unroll
            for (int k = 0; k < LE / 8; ++k) {
                red[warp][c0 + 8 * k] = tot[2 * k];
                red[warp][c0 + 8 * k + 1] = tot[2 * k + 1];
            }
            __syncthreads();
#pragma unroll
            for (int k = 0; k < LE / 4; ++k) tot[k] = 0.0f;
            if (q == 0) {
#pragma unroll
                for (int w = 0; w < WPS; ++w) {
#pragma unroll
                    for (int k = 0; k < LE / 8; ++k) {
                        tot[2 * k] += red[group * WPS + w][c0 + 8 * k];
                        tot[2 * k + 1] += red[group * WPS + w][c0 + 8 * k + 1];
                    }
                }
            }
        }
        const i64 col = l0 + c0;
        if (splits == 1) {
            if (q == 0 && strip_ok) store_pairs<LE>(out, i, b, col, tot);
            continue;
        }
        if (q == 0 && strip_ok) {
#pragma unroll
            for (int k = 0; k < LE / 8; ++k) {
                ws[(strip * SW + c0 + 8 * k) * splits + split] = tot[2 * k];
                ws[(strip * SW + c0 + 8 * k + 1) * splits + split] = tot[2 * k + 1];
            }
        }
        if (arrive_last(counters + strip, (unsigned)splits)) {
            if (threadIdx.x < SW && l0 + threadIdx.x < b) {
                out[i * b + l0 + threadIdx.x] =
                    from_float<OutT>(ordered_sum_ldcg(ws + (strip * SW + threadIdx.x) * splits, splits));
            }
        }
    }
    }
}
