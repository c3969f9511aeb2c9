"""Exact sums (on the GPU by exponent bins, on the host by math.fsum) and exactly evaluated relative errors."""

from __future__ import annotations

import functools
import math

import numpy as np

from .env import device_info

__all__ = ["exact_sum_gpu", "exact_sum_host", "rel_error"]


_EXACT_SRC = r"""
// Exact sum by exponent bins: value = m * 2^(e - bias) with an integer significand m (sign included). Each block
// adds the signed significands of its elements into 64-bit shared bins, one per biased exponent (exactly: |m| < 2^24,
// so up to 2^39 elements fit), then adds its bins into the global bins. The host combines the bins exactly.
template <typename U, int EBITS, int MBITS>
__device__ __forceinline__ void bin_of(U b, int& e, long long& m, bool& bad) {
    const unsigned ub = (unsigned)b;
    e = (int)((ub >> MBITS) & ((1u << EBITS) - 1u));
    long long mm = (long long)(ub & ((1u << MBITS) - 1u));
    bad = (e == (1 << EBITS) - 1);
    if (e) mm |= (1ll << MBITS); else e = 1;
    m = ((ub >> (EBITS + MBITS)) & 1u) ? -mm : mm;
}

template <typename U, int EBITS, int MBITS>
__device__ void exact_bins(const U* x, long long n, unsigned long long* bins, unsigned* nonfinite) {
    __shared__ unsigned long long sb[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) sb[i] = 0ull;
    __syncthreads();
    bool any_bad = false;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int e; long long m; bool bad;
        bin_of<U, EBITS, MBITS>(x[i], e, m, bad);
        if (bad) { any_bad = true; continue; }
        if (m) atomicAdd(&sb[e], (unsigned long long)m);
    }
    if (any_bad) atomicOr(nonfinite, 1u);
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        if (sb[i]) atomicAdd(&bins[i], sb[i]);
}

extern "C" __global__ void exact_bins_f32(const unsigned* x, long long n, unsigned long long* bins, unsigned* bad) {
    exact_bins<unsigned, 8, 23>(x, n, bins, bad);
}
extern "C" __global__ void exact_bins_f16(const unsigned short* x, long long n, unsigned long long* bins,
                                          unsigned* bad) {
    exact_bins<unsigned short, 5, 10>(x, n, bins, bad);
}
"""

_EXACT_PARAMS = {"float32": ("exact_bins_f32", 150), "float16": ("exact_bins_f16", 25)}


@functools.lru_cache(maxsize=None)
def _exact_kernel(name: str, device_id: int):
    import cupy

    mod = cupy.RawModule(code=_EXACT_SRC, options=("-std=c++17",))
    return mod.get_function(name)


def exact_sum_gpu(x, absolute: bool = False) -> float:
    """The exact sum of a CuPy float16/float32 array (or of its absolute values), correctly rounded to float64.

    One pass on the GPU into 64-bit bins per exponent, combined on the host with Python integers; the final
    ``int / int`` division rounds correctly. NaN or Inf in the input: the float64 sum (which propagates them)."""
    import cupy

    x = cupy.ascontiguousarray(x).ravel()
    dtype = str(x.dtype)
    if dtype not in _EXACT_PARAMS:
        raise TypeError(f"exact_sum_gpu takes float16 or float32, not {dtype}")
    name, bias = _EXACT_PARAMS[dtype]
    if absolute:
        x = cupy.abs(x)
    n = x.size
    if n == 0:
        return 0.0
    view = x.view(cupy.uint32 if dtype == "float32" else cupy.uint16)
    bins = cupy.zeros(256, dtype=cupy.uint64)
    bad = cupy.zeros(1, dtype=cupy.uint32)
    fn = _exact_kernel(name, x.device.id)
    sms = device_info().get("sm_count", 132)
    grid = int(max(1, min(sms * 8, -(-n // 256))))
    fn((grid,), (256,), (view, np.int64(n), bins, bad))
    if int(bad.get()[0]):
        return float(cupy.sum(x, dtype=cupy.float64))
    total = 0
    for e, s in enumerate(bins.get().tolist()):
        if s:
            s = s - (1 << 64) if s >= (1 << 63) else s
            total += s << (e - 1)  # value of bin e: s * 2^(e - bias) = s * 2^(e - 1) / 2^(bias - 1)
    return total / (1 << (bias - 1))


def rel_error(computed: float, exact: float) -> float:
    """|computed - exact| / |exact|, evaluated exactly (fractions) and rounded once; 0/0 is 0, x/0 is inf."""
    if math.isnan(computed) or math.isnan(exact):
        return float("nan")
    if math.isinf(exact) or math.isinf(computed):
        return 0.0 if computed == exact else float("inf")
    if exact == 0.0:
        return 0.0 if computed == 0.0 else float("inf")
    from fractions import Fraction

    return float(abs(Fraction(computed) - Fraction(exact)) / abs(Fraction(exact)))


def exact_sum_host(x: np.ndarray) -> float:
    """The exact sum of a NumPy float array, correctly rounded (math.fsum of the exactly converted values)."""
    return math.fsum(np.asarray(x, dtype=np.float64).ravel().tolist())
