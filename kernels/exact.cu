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
//   double (log2(Tuning::FLUSH32) + QHI - max(QLO, 1) <= 29). Per element: an unsigned compare of the exponent against the
//   window (zeros always pass), the double, one DADD. Elements outside the window take the slow path: a NaN or
//   infinity is counted; a value above the window (or the first nonzero value) flushes the doubles and moves the
//   window up to it (QHI = its exponent + Tuning::HEADROOM); a value below the window is added to the thread's superaccumulator
//   directly. The superaccumulator (K int64 limbs per thread, in shared memory, column threadIdx.x) receives every
//   flush. bf16 is an fp32 whose low 16 bits are zero: the same path on the 16-bit words shifted left by 16.
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

namespace exact_detail {

// ------------------------------------------------------------------------------------------------ input kinds
// Word: the element's storage; K: value limbs; LSB: exponent of the state's unit; WIDE: the fp32 engine (fp32, bf16).
struct InF16 {
    typedef unsigned short Word;
    static constexpr int K = 4, LSB = -24, PER_CHUNK = 8;
    static constexpr bool WIDE = false;
};
struct InF32 {
    typedef unsigned Word;
    static constexpr int K = 11, LSB = -149, PER_CHUNK = 4;
    static constexpr bool WIDE = true;
    __device__ static __forceinline__ unsigned bits(Word w) { return w; }
};
struct InBF16 {  // registered by the planner as soon as the API takes bfloat16 input (a raw 16-bit array)
    typedef unsigned short Word;
    static constexpr int K = 11, LSB = -149, PER_CHUNK = 8;
    static constexpr bool WIDE = true;
    __device__ static __forceinline__ unsigned bits(Word w) { return (unsigned)w << 16; }
};

constexpr int NCOUNT = 3;  // NaN, +inf, -inf
struct Tuning {
    static constexpr int FLUSH16 = 1 << 13;  // fp16: elements per double accumulator between flushes (exact to 2^13)
    static constexpr int FLUSH32 = 1 << 9;   // fp32: elements per double accumulator between flushes
    static constexpr int WINDOW = 21;        // fp32: exponent fields in the window: 9 + (WINDOW - 1) <= 29
    static constexpr int HEADROOM = 2;       // fp32: a new window's top is the exponent that moved it plus this
};

// ------------------------------------------------------------------------------------------------ limb helpers
// Propagates carries so that limbs 0..K-2 lie in [0, 2^32) and limb K-1 holds the rest (signed).
template <int K>
__device__ __forceinline__ void normalize(i64 (&v)[K]) {
#pragma unroll
    for (int i = 0; i < K - 1; ++i) {
        const i64 c = v[i] >> 32;  // arithmetic shift: floor division
        v[i] -= c * 4294967296LL;
        v[i + 1] += c;
    }
}

// Bits [lo, lo + n) of the non-negative multi-limb integer (limbs in [0, 2^32), n <= 60).
template <int K>
__device__ __forceinline__ u64 get_bits(const i64 (&v)[K], int lo, int n) {
    u64 r = 0;
#pragma unroll
    for (int i = 0; i < K; ++i) {
        const int off = 32 * i - lo;
        const u64 li = (u64)v[i];
        if (off >= 64 || off <= -32) continue;
        r |= off >= 0 ? (li << off) : (li >> (-off));
    }
    return n >= 64 ? r : (r & ((1ull << n) - 1ull));
}

// Whether any of bits [0, pos) of the non-negative multi-limb integer is set.
template <int K>
__device__ __forceinline__ bool any_below(const i64 (&v)[K], int pos) {
    bool any = false;
#pragma unroll
    for (int i = 0; i < K; ++i) {
        const int b = pos - 32 * i;  // bits of limb i below pos
        if (b >= 32) any |= v[i] != 0;
        else if (b > 0) any |= ((u64)v[i] & ((1ull << b) - 1ull)) != 0;
    }
    return any;
}

// ------------------------------------------------------------------------------------------------ rounding
template <typename OutT> struct Fmt;
template <> struct Fmt<__half> { static constexpr int P = 11, EMIN = -14, EMAX = 15, BITS = 16; };
template <> struct Fmt<float> { static constexpr int P = 24, EMIN = -126, EMAX = 127, BITS = 32; };
template <> struct Fmt<double> { static constexpr int P = 53, EMIN = -1022, EMAX = 1023, BITS = 64; };

template <typename OutT> __device__ __forceinline__ OutT from_bits(u64 b);
template <> __device__ __forceinline__ __half from_bits<__half>(u64 b) { return __ushort_as_half((unsigned short)b); }
template <> __device__ __forceinline__ float from_bits<float>(u64 b) { return __uint_as_float((unsigned)b); }
template <> __device__ __forceinline__ double from_bits<double>(u64 b) { return __longlong_as_double((i64)b); }

// The state s[0 .. K + 3) (normalised) rounded once to OutT, round to nearest, ties to even: NaN if a NaN or both
// infinities were summed; else the infinity; else the exact value, +-inf where it rounds beyond OutT's range; an
// exact zero is +0.0. The same function serves the sum kernels and exact_finalize (tcreduce.exact.finalize).
template <typename OutT, int K, int LSB>
__device__ OutT round_state(const i64* s) {
    typedef Fmt<OutT> F;
    const u64 sign_bit = 1ull << (F::BITS - 1);
    const u64 inf_bits = ((1ull << (F::BITS - F::P)) - 1ull) << (F::P - 1);
    const i64 nan = s[K], pinf = s[K + 1], ninf = s[K + 2];
    if (nan > 0 || (pinf > 0 && ninf > 0)) return tcr::canonical_nan<OutT>();
    if (pinf > 0) return from_bits<OutT>(inf_bits);
    if (ninf > 0) return from_bits<OutT>(inf_bits | sign_bit);
    i64 v[K];
#pragma unroll
    for (int i = 0; i < K; ++i) v[i] = s[i];
    const bool neg = v[K - 1] < 0;
    if (neg) {
#pragma unroll
        for (int i = 0; i < K; ++i) v[i] = -v[i];
        normalize<K>(v);
    }
    int msb = -1;  // highest set bit of the magnitude
#pragma unroll
    for (int i = 0; i < K; ++i)
        if (v[i] != 0) msb = 32 * i + 63 - __clzll(v[i]);
    if (msb < 0) return from_bits<OutT>(0);  // exact zero: +0.0
    const int e = msb + LSB;                  // exponent of the leading bit
    const u64 sgn = neg ? sign_bit : 0ull;
    if (e > F::EMAX) return from_bits<OutT>(inf_bits | sgn);
    const int qmin = F::EMIN - (F::P - 1);          // quantum of the subnormals
    const int q = max(e - (F::P - 1), qmin);        // quantum of the result
    const int sh = q - LSB;                         // bits of the state below the quantum
    u64 mant;
    if (sh <= 0) {
        mant = get_bits<K>(v, 0, msb + 1) << (-sh);  // exact: msb + 1 - sh <= P bits
    } else {
        const u64 w = get_bits<K>(v, sh - 1, msb - sh + 2);  // the kept bits and the round bit
        mant = w >> 1;
        if ((w & 1ull) && ((mant & 1ull) || any_below<K>(v, sh - 1))) ++mant;
    }
    // mant < 2^(P-1) encodes a subnormal; its carries move into the exponent field (subnormal -> normal, 2^P -> next
    // binade, the top binade -> the infinity's bits), exactly as the encoding is laid out.
    return from_bits<OutT>((((u64)(q - qmin)) << (F::P - 1)) + mant | sgn);
}

// ------------------------------------------------------------------------------------------------ engines
// A per-thread engine takes a 16-byte chunk (8 halves / 4 floats / 8 bf16) or one element:
//   ok(q)      whether the chunk may take the fast path (no branch per element);
//   fast(q)    the fast path; careful(q) handles every element of the chunk correctly (the cold path: the caller
//              inlines it once, outside its unrolled loop, so that the accumulators stay in registers);
//   tick()     after each chunk: counts the elements per accumulator and flushes before exactness could be lost;
//   one(w)     one element (heads, tails, strided kernels).

// The element of a chunk, by a run-time index, through a chain of selects (no local-memory array).
__device__ __forceinline__ unsigned word_of(const uint4& q, int i) {
    unsigned w = q.x;
    w = i == 1 ? q.y : w;
    w = i == 2 ? q.z : w;
    w = i == 3 ? q.w : w;
    return w;
}

// fp16: the double x * 2^-1008 of the half in the high (low) 16 bits of w.
__device__ __forceinline__ double dbl_hi(unsigned hi) { return __hiloint2double((int)hi, 0); }
__device__ __forceinline__ double half_hi(unsigned w) { return dbl_hi((unsigned)((int)w >> 6) & 0x81FFFC00u); }
__device__ __forceinline__ double half_lo(unsigned w) { return half_hi(w << 16); }
// Exact int64 count of 2^-24 of a double sum of scaled halves (|d| < 2^-979, a multiple of 2^-1032).
__device__ __forceinline__ i64 units16(double d) { return __double2ll_rn(__dmul_rn(__dmul_rn(d, 0x1p1000), 0x1p32)); }

struct Fast16 {
    double d0 = 0.0, d1 = 0.0, d2 = 0.0, d3 = 0.0;
    i64 total = 0;        // units of 2^-24
    unsigned spec = 0u;   // per-half maximum of the magnitude bits seen (>= 0x7C00: an Inf or NaN was seen)
    int run = 0;          // elements per accumulator since the last flush (an upper bound)

    __device__ __forceinline__ void flush() {
        total += units16(d0) + units16(d1) + units16(d2) + units16(d3);
        d0 = d1 = d2 = d3 = 0.0;
        run = 0;
    }
    __device__ __forceinline__ bool ok(const uint4&) const { return true; }
    __device__ __forceinline__ void fast(const uint4& q) {
        d0 += half_lo(q.x); d1 += half_hi(q.x);
        d2 += half_lo(q.y); d3 += half_hi(q.y);
        d0 += half_lo(q.z); d1 += half_hi(q.z);
        d2 += half_lo(q.w); d3 += half_hi(q.w);
        spec = __vimax3_u16x2(spec, q.x & 0x7fff7fffu, q.y & 0x7fff7fffu);
        spec = __vimax3_u16x2(spec, q.z & 0x7fff7fffu, q.w & 0x7fff7fffu);
    }
    __device__ __forceinline__ void careful(const uint4& q) { fast(q); }
    __device__ __forceinline__ void tick() {
        run += 2;
        if (run >= Tuning::FLUSH16) flush();
    }
    __device__ __forceinline__ void one(unsigned short h) {
        d0 += half_lo(h);
        spec = __vmaxu2(spec, (unsigned)h & 0x7fffu);
        if (++run >= Tuning::FLUSH16) flush();
    }
    __device__ __forceinline__ bool saw_special() const {
        return (spec & 0xffffu) >= 0x7c00u || (spec >> 16) >= 0x7c00u;
    }
};

// The careful fp16 path (a thread that saw an Inf or NaN redoes its share with it): classifies every element.
struct Careful16 {
    double d = 0.0;
    i64 total = 0;
    int run = 0;
    int nan = 0, pinf = 0, ninf = 0;

    __device__ __forceinline__ void one(unsigned short h) {
        if ((h & 0x7c00u) == 0x7c00u) {
            if (h & 0x3ffu) ++nan;
            else if (h & 0x8000u) ++ninf;
            else ++pinf;
            return;
        }
        d += half_lo(h);
        if (++run >= Tuning::FLUSH16) { total += units16(d); d = 0.0; run = 0; }
    }
    __device__ __forceinline__ bool ok(const uint4&) const { return false; }
    __device__ __forceinline__ void fast(const uint4& q) { careful(q); }
    __device__ __forceinline__ void careful(const uint4& q) {
#pragma unroll 1
        for (int i = 0; i < 8; ++i) {
            const unsigned w = word_of(q, i >> 1);
            one((unsigned short)((i & 1) ? (w >> 16) : (w & 0xffffu)));
        }
    }
    __device__ __forceinline__ void tick() {}
};

// fp32 and bf16: the double x * 2^-896 of the fp32 bits b (exact for every finite x).
__device__ __forceinline__ double dbl32(unsigned b) {
    return __hiloint2double((int)((unsigned)((int)b >> 3) & 0x8FFFFFFFu), (int)(b << 29));
}

// EPW: fp32 elements per 32-bit word of a chunk (1: fp32; 2: bf16, the low half first). The thread's K limbs and
// its 3 counts (NaN, +inf, -inf) live in shared memory at sacc[i * STRIDE], i < K + 3.
template <int K, int EPW, int STRIDE>
struct Wide {
    double d0 = 0.0, d1 = 0.0, d2 = 0.0, d3 = 0.0;  // fast path: element e of a chunk goes to d[e % 4]
    double ds = 0.0;                                 // careful path: in-window elements
    unsigned lo2 = 0u, r2 = 0u;  // window: exponent fields q with (q << 24) - lo2 < r2 (unsigned); r2 = 0: empty
    int qhi = -1;
    int run = 0, runs = 0;       // elements per fast accumulator / in ds since the last flush
    i64* sacc;

    __device__ __forceinline__ explicit Wide(i64* column) : sacc(column) {
#pragma unroll
        for (int i = 0; i < K + NCOUNT; ++i) sacc[i * STRIDE] = 0;
    }
    // sacc += (-1)^neg * m * 2^p (units of 2^-149), m < 2^53.
    __device__ __forceinline__ void add_shifted(u64 m, int p, bool neg) {
        const int limb = p >> 5, sh = p & 31;
        const u64 lo = m << sh;
        const u64 hi = sh ? (m >> (64 - sh)) : 0ull;
        const i64 sg = neg ? -1 : 1;
        i64* s = sacc + limb * STRIDE;
        s[0] += sg * (i64)(lo & 0xffffffffull);
        s[STRIDE] += sg * (i64)(lo >> 32);
        if (hi) s[2 * STRIDE] += sg * (i64)hi;
    }
    __device__ __forceinline__ void flush_double(double v) {
        const i64 b = __double_as_longlong(v);
        if ((b << 1) == 0) return;
        const int e = (int)((b >> 52) & 0x7ff);
        u64 m = ((u64)b & ((1ull << 52) - 1ull)) | (e ? (1ull << 52) : 0ull);
        int p = max(e, 1) - 30;  // v * 2^1045 = m * 2^(max(e,1) - 30)
        if (p < 0) { m >>= -p; p = 0; }  // exact: v is a multiple of 2^-1045
        add_shifted(m, p, b < 0);
    }
    __device__ __forceinline__ void flush() {
        flush_double(d0); flush_double(d1); flush_double(d2); flush_double(d3); flush_double(ds);
        d0 = d1 = d2 = d3 = ds = 0.0;
        run = runs = 0;
    }
    __device__ __forceinline__ bool in_window(unsigned b) const {
        const unsigned u = b << 1;
        return u - lo2 < r2 || u == 0u;
    }
    // One element, correctly (the cold path).
    __device__ __forceinline__ void slow(unsigned b) {
        const unsigned u = b << 1;
        if (u == 0u) return;
        const int q = (int)(u >> 24);
        if (q == 255) {  // counts: NaN, +inf, -inf
            sacc[(K + ((b & 0x7fffffu) ? 0 : (b >> 31) ? 2 : 1)) * STRIDE] += 1;
            return;
        }
        if (r2 == 0u || q > qhi) {  // first value, or above the window: flush, move the window up to it
            flush();
            qhi = min(q + Tuning::HEADROOM, 254);
            const int qlo = max(qhi - (Tuning::WINDOW - 1), 0);
            lo2 = (unsigned)qlo << 24;
            r2 = (unsigned)(qhi - qlo + 1) << 24;
        }
        if (in_window(b)) {
            ds += dbl32(b);
            if (++runs >= Tuning::FLUSH32) flush();
            return;
        }
        // below the window: straight into the superaccumulator
        const u64 m = (b & 0x7fffffu) | (q ? 0x800000u : 0u);
        add_shifted(m, max(q, 1) - 1, (b >> 31) != 0u);
    }
    __device__ __forceinline__ static unsigned lo_bits(unsigned w) { return EPW == 1 ? w : w << 16; }
    __device__ __forceinline__ static unsigned hi_bits(unsigned w) { return w & 0xffff0000u; }
    __device__ __forceinline__ bool ok(const uint4& q) const {
        if constexpr (EPW == 1) {
            return in_window(q.x) & in_window(q.y) & in_window(q.z) & in_window(q.w);
        } else {
            return in_window(lo_bits(q.x)) & in_window(hi_bits(q.x)) & in_window(lo_bits(q.y)) &
                   in_window(hi_bits(q.y)) & in_window(lo_bits(q.z)) & in_window(hi_bits(q.z)) &
                   in_window(lo_bits(q.w)) & in_window(hi_bits(q.w));
        }
    }
    __device__ __forceinline__ void fast(const uint4& q) {
        if constexpr (EPW == 1) {
            d0 += dbl32(q.x); d1 += dbl32(q.y); d2 += dbl32(q.z); d3 += dbl32(q.w);
        } else {
            d0 += dbl32(lo_bits(q.x)); d1 += dbl32(hi_bits(q.x)); d2 += dbl32(lo_bits(q.y)); d3 += dbl32(hi_bits(q.y));
            d0 += dbl32(lo_bits(q.z)); d1 += dbl32(hi_bits(q.z)); d2 += dbl32(lo_bits(q.w)); d3 += dbl32(hi_bits(q.w));
        }
    }
    __device__ __forceinline__ void careful(const uint4& q) {
#pragma unroll 1
        for (int i = 0; i < 4 * EPW; ++i) {
            const unsigned w = word_of(q, i / EPW);
            slow(EPW == 1 ? w : ((i & 1) ? hi_bits(w) : lo_bits(w)));
        }
    }
    __device__ __forceinline__ void tick() {
        run += EPW;
        if (run >= Tuning::FLUSH32) flush();
    }
    __device__ __forceinline__ void one(unsigned b) {
        if (in_window(b)) {
            d0 += dbl32(b);
            if (++run >= Tuning::FLUSH32) flush();
        } else {
            slow(b);
        }
    }
};

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
__global__ void __launch_bounds__(128) exact_finalize(const i64* __restrict__ states, i64 count, OutT* __restrict__ out) {
    constexpr int L = IN::K + NCOUNT;
    const i64 o = (i64)blockIdx.x * 128 + threadIdx.x;
    if (o < count) out[o] = round_state<OutT, IN::K, IN::LSB>(states + o * L);
}
