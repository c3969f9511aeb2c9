// exact_core.cuh: the arithmetic of method "exact" (kernels/exact.cu): the input kinds, the limb helpers, the correct
// rounding of a state (round_state) and the per-thread engines (Fast16, Careful16, Wide). Nothing here touches
// threads, warps or shared-memory layout, so tests/test_exact_host.py also compiles this file as plain C++ on the CPU
// (with host definitions of the few CUDA intrinsics it uses) and checks it against the Python twin, bit for bit.
//
// Needs, before inclusion: i64 / u64, uint4, __half and the CUDA intrinsics used below (common.cuh on the GPU).
#pragma once

namespace exact_detail {

typedef long long i64;
typedef unsigned long long u64;

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
template <> struct Fmt<__half> {
    static constexpr int P = 11, EMIN = -14, EMAX = 15, BITS = 16;
    static constexpr u64 NAN_BITS = 0x7E00ull;
};
template <> struct Fmt<float> {
    static constexpr int P = 24, EMIN = -126, EMAX = 127, BITS = 32;
    static constexpr u64 NAN_BITS = 0x7FC00000ull;
};
template <> struct Fmt<double> {
    static constexpr int P = 53, EMIN = -1022, EMAX = 1023, BITS = 64;
    static constexpr u64 NAN_BITS = 0x7FF8000000000000ull;
};

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
    if (nan > 0 || (pinf > 0 && ninf > 0)) return from_bits<OutT>(F::NAN_BITS);  // the canonical quiet NaN
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
    return from_bits<OutT>(((((u64)(q - qmin)) << (F::P - 1)) + mant) | sgn);
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

}  // namespace exact_detail
