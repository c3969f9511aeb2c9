"""The inputs of every study: random distributions with fixed seeds (never zeros), one random pool per dtype on the
GPU, and rotating views of it so that small inputs are not served from the L2 cache."""

from __future__ import annotations

import math
import zlib
from typing import Any, Optional

import numpy as np

from .env import l2_bytes

__all__ = ["DISTRIBUTIONS", "dist_label", "case_seed", "make_input", "dtype_label", "random_pool", "rotating_views",
           "NEW_FORMATS", "as_format", "to_host", "float32_copy", "format_missing", "raw_bits", "torch_view"]

# Formats without a CuPy dtype: on the GPU their inputs are torch tensors of that dtype (tcreduce.sum and torch.sum
# take them as they are); on the host, ml_dtypes arrays (tcreduce.emulate takes them).
NEW_FORMATS = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
ALL_FORMATS = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float32")


# Input distributions of the accuracy and trade-off studies. Parameters are fixed (recorded in the metadata).
DISTRIBUTIONS: dict[str, dict[str, Any]] = {
    "uniform": {"label": "uniform [0, 1)", "dtypes": ALL_FORMATS},
    "normal": {"label": "normal N(0, 1)", "dtypes": ALL_FORMATS},
    "mixed": {"label": "mixed sign, κ≈1e4", "dtypes": ALL_FORMATS, "kappa": 1e4},
    "lognormal": {"label": "lognormal, wide range", "dtypes": ALL_FORMATS,
                  "sigma": {"float16": 2.0, "float32": 4.0, "bfloat16": 4.0, "float8_e4m3fn": 1.5,
                            "float8_e5m2": 2.0}},
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
    60000 for fp16, 448 for e4m3 and 57344 for e5m2. near_overflow (fp16): uniform in [32768, 65504). The float32
    values are rounded to ``dtype`` once (round to nearest even): :func:`as_format`."""
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
        clip = {"float16": 60000.0, "float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}.get(dtype)
        if clip is not None:
            xp.minimum(v, f32(clip), out=v)
    else:  # near_overflow
        v = uniform(n)
        v *= f32(65504.0 - 32768.0)
        v += f32(32768.0)
    return as_format(v, dtype, xp)


def dtype_label(dtype: str) -> str:
    return {"float16": "fp16", "float32": "fp32", "bfloat16": "bf16", "float8_e4m3fn": "fp8 e4m3",
            "float8_e5m2": "fp8 e5m2"}.get(dtype, dtype)


def format_missing(dtype: str) -> str:
    """Why GPU inputs of ``dtype`` cannot be made here ('' when they can): bf16 and fp8 need torch with CUDA."""
    if dtype not in NEW_FORMATS:
        return ""
    from .env import torch_cuda, torch_missing_reason

    return "" if torch_cuda() is not None else f"{dtype} inputs are torch tensors: {torch_missing_reason()}"


def as_format(v32, dtype: str, xp=np):
    """float32 values (NumPy or CuPy) rounded once to ``dtype``: NumPy/ml_dtypes arrays on the host; on the GPU a
    CuPy array for float16/float32 and a torch CUDA tensor of that dtype for bf16 and fp8 (zero-copy input, torch's
    round-to-nearest-even conversion)."""
    if dtype not in NEW_FORMATS:
        return v32.astype(dtype, copy=False)
    if xp is np:
        from tcreduce.formats import numpy_dtype

        return v32.astype(numpy_dtype(dtype))
    from .env import torch_cuda

    torch = torch_cuda()
    if torch is None:
        raise RuntimeError(format_missing(dtype))
    return torch.from_dlpack(v32).to(getattr(torch, dtype))


def to_host(x) -> np.ndarray:
    """A GPU input as a NumPy array (ml_dtypes for bf16 and fp8)."""
    if type(x).__module__.startswith("torch"):
        from tcreduce.formats import get_format, numpy_dtype

        name = str(x.dtype).replace("torch.", "")
        raw = x.view(_torch_raw(x)).cpu().numpy()
        return raw.view(get_format(name).raw_dtype).view(numpy_dtype(name))
    import cupy

    return cupy.asnumpy(x)


def _torch_raw(x):
    import torch

    return torch.int16 if x.element_size() == 2 else torch.uint8


def float32_copy(x):
    """A CuPy float32 array of the same values (exact for every input format); CuPy inputs of fp16/fp32 as they are
    (the exact sums take fp16 and fp32)."""
    import cupy

    if type(x).__module__.startswith("torch"):
        return cupy.from_dlpack(x.float().contiguous())
    return x


def random_pool(dtype: str, n: int, seed: int, low: float = 0.0, high: float = 1.0):
    """A CuPy array of ``n`` uniform random values in [low, high) (never zeros-only data); bf16 and fp8 as their raw
    bits (uint16 / uint8: pass ``format=dtype`` to tcreduce.sum, :func:`torch_view` for torch)."""
    import cupy

    rs = cupy.random.RandomState(seed)
    v = rs.random_sample(n, dtype=np.float32)
    if (low, high) != (0.0, 1.0):
        v *= np.float32(high - low)
        v += np.float32(low)
    x = as_format(v, dtype, cupy)
    return raw_bits(x) if dtype in NEW_FORMATS else x


def raw_bits(t):
    """The raw bits of a torch bf16 / fp8 CUDA tensor as a CuPy uint16 / uint8 array (zero copy)."""
    import cupy

    raw = cupy.from_dlpack(t.view(_torch_raw(t)))
    return raw.view(cupy.uint16) if t.element_size() == 2 else raw


def torch_view(x, dtype: str):
    """A torch tensor of ``dtype`` over a CuPy array (raw bits for bf16 and fp8), zero copy."""
    from .env import torch_cuda

    torch = torch_cuda()
    t = torch.from_dlpack(x.view("int16") if x.dtype.itemsize == 2 and dtype in NEW_FORMATS else x)
    return t.view(getattr(torch, dtype)) if dtype in NEW_FORMATS else t


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
