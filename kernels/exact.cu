// exact.cu: method "exact": the exact sum of fp16 / fp32 (and bf16) inputs, rounded once to the output dtype (round
// to nearest, ties to even), for any length, axis and view. Bitwise identical on every GPU, plan and stream, and for
// any partition of the data: the state of a partition is its exact sum, kept as a fixed-point integer.
//
// Design (notes/performance.md compares it with the Ozaki int8-mma and Kulisch designs):
//
// * The exact state (tcreduce/exact.py documents the encoding): L = K + 3 int64 values. Limbs 0..K-1 hold the exact
//   sum of the finite elements as the integer sum_i limb_i * 2^(32 i) in units of 2^LSB (fp16: K = 4, LSB = -24;
//   fp32 and bf16: K = 11, LSB = -149), normalised: limbs 0..K-2 in [0, 2^32), limb K-1 signed. Then the counts of
//   NaN, +inf and -inf elements. Integer addition is associative, so the order of additions below is free: any
//   thread, block or GPU may add any part, and the state (hence the result) is the same bits.
//
// * fp16 fast path (per thread, CUDA cores): an fp16 value is an integer multiple of 2^-24 below 2^16. The 15 bits
//   of its magnitude, placed at bits 10..24 of the high word of a double (sign at bit 63, low word 0), make the
//   double x * 2^-1008 exactly, normal and subnormal fp16 alike: the double's exponent field is the half's, its
//   mantissa the half's mantissa, and both formats' subnormals have no implicit bit. Two integer instructions make
//   this double (SHF.R.S32 + LOP3; the low half of a word needs one more shift), one DADD adds it. Partial sums of up
//   to 2^13 such values are multiples of 2^-1032 below 2^-1003, where doubles are spaced 2^-1055 apart or finer: every
//   DADD is exact. Each thread keeps 4 double accumulators, converts them (exactly) to an int64 count of 2^-24 every
//   FLUSH16 elements per accumulator, and tracks the largest magnitude it saw with one VIMNMX3.U16x2 per two words.
//   A thread that saw an Inf or NaN (magnitude bits >= 0x7C00: their doubles would be finite garbage) redoes its
//   share on the careful path, which classifies each element.
//
// * fp32 / bf16 fast path: the fp32 bits shifted right by 3 (sign kept) and left by 29 are the double x * 2^-896
//   exactly (subnormals too). A thread keeps a window of exponent fields [QLO, QHI] (QHI - QLO = WINDOW - 1); values
//   in the window are multiples of 2^(max(QLO,1) - 150) below 2^(QHI - 126), so FLUSH32 of them sum exactly in a
//   double (log2(FLUSH32) + QHI - max(QLO, 1) <= 29). Per element: an unsigned compare of the exponent against the
//   window (zeros always pass), the double, one DADD. Elements outside the window take the slow path: a NaN or
//   infinity is counted; a value above the window (or the first nonzero value) flushes the doubles and moves the
//   window up to it (QHI = its exponent + HEADROOM); a value below the window is added to the thread's
//   superaccumulator directly. The superaccumulator (K int64 limbs and the 3 counts per thread, in shared memory,
//   column threadIdx.x) receives every flush. bf16 is an fp32 whose low 16 bits are zero: the same path on the 16-bit
//   words shifted left by 16. The arithmetic lives in exact_core.cuh.
//
// * Combination: each thread normalises its limbs (limbs < 2^32), the group (lanes of one output) or block adds
//   them with __shfl_xor_sync (int64) and shared memory, the block's state is normalised; with several blocks per
//   output the states go to the workspace (int64) and the last block to arrive (tcr::arrive_last) adds them and
//   normalises. MODE 0 then rounds the state to OutT (round_state: correct rounding, canonical NaN, +-inf on
//   overflow); MODE 1 writes the state itself (L int64 per output: tcreduce.exact.partial_state).
//
// Limits (the planner keeps them): fewer than 2^22 elements per thread (int64 per-thread totals and limb sums).
#include "common.cuh"

using tcr::i64;
using tcr::u64;

#include "exact_core.cuh"

namespace exact_detail {

// ------------------------------------------------------------------------------------------------ per-thread state
// The engine of each input kind, and the thread's normalised state at the end.
template <class IN, int BLOCK>
struct Thread;

template <int BLOCK>
struct Thread<InF16, BLOCK> : Fast16 {
    static constexpr int L = InF16::K + NCOUNT;
    __device__ __forceinline__ Thread(i64*) {}
    // VISIT(engine) feeds the thread's share again: the careful pass of a thread that saw an Inf or NaN.
    template <class Visit>
    __device__ __forceinline__ void state(i64 (&s)[L], Visit&& visit) {
        i64 t;
        int nan = 0, pinf = 0, ninf = 0;
        if (!saw_special()) {
            flush();
            t = total;
        } else {
            Careful16 c;
            visit(c);
            t = c.total + units16(c.d);
            nan = c.nan; pinf = c.pinf; ninf = c.ninf;
        }
        s[0] = t & 0xffffffffLL;
        s[1] = t >> 32;
        s[2] = 0; s[3] = 0;
        s[4] = nan; s[5] = pinf; s[6] = ninf;
    }
};

template <class IN, int BLOCK>
struct WideThread : Wide<IN::K, sizeof(typename IN::Word) == 4 ? 1 : 2, BLOCK> {
    typedef Wide<IN::K, sizeof(typename IN::Word) == 4 ? 1 : 2, BLOCK> Base;
    static constexpr int K = IN::K, L = K + NCOUNT;
    __device__ __forceinline__ WideThread(i64* smem) : Base(smem + threadIdx.x) {}
    __device__ __forceinline__ void one(typename IN::Word x) { Base::one(IN::bits(x)); }
    template <class Visit>
    __device__ __forceinline__ void state(i64 (&s)[L], Visit&&) {
        Base::flush();
#pragma unroll
        for (int i = 0; i < L; ++i) s[i] = this->sacc[i * BLOCK];
        normalize<K>(*reinterpret_cast<i64 (*)[K]>(s));
    }
};
template <int BLOCK> struct Thread<InF32, BLOCK> : WideThread<InF32, BLOCK> {
    __device__ __forceinline__ Thread(i64* smem) : WideThread<InF32, BLOCK>(smem) {}
};
template <int BLOCK> struct Thread<InBF16, BLOCK> : WideThread<InBF16, BLOCK> {
    __device__ __forceinline__ Thread(i64* smem) : WideThread<InBF16, BLOCK>(smem) {}
};

// Shared memory of a block: the fp32 superaccumulators and counts ([K + 3][BLOCK] int64), the block's reduction slots.
template <class IN, int BLOCK>
struct Smem {
    static constexpr int L = IN::K + NCOUNT;
    static constexpr int SACC = IN::WIDE ? L * BLOCK : 1;
    i64 sacc[SACC];
    i64 red[L][BLOCK / 32];
    i64 total[L];
};

// ------------------------------------------------------------------------------------------------ combination
// Adds the states of the G lanes of each group (G a power of two <= 32): every lane of the group ends with the sum.
template <int L, int G>
__device__ __forceinline__ void group_add(i64 (&s)[L]) {
#pragma unroll
    for (int off = G / 2; off > 0; off >>= 1) {
#pragma unroll
        for (int i = 0; i < L; ++i) s[i] += __shfl_xor_sync(0xffffffffu, s[i], off);
    }
}

// Sum of the normalised states of the block's threads (each < 2^32 per limb: no overflow), normalised, into
// sm.total (valid after the call, for every thread). Every thread of the block must call it.
template <class IN, int BLOCK>
__device__ __forceinline__ void block_add(i64 (&s)[IN::K + NCOUNT], Smem<IN, BLOCK>& sm) {
    constexpr int L = IN::K + NCOUNT, K = IN::K, WARPS = BLOCK / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    group_add<L, 32>(s);
    __syncthreads();  // sm may be in use by the caller's previous item
    if (lane == 0) {
#pragma unroll
        for (int i = 0; i < L; ++i) sm.red[i][warp] = s[i];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        i64 t[L];
#pragma unroll
        for (int i = 0; i < L; ++i) {
            t[i] = 0;
            for (int w = 0; w < WARPS; ++w) t[i] += sm.red[i][w];
        }
        normalize<K>(*reinterpret_cast<i64 (*)[K]>(t));
#pragma unroll
        for (int i = 0; i < L; ++i) sm.total[i] = t[i];
    }
    __syncthreads();
}

// Sum of `count` normalised states p[j * L .. j * L + L) (written by other blocks of this launch: read through L2),
// normalised, into t. Called by one warp (all lanes get the result).
template <int K>
__device__ __forceinline__ void warp_add_states(const i64* p, i64 count, i64 (&t)[K + NCOUNT]) {
    constexpr int L = K + NCOUNT;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < L; ++i) t[i] = 0;
    for (i64 j = lane; j < count; j += 32) {
#pragma unroll
        for (int i = 0; i < L; ++i) t[i] += __ldcg(p + j * L + i);
    }
    group_add<L, 32>(t);
    normalize<K>(*reinterpret_cast<i64 (*)[K]>(t));
}

// Writes one output: the rounded value (MODE 0) or the state (MODE 1, out is int64 [outputs][L]).
template <class IN, typename OutT, int MODE>
__device__ __forceinline__ void write_output(OutT* out, i64 o, const i64* t) {
    constexpr int L = IN::K + NCOUNT;
    if constexpr (MODE == 0) {
        out[o] = round_state<OutT, IN::K, IN::LSB>(t);
    } else {
        i64* dst = reinterpret_cast<i64*>(out) + o * L;
#pragma unroll
        for (int i = 0; i < L; ++i) dst[i] = t[i];
    }
}

}  // namespace exact_detail

using namespace exact_detail;

// =====================================================================================================================
// exact_flat<IN, OutT, MODE, BLOCK, UNROLL, MINB>: the exact sum of n contiguous elements (Flat problem).
// Thread g of T = gridDim.x * BLOCK: chunks (16 bytes: 8 halves / 4 floats) v = g, g + T, ... after the head (the
// elements before the first 16-byte boundary); global thread 0 also adds the head and the tail (< 1 chunk) one by
// one. Any order gives the same state (integer sums). The block states go to ws (int64, L per block); the last
// block adds them and writes out[0] (MODE 0: rounded to OutT; MODE 1: the L-limb state).
// Workspace: gridDim.x * L int64 (2 L floats per block); one counter.
// =====================================================================================================================
template <class IN, typename OutT, int MODE, int BLOCK, int UNROLL, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB) exact_flat(const typename IN::Word* __restrict__ x, i64 n,
                                                    OutT* __restrict__ out, float* __restrict__ ws,
                                                    unsigned* __restrict__ counters) {
    typedef typename IN::Word Word;
    constexpr int L = IN::K + NCOUNT, N = IN::PER_CHUNK;
    __shared__ Smem<IN, BLOCK> sm;
    const i64 misalign = (i64)(reinterpret_cast<u64>(x) & 15u);
    const i64 head = min((i64)(((16 - misalign) & 15) / sizeof(Word)), n);
    const i64 nv = (n - head) / N;
    const i64 tail_start = head + nv * N;
    const uint4* __restrict__ xv = reinterpret_cast<const uint4*>(x + head);
    const i64 threads = (i64)gridDim.x * BLOCK;
    const i64 g = (i64)blockIdx.x * BLOCK + threadIdx.x;

    auto visit = [&](auto& eng) {
        if (g == 0) {
            for (i64 i = 0; i < head; ++i) eng.one(x[i]);
            for (i64 i = tail_start; i < n; ++i) eng.one(x[i]);
        }
        i64 base = 0;
        for (; base + (UNROLL - 1) * threads + g < nv; base += UNROLL * threads) {
            uint4 v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) v[u] = tcr::load16<2>(xv + base + u * threads + g);
            bool ok = true;
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) ok &= eng.ok(v[u]);
            if (ok) {
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) eng.fast(v[u]);
            } else {  // cold: one copy of the careful path, the chunk picked by selects
#pragma unroll 1
                for (int u = 0; u < UNROLL; ++u) {
                    uint4 c = v[0];
#pragma unroll
                    for (int k = 1; k < UNROLL; ++k) c = u == k ? v[k] : c;
                    eng.careful(c);
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) eng.tick();
        }
        for (i64 i = base + g; i < nv; i += threads) {
            const uint4 c = tcr::load16<2>(xv + i);
            if (eng.ok(c)) eng.fast(c);
            else eng.careful(c);
            eng.tick();
        }
    };

    Thread<IN, BLOCK> th(sm.sacc);
    visit(th);
    i64 s[L];
    th.state(s, visit);
    block_add<IN, BLOCK>(s, sm);
    if (gridDim.x == 1) {
        if (threadIdx.x == 0) write_output<IN, OutT, MODE>(out, 0, sm.total);
        return;
    }
    i64* wsl = reinterpret_cast<i64*>(ws);
    if (threadIdx.x < L) wsl[(i64)blockIdx.x * L + threadIdx.x] = sm.total[threadIdx.x];
    if (tcr::arrive_last(counters, gridDim.x)) {
        if (threadIdx.x < 32) {
            i64 t[L];
            warp_add_states<IN::K>(wsl, gridDim.x, t);
            if (threadIdx.x == 0) write_output<IN, OutT, MODE>(out, 0, t);
        }
    }
}

// =====================================================================================================================
// exact_seg<IN, OutT, MODE, BLOCK, G, MINB>: element (i, j, l) at x + i*sa + j*sr + l (i < a, j < r, l < b);
// output o = i*b + l is the exact sum over j (Cols problem; a Rows problem is a = m, b = 1, sa = ld, sr = 1).
// A group of G threads (G a power of two <= 32, or G == BLOCK) owns one output; the block owns BLOCK / G outputs (a
// tile: outputs tile * BLOCK/G + group); tiles are grid-strided over blockIdx.x. The reduced axis is cut into `splits`
// ranges of ceil(r / splits) (blockIdx.y picks one); lane t of a group adds j = begin + t, begin + t + G, ... one
// element at a time. The group's states are added (shuffles, or the block's shared memory when G == BLOCK); with
// splits > 1 the state of (output, split) goes to ws[(o * splits + split) * L ..] and the last block of the tile to
// arrive (counters[tile]) adds the splits' states of each of its outputs. Any order gives the same state.
// Workspace: a * b * splits * L int64 and ceil(a * b / (BLOCK / G)) counters when splits > 1.
// =====================================================================================================================
template <class IN, typename OutT, int MODE, int BLOCK, int G, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB) exact_seg(const typename IN::Word* __restrict__ x, i64 a, i64 r, i64 b,
                                                   i64 sa, i64 sr, OutT* __restrict__ out, float* __restrict__ ws,
                                                   unsigned* __restrict__ counters, i64 splits) {
    static_assert(G == BLOCK || (G >= 1 && G <= 32 && (G & (G - 1)) == 0), "G: a power of two <= 32, or BLOCK");
    constexpr int L = IN::K + NCOUNT, OPB = BLOCK / G;
    __shared__ Smem<IN, BLOCK> sm;
    const i64 outputs = a * b;
    const i64 tiles = (outputs + OPB - 1) / OPB;
    const i64 split = blockIdx.y;
    const i64 per = (r + splits - 1) / splits;
    const i64 jbegin = split * per, jend = min(r, jbegin + per);
    const int t = threadIdx.x % G;
    i64* wsl = reinterpret_cast<i64*>(ws);

    for (i64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {  // block-uniform
        const i64 o = tile * OPB + threadIdx.x / G;
        const bool ok = o < outputs;
        const i64 i = ok ? o / b : 0, l = ok ? o - (o / b) * b : 0;
        const typename IN::Word* __restrict__ p = x + i * sa + l;
        const i64 jend_o = ok ? jend : jbegin;
        auto visit = [&](auto& eng) {
            for (i64 j = jbegin + t; j < jend_o; j += G) eng.one(__ldg(p + j * sr));
        };
        Thread<IN, BLOCK> th(sm.sacc);
        visit(th);
        i64 s[L];
        th.state(s, visit);
        const i64* total = s;
        if constexpr (G == BLOCK) {
            block_add<IN, BLOCK>(s, sm);
            total = sm.total;
        } else {
            group_add<L, G>(s);
            normalize<IN::K>(*reinterpret_cast<i64 (*)[IN::K]>(s));
        }
        const bool leader = t == 0 && ok;
        if (splits == 1) {
            if (leader) write_output<IN, OutT, MODE>(out, o, total);
            continue;
        }
        if (leader) {
#pragma unroll
            for (int q = 0; q < L; ++q) wsl[(o * splits + split) * L + q] = total[q];
        }
        if (tcr::arrive_last(counters + tile, (unsigned)splits)) {
            if (leader) {
                i64 v[L];
#pragma unroll
                for (int q = 0; q < L; ++q) v[q] = 0;
                for (i64 sp = 0; sp < splits; ++sp) {
#pragma unroll
                    for (int q = 0; q < L; ++q) v[q] += __ldcg(wsl + (o * splits + sp) * L + q);
                }
                normalize<IN::K>(*reinterpret_cast<i64 (*)[IN::K]>(v));
                write_output<IN, OutT, MODE>(out, o, v);
            }
        }
    }
}

// =====================================================================================================================
// exact_finalize<IN, OutT>: out[o] = round_state(states[o * L ..]) for o < count (tcreduce.exact.finalize). The states
// must be normalised (as partial_state and merge_states leave them). One thread per output.
// =====================================================================================================================
template <class IN, typename OutT>
__global__ void __launch_bounds__(128) exact_finalize(const i64* __restrict__ states, i64 count,
                                                      OutT* __restrict__ out) {
    constexpr int L = IN::K + NCOUNT;
    const i64 o = (i64)blockIdx.x * 128 + threadIdx.x;
    if (o < count) out[o] = round_state<OutT, IN::K, IN::LSB>(states + o * L);
}
