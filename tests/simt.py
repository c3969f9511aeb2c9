"""A small SIMT shim that compiles the real kernels (kernels/*.cu with common.cuh inlined) for the CPU with g++: one
std::thread per CUDA thread, a std::barrier per block (__syncthreads) and per warp (__shfl_xor_sync and __shfl_sync of
any 4- or 8-byte type, __all_sync, __syncwarp: whole warps only), blocks run one after another over a 1-D or 2-D
grid. Used by tests/test_shuffle.py and tests/test_simt.py to check, without a GPU, that kernel code does what its
comments say, writes every output and leaves the counters at zero. The GPU tests remain the authority on the
hardware; this catches logic errors early. Not a test module.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

SIMT_FP16 = r"""#pragma once
#include <cstring>
struct __half { unsigned short x; };
inline float __half2float(__half h) { _Float16 f; std::memcpy(&f, &h.x, 2); return (float)f; }
inline __half __float2half_rn(float v) { _Float16 f = (_Float16)v; __half h; std::memcpy(&h.x, &f, 2); return h; }
inline __half __ushort_as_half(unsigned short u) { __half h; h.x = u; return h; }
inline unsigned short __half_as_ushort(__half h) { return h.x; }
"""

# bf16 / fp8 types of common.cuh: declared so the header compiles (the SIMT cases are fp16 and fp32)
SIMT_BF16 = r"""#pragma once
#include <cstring>
struct __nv_bfloat16 { unsigned short x; };
inline float __bfloat162float(__nv_bfloat16 h) { unsigned u = (unsigned)h.x << 16; float f; std::memcpy(&f, &u, 4);
                                                  return f; }
"""
SIMT_FP8 = r"""#pragma once
#include <cstdlib>
typedef unsigned char __nv_fp8_storage_t;
typedef unsigned short __nv_fp8x2_storage_t;
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };
struct __half_raw { unsigned short x; };
struct __half2_raw { unsigned short x, y; };
inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t, __nv_fp8_interpretation_t) { std::abort(); }
inline __half2_raw __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t, __nv_fp8_interpretation_t) { std::abort(); }
struct __nv_fp8_e4m3 { unsigned char x; explicit operator float() const { std::abort(); } };
struct __nv_fp8_e5m2 { unsigned char x; explicit operator float() const { std::abort(); } };
inline unsigned __byte_perm(unsigned a, unsigned b, unsigned s) {
    const unsigned long long v = ((unsigned long long)b << 32) | a;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xffu) << (8 * i);
    return r;
}
"""
SIMT_SHIM = r"""#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>
#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static
using std::max;
using std::min;
struct dim3s { unsigned x = 0, y = 0, z = 0; };
thread_local dim3s threadIdx, blockIdx;
dim3s gridDim, blockDim;
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
struct double2 { double x, y; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
inline uint2 make_uint2(unsigned a, unsigned b) { return uint2{a, b}; }
inline float2 make_float2(float a, float b) { return float2{a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
inline double2 make_double2(double a, double b) { return double2{a, b}; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline double __longlong_as_double(long long b) { double d; std::memcpy(&d, &b, 8); return d; }
inline long long __double_as_longlong(double d) { long long b; std::memcpy(&b, &d, 8); return b; }
inline double __hiloint2double(int hi, int lo) {
    return __longlong_as_double((long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo));
}
inline double __dmul_rn(double a, double b) { return a * b; }
inline long long __double2ll_rn(double d) { return (long long)std::nearbyint(d); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline unsigned __simt_max_u16x2(unsigned a, unsigned b) {
    return std::max(a & 0xffffu, b & 0xffffu) | (std::max(a >> 16, b >> 16) << 16);
}
inline unsigned __vmaxu2(unsigned a, unsigned b) { return __simt_max_u16x2(a, b); }
inline unsigned __vimax3_u16x2(unsigned a, unsigned b, unsigned c) {
    return __simt_max_u16x2(__simt_max_u16x2(a, b), c);
}
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
struct BlockCtx {
    std::unique_ptr<std::barrier<>> block;
    std::unique_ptr<std::barrier<>> warp[32];
    unsigned long long wbuf[32][32];
};
BlockCtx* g_ctx;
inline void __syncthreads() { g_ctx->block->arrive_and_wait(); }
// a warp's exchange (whole warps only): every lane puts v in its slot and waits for the others (__simt_put); lanes
// then read any slots; __simt_done waits until every lane has read before the slots are reused
template <class T>
inline unsigned long long* __simt_put(T v) {
    static_assert(sizeof(T) <= 8, "4- or 8-byte shuffles");
    const int w = threadIdx.x >> 5;
    std::memcpy(&g_ctx->wbuf[w][threadIdx.x & 31], &v, sizeof(T));
    g_ctx->warp[w]->arrive_and_wait();
    return g_ctx->wbuf[w];
}
inline void __simt_done() { g_ctx->warp[threadIdx.x >> 5]->arrive_and_wait(); }
template <class T>
inline T __shfl_sync(unsigned, T v, int src) {
    const unsigned long long* slots = __simt_put(v);
    T r;
    std::memcpy(&r, &slots[src & 31], sizeof(T));
    __simt_done();
    return r;
}
template <class T>
inline T __shfl_xor_sync(unsigned m, T v, int off) { return __shfl_sync(m, v, (int)(threadIdx.x & 31) ^ off); }
inline int __all_sync(unsigned, int pred) {
    const unsigned long long* slots = __simt_put((unsigned long long)(pred != 0));
    int all = 1;
    for (int l = 0; l < 32; ++l) all &= (int)slots[l];
    __simt_done();
    return all;
}
inline void __syncwarp(unsigned = 0xffffffffu) { g_ctx->warp[threadIdx.x >> 5]->arrive_and_wait(); }
template <class F> void launch(F f, unsigned grid, unsigned block, unsigned grid_y = 1) {
    gridDim.x = grid; gridDim.y = grid_y; gridDim.z = 1; blockDim.x = block;
    for (unsigned by = 0; by < grid_y; ++by) {
        for (unsigned b = 0; b < grid; ++b) {
            BlockCtx ctx;
            ctx.block = std::make_unique<std::barrier<>>(block);
            for (unsigned w = 0; w < block / 32; ++w) ctx.warp[w] = std::make_unique<std::barrier<>>(32);
            g_ctx = &ctx;
            std::vector<std::thread> ts;
            for (unsigned t = 0; t < block; ++t)
                ts.emplace_back([=]() { threadIdx.x = t; blockIdx.x = b; blockIdx.y = by; f(); });
            for (auto& th : ts) th.join();
        }
    }
}
"""


def simt_main(plan, kernel_file: str, in_ctype: str, outputs: int, per_output: int = 1) -> str:
    """The C++ main that runs ``plan``'s one launch on the shim: reads the input bytes (argv[1]) from byte offset
    argv[2], poisons the ``outputs * per_output`` outputs, checks the counters come back zero, writes the outputs to
    argv[3]."""
    from tcreduce._plan import Buf

    (ln,) = plan.launches
    ot = {"float16": "__half", "float32": "float", "float64": "double", "int64": "long long"}[plan.out_dtype]
    names = {"x": f"(const {in_ctype}*)xptr", "out": f"({ot}*)out.data()", "ws": "ws.data()", "counters": "cnt.data()"}
    args = ", ".join(names[a.name] if isinstance(a, Buf) else f"(long long){a}LL" for a in ln.args)
    n = outputs * per_output
    return f"""#include "shim.h"
#include "{kernel_file}"
int main(int argc, char** argv) {{
    FILE* f = fopen(argv[1], "rb"); fseek(f, 0, SEEK_END); const long sz = ftell(f); fseek(f, 0, SEEK_SET);
    unsigned char* buf = (unsigned char*)std::aligned_alloc(256, ((sz + 256) / 256 + 1) * 256);
    if (fread(buf, 1, sz, f) != (size_t)sz) return 2;
    fclose(f);
    const unsigned char* xptr = buf + atol(argv[2]);
    std::vector<{ot}> out({n});
    std::memset(out.data(), 0xff, sizeof({ot}) * out.size());  // poisoned (all ones: NaN, or -1 for states)
    std::vector<float> ws({plan.workspace_floats} + 2, -12345.0f);
    std::vector<unsigned> cnt({plan.counters} + 1024, 0u);
    launch([&]() {{ {ln.kernel}({args}); }}, {ln.grid[0]}, {ln.block[0]}, {ln.grid[1]});
    for (unsigned c : cnt) if (c) {{ fprintf(stderr, "a counter was left nonzero\\n"); return 3; }}
    FILE* o = fopen(argv[3], "wb"); fwrite(out.data(), sizeof({ot}), {n}, o); fclose(o);
    return 0;
}}
"""


def input_bytes(owner, view, layout) -> tuple[bytes, int]:
    """(the bytes a shim program reads, the byte offset of the problem's base in them) for the NumPy ``view`` of the
    array ``owner`` with host layout ``layout``: the owner's whole buffer, or the copy the layout asks for."""
    if layout.copy_order is not None:
        return np.ascontiguousarray(view.transpose(layout.copy_order)).tobytes(), 0
    view_off = view.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    return owner.tobytes(), view_off + layout.base_offset * view.itemsize


# inline PTX the CPU cannot run -> C++ that gives the same values: tcr::load16's evict-first mode (MODE 3) is a plain
# load on the CPU, and its L2 policy a dummy (a hint only: the loaded values are the same); the flagged slots'
# relaxed 64-bit loads and stores (tcr::load_slot, store_slot) are relaxed C++ atomics
PTX_ON_THE_CPU = ((re.compile(r'asm volatile\("createpolicy\..*?\);', re.S), "pol = 0ull;"),
                  (re.compile(r'asm volatile\("ld\.global\.L1::evict_first\.L2::cache_hint\.v4\.u32.*?\);', re.S),
                   "r = *p; (void)policy;"),
                  (re.compile(r'asm volatile\("ld\.relaxed\.gpu\.global\.u64.*?\);', re.S),
                   "v = __atomic_load_n(p, __ATOMIC_RELAXED);"),
                  (re.compile(r'asm volatile\("st\.relaxed\.gpu\.global\.u64.*?\);', re.S),
                   "__atomic_store_n(p, v, __ATOMIC_RELAXED);"))


def prepare(folder: Path, kernels: dict[str, str]) -> str:
    """g++'s path (the test skips without one), with the shim's headers and ``kernels`` (file name in ``folder`` ->
    kernels/ source, common.cuh inlined, PTX_ON_THE_CPU replaced) written into ``folder``."""
    from tcreduce._compile import load_source

    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found")
    for name, text in (("cuda_fp16.h", SIMT_FP16), ("cuda_bf16.h", SIMT_BF16), ("cuda_fp8.h", SIMT_FP8),
                       ("shim.h", SIMT_SHIM)):
        (folder / name).write_text(text)
    for name, source in kernels.items():
        text = load_source(source)
        for ptx, cpu in PTX_ON_THE_CPU:
            text, count = ptx.subn(cpu, text)
            assert count == 1, f"{ptx.pattern} found {count} times in {source}: update tests/simt.py"
        (folder / name).write_text(text)
    return gxx


def build(gxx: str, folder: Path, sources: Sequence[Path]) -> list[Path]:
    """Compile the programs ``sources`` (4 at a time) into executables beside them. A g++ without C++20 barriers or
    _Float16 skips the test; any other compile error fails it."""

    def one(src: Path):
        exe = src.with_suffix("")
        r = subprocess.run([gxx, "-std=c++20", "-O1", "-pthread", "-w", f"-I{folder}", str(src), "-o", str(exe)],
                           capture_output=True, text=True, check=False)
        return exe if r.returncode == 0 else r.stderr

    with ThreadPoolExecutor(4) as ex:
        exes = list(ex.map(one, sources))
    for err in exes:
        if isinstance(err, str):
            if "_Float16" in err or "barrier" in err or "c++20" in err:
                pytest.skip(f"this g++ lacks C++20 barriers or _Float16: {err[:300]}")
            raise AssertionError(f"the SIMT shim does not compile the kernel (a new intrinsic in common.cuh?):\n"
                                 f"{err[:3000]}")
    return exes

