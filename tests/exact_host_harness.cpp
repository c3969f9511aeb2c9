// Host harness for kernels/exact_core.cuh (tests/test_exact_host.py): the engines and round_state of method "exact"
// compiled as plain C++ with host definitions of the CUDA intrinsics they use, driven the way exact_flat drives them
// (thread g of T takes the 16-byte chunks g, g + T, ...; thread 0 also takes the elements after the last whole chunk
// one by one; a thread whose fp16 engine saw an Inf or NaN redoes its share on the careful path). Prints the summed,
// normalised state and its rounding to fp16, fp32 and fp64 (bits in hex).
//
// stdin: kind (0 fp16, 1 fp32, 2 bf16), T, n, then n raw elements (2 or 4 bytes each, little-endian).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#define __device__
#define __forceinline__ inline
using std::max;
using std::min;

struct uint4 {
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
struct __half {
    unsigned short bits;
};
static inline __half __ushort_as_half(unsigned short b) { return {b}; }
static inline double __hiloint2double(int hi, int lo) {
    const uint64_t b = ((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo;
    double d;
    std::memcpy(&d, &b, 8);
    return d;
}
static inline long long __double_as_longlong(double d) {
    long long b;
    std::memcpy(&b, &d, 8);
    return b;
}
static inline double __longlong_as_double(long long b) {
    double d;
    std::memcpy(&d, &b, 8);
    return d;
}
static inline float __uint_as_float(unsigned b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline long long __double2ll_rn(double d) { return (long long)std::nearbyint(d); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline unsigned max_u16x2(unsigned a, unsigned b) {
    return std::max(a & 0xffffu, b & 0xffffu) | (std::max(a >> 16, b >> 16) << 16);
}
static inline unsigned __vmaxu2(unsigned a, unsigned b) { return max_u16x2(a, b); }
static inline unsigned __vimax3_u16x2(unsigned a, unsigned b, unsigned c) { return max_u16x2(max_u16x2(a, b), c); }

#include "../kernels/exact_core.cuh"

using namespace exact_detail;

template <class Eng, class Word>
static void visit(Eng& eng, const std::vector<Word>& x, long long g, long long T) {
    const long long per = 16 / (long long)sizeof(Word);
    const long long nv = (long long)x.size() / per;
    if (g == 0)
        for (long long i = nv * per; i < (long long)x.size(); ++i) eng.one(x[i]);
    for (long long v = g; v < nv; v += T) {
        uint4 q;
        std::memcpy(&q, &x[v * per], 16);
        if (eng.ok(q)) eng.fast(q);
        else eng.careful(q);
        eng.tick();
    }
}

template <int K>
static void add_state(std::vector<i64>& total, const i64* s) {
    for (int i = 0; i < K + NCOUNT; ++i) total[i] += s[i];
}

template <class IN>
static void print_rounded(std::vector<i64>& t) {
    const auto h = round_state<__half, IN::K, IN::LSB>(t.data());
    const float f = round_state<float, IN::K, IN::LSB>(t.data());
    const double d = round_state<double, IN::K, IN::LSB>(t.data());
    unsigned fb;
    unsigned long long db;
    std::memcpy(&fb, &f, 4);
    std::memcpy(&db, &d, 8);
    std::printf("%x %x %llx\n", h.bits, fb, db);
}

int main() {
    int kind;
    long long T, n;
    if (std::scanf("%d %lld %lld", &kind, &T, &n) != 3) return 2;
    std::getchar();  // the newline before the raw data
    if (kind == 0) {
        std::vector<unsigned short> x(n);
        if (n && std::fread(x.data(), 2, n, stdin) != (size_t)n) return 3;
        std::vector<i64> total(InF16::K + NCOUNT, 0);
        for (long long g = 0; g < T; ++g) {
            Fast16 f;
            visit(f, x, g, T);
            i64 s[7] = {0, 0, 0, 0, 0, 0, 0};
            i64 t;
            if (!f.saw_special()) {
                f.flush();
                t = f.total;
            } else {
                Careful16 c;
                visit(c, x, g, T);
                t = c.total + units16(c.d);
                s[4] = c.nan; s[5] = c.pinf; s[6] = c.ninf;
            }
            s[0] = t & 0xffffffffLL;
            s[1] = t >> 32;
            add_state<4>(total, s);
        }
        normalize<4>(*reinterpret_cast<i64 (*)[4]>(total.data()));
        for (auto v : total) std::printf("%lld ", v);
        std::printf("\n");
        print_rounded<InF16>(total);
    } else {
        constexpr int K = InF32::K, L = K + NCOUNT;
        std::vector<i64> total(L, 0);
        std::vector<unsigned> x32;
        std::vector<unsigned short> x16;
        if (kind == 1) {
            x32.resize(n);
            if (n && std::fread(x32.data(), 4, n, stdin) != (size_t)n) return 3;
        } else {
            x16.resize(n);
            if (n && std::fread(x16.data(), 2, n, stdin) != (size_t)n) return 3;
        }
        for (long long g = 0; g < T; ++g) {
            i64 smem[L];
            i64 s[L];
            if (kind == 1) {
                Wide<K, 1, 1> w(smem);
                visit(w, x32, g, T);
                w.flush();
            } else {
                struct W2 : Wide<K, 2, 1> {  // bf16 words reach one() as their fp32 bits
                    explicit W2(i64* p) : Wide<K, 2, 1>(p) {}
                    void one(unsigned short h) { Wide<K, 2, 1>::one(InBF16::bits(h)); }
                } w(smem);
                visit(w, x16, g, T);
                w.flush();
            }
            std::memcpy(s, smem, sizeof(s));
            normalize<K>(*reinterpret_cast<i64 (*)[K]>(s));
            add_state<K>(total, s);
        }
        normalize<K>(*reinterpret_cast<i64 (*)[K]>(total.data()));
        for (auto v : total) std::printf("%lld ", v);
        std::printf("\n");
        print_rounded<InF32>(total);
    }
    return 0;
}
