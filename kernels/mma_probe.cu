// mma_probe.cu: validation probe, not a reduction method.
//
// Each warp w < count executes exactly one mma.sync D = A * B + C (f32 accumulator) of the input format FMT on its
// own operands and stores D, so that tests/test_mma_model_gpu.py can compare the tensor core's bits with the CPU model
// (tcreduce/emulate/mma_model.py). FMT selects the instruction (PTX ISA, "Warp-level matrix fragments"):
//     0 float16   mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32     K = 16, 2 elements per .b32 register
//     1 bfloat16  mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32   K = 16, 2 per register
//     2 e4m3      mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32   K = 32, 4 per register (sm_89+)
//     3 e5m2      mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32   K = 32, 4 per register (sm_89+)
//     4 tf32      mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32    K = 8, 1 per register (the fp32 register
//                 as given: the probe passes all 32 bits, to see what the tensor core does with the low 13)
// Memory layout, per warp w (raw element bits, contiguous, no padding):
//     a: [count][16][K]  A[m][k] row-major      b: [count][K][8]  B[k][n] (k-major)
//     c: float [count][16][8] C[m][n]           d: float [count][16][8] D[m][n]
// Fragments, with g = lane >> 2, t = lane & 3, E = elements per register, element e of register j:
//     A: row g + 8 * (j & 1), column E * t + e + (K / 2) * (j >> 1)      (4 registers)
//     B: k = E * t + e + (K / 2) * j, n = g                               (2 registers)
//     C, D: element i in 0..3: row g + 8 * (i >> 1), column 2t + (i & 1)
// Element e sits in bits [e * bits, (e + 1) * bits) of its register (the lowest element lowest).
// The launch uses a block size that is a multiple of 32, so each warp is whole and exits (or not) as one.

template <int FMT> struct ProbeFormat;
template <> struct ProbeFormat<0> { typedef unsigned short T; static constexpr int K = 16; };
template <> struct ProbeFormat<1> { typedef unsigned short T; static constexpr int K = 16; };
template <> struct ProbeFormat<2> { typedef unsigned char T; static constexpr int K = 32; };
template <> struct ProbeFormat<3> { typedef unsigned char T; static constexpr int K = 32; };
template <> struct ProbeFormat<4> { typedef unsigned T; static constexpr int K = 8; };

template <int FMT>
__device__ __forceinline__ void probe_mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                          const float (&c)[4]) {
#define TCR_PROBE_MMA(SHAPE_TYPES)                                                                              \
    asm volatile("mma.sync.aligned." SHAPE_TYPES " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"  \
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                                \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),      \
                   "f"(c[2]), "f"(c[3]))
    if constexpr (FMT == 0) TCR_PROBE_MMA("m16n8k16.row.col.f32.f16.f16.f32");
    else if constexpr (FMT == 1) TCR_PROBE_MMA("m16n8k16.row.col.f32.bf16.bf16.f32");
    else if constexpr (FMT == 2) TCR_PROBE_MMA("m16n8k32.row.col.f32.e4m3.e4m3.f32");
    else if constexpr (FMT == 3) TCR_PROBE_MMA("m16n8k32.row.col.f32.e5m2.e5m2.f32");
    else TCR_PROBE_MMA("m16n8k8.row.col.f32.tf32.tf32.f32");
#undef TCR_PROBE_MMA
}

template <int FMT>
__global__ void mma_probe(const void* __restrict__ a, const void* __restrict__ b, const float* __restrict__ c,
                          float* __restrict__ d, long long count) {
    typedef typename ProbeFormat<FMT>::T T;
    constexpr int K = ProbeFormat<FMT>::K, E = 4 / (int)sizeof(T), BITS = 8 * (int)sizeof(T);
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (warp >= count) return;  // warp-uniform
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const T* A = reinterpret_cast<const T*>(a) + warp * 16 * K;
    const T* B = reinterpret_cast<const T*>(b) + warp * K * 8;
    const float* C = c + warp * 128;
    float* D = d + warp * 128;

    unsigned ra[4], rb[2];
    float rc[4], rd[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        unsigned r = 0;
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const int row = g + 8 * (j & 1), col = E * t + e + (K / 2) * (j >> 1);
            r |= (unsigned)A[row * K + col] << (BITS * e);
        }
        ra[j] = r;
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        unsigned r = 0;
#pragma unroll
        for (int e = 0; e < E; ++e) r |= (unsigned)B[(E * t + e + (K / 2) * j) * 8 + g] << (BITS * e);
        rb[j] = r;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) rc[i] = C[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
    probe_mma<FMT>(rd, ra, rb, rc);
#pragma unroll
    for (int i = 0; i < 4; ++i) D[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = rd[i];
}
