// tensorcore_fp32.cu: float32 sums on tensor cores to fp32 accuracy, method "tensorcore" for float32 input.
//
// Markidis et al. (2018) and Ootomo and Yokota (2022) split fp32 operands into low-precision pieces to use tensor
// cores; a sum needs no cross terms (the other operand is ones), so bf16 pieces summed with
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 against ones can carry the bits (tensorcore_f32.cuh for the
// forms). Which pieces share a fused block decides the accuracy: a block (16 products, F = 25 fraction bits below its
// largest exponent, truncation, then round toward zero to fp32) is exact when its exact sum fits in 24 bits, and
// truncates toward zero otherwise. Splitting each value at its own exponent (hi = its top 8 bits, ...) leaves the
// rows of values more than 12 binades apart inexact, a one-signed loss (about an ulp of the result on wide-range
// data), so the pieces are cut on a grid common to the mma row instead (the error-free extraction of Rump, Ogita and
// Oishi's AccSum, as in Ozaki's splitting), which makes every row sum exact:
//
//   M = the largest |v| of the row's 16 values (v0, v1, v4, v5 of lanes 4g..4g+3 for row g; v2, v3, v6, v7 for row
//   g + 8; NaN ignored; 2 shuffles within the quad), 2^E <= M < 2^(E+1), E raised to at least -110;
//   sigma1 = 1.5 * 2^(E + 16), sigma2 = 1.5 * 2^(E + 8). Per value x of the row (round to nearest):
//     hi  = (sigma1 + x) - sigma1     x rounded to a multiple of 2^(E-7): |hi| <= 2^(E+1), at most 8 significant bits
//     r1  = x - hi                    exact, |r1| <= 2^(E-8)
//     mid = (sigma2 + r1) - sigma2    r1 rounded to a multiple of 2^(E-15): at most 8 bits
//     r2  = r1 - mid                  exact, |r2| <= min(|x|, 2^(E-16))
//   hi and mid are bf16 exactly, and hi + mid + r2 = x exactly for every finite x. A row's hi pieces are multiples of
//   2^(E-7) below 2^(E+1): their sum (below 2^(E+5)) is exact; the mid block chained on it adds multiples of 2^(E-15)
//   below 2^(E-8), the sum staying below 2^(E+6) (21 bits): exact too. The remainders r2 (at most 2^-16 of the row
//   maximum, so of the row's own sum|x|: rows of different segments do not share a grid) are added on the CUDA cores
//   into a per-lane register rho, one per row, and summed over the quad at the end. So the split loses nothing; what
//   is left is fp32 rounding of small quantities (the pair sums below). The kernel cuts the same t = hi + mid another
//   way, with fewer instructions (split_common): hi' = t truncated to bf16, mid' = t - hi'; its blocks sum the same t
//   exactly and its remainders are the same r2, so the bits are those of the cut above (which the twin replays).
//   Rows with M >= 2^112 (or an infinity, or only NaNs: M's exponent field above 238) would overflow sigma1: if any
//   row of the warp has one, the whole warp takes the wide path for that step, the split at each value's own
//   exponent (exact for values above 2^-110; its blocks may truncate):
//     hi = x truncated to bf16 (cvt.rz.bf16x2.f32: NaN -> NaN, +-inf -> +-inf), r = x - hi (exact; inf - inf = NaN),
//     mid = r truncated to bf16, lo = r - mid truncated to bf16.
//
// Split order, per lane and step (v0..v7 in A-fragment order; H, M, L: the bf16x2 registers of the pairs (v0,v1),
// (v2,v3), (v4,v5), (v6,v7), low half = first value; all mmas start from 0):
//   normal path: c1 = mma(M, mma(H, 0)) (hi block, then the mid block on top); c3 = -0.0;
//                rho_lo = (((rho_lo + r2(v0)) + r2(v1)) + r2(v4)) + r2(v5); rho_hi likewise with v2, v3, v6, v7
//   wide path:   c1 = mma(H, 0); c3 = mma(L, mma(M, 0)); rho unchanged
//   acc_lo = add2(acc_lo, (c1[0], c3[0])), acc_hi = add2(acc_hi, (c1[2], c3[2])) (tensorcore_f32.cuh: TwoSum of the
//   s parts, then e = (e + c3) + t; e + -0.0 is e): the normal path adds e + t alone, add2_c).
// Row values: rho_q = (rho + rho[lane ^ 1]) then rho_q + rho_q[lane ^ 2] (the quad's 4 lanes, each row's rho);
//   row g = (acc_lo.s, acc_lo.e + rho_q_lo), row g + 8 = (acc_hi.s, acc_hi.e + rho_q_hi).
// Infinities: an infinite x takes the wide path, its hi piece makes c1, hence s, infinite (or NaN with the other
// sign), and value2 ignores the NaN e parts; a NaN x makes hi NaN on either path, hence s NaN.
#include "tensorcore_f32.cuh"

namespace tcr32 {

constexpr unsigned BF16X2_ONES = 0x3F803F80u;  // two bf16 1.0

// d = A * ones + c with mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: a0, a2 hold row g, a1, a3 row g + 8.
__device__ __forceinline__ void mma_bf16_rowsum(float (&d)[4], const unsigned (&a)[4], const float (&c)[4]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(BF16X2_ONES), "r"(BF16X2_ONES), "f"(c[0]), "f"(c[1]),
          "f"(c[2]), "f"(c[3]));
}

__device__ __forceinline__ unsigned upper_halves(float a, float b) {  // (a's top 16 bits, b's top 16 bits)
    return __byte_perm(__float_as_uint(a), __float_as_uint(b), 0x7632);
}

// Normal path: the hi' and mid' bf16x2 registers of the pair (x0, x1) and the two remainders, with 10 instructions
// where cutting hi and mid on the grids of sigma1 and sigma2 (the order above, which the twin replays) takes 14:
//   t  = (sigma2 + x) - sigma2      x rounded to a multiple of 2^(E-15), = hi + mid above (hi is an even multiple of
//                                   2^(E-15), so rounding x - hi to that grid is rounding x, minus hi)
//   r2 = x - t                      exact, = r2 above
//   hi' = t truncated to bf16, mid' = t - hi' (exact: t has at most 16 significant bits below 2^(E+1), so mid' has at
//   most 8 and is a bf16; both are multiples of 2^(E-15))
// The hi' block (16 multiples of 2^(E-15) below 2^(E+1)) and the mid' block chained on it are exact as the hi and mid
// blocks are (the sum stays below 2^(E+6)), so c1 = the exact sum of the row's t = the same bits, and r2 is the same.
__device__ __forceinline__ void split_common(float x0, float x1, float sigma2, unsigned& h, unsigned& m, float& r0,
                                             float& r1) {
    const float t0 = __fsub_rn(__fadd_rn(sigma2, x0), sigma2), t1 = __fsub_rn(__fadd_rn(sigma2, x1), sigma2);
    r0 = __fsub_rn(x0, t0);
    r1 = __fsub_rn(x1, t1);
    h = upper_halves(t0, t1);
    const float m0 = __fsub_rn(t0, __uint_as_float(__float_as_uint(t0) & 0xFFFF0000u));
    const float m1 = __fsub_rn(t1, __uint_as_float(__float_as_uint(t1) & 0xFFFF0000u));
    m = upper_halves(m0, m1);
}

// Wide path: the pieces cut at each value's own exponent, by truncation.
__device__ __forceinline__ void split_own(float x0, float x1, unsigned& h, unsigned& m, unsigned& l) {
    asm("cvt.rz.bf16x2.f32 %0, %1, %2;\n" : "=r"(h) : "f"(x1), "f"(x0));
    const float h0 = __uint_as_float(h << 16), h1 = __uint_as_float(h & 0xFFFF0000u);
    const float r0 = __fsub_rn(x0, h0), r1 = __fsub_rn(x1, h1);
    m = upper_halves(r0, r1);
    const float m0 = __uint_as_float(__float_as_uint(r0) & 0xFFFF0000u);
    const float m1 = __uint_as_float(__float_as_uint(r1) & 0xFFFF0000u);
    l = upper_halves(__fsub_rn(r0, m0), __fsub_rn(r1, m1));
}

struct Split {
    struct Acc {
        F2 lo = {0.0f, 0.0f}, hi = {0.0f, 0.0f};
        float rho_lo = 0.0f, rho_hi = 0.0f;  // this lane's remainders of rows g and g + 8
    };
    static __device__ __forceinline__ unsigned row_max_field(float a, float b, float c, float d) {
        float mx = fmaxf(fmaxf(fabsf(a), fabsf(b)), fmaxf(fabsf(c), fabsf(d)));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        return __float_as_uint(mx) >> 23;  // the row maximum's exponent field (255: inf or NaN)
    }
    static __device__ __forceinline__ float sigma(unsigned eb, unsigned shift) {  // 1.5 * 2^(max(E, -110) + shift)
        return __uint_as_float(((max(eb, 17u) + shift) << 23) | 0x00400000u);
    }
    static __device__ __forceinline__ void step(Acc& acc, const float (&v)[8]) {
        const unsigned eb_lo = row_max_field(v[0], v[1], v[4], v[5]);  // row g
        const unsigned eb_hi = row_max_field(v[2], v[3], v[6], v[7]);  // row g + 8
        const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        unsigned h[4], m[4];
        float c1[4];
        if (__any_sync(0xffffffffu, max(eb_lo, eb_hi) > 238u)) {  // warp-uniform: a row maximum >= 2^112, inf, NaN
            unsigned l[4];
            float c3[4];
#pragma unroll
            for (int p = 0; p < 4; ++p) split_own(v[2 * p], v[2 * p + 1], h[p], m[p], l[p]);
            float cm[4];
            mma_bf16_rowsum(c1, h, zero);
            mma_bf16_rowsum(cm, m, zero);
            mma_bf16_rowsum(c3, l, cm);
            acc.lo = add2(acc.lo, F2{c1[0], c3[0]});
            acc.hi = add2(acc.hi, F2{c1[2], c3[2]});
        } else {
            const float s2_lo = sigma(eb_lo, 8u), s2_hi = sigma(eb_hi, 8u);
            float r[8];
            split_common(v[0], v[1], s2_lo, h[0], m[0], r[0], r[1]);  // pairs 0, 2: row g
            split_common(v[2], v[3], s2_hi, h[1], m[1], r[2], r[3]);  // pairs 1, 3: row g + 8
            split_common(v[4], v[5], s2_lo, h[2], m[2], r[4], r[5]);
            split_common(v[6], v[7], s2_hi, h[3], m[3], r[6], r[7]);
            acc.rho_lo = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(acc.rho_lo, r[0]), r[1]), r[4]), r[5]);
            acc.rho_hi = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(acc.rho_hi, r[2]), r[3]), r[6]), r[7]);
            float ch[4];
            mma_bf16_rowsum(ch, h, zero);
            mma_bf16_rowsum(c1, m, ch);
            acc.lo = add2_c(acc.lo, c1[0]);  // = add2(acc.lo, F2{c1[0], -0.0f}): c3 is -0 on this path
            acc.hi = add2_c(acc.hi, c1[2]);
        }
    }
    static __device__ __forceinline__ float quad_sum(float r) {
        r = __fadd_rn(r, __shfl_xor_sync(0xffffffffu, r, 1));
        return __fadd_rn(r, __shfl_xor_sync(0xffffffffu, r, 2));
    }
    static __device__ __forceinline__ F2 row_lo(const Acc& acc) {
        return F2{acc.lo.s, __fadd_rn(acc.lo.e, quad_sum(acc.rho_lo))};
    }
    static __device__ __forceinline__ F2 row_hi(const Acc& acc) {
        return F2{acc.hi.s, __fadd_rn(acc.hi.e, quad_sum(acc.rho_hi))};
    }
};

}  // namespace tcr32
