// tensorcore_tf32.cu: float32 sums on tensor cores through tf32, method "tensorcore_tf32": the fast, lossy point of
// the accuracy/speed trade-off (each value is rounded to 10 fraction bits: 2^-11 relative per value).
//
// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 against ones (tensorcore_f32.cuh for the forms). The tensor core
// reads only the top 19 bits of each fp32 register (it truncates; a NaN whose payload lies in the low 13 bits would
// read as an infinity), so every value is rounded first, in integer arithmetic, to the register the tensor core then
// truncates:
//   |x| < 0x1.ffep127 (finite, and adding half a tf32 ulp cannot carry into the exponent of infinity):
//       bits + 0x1000 (round to nearest, ties away from zero: cvt.rna.tf32.f32 without its overflow to infinity);
//   NaN: bits | 0x00400000 (a payload bit the tensor core reads, so NaN stays NaN);
//   +-inf and the finite values at or above 0x1.ffep127: the bits as they are (truncated: +-inf stays +-inf, the
//       largest values lose less than 2^-11 of themselves instead of overflowing).
// cvt.rna.tf32.f32 itself (its SASS on sm_80/sm_90: add 0x1000 to finite values, mask) turns those largest values
// into infinity and a low-payload NaN into infinity, and its .satfinite form turns infinity into the largest finite
// tf32; hence the explicit rounding.
//
// Tf32 order, per lane and per step (v0..v7 in A-fragment order): t_i = the rounded v_i;
//   c0 = mma(a0 = t0, a1 = t2, a2 = t1, a3 = t3) from 0: row g sums t0, t1 of lanes 4g..4g+3 (8 values, one block),
//                                                         row g + 8 their t2, t3;
//   c1 = mma(t4, t6, t5, t7) from 0: row g sums t4, t5, row g + 8 t6, t7;
//   lo += c0[0]; hi += c0[2]; lo += c1[0]; hi += c1[2] (round to nearest). Row values: (lo, 0) (row g), (hi, 0) (row g + 8).
#include "tensorcore_f32.cuh"

namespace tcr32 {

constexpr unsigned TF32_ONE = 0x3F800000u;

// c += A * ones with mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: a0 = A[g][t], a1 = A[g+8][t],
// a2 = A[g][t+4], a3 = A[g+8][t+4] (PTX ISA fragment layout; kernels/mma_probe.cu).
__device__ __forceinline__ void mma_tf32_rowsum(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(TF32_ONE), "r"(TF32_ONE));
}

// x rounded to tf32, as register bits whose low 13 bits the tensor core ignores (file comment).
__device__ __forceinline__ unsigned round_tf32(float x) {
    unsigned u = __float_as_uint(x);
    const float ax = fabsf(x);
    if (ax < __uint_as_float(0x7F7FF000u)) {
        u += 0x1000u;
    } else if (!(ax <= __uint_as_float(0x7F800000u))) {
        u |= 0x00400000u;  // NaN
    }
    return u;
}

struct Tf32 {
    struct Acc {
        float lo = 0.0f, hi = 0.0f;
    };
    static __device__ __forceinline__ void step(Acc& acc, const float (&v)[8]) {
        unsigned t[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) t[i] = round_tf32(v[i]);
        float c0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        mma_tf32_rowsum(c0, t[0], t[2], t[1], t[3]);
        mma_tf32_rowsum(c1, t[4], t[6], t[5], t[7]);
        acc.lo += c0[0];
        acc.hi += c0[2];
        acc.lo += c1[0];
        acc.hi += c1[2];
    }
    static __device__ __forceinline__ F2 row_lo(const Acc& acc) { return F2{acc.lo, 0.0f}; }
    static __device__ __forceinline__ F2 row_hi(const Acc& acc) { return F2{acc.hi, 0.0f}; }
};

}  // namespace tcr32
