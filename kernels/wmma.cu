// wmma.cu: method "wmma", the tensor-core reductions of Dakkak, Li, Xiong, Gelado and Hwu, "Accelerating Reduction
// and Scan Using Tensor Core Units", ICS 2019 (public code c3sr/tcu_scope, src/reduction/kernel.cuh and
// seg_wmma_{16,16n,256,256n,256n_block}.cu), on nvcuda::wmma 16x16x16 fragments with FLOAT accumulators where the
// paper used half. The plan for these kernels is tcreduce/plans/wmma.py.
//
// Input formats (template parameter T, the type of every data, P and hand-off fragment): __half (fp16, the paper's)
// and __nv_bfloat16 (bf16, sm_80+: wmma::fragment<matrix_a, 16, 16, 16, __nv_bfloat16, row_major> with a float
// accumulator). The two differ only in the ones of P / P^T (0x3C00 / 0x3F80, tcr::HALF2_ONES / BF16X2_ONES) and in
// HANDOFF (below); loads, staging, the transposing copy (a 16-bit copy for both) and the order of every addition
// are the same. For bf16 the tensor core follows fp16's rule with bf16's exponent range (16 products per block, 25
// fraction bits below the block's largest exponent, truncation, round toward zero: tcreduce/emulate/mma_model.py).
//
// ------------------------------------------------------------------------------------------------ notation
// P    16x16 T, first ROW ones, zeros elsewhere (the paper's r_frag of seg_wmma_256*: operand A).
// P^T  16x16 T, first COLUMN ones (operand B; also the "P" of Reduction16, whose first column is ones).
// TC(c; a_0..a_15)   one tensor-core product for one output element: the fp32 result of c + sum_q a_q * 1 computed by
//      wmma::mma_sync (m16n16k16, T x T + f32), i.e. one m16n8k16 HMMA per 8 output columns, k = q = 0..15, with the
//      hardware's block-FMA arithmetic (exact products, alignment to the largest exponent, truncation, round toward
//      zero: tcreduce/emulate/mma_model.py). Products with the zeros of P / P^T are exact zeros and add nothing, so
//      every element the kernels read is such a TC of 16 data values (or of 16 hand-off parts, below) onto c.
// A chain "acc = TC(acc; tile_0), acc = TC(acc; tile_1), ..." starts from acc = +0.0f (wmma::fill_fragment 0).
// Tiles are staged through shared memory, so which value sits at which matrix position is exactly as written below,
// whatever the load path (16-byte vector loads when the plan says the rows are 16-byte aligned, masked scalar loads
// otherwise); positions past the end of a row (or of the rows) hold +0.
//
// HANDOFF(v_0..v_15): the sum of 16 fp32 values through a T operand, used wherever the paper stores an accumulator
// to shared memory and loads it back as a half operand for the product with P^T. Each value is split into three T
// parts hi + mid + lo, and
//   d = TC(TC(TC(+0; lo_0..lo_15); mid_0..mid_15); hi_0..hi_15)   (three chained wmma products with P^T, lo first).
// fp16 (11 significant bits, largest 65504): converting fp32 partial sums to one half each would lose 13 bits and
// overflow above 65504, so each row is first scaled by a power of two:
//   amax = max |v_j| over the finite v_j;  sh = 0 if amax == 0 else 14 - floor(log2(amax))   (exact, from the bits)
//   w_j  = ldexpf(v_j, sh)             (exact: the largest finite w lies in [2^14, 2^15))
//   hi_j = half_rn(w_j); mid_j = half_rn(w_j - hi_j); lo_j = half_rn((w_j - hi_j) - mid_j)   (fp32 subtractions exact)
//          (non-finite w_j: hi_j = half_rn(w_j), mid_j = lo_j = 0, so Inf stays Inf and NaN stays NaN)
//   HANDOFF = ldexpf(d, -sh)            (exact unless the fp32 result is subnormal: then rounded once, to nearest)
// The split is exact for every |w_j| >= 2^-1 (24 significant bits = 11 + 11 + 2 half bits, all above 2^-24); smaller
// w_j lose at most 2^-25 each (half's subnormal step), i.e. at most 2^-39 * amax per value in unscaled terms. So the
// hand-off adds no rounding of its own beyond 16 * 2^-39 * amax: its error is that of the three TC steps summing the
// 48 parts (each step: truncation to the tensor core's alignment width plus one round toward zero, <= a few 2^-23
// relative to the sum of |v_j|). The paper, with half partials, lost 2^-11 here.
// bf16 (8 significant bits but fp32's exponent range, so no scaling; no part exceeds its value): each value is cut
// into three bf16 truncations, from the bits, with no rounding anywhere:
//   hi_j = RZ16(v_j);  r_j = v_j - hi_j (fp32, exact);  mid_j = RZ16(r_j);  lo_j = RZ16(r_j - mid_j) (exact)
//   where RZ16(v) keeps the top 16 bits of v's fp32 encoding (v truncated toward zero to 8 significant bits, or to
//   bf16's subnormal step 2^-133), i.e. that bf16 as is;
//          (non-finite v_j: hi_j = bf16_rn(v_j), mid_j = lo_j = 0, so Inf stays Inf and NaN stays NaN)
//   HANDOFF = d.
// With v_j's leading bit at 2^e: hi_j holds bits e .. e-7, r_j the rest (bits e-8 .. e-23), mid_j the top 8 bits of
// r_j (from r_j's own leading bit) and lo_j the rest, at most 8 bits (8 + 8 + 8 = fp32's 24, no slack, where fp16's
// 11 + 11 + 11 has 9 bits to spare but 5 exponent bits), so hi + mid + lo = v exactly whenever lo is a
// bf16, i.e. whenever v is a multiple of 2^-133 (only bits below bf16's smallest subnormal are lost, < 2^-133 per
// value otherwise). Every partial sum the kernels hand off IS a multiple of 2^-133: every bf16 value is, and every
// tensor-core result and fp32 addition of such multiples is too (each rounds onto a power-of-two grid: a coarser
// grid keeps them multiples, a finer one leaves them unchanged). So for bf16 the hand-off is exact for every
// reachable value; truncation (round-to-nearest pieces would be exact too) makes the parts share v_j's sign
// (|hi| + |mid| + |lo| = |v|), and the hand-off's error is only that of the three TC steps summing the 48 parts.
// One HANDOFF per row of a 16x16 fp32 matrix S is computed at once (rows are independent: row i's parts form row i
// of the three T operands, row i's shift (fp16) is its own, and the result is column 0 of the product with P^T).
//
// Every kernel is deterministic (no float atomics; the one atomicAdd is on the integer arrival counter of
// tcr::arrive_last) and indexes in 64 bits. Kernel arguments follow ARCHITECTURE.md (rows form), with one extra
// trailing integer for the block kernel (tiles per block).
#include <mma.h>
#include "common.cuh"

namespace tcr_wmma {

using namespace nvcuda;
using tcr::i64;

enum : unsigned { FULL = 0xffffffffu };
enum { STAGE = 4 };  // tiles loaded and staged per warp per batch (loads in flight)

template <typename T>
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <typename T>
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> FragC;

// The T with raw bits b (a bit copy).
template <typename T> __device__ __forceinline__ T from_bits(unsigned short b);
template <> __device__ __forceinline__ __half from_bits<__half>(unsigned short b) { return __ushort_as_half(b); }
template <> __device__ __forceinline__ __nv_bfloat16 from_bits<__nv_bfloat16>(unsigned short b) {
    return __ushort_as_bfloat16(b);
}

// P (first row ones) into p_row, P^T (first column ones) into p_col; 16x16 row-major T each. One: 0x3C00 (fp16) or
// 0x3F80 (bf16), the low half of common.cuh's HALF2_ONES / BF16X2_ONES.
template <typename T>
__device__ __forceinline__ void init_ones(T* p_row, T* p_col) {
    constexpr unsigned short ONE = (unsigned short)((tcr::is_bf16<T>::value ? tcr::BF16X2_ONES : tcr::HALF2_ONES) &
                                                    0xffffu);
    const T one = from_bits<T>(ONE), zero = from_bits<T>(0);
    for (int i = threadIdx.x; i < 256; i += blockDim.x) {
        p_row[i] = i < 16 ? one : zero;
        p_col[i] = (i & 15) == 0 ? one : zero;
    }
}

// p[pos .. pos+8) as 8 packed 16-bit elements (element 2q in the low half of word q), +0 where pos + e >= k. VEC:
// p + pos is 16-byte aligned whenever pos is a multiple of 8 (the plan checks the base address and the row stride),
// so an in-range octet is one 16-byte load.
template <typename T, bool VEC>
__device__ __forceinline__ uint4 load8(const T* __restrict__ p, i64 pos, i64 k) {
    if (VEC && pos + 8 <= k) return __ldg(reinterpret_cast<const uint4*>(p + pos));
    unsigned w[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const i64 e = pos + 2 * q;
        const unsigned lo = e < k ? tcr::load1_as_bits16(p + e) : 0u;
        const unsigned hi = e + 1 < k ? tcr::load1_as_bits16(p + e + 1) : 0u;
        w[q] = lo | (hi << 16);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ bool finite_f(float v) { return (__float_as_uint(v) & 0x7f800000u) != 0x7f800000u; }

// sh = 14 - floor(log2(amax)) for amax > 0 (subnormals included), 0 for amax == 0.
__device__ __forceinline__ int handoff_shift(float amax) {
    if (!(amax > 0.0f)) return 0;
    const unsigned b = __float_as_uint(amax);
    const int ef = (int)(b >> 23);
    const int e = ef ? ef - 127 : (31 - __clz((int)b)) - 149;
    return 14 - e;
}

// Exact three-way split of an fp32 value into halves (fp16 HANDOFF in the header; w already scaled).
__device__ __forceinline__ void split3(float w, __half& hi, __half& mid, __half& lo) {
    hi = __float2half_rn(w);
    if (!finite_f(w)) {
        mid = lo = __ushort_as_half((unsigned short)0);
        return;
    }
    const float r1 = __fsub_rn(w, __half2float(hi));
    mid = __float2half_rn(r1);
    const float r2 = __fsub_rn(r1, __half2float(mid));
    lo = __float2half_rn(r2);
}

// RZ16 of the header: the bf16 made of the top 16 bits of v's fp32 encoding (v truncated toward zero).
__device__ __forceinline__ unsigned short rz16_bits(float v) { return (unsigned short)(__float_as_uint(v) >> 16); }
__device__ __forceinline__ float rz16(float v) { return __uint_as_float(__float_as_uint(v) & 0xffff0000u); }

// Three-way truncating split of an fp32 value into bf16s (bf16 HANDOFF in the header; no scaling): exact for every
// multiple of 2^-133, which every partial sum of bf16 data is.
__device__ __forceinline__ void split3(float v, __nv_bfloat16& hi, __nv_bfloat16& mid, __nv_bfloat16& lo) {
    if (!finite_f(v)) {
        hi = __float2bfloat16_rn(v);
        mid = lo = __ushort_as_bfloat16((unsigned short)0);
        return;
    }
    const float h = rz16(v);
    const float r1 = __fsub_rn(v, h);  // exact: the low 16 bits of v's significand
    const float m = rz16(r1);
    const float r2 = __fsub_rn(r1, m);  // exact: the low bits of r1
    hi = __ushort_as_bfloat16(rz16_bits(h));
    mid = __ushort_as_bfloat16(rz16_bits(m));
    lo = __ushort_as_bfloat16(rz16_bits(r2));
}

// HANDOFF of every row of S (16x16 fp32, row-major, shared, 32-byte aligned). H: 768 T of shared scratch
// (32-byte aligned). The whole warp calls it. Lane i < 16 returns HANDOFF(S[i][0..15]); lanes >= 16 return 0.
// S is overwritten (the product is stored there).
template <typename T>
__device__ float handoff_rows(float* S, T* H, const FragB<T>& p_col, int lane) {
    constexpr bool SCALED = !tcr::is_bf16<T>::value;  // fp16 scales each row by 2^sh; bf16 needs no scaling
    int my_sh = 0;
#pragma unroll
    for (int it = 0; it < 8; ++it) {  // rows 2it (lanes 0-15) and 2it+1 (lanes 16-31)
        const int idx = it * 32 + lane;
        const float v = S[idx];
        T hi, mid, lo;
        if constexpr (SCALED) {
            float a = finite_f(v) ? fabsf(v) : 0.0f;
            a = fmaxf(a, __shfl_xor_sync(FULL, a, 8));
            a = fmaxf(a, __shfl_xor_sync(FULL, a, 4));
            a = fmaxf(a, __shfl_xor_sync(FULL, a, 2));
            a = fmaxf(a, __shfl_xor_sync(FULL, a, 1));
            const int sh = handoff_shift(a);
            split3(ldexpf(v, sh), hi, mid, lo);
            const int s0 = __shfl_sync(FULL, sh, 0), s1 = __shfl_sync(FULL, sh, 16);
            if ((lane >> 1) == it) my_sh = (lane & 1) ? s1 : s0;
        } else {
            split3(v, hi, mid, lo);
        }
        H[idx] = hi;
        H[256 + idx] = mid;
        H[512 + idx] = lo;
    }
    __syncwarp();
    FragA<T> a_lo, a_mid, a_hi;
    wmma::load_matrix_sync(a_lo, H + 512, 16);
    wmma::load_matrix_sync(a_mid, H + 256, 16);
    wmma::load_matrix_sync(a_hi, H, 16);
    FragC d;
    wmma::fill_fragment(d, 0.0f);
    wmma::mma_sync(d, a_lo, p_col, d);
    wmma::mma_sync(d, a_mid, p_col, d);
    wmma::mma_sync(d, a_hi, p_col, d);
    wmma::store_matrix_sync(S, d, 16, wmma::mem_col_major);  // column 0 of d -> S[0..15]
    __syncwarp();
    float r = 0.0f;
    if (lane < 16) r = SCALED ? ldexpf(S[lane], -my_sh) : S[lane];
    __syncwarp();
    return r;
}

}  // namespace tcr_wmma

// =====================================================================================================================
// Reduction16 / Reduction16n (seg_wmma_16.cu, seg_wmma_16n.cu): last-axis sums of short rows.
// Rows(m, k, ld): row rho is x[rho*ld + 0 .. k). Group g is rows 16g .. 16g+15 (rows >= m read as +0); its
// n = ceil(k/16) tiles are chained into ONE fp32 accumulator:
//   A_c[i][j] = x[(16g+i)*ld + 16c + j]  (+0 where 16g+i >= m or 16c+j >= k),  c = 0 .. n-1 ascending,
//   acc = +0; acc = A_c * P^T + acc  for c = 0, 1, ..., n-1       (wmma::mma_sync(acc, A_c, P^T, acc))
// so out[16g+i] = OutT( acc[i][0] ) with acc[i][0] = TC(...TC(TC(+0; row i, cols 0..15); cols 16..31)...; cols 16(n-1)..)
// (the paper's Reduction16 when k == 16). The fp32 accumulator is stored to shared memory and read back as fp32 (no
// hand-off). Scheduling (no effect on the arithmetic): warp v of the grid (nw warps) takes the groups
// g = v + nw*(STAGE*q + u), u = 0..STAGE-1, q = 0, 1, ..., STAGE groups at once, each with its own accumulator.
// Arguments: splits is unused (1).
template <typename T, typename OutT, bool VEC, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
    wmma_rows16(const T* __restrict__ x, long long m, long long k, long long ld, OutT* __restrict__ out,
                float* __restrict__ ws, unsigned* __restrict__ counters, long long splits) {
    using namespace tcr_wmma;
    __shared__ __align__(128) T ones[2][256];
    __shared__ __align__(128) T stage[WARPS][STAGE * 256];  // its first 1 KB also holds an fp32 accumulator
    init_ones(ones[0], ones[1]);
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    T* st = stage[warp];
    float* fs = reinterpret_cast<float*>(st);
    FragB<T> p_col;
    wmma::load_matrix_sync(p_col, ones[1], 16);
    const i64 groups = (m + 15) / 16, chunks = (k + 15) / 16;
    const i64 nw = (i64)gridDim.x * WARPS;
    const int jo = 8 * (lane & 1);  // this lane loads row lane/2 of a tile, columns jo .. jo+7
    for (i64 g0 = (i64)blockIdx.x * WARPS + warp; g0 < groups; g0 += nw * STAGE) {
        const T* p[STAGE];
        i64 kk[STAGE];
#pragma unroll
        for (int u = 0; u < STAGE; ++u) {
            const i64 row = (g0 + u * nw) * 16 + (lane >> 1);
            const bool live = g0 + u * nw < groups && row < m;
            kk[u] = live ? k : 0;  // rows past m (and groups past the last) read as zeros
            p[u] = x + (live ? row : 0) * ld;
        }
        FragC acc[STAGE];
        uint4 buf[STAGE];
#pragma unroll
        for (int u = 0; u < STAGE; ++u) {
            wmma::fill_fragment(acc[u], 0.0f);
            buf[u] = load8<T, VEC>(p[u], jo, kk[u]);
        }
        for (i64 c = 0; c < chunks; ++c) {
            __syncwarp();  // the previous tiles' fragments are loaded
#pragma unroll
            for (int u = 0; u < STAGE; ++u) reinterpret_cast<uint4*>(st + u * 256)[lane] = buf[u];
            __syncwarp();
            if (c + 1 < chunks) {  // next tiles in flight during these products
#pragma unroll
                for (int u = 0; u < STAGE; ++u) buf[u] = load8<T, VEC>(p[u], (c + 1) * 16 + jo, kk[u]);
            }
#pragma unroll
            for (int u = 0; u < STAGE; ++u) {
                if (g0 + u * nw < groups) {
                    FragA<T> a;
                    wmma::load_matrix_sync(a, st + u * 256, 16);
                    wmma::mma_sync(acc[u], a, p_col, acc[u]);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < STAGE; ++u) {
            const i64 g = g0 + u * nw;
            if (g < groups) {
                __syncwarp();
                wmma::store_matrix_sync(fs, acc[u], 16, wmma::mem_col_major);  // column 0 -> fs[0..15]
                __syncwarp();
                if (lane < 16 && g * 16 + lane < m) out[g * 16 + lane] = tcr::from_float<OutT>(fs[lane]);
            }
        }
        __syncwarp();
    }
}

// =====================================================================================================================
// Reduction256 / Reduction256n (seg_wmma_256.cu, seg_wmma_256n.cu): one warp per row, V = P * (sum_t A_t) * P^T.
// Row rho is cut into NT = ceil(k/256) tiles of 256 consecutive elements, tile t as a 16x16 row-major matrix:
//   A_t[i][j] = x[rho*ld + 256t + 16i + j]   (+0 past k)
//   acc = +0; acc = P * A_t + acc  for t = 0 .. NT-1 ascending   (wmma::mma_sync(acc, P, A_t, acc))
// so acc[0][j] = TC(...TC(TC(+0; A_0[0..15][j]); A_1[0..15][j])...; A_{NT-1}[0..15][j]) is the sum of column j of all
// tiles (elements 256t + j + 16i), and (the paper's final product with P^T, through shared memory)
//   out[rho] = OutT( HANDOFF(acc[0][0..15]) ).
// Warps take rows rho = global warp, + total warps, ... Arguments: splits is unused (1).
template <typename T, typename OutT, bool VEC, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
    wmma_rows256n(const T* __restrict__ x, long long m, long long k, long long ld, OutT* __restrict__ out,
                  float* __restrict__ ws, unsigned* __restrict__ counters, long long splits) {
    using namespace tcr_wmma;
    // S (256 fp32) + H (768 T) = 2.5 KB; the staging (STAGE tiles) aliases it
    constexpr int WARP_BYTES = STAGE * 512 > 2560 ? STAGE * 512 : 2560;
    __shared__ __align__(128) T ones[2][256];
    __shared__ __align__(128) unsigned char area[WARPS][WARP_BYTES];
    init_ones(ones[0], ones[1]);
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    T* st = reinterpret_cast<T*>(area[warp]);
    float* S = reinterpret_cast<float*>(area[warp]);
    T* H = reinterpret_cast<T*>(area[warp] + 1024);
    FragA<T> p_row;
    FragB<T> p_col;
    wmma::load_matrix_sync(p_row, ones[0], 16);
    wmma::load_matrix_sync(p_col, ones[1], 16);
    const i64 tiles = (k + 255) / 256;
    const i64 nw = (i64)gridDim.x * WARPS;
    for (i64 r = (i64)blockIdx.x * WARPS + warp; r < m; r += nw) {
        const T* p = x + r * ld;
        FragC acc;
        wmma::fill_fragment(acc, 0.0f);
        uint4 buf[STAGE];
#pragma unroll
        for (int u = 0; u < STAGE; ++u) buf[u] = load8<T, VEC>(p, (i64)u * 256 + 8 * lane, k);
        for (i64 t0 = 0; t0 < tiles; t0 += STAGE) {
            __syncwarp();
#pragma unroll
            for (int u = 0; u < STAGE; ++u) reinterpret_cast<uint4*>(st + u * 256)[lane] = buf[u];
            __syncwarp();
            if (t0 + STAGE < tiles) {  // next batch in flight during these products
#pragma unroll
                for (int u = 0; u < STAGE; ++u) buf[u] = load8<T, VEC>(p, (t0 + STAGE + u) * 256 + 8 * lane, k);
            }
#pragma unroll
            for (int u = 0; u < STAGE; ++u) {
                if (t0 + u < tiles) {
                    FragB<T> b;
                    wmma::load_matrix_sync(b, st + u * 256, 16);
                    wmma::mma_sync(acc, p_row, b, acc);
                }
            }
        }
        __syncwarp();
        wmma::store_matrix_sync(S, acc, 16, wmma::mem_row_major);  // row 0 holds the 16 column sums
        __syncwarp();
        const float v = handoff_rows(S, H, p_col, lane);  // lane 0: HANDOFF(row 0); other rows are not used
        if (lane == 0) out[r] = tcr::from_float<OutT>(v);
        __syncwarp();
    }
}

// =====================================================================================================================
// Block variant (seg_wmma_256n_block.cu) with splits, plus the grid combination: long rows and full sums
// (a full sum is Rows(1, n, n)). Row rho has NT = ceil(k/256) tiles A_t as in wmma_rows256n. Block b of the 1-D grid
// works on row rho = b / splits, split s = b % splits: tiles [s*tpb, e) with e = min((s+1)*tpb, NT). Its WARPS warps
// interleave the tiles as in the paper: warp w chains t = s*tpb + w + WARPS*j, j = 0, 1, ... while t < e:
//   acc_w = +0; acc_w = P * A_t + acc_w   (j ascending);   c_w[0..15] = acc_w[0][0..15]
// then, as the paper's block kernel, the warps' column sums are stacked as the rows of one 16x16 matrix
// (row w = c_w, rows WARPS..15 = +0) and multiplied by P^T (through the fp32-exact hand-off), then summed once more:
//   y_w = HANDOFF(c_w) for w < WARPS, y_w = 0 for WARPS <= w < 16          (one batched hand-off, rows = warps)
//   partial(rho, s) = HANDOFF(y_0 .. y_15)                                  (the y's as row 0, rows 1..15 = +0)
// Grid combination (deterministic, one launch): if splits == 1, out[rho] = OutT(partial(rho, 0)). Otherwise every
// block writes ws[rho*splits + s]; the last block of row rho to arrive (tcr::arrive_last on counters[rho], which it
// resets) sums the row's partials with tcr::combine_partials<WARPS*32> (thread i adds p[i], p[i + 32*WARPS], ...
// left to right from 0.0f, then tcr::block_fold; fp32 round to nearest on CUDA cores) and writes out[rho].
template <typename T, typename OutT, bool VEC, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
    wmma_rows_block(const T* __restrict__ x, long long m, long long k, long long ld, OutT* __restrict__ out,
                    float* __restrict__ ws, unsigned* __restrict__ counters, long long splits, long long tpb) {
    using namespace tcr_wmma;
    static_assert(WARPS >= 1 && WARPS <= 16, "one row of the hand-off matrix per warp");
    __shared__ __align__(128) T ones[2][256];
    __shared__ __align__(128) T stage[WARPS][STAGE * 256];
    __shared__ __align__(128) float S[256];
    __shared__ __align__(128) T H[768];
    __shared__ float red[32];
    init_ones(ones[0], ones[1]);
    for (int i = threadIdx.x; i < 256; i += blockDim.x) S[i] = 0.0f;
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    T* st = stage[warp];
    FragA<T> p_row;
    FragB<T> p_col;
    wmma::load_matrix_sync(p_row, ones[0], 16);
    wmma::load_matrix_sync(p_col, ones[1], 16);
    const i64 tiles = (k + 255) / 256;
    const i64 r = (i64)blockIdx.x / splits, s = (i64)blockIdx.x % splits;
    const i64 t_end = min((s + 1) * tpb, tiles);
    const T* p = x + r * ld;
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
    const i64 t_first = s * tpb + warp;
    uint4 buf[STAGE];
#pragma unroll
    for (int u = 0; u < STAGE; ++u) {
        const i64 t = t_first + (i64)u * WARPS;
        buf[u] = t < t_end ? load8<T, VEC>(p, t * 256 + 8 * lane, k) : make_uint4(0u, 0u, 0u, 0u);
    }
    for (i64 t0 = t_first; t0 < t_end; t0 += (i64)STAGE * WARPS) {
        __syncwarp();
#pragma unroll
        for (int u = 0; u < STAGE; ++u) reinterpret_cast<uint4*>(st + u * 256)[lane] = buf[u];
        __syncwarp();
        if (t0 + (i64)STAGE * WARPS < t_end) {  // next batch in flight during these products
#pragma unroll
            for (int u = 0; u < STAGE; ++u) {
                const i64 t = t0 + (i64)(STAGE + u) * WARPS;
                buf[u] = t < t_end ? load8<T, VEC>(p, t * 256 + 8 * lane, k) : make_uint4(0u, 0u, 0u, 0u);
            }
        }
#pragma unroll
        for (int u = 0; u < STAGE; ++u) {
            if (t0 + (i64)u * WARPS < t_end) {
                FragB<T> b;
                wmma::load_matrix_sync(b, st + u * 256, 16);
                wmma::mma_sync(acc, p_row, b, acc);
            }
        }
    }
    __syncwarp();
    float* fs = reinterpret_cast<float*>(st);
    wmma::store_matrix_sync(fs, acc, 16, wmma::mem_row_major);
    __syncwarp();
    if (lane < 16) S[warp * 16 + lane] = fs[lane];  // row w of the stacked matrix = row 0 of warp w's product
    __syncthreads();
    float partial = 0.0f;
    if (warp == 0) {
        const float y = handoff_rows(S, H, p_col, lane);  // lane w < 16: y_w
        for (int i = lane; i < 256; i += 32) S[i] = 0.0f;
        __syncwarp();
        if (lane < 16) S[lane] = y;
        __syncwarp();
        partial = handoff_rows(S, H, p_col, lane);  // lane 0: the block's sum
    }
    if (splits == 1) {
        if (threadIdx.x == 0) out[r] = tcr::from_float<OutT>(partial);
        return;
    }
    if (threadIdx.x == 0) ws[r * splits + s] = partial;
    if (tcr::arrive_last(counters + r, (unsigned)splits)) {
        const float total = tcr::combine_partials<WARPS * 32>(ws + r * splits, splits, 1, red);
        if (threadIdx.x == 0) out[r] = tcr::from_float<OutT>(total);
    }
}

// =====================================================================================================================
// Transposing copy for reductions over a non-last axis (the paper has no column kernel). Cols(a, r, b, sa, sr):
// element (i, j, l) at x[i*sa + j*sr + l] is copied to the rows layout ws16[(i*b + l)*ldw + j] (ldw: r rounded up
// to a multiple of 8, so every row is 16-byte aligned); a rows kernel then reduces Rows(a*b, r, ldw) from the
// workspace. Positions ldw > j >= r are not written (the rows kernels mask at k = r and never read them). No arithmetic:
// bits are copied, so the sums are those of the rows kernel. Tiles of TJ (j) x TL = 2048/TJ (l) through shared
// memory, read along l and written along j (both coalesced); the 1-D grid enumerates (i, j-tile, l-tile), l-tile
// fastest. 256 threads, 8 elements each way per thread. The elements are moved as 16-bit patterns, so one kernel
// serves fp16 and bf16 alike.
template <int TJ>
__global__ void __launch_bounds__(256)
    wmma_transpose(const unsigned short* __restrict__ x, long long a, long long r, long long b, long long sa,
                   long long sr, float* __restrict__ ws, long long ldw) {
    using tcr::i64;
    constexpr int TL = 2048 / TJ, PAD = 2;
    static_assert(TJ == 16 || TJ == 32, "tile height");
    __shared__ unsigned short tile[TJ][TL + PAD];
    unsigned short* dst = reinterpret_cast<unsigned short*>(ws);
    const i64 nl = (b + TL - 1) / TL, nj = (r + TJ - 1) / TJ;
    i64 bid = blockIdx.x;
    const i64 l0 = (bid % nl) * TL;
    bid /= nl;
    const i64 j0 = (bid % nj) * TJ;
    const i64 i = bid / nj;
    const unsigned short* src = x + i * sa;
#pragma unroll
    for (int q = 0; q < 8; ++q) {  // read: l fastest
        const int e = q * 256 + threadIdx.x, jj = e / TL, ll = e % TL;
        const i64 j = j0 + jj, l = l0 + ll;
        if (j < r && l < b) tile[jj][ll] = src[j * sr + l];
    }
    __syncthreads();
    unsigned short* out_rows = dst + (i * b + l0) * ldw + j0;
#pragma unroll
    for (int q = 0; q < 8; ++q) {  // write: j fastest
        const int e = q * 256 + threadIdx.x, ll = e / TJ, jj = e % TJ;
        if (j0 + jj < r && l0 + ll < b) out_rows[(i64)ll * ldw + jj] = tile[jj][ll];
    }
}
