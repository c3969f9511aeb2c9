// common.cuh: device helpers shared by every tcreduce kernel file.
//
// The Python loader (tcreduce/_compile.py) inlines this header textually into each kernel source before NVRTC sees
// it, so the compile cache key covers it (CuPy's cache ignores -I headers: facts.md, cupy/cupy#941).
//
// Canonical orders of addition (the emulator in tcreduce/emulate/ reproduces these exactly):
//   warp_fold(v)      xor butterfly over offsets 16, 8, 4, 2, 1: v[l] = v[l] + v[l ^ off]. Every lane ends with the
//                     same value, equal to folding the 32 values in halves: v[:16] + v[16:], then [:8] + [8:], ...
//   block_fold(v)     warp_fold in every warp, then block_combine: lane 0 of warp w stores smem[w]; warp 0 loads
//                     smem[lane] (0.0f for lane >= warps) and warp_folds again. Valid in warp 0 (all its lanes).
//   serial partials   the last block of a grid combines partials p[0..count) as: thread i sums p[i], p[i + T],
//                     p[i + 2T], ... left to right starting from 0.0f, then block_fold.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace tcr {

typedef long long i64;
typedef unsigned long long u64;

// ---------------------------------------------------------------------------------------------- folds
__device__ __forceinline__ float warp_fold(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// Folds only across lanes that differ in g = lane >> 2 (offsets 16, 8, 4): the sum over the 8 values held by the
// lanes t = lane & 3 fixed. Used where the 4 lanes of a quad hold copies of one value (mma row sums).
__device__ __forceinline__ float warp_fold_rows(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 16);
    v += __shfl_xor_sync(0xffffffffu, v, 8);
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    return v;
}

// Combines per-warp totals (the same value in every lane of a warp) across the block: lane 0 of warp w stores
// smem[w]; warp 0 loads smem[lane] (0.0f for lane >= warps) and warp_folds. Every thread of the block must call it;
// smem must hold 32 floats; the result is valid in warp 0 (all lanes).
template <int BLOCK>
__device__ __forceinline__ float block_combine(float warp_total, float* smem) {
    constexpr int WARPS = BLOCK / 32;
    if (WARPS == 1) return warp_total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // smem may be reused by the caller between folds
    if (lane == 0) smem[warp] = warp_total;
    __syncthreads();
    float v = 0.0f;
    if (warp == 0) {
        v = lane < WARPS ? smem[lane] : 0.0f;
        v = warp_fold(v);
    }
    return v;
}

// warp_fold in every warp, then block_combine. Result valid in warp 0.
template <int BLOCK>
__device__ __forceinline__ float block_fold(float v, float* smem) {
    return block_combine<BLOCK>(warp_fold(v), smem);
}

// ------------------------------------------------------------------------------------------ work splits
// The part [begin, end) of `length` positions that split `split` of `splits` owns when the positions are cut into
// chunks of CHUNK and the chunks into equal ranges (the last range may be short or empty), and its chunk count.
struct SplitRange {
    i64 begin, end, nchunks;
};
template <int CHUNK>
__device__ __forceinline__ SplitRange split_range(i64 length, i64 splits, i64 split) {
    const i64 per_split = ((length + CHUNK - 1) / CHUNK + splits - 1) / splits;
    const i64 begin = split * per_split * CHUNK;
    const i64 end = min(length, begin + per_split * CHUNK);
    return {begin, end, end > begin ? (end - begin + CHUNK - 1) / CHUNK : 0};
}

// ------------------------------------------------------------------------------ single-pass grid combination
// The last-block-done pattern (CUDA samples threadFenceReduction): each block publishes a partial, fences, and bumps
// a counter; the block that sees count == expected - 1 is last, combines in a fixed order, and resets the counter to
// zero for the next launch. Deterministic: which block is last varies, the order of additions does not.
__device__ __forceinline__ bool arrive_last(unsigned* counter, unsigned expected) {
    __shared__ bool is_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {  // one ticket per block, 2-D blocks too
        const unsigned ticket = atomicAdd(counter, 1u);
        is_last = (ticket == expected - 1);
        if (is_last) *counter = 0u;  // nobody else touches it in this launch any more
    }
    __syncthreads();
    if (is_last) __threadfence();
    return is_last;
}

// The last block's serial combinations: acc = add(acc, load(j)) for j = 0, 1, ..., n - 1, in that order, with the
// values of BATCH consecutive j loaded before any of them is added. The additions and their order are a plain loop's;
// only the loads in flight differ (a plain loop of L2 reads gets about 4, so a last block adding a few hundred
// partials per output waited a few L2 round trips per 4 of them while the rest of the grid had finished). Absent
// values are not added (adding +0.0f would turn an accumulator of -0.0f into +0.0f).
template <int BATCH, typename Acc, typename Load, typename Add>
__device__ __forceinline__ Acc ordered_fold(Acc acc, i64 n, Load load, Add add) {
    for (i64 j0 = 0; j0 < n; j0 += BATCH) {
        decltype(load(j0)) v[BATCH];
#pragma unroll
        for (int u = 0; u < BATCH; ++u) v[u] = j0 + u < n ? load(j0 + u) : decltype(load(j0)){};
#pragma unroll
        for (int u = 0; u < BATCH; ++u) {
            if (j0 + u < n) acc = add(acc, v[u]);
        }
    }
    return acc;
}

// ordered_fold of n consecutive floats p[0] .. p[n-1] from +0.0f, read through L2 (written by other blocks of this
// launch): ((0.0f + p[0]) + p[1]) + ...
__device__ __forceinline__ float ordered_sum_ldcg(const float* p, i64 n) {
    return ordered_fold<8>(0.0f, n, [p](i64 j) { return __ldcg(p + j); }, [](float a, float v) { return a + v; });
}

// Serial-then-fold sum of count partials (read through L2: written by other blocks in this launch).
template <int BLOCK>
__device__ __forceinline__ float combine_partials(const float* p, i64 count, i64 stride, float* smem) {
    float acc = 0.0f;
    for (i64 i = threadIdx.x; i < count; i += BLOCK) acc += __ldcg(p + i * stride);
    return block_fold<BLOCK>(acc, smem);
}

// ---------------------------------------------------------------------- a full sum's block values, flagged
// A full sum's block values travel with a flag: value bits | 1 << 32 in one 64-bit slot, stored relaxed by thread 0
// of the block. Slots live in the counters pool, which is all zero between launches (every kernel leaves its
// counters at zero), and the block that adds a slot zeroes it again, so a set flag can only be this launch's. The
// last block to arrive (a relaxed atomic on a counter, as arrive_last's, but no fence on either side: a slot's store
// may still be on its way when its counter ticket is seen) waits for each flag it adds. So the combination costs its
// L2 round trips and no fences (benchmarks/combine_probe.py, H200, 512 MiB fp16: 4.1 us over storing the block
// values for combine_partials behind arrive_last's fences, 1.8 us this way). Single-copy atomic 64-bit relaxed
// accesses at gpu scope; the SIMT shim (tests/simt.py) runs them as relaxed C++ atomics.
__device__ __forceinline__ unsigned long long load_slot(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void store_slot(unsigned long long* p, unsigned long long v) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ unsigned long long flagged(float v) {
    return (1ull << 32) | __float_as_uint(v);
}

// One ticket per block on `counter` (thread 0, relaxed), without arrive_last's fences; true in the last of `expected`
// blocks, which resets the counter.
__device__ __forceinline__ bool arrive_last_relaxed(unsigned* counter, unsigned expected) {
    __shared__ bool is_last;
    if (threadIdx.x == 0) {
        is_last = atomicAdd(counter, 1u) == expected - 1;
        if (is_last) *counter = 0u;
    }
    __syncthreads();
    return is_last;
}

// A value of type V in SlotFloats<V>::W consecutive flagged slots, one float each (float: 1; tensorcore_f32.cuh adds
// tcr32::F2's (s, e) pair: 2): store_value publishes one (thread 0 of a block); wait_value waits for every flag of one
// whose slots were loaded ahead into w, zeroes those slots and returns the value.
template <typename V> struct SlotFloats;
template <> struct SlotFloats<float> {
    enum : int { W = 1 };  // an enumerator, not a variable: no symbol in the PTX
    static __device__ __forceinline__ float get(float v, int) { return v; }
    static __device__ __forceinline__ float make(const float (&f)[1]) { return f[0]; }
};

template <typename V>
__device__ __forceinline__ void store_value(unsigned long long* slots, i64 j, V v) {
    constexpr int W = SlotFloats<V>::W;
#pragma unroll
    for (int c = 0; c < W; ++c) store_slot(slots + j * W + c, flagged(SlotFloats<V>::get(v, c)));
}

template <typename V, int W = SlotFloats<V>::W>
__device__ __forceinline__ V wait_value(unsigned long long* slots, i64 j, unsigned long long (&w)[W]) {
    float f[W];
#pragma unroll
    for (int c = 0; c < W; ++c) {
        while ((w[c] >> 32) == 0ull) w[c] = load_slot(slots + j * W + c);
        store_slot(slots + j * W + c, 0ull);
        f[c] = __uint_as_float((unsigned)w[c]);
    }
    return SlotFloats<V>::make(f);
}

// combine_partials' additions over count flagged values (thread t adds values t, t + BLOCK, ... to `zero` in
// increasing index with add, then fold(acc, smem): block_fold for floats), the slots of 4 values loaded before the
// first is waited for; each slot is zeroed once read.
template <int BLOCK, typename V, typename Add, typename Fold>
__device__ __forceinline__ V combine_slots(unsigned long long* slots, i64 count, float* smem, V zero, Add add,
                                           Fold fold) {
    constexpr int BATCH = 4, W = SlotFloats<V>::W;
    V acc = zero;
    for (i64 j0 = threadIdx.x; j0 < count; j0 += (i64)BATCH * BLOCK) {
        unsigned long long w[BATCH][W];
#pragma unroll
        for (int u = 0; u < BATCH; ++u) {
#pragma unroll
            for (int c = 0; c < W; ++c)
                w[u][c] = j0 + u * BLOCK < count ? load_slot(slots + (j0 + u * BLOCK) * W + c) : 0ull;
        }
#pragma unroll
        for (int u = 0; u < BATCH; ++u) {
            const i64 j = j0 + u * BLOCK;
            if (j < count) acc = add(acc, wait_value<V>(slots, j, w[u]));
        }
    }
    return fold(acc, smem);
}

// A full sum's block values combined into one by the last block to arrive (counters[0]): combine_slots over all
// gridDim.x of them. TWO_LEVEL (the one-pass grids, whose grids run to many thousand blocks): the last block of each
// group of BLOCK consecutive blocks combine_slots its group's values (thread t: zero + value t) into the group's slot
// (counters[group]), and the last group to finish combine_slots the groups' totals (counters[groups]). `value` is
// valid in thread 0; every thread of every block calls it; it returns true in the one block holding the result
// (*total, valid in thread 0). The counters pool holds the counters (1, or groups + 1), then from the next even index
// the slots, 64-bit, W per value: gridDim.x block values, then (TWO_LEVEL) the groups' totals (plans/_common.py's
// flagged_counters sizes it). combine_grid_slots below is the float instance (tc_flat, shuffle_flat); tc32_flat's
// (s, e) pairs take two slots each.
template <int BLOCK, bool TWO_LEVEL, typename V, typename Add, typename Fold>
__device__ __forceinline__ bool combine_grid_values(V value, unsigned* counters, float* smem, V* total, V zero, Add add,
                                                    Fold fold) {
    const unsigned groups = TWO_LEVEL ? (gridDim.x + BLOCK - 1) / BLOCK : 0u;
    unsigned long long* slots = reinterpret_cast<unsigned long long*>(counters + ((groups + 2u) & ~1u));
    if (threadIdx.x == 0) store_value(slots, blockIdx.x, value);
    if constexpr (!TWO_LEVEL) {
        if (!arrive_last_relaxed(counters, gridDim.x)) return false;
        *total = combine_slots<BLOCK>(slots, gridDim.x, smem, zero, add, fold);
        return true;
    } else {
        const unsigned group = blockIdx.x / BLOCK;
        const unsigned members = min((unsigned)BLOCK, gridDim.x - group * BLOCK);
        if (!arrive_last_relaxed(counters + group, members)) return false;
        constexpr int W = SlotFloats<V>::W;
        const V group_total = combine_slots<BLOCK>(slots + (i64)group * BLOCK * W, members, smem, zero, add, fold);
        if (threadIdx.x == 0) store_value(slots, (i64)gridDim.x + group, group_total);
        __syncthreads();  // every thread has read is_last before thread 0 writes it again
        if (!arrive_last_relaxed(counters + groups, groups)) return false;
        *total = combine_slots<BLOCK>(slots + (i64)gridDim.x * W, groups, smem, zero, add, fold);
        return true;
    }
}

template <int BLOCK, bool TWO_LEVEL>
__device__ __forceinline__ bool combine_grid_slots(float value, unsigned* counters, float* smem, float* total) {
    return combine_grid_values<BLOCK, TWO_LEVEL>(
        value, counters, smem, total, 0.0f, [](float a, float v) { return a + v; },
        [](float a, float* sm) { return block_fold<BLOCK>(a, sm); });
}

// ------------------------------------------------------------------------------ whole-grid cluster combination
// combine_grid_slots' result for a grid that is one thread-block cluster (sm_90; the kernel declares __cluster_dims__
// equal to its grid, at most 16 blocks, more than 8 with the non-portable size allowed): every block publishes
// `partial` (valid in thread 0) in its shared memory, and after one cluster barrier the rank-0 block reads them
// through distributed shared memory (mapa + ld.shared::cluster) in combine_partials' order: thread i adds the partial
// of rank i, i + BLOCK, ... to +0.0f, then block_fold. Bit for bit combine_grid_slots' non-TWO_LEVEL value for the
// same partials (rank = blockIdx.x in a 1-D grid of one cluster), without the slots, the counter's atomic and the
// partials' round trip through L2. A second barrier keeps every block (and its shared memory) alive until
// rank 0 has read it. A grid of several clusters traps (it would write one result per cluster). Every thread of
// every block calls it; it returns true in the rank-0 block (*total valid in thread 0).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void cluster_barrier() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

template <int BLOCK>
__device__ __forceinline__ bool combine_cluster(float partial, float* smem, float* total) {
    __shared__ float published;
    unsigned rank, blocks;
    asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    asm("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(blocks));
    if (blocks != gridDim.x) __trap();
    if (threadIdx.x == 0) published = partial;
    cluster_barrier();
    float acc = 0.0f;
    if (rank == 0) {
        const unsigned local = static_cast<unsigned>(__cvta_generic_to_shared(&published));
        for (unsigned i = threadIdx.x; i < blocks; i += BLOCK) {
            unsigned remote;
            float v;
            asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(i));
            asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote) : "memory");
            acc += v;
        }
    }
    cluster_barrier();
    if (rank != 0) return false;
    *total = block_fold<BLOCK>(acc, smem);
    return true;
}
#endif

// ------------------------------------------------------------------------------------------ streaming loads
// An L2 access policy that marks lines evict-first (createpolicy: what Triton emits for eviction_policy="evict_first"),
// for load16's MODE 3; a thread makes it once.
__device__ __forceinline__ unsigned long long evict_first_policy() {
    unsigned long long pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    return pol;
}

// 16-byte read-only loads for data read exactly once. MODE 0: plain ld.global.nc (__ldg); MODE 1: no L1 allocation
// and a 256-byte L2 prefetch hint; MODE 2: cache-streaming (__ldcs, evict-first); MODE 3: evict-first in L1 and in L2
// under `policy` (evict_first_policy; ld.global.L1::evict_first.L2::cache_hint): data read once that should leave L2
// to the lines written around it.
template <int MODE>
__device__ __forceinline__ uint4 load16(const uint4* p, unsigned long long policy = 0ull) {
    if constexpr (MODE == 1) {
        uint4 r;
        asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
        return r;
    } else if constexpr (MODE == 2) {
        return __ldcs(p);
    } else if constexpr (MODE == 3) {
        uint4 r;
        asm volatile("ld.global.L1::evict_first.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
                     : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "l"(policy));
        return r;
    } else {
        return __ldg(p);
    }
}

// ------------------------------------------------------------------------------------------ TMA (sm_90)
// Hopper's tensor memory accelerator copies a box of a 2-5 dimensional array (described by a CUtensorMap the host
// encodes, cuTensorMapEncodeTiled) from global to shared memory with one instruction and no registers, filling
// elements outside the array with zeros, and counts the bytes it wrote on an mbarrier: a warp can keep several boxes
// in flight in a shared-memory ring while it computes on another.
struct alignas(64) TensorMap {  // CUtensorMap: 128 opaque bytes, passed by value as a __grid_constant__ parameter
    unsigned long long opaque[16];
};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TCR_HAS_TMA 1
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(u64* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// Makes the barriers' initialisation visible to the copy engine (the async proxy).
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival on `bar` that also expects `bytes` more bytes of copies before the phase can complete.
__device__ __forceinline__ void mbar_arrive_expect_tx(u64* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
}
// Waits until the phase of `bar` with this parity has completed.
__device__ __forceinline__ void mbar_wait(u64* bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(smem_addr(bar)), "r"(parity)
            : "memory");
    } while (!done);
}
// The box of `map` at coordinates (c0, c1, c2) (innermost first) into shared dst, completing on bar.
__device__ __forceinline__ void tma_load_3d(void* dst, const TensorMap* map, int c0, int c1, int c2, u64* bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
        "[%5];\n" ::"r"(smem_addr(dst)), "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(c2),
        "r"(smem_addr(bar))
        : "memory");
}
#endif

// ------------------------------------------------------------------------------------------ conversions
// Every sum kernel writes its outputs through from_float (or, for exact sums, round_state), so that a NaN result is
// always the canonical quiet NaN of the output dtype, whatever NaN the arithmetic produced (the GPU's 0x7FFFFFFF, a
// NaN input's payload, a tensor core's): fp16 0x7E00, fp32 0x7FC00000, fp64 0x7FF8000000000000 (NumPy's np.nan bits;
// the emulator canonicalises the same way, tcreduce/emulate/api.py).
template <typename OutT> __device__ __forceinline__ OutT canonical_nan();
template <> __device__ __forceinline__ float canonical_nan<float>() { return __uint_as_float(0x7FC00000u); }
template <> __device__ __forceinline__ double canonical_nan<double>() {
    return __longlong_as_double(0x7FF8000000000000LL);
}
template <> __device__ __forceinline__ __half canonical_nan<__half>() {
    return __ushort_as_half((unsigned short)0x7E00u);
}

template <typename OutT> __device__ __forceinline__ OutT from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v != v ? canonical_nan<float>() : v; }
template <> __device__ __forceinline__ double from_float<double>(float v) {
    return v != v ? canonical_nan<double>() : (double)v;
}
template <> __device__ __forceinline__ __half from_float<__half>(float v) {
    return v != v ? canonical_nan<__half>() : __float2half_rn(v);
}

__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__nv_fp8_e4m3 v) { return float(v); }
__device__ __forceinline__ float to_float(__nv_fp8_e5m2 v) { return float(v); }

// ------------------------------------------------------------------------------------------ input formats
// The input element types (kernels are templated on them; the data is read as raw bits):
//   __half (fp16), __nv_bfloat16 (bf16), __nv_fp8_e4m3 / __nv_fp8_e5m2 (fp8, sm_89+), float.
// Every format converts to fp32 exactly, and the fp8 formats to fp16 exactly (e5m2 is the top byte of an fp16;
// e4m3's range 2^-9 .. 448 with 3 fraction bits lies inside fp16's).
template <typename T> struct is_bf16 { static constexpr bool value = false; };
template <> struct is_bf16<__nv_bfloat16> { static constexpr bool value = true; };
template <typename T> struct is_fp8 { static constexpr bool value = false; };
template <> struct is_fp8<__nv_fp8_e4m3> { static constexpr bool value = true; };
template <> struct is_fp8<__nv_fp8_e5m2> { static constexpr bool value = true; };

// fp32 value of the element whose raw bits are the low sizeof(T) * 8 bits of w.
template <typename T> __device__ __forceinline__ float bits_to_float(unsigned w);
template <> __device__ __forceinline__ float bits_to_float<float>(unsigned w) { return __uint_as_float(w); }
template <> __device__ __forceinline__ float bits_to_float<__half>(unsigned w) {
    return __half2float(__ushort_as_half((unsigned short)(w & 0xffffu)));
}
template <> __device__ __forceinline__ float bits_to_float<__nv_bfloat16>(unsigned w) {
    return __uint_as_float(w << 16);
}
template <> __device__ __forceinline__ float bits_to_float<__nv_fp8_e4m3>(unsigned w) {
    return __half2float(__ushort_as_half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)(w & 0xffu), __NV_E4M3).x));
}
template <> __device__ __forceinline__ float bits_to_float<__nv_fp8_e5m2>(unsigned w) {
    return __half2float(__ushort_as_half((unsigned short)((w & 0xffu) << 8)));
}

// Two fp8 values (the low 16 bits of w: element 0 in bits 0..7) as an fp16x2 register (element 0 in the low half):
// cvt.rn.f16x2.e4m3x2 (exact) for e4m3, a byte shuffle for e5m2.
template <typename T> __device__ __forceinline__ unsigned fp8x2_to_half2(unsigned w);
template <> __device__ __forceinline__ unsigned fp8x2_to_half2<__nv_fp8_e4m3>(unsigned w) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xffffu), __NV_E4M3);
    return (unsigned)h.x | ((unsigned)h.y << 16);
}
template <> __device__ __forceinline__ unsigned fp8x2_to_half2<__nv_fp8_e5m2>(unsigned w) {
    return __byte_perm(w, 0u, 0x1404);  // bytes (0, b0, 0, b1): each fp8 byte becomes the high byte of an fp16
}

// Four fp8 values (w: element 0 in bits 0..7) as two fp16x2 registers, lo = elements 0 and 1, hi = elements 2 and 3
// (fp8x2_to_half2 of w and of w >> 16). e4m3 on sm_89+: one cvt.rn.f16x2.e4m3x2 per half of w read as a 16-bit
// register, so the high half needs no shift.
template <typename T>
__device__ __forceinline__ void fp8x4_to_half2x2(unsigned w, unsigned& lo, unsigned& hi) {
    lo = fp8x2_to_half2<T>(w);
    hi = fp8x2_to_half2<T>(w >> 16);
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
template <>
__device__ __forceinline__ void fp8x4_to_half2x2<__nv_fp8_e4m3>(unsigned w, unsigned& lo, unsigned& hi) {
    lo = fp8x2_to_half2<__nv_fp8_e4m3>(w);
    asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %1;\n\tcvt.rn.f16x2.e4m3x2 %0, h;\n\t}" : "=r"(hi) : "r"(w));
}
#endif

// Column pairs of two rows: row0 and row1 hold 4 fp8 values each (element e in bits 8e .. 8e + 7); a[e] is the
// fp16x2 register (row0's element e, row1's element e), as __byte_perm(fp8x2_to_half2 of each row's pair, 0x5410 or
// 0x7632) would give it. The rows' bytes are interleaved first (one byte permute per two registers), then converted.
template <typename T>
__device__ __forceinline__ void fp8_column_pairs(unsigned row0, unsigned row1, unsigned (&a)[4]) {
    fp8x4_to_half2x2<T>(__byte_perm(row0, row1, 0x5140), a[0], a[1]);
    fp8x4_to_half2x2<T>(__byte_perm(row0, row1, 0x7362), a[2], a[3]);
}

// 8 consecutive elements as raw bits: a uint4 for 16-bit formats, a uint2 for fp8 (kept raw while loads are in
// flight, converted by raw8_pairs just before the mma, so fp8 needs no more registers in flight than its bytes).
template <bool B, typename A, typename C> struct pick_type { typedef A type; };
template <typename A, typename C> struct pick_type<false, A, C> { typedef C type; };
template <typename T> using raw8_t = typename pick_type<is_fp8<T>::value, uint2, uint4>::type;

// p[0..valid) of one 16-byte vector (16 / sizeof(T) elements), one element at a time, as raw bits (valid below a
// whole vector allowed; absent elements are +0 bits): the masked twin of load16 for the end of a row.
template <typename T>
__device__ __forceinline__ uint4 load16_raw_masked(const T* p, i64 valid) {
    constexpr int S = (int)sizeof(T), VEC = 16 / S;
    unsigned w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
        if (e < valid) {
            const unsigned b = S == 1 ? (unsigned)*reinterpret_cast<const unsigned char*>(p + e)
                                      : (unsigned)__ldg(reinterpret_cast<const unsigned short*>(p + e));
            w[(e * S) / 4] |= b << (8 * ((e * S) % 4));
        }
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// The 8 elements as four 2-element registers in the tensor core's 16-bit input format (fp16 or bf16 as stored, fp8
// converted to fp16): element 2j in the low half of register j.
template <typename T>
__device__ __forceinline__ uint4 raw8_pairs(const raw8_t<T>& r) {
    if constexpr (is_fp8<T>::value) {
        uint4 p;
        fp8x4_to_half2x2<T>(r.x, p.x, p.y);
        fp8x4_to_half2x2<T>(r.y, p.z, p.w);
        return p;
    } else {
        return r;
    }
}

// The element at p as 16 bits of the tensor core's input format (fp8 converted to fp16).
template <typename T>
__device__ __forceinline__ unsigned short load1_as_bits16(const T* p) {
    if constexpr (is_fp8<T>::value) {
        const unsigned b = *reinterpret_cast<const unsigned char*>(p);
        return (unsigned short)(fp8x2_to_half2<T>(b) & 0xffffu);
    } else {
        return __ldg(reinterpret_cast<const unsigned short*>(p));
    }
}

// ------------------------------------------------------------------------------------------ tensor cores
// 0x3C00 is 1.0 in binary16; one .f16x2 register of two ones.
inline constexpr unsigned HALF2_ONES = 0x3C003C00u;
// 0x3F80 is 1.0 in bfloat16.
inline constexpr unsigned BF16X2_ONES = 0x3F803F80u;

// D = A * ones + C with mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (facts.md has the fragment layout).
// a[0]: row g, cols 2t..2t+1; a[1]: row g+8, cols 2t..; a[2]: row g, cols 2t+8..; a[3]: row g+8, cols 2t+8..
// c[0], c[1]: row g (cols 2t, 2t+1); c[2], c[3]: row g+8. With B all ones every column of a row holds its row sum.
// T selects the instruction: .bf16.bf16 for __nv_bfloat16 (B = bf16 ones), .f16.f16 for every other format (fp8
// arrives converted to fp16).
template <typename T = __half>
__device__ __forceinline__ void mma_rowsum(float c[4], const unsigned a[4]) {
    if constexpr (is_bf16<T>::value) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(BF16X2_ONES), "r"(BF16X2_ONES));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(HALF2_ONES), "r"(HALF2_ONES));
    }
}

// D = A * ones + 0 (the same instruction with C = +0.0f, so the same bits as mma_rowsum on a zeroed c): the
// outputs are fresh registers, so a caller that flushes after every mma holds no C fragment across its walk.
template <typename T = __half>
__device__ __forceinline__ void mma_rowsum_from_zero(float d[4], const unsigned a[4]) {
    const float z = 0.0f;
    if constexpr (is_bf16<T>::value) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%10,%10,%10,%10};\n"
            : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(BF16X2_ONES), "r"(BF16X2_ONES), "f"(z));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%10,%10,%10,%10};\n"
            : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(HALF2_ONES), "r"(HALF2_ONES), "f"(z));
    }
}

__device__ __forceinline__ unsigned pack_half2(__half lo, __half hi) {
    return (unsigned)__half_as_ushort(lo) | ((unsigned)__half_as_ushort(hi) << 16);
}

// Two adjacent outputs from_float<OutT>(lo), from_float<OutT>(hi) (OutT float, double or __half) as one word of
// 2 * sizeof(OutT) bytes, lo first: what tc_cols' store_pairs and shuffle_cols' run_word write with one store.
template <typename OutT> struct PairWord;
template <> struct PairWord<float> { using type = float2; };
template <> struct PairWord<double> { using type = double2; };
template <> struct PairWord<__half> { using type = unsigned; };

template <typename OutT>
__device__ __forceinline__ typename PairWord<OutT>::type output_pair(float lo, float hi) {
    if constexpr (sizeof(OutT) == 4) {
        return make_float2(from_float<float>(lo), from_float<float>(hi));
    } else if constexpr (sizeof(OutT) == 8) {
        return make_double2(from_float<double>(lo), from_float<double>(hi));
    } else {
        return pack_half2(from_float<__half>(lo), from_float<__half>(hi));
    }
}

// An output_pair word's bits as 32-bit words w[0 .. 2 * sizeof(OutT) / 4), lo's first.
__device__ __forceinline__ void pair_bits(unsigned p, unsigned* w) { w[0] = p; }
__device__ __forceinline__ void pair_bits(float2 p, unsigned* w) {
    w[0] = __float_as_uint(p.x);
    w[1] = __float_as_uint(p.y);
}
__device__ __forceinline__ void pair_bits(double2 p, unsigned* w) {
    const unsigned long long lo = __double_as_longlong(p.x), hi = __double_as_longlong(p.y);
    w[0] = (unsigned)lo;
    w[1] = (unsigned)(lo >> 32);
    w[2] = (unsigned)hi;
    w[3] = (unsigned)(hi >> 32);
}

}  // namespace tcr
