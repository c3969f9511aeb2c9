// bandwidth.cu: the plain read kernel behind the experiments' measured bandwidth ceiling. Not a reduction method:
// experiments/common.py loads it through tcreduce._compile.get_function and times it beside every study, so that
// "fraction of the ceiling" means the fraction of what a kernel that only reads the same bytes achieves on the same
// GPU in the same run (METHOD: measure the ceiling, don't take the datasheet's).
//
// read16<UNROLL, STREAM>(x, n16, sink): a grid-stride loop over n16 16-byte words (uint4), UNROLL independent 16-byte
// loads in flight per thread (STREAM: ld.global.cs, evict-first; else plain loads the compiler may schedule freely),
// folded with XOR (no floating point, so no arithmetic limit). Every loaded word reaches a value
// that decides a store, so the compiler cannot drop a load; the store itself happens only if a thread's XOR equals a
// magic constant, i.e. practically never, so the kernel moves only the bytes it reads. The caller passes a 16-byte
// aligned pointer and ignores any tail of fewer than 16 bytes.
//
// read16_blocks<UNROLL, STREAM>(x, n16, per, sink): the same fold over a one-pass grid of short blocks, block b reading
// words [b * per, (b + 1) * per) with UNROLL loads of 256 adjacent words in flight (the walk of Triton's and inductor's
// kernels; benchmarks/read_probe.py read it 1.5-3% above the grid-stride loop on an H100 and an H200).

namespace tcr_bw {

typedef long long i64;

template <bool STREAM>
__device__ __forceinline__ uint4 load16(const uint4* p) {
    if (STREAM) return __ldcs(p);
    return *p;
}

// The XOR of words x[i], x[i + stride], ... below end, UNROLL loads in flight; a thread whose XOR equals the magic
// constant stores it (practically never).
template <int UNROLL, bool STREAM>
__device__ __forceinline__ void xor_fold16(const uint4* __restrict__ x, i64 i, i64 end, i64 stride, unsigned* sink) {
    unsigned acc = 0u;
    for (; i + (UNROLL - 1) * stride < end; i += UNROLL * stride) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = load16<STREAM>(x + i + u * stride);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < end; i += stride) {
        const uint4 v = load16<STREAM>(x + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9E3779B9u) sink[0] = acc;
}

template <int UNROLL, bool STREAM>
__global__ void __launch_bounds__(256) read16(const uint4* __restrict__ x, i64 n16, unsigned* sink) {
    xor_fold16<UNROLL, STREAM>(x, (i64)blockIdx.x * blockDim.x + threadIdx.x, n16, (i64)gridDim.x * blockDim.x, sink);
}

template <int UNROLL, bool STREAM>
__global__ void __launch_bounds__(256) read16_blocks(const uint4* __restrict__ x, i64 n16, i64 per, unsigned* sink) {
    const i64 base = (i64)blockIdx.x * per;
    xor_fold16<UNROLL, STREAM>(x, base + threadIdx.x, base + per < n16 ? base + per : n16, 256, sink);
}

}  // namespace tcr_bw
