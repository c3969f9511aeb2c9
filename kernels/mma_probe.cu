// mma_probe.cu: validation probe, not a reduction method.
//
// Each warp w < count executes exactly one
//     mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32  D = A * B + C
// on its own operands and stores D, so that tests/test_mma_model_gpu.py can compare the tensor core's bits with the
// CPU model (tcreduce/emulate/mma_model.py). Memory layout, per warp w (all contiguous, no padding):
//     a: __half [count][16][16]  A[m][k] row-major
//     b: __half [count][16][8]   B[k][n] (k-major: element (k, n) at k * 8 + n)
//     c: float  [count][16][8]   C[m][n] row-major
//     d: float  [count][16][8]   D[m][n] row-major
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16"; g = lane >> 2, t = lane & 3):
//     A: 4 x .f16x2, element i in 0..7: row g + 8 * ((i >> 1) & 1), column 2t + (i & 1) + 8 * (i >> 2)
//     B: 2 x .f16x2, element i in 0..3: k = 2t + (i & 1) + 8 * (i >> 1), n = g
//     C, D: 4 x .f32, element i in 0..3: row g + 8 * (i >> 1), column 2t + (i & 1)
// Element 2j sits in the low 16 bits of register j, element 2j + 1 in the high 16 bits.
// The launch uses a block size that is a multiple of 32, so each warp is whole and exits (or not) as one.
#include <cuda_fp16.h>

__global__ void mma_probe(const __half* __restrict__ a, const __half* __restrict__ b, const float* __restrict__ c,
                          float* __restrict__ d, long long count) {
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (warp >= count) return;  // warp-uniform
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const unsigned short* A = reinterpret_cast<const unsigned short*>(a) + warp * 256;
    const unsigned short* B = reinterpret_cast<const unsigned short*>(b) + warp * 128;
    const float* C = c + warp * 128;
    float* D = d + warp * 128;

    unsigned ra[4], rb[2];
    float rc[4], rd[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // register j holds elements 2j (low half) and 2j + 1 (high half)
        const int row = g + 8 * (j & 1);
        const int col = 2 * t + 8 * (j >> 1);
        ra[j] = (unsigned)A[row * 16 + col] | ((unsigned)A[row * 16 + col + 1] << 16);
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        const int k = 2 * t + 8 * j;
        rb[j] = (unsigned)B[k * 8 + g] | ((unsigned)B[(k + 1) * 8 + g] << 16);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) rc[i] = C[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];

    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};\n"
        : "=f"(rd[0]), "=f"(rd[1]), "=f"(rd[2]), "=f"(rd[3])
        : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]), "f"(rc[0]), "f"(rc[1]),
          "f"(rc[2]), "f"(rc[3]));

#pragma unroll
    for (int i = 0; i < 4; ++i) D[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = rd[i];
}
