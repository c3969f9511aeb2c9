"""The inputs of every study: random distributions with fixed seeds (never zeros), one random pool per dtype on the
GPU, and rotating views of it so that small inputs are not served from the L2 cache."""

from __future__ import annotations

import math
import zlib
from typing import Any, Optional

import numpy as np

from .env import l2_bytes

__all__ = ["DISTRIBUTIONS", "dist_label", "case_seed", "make_input", "dtype_label", "random_pool", "rotating_views"]


# Input distributions of the accuracy and trade-off studies. Parameters are fixed (recorded in the metadata).
DISTRIBUTIONS: dict[str, dict[str, Any]] = {
    "uniform": {"label": "uniform [0, 1)", "dtypes": ("float16", "float32")},
    "normal": {"label": "normal N(0, 1)", "dtypes": ("float16", "float32")},
    "mixed": {"label": "mixed sign, κ≈1e4", "dtypes": ("float16", "float32"), "kappa": 1e4},
    "lognormal": {"label": "lognormal, wide range", "dtypes": ("float16", "float32"),
                  "sigma": {"float16": 2.0, "float32": 4.0}},
    "near_overflow": {"label": "near overflow [2^15, 65504)", "dtypes": ("float16",)},
}


def dist_label(dist: str, dtype: Optional[str] = None) -> str:
    """A distribution's label in figures (with the parameter that applies to ``dtype``)."""
    spec = DISTRIBUTIONS.get(dist)
    if spec is None:
        return dist
    if dist == "lognormal" and dtype in spec["sigma"]:
        return f"lognormal exp(σN(0,1)), σ={spec['sigma'][dtype]:g}"
    return spec["label"]


def case_seed(*parts: Any) -> int:
    """A fixed seed per case (stable across runs and machines)."""
    return zlib.crc32("/".join(str(p) for p in parts).encode()) & 0x7FFFFFFF


def make_input(dist: str, dtype: str, n: int, seed: int, xp=np):
    """``n`` random values of ``dist`` as ``dtype`` (NumPy or CuPy, with that library's generator and ``seed``).

    uniform: [0, 1). normal: N(0, 1). mixed: uniform (-1, 1), centred, shifted by 1/(2 kappa) so that
    sum|x| / |sum x| is about kappa (the CSV records the actual value). lognormal: exp(sigma N(0, 1)), clipped to
    60000 for fp16. near_overflow (fp16): uniform in [32768, 65504)."""
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {dist!r}; known: {', '.join(DISTRIBUTIONS)}")
    spec = DISTRIBUTIONS[dist]
    if dtype not in spec["dtypes"]:
        raise ValueError(f"distribution {dist!r} is not defined for {dtype}")
    f32 = np.float32
    if xp is np:
        rng = np.random.default_rng(seed)

        def uniform(k):
            return rng.random(k, dtype=f32)

        def normal(k):
            return rng.standard_normal(k, dtype=f32)
    else:
        rs = xp.random.RandomState(seed)

        def uniform(k):
            return rs.random_sample(k, dtype=f32)

        def normal(k):
            return rs.standard_normal(k, dtype=f32)

    if dist == "uniform":
        v = uniform(n)
    elif dist == "normal":
        v = normal(n)
    elif dist == "mixed":
        v = uniform(n)
        v *= f32(2.0)
        v -= f32(1.0)
        v -= f32(float(v.mean(dtype=np.float64)))
        v += f32(1.0 / (2.0 * spec["kappa"]))
    elif dist == "lognormal":
        v = normal(n)
        v *= f32(spec["sigma"][dtype])
        xp.exp(v, out=v)
        if dtype == "float16":
            xp.minimum(v, f32(60000.0), out=v)
    else:  # near_overflow
        v = uniform(n)
        v *= f32(65504.0 - 32768.0)
        v += f32(32768.0)
    return v.astype(dtype, copy=False)


def dtype_label(dtype: str) -> str:
    return {"float16": "fp16", "float32": "fp32"}.get(dtype, dtype)


def random_pool(dtype: str, n: int, seed: int, low: float = 0.0, high: float = 1.0):
    """A CuPy array of ``n`` uniform random values in [low, high) (never zeros-only data)."""
    import cupy

    rs = cupy.random.RandomState(seed)
    v = rs.random_sample(n, dtype=np.float32)
    if (low, high) != (0.0, 1.0):
        v *= np.float32(high - low)
        v += np.float32(low)
    return v.astype(dtype, copy=False)


def rotating_views(pool, n: int, max_views: int = 1024) -> list:
    """Views of ``n`` elements at 256-byte aligned offsets of ``pool`` (a 1-D CuPy array), enough that the bytes
    they cover exceed twice the L2 cache where the pool and ``max_views`` allow (one view when one input does)."""
    itemsize = pool.dtype.itemsize
    nbytes = n * itemsize
    step = -(-n // (256 // itemsize)) * (256 // itemsize)  # elements, rounded up to 256 bytes
    want = max(1, math.ceil(2 * l2_bytes() / max(nbytes, 1)))
    fit = max(1, (pool.size - n) // step + 1) if pool.size >= n else 0
    if fit == 0:
        raise ValueError(f"pool of {pool.size} elements is smaller than one input of {n}")
    count = int(min(want, fit, max_views))
    # spread the views over the whole pool
    span = (pool.size - n) // step
    offsets = sorted({(i * span // max(count - 1, 1)) * step for i in range(count)}) if count > 1 else [0]
    return [pool[o:o + n] for o in offsets]
