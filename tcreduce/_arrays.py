"""Accept CuPy arrays and any CUDA array (``__cuda_array_interface__`` or ``__dlpack__``, e.g. torch CUDA tensors);
return results of the same kind.

bfloat16 and fp8 data has no CuPy dtype: it is viewed as its raw bits (uint16 / uint8) and its format travels beside
it (``tcreduce.formats``). Torch tensors of those dtypes are recognised; raw CuPy arrays name their format with
``format=``."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["as_cupy", "as_cupy_input", "canonical_nan", "DTYPE_NAMES"]

DTYPE_NAMES = {np.dtype(np.float16): "float16", np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}
_TORCH_RAW = {"bfloat16": "int16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}


def canonical_nan(res: Any) -> Any:
    """Every NaN of a NumPy or CuPy array replaced by its dtype's canonical quiet NaN (fp16 0x7E00, fp32 0x7FC00000,
    fp64 0x7FF8000000000000, NumPy's ``np.nan``): what every GPU sum kernel writes (tcr::from_float in common.cuh).
    The NaN's bits are made on the host and only selected on the device, so no conversion can change them."""
    nan = res != res
    if not bool(nan.any()):
        return res
    nan_value = np.array(np.nan, res.dtype)
    if isinstance(res, (np.ndarray, np.generic)):
        return np.where(nan, nan_value, res)
    import cupy

    return cupy.where(nan, cupy.asarray(nan_value), res)


def _is_numpy_like(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic, list, tuple, int, float, complex))


def as_cupy(x: Any) -> tuple[Any, Callable[[Any], Any]]:
    """(CuPy view of x, function turning a CuPy result back into x's kind). Never copies the data."""
    try:
        import cupy
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("tcreduce.sum needs CuPy with a CUDA device; install cupy-cuda13x (or cupy-cuda12x), "
                          "or use tcreduce.emulate for NumPy arrays on the CPU") from e
    if isinstance(x, cupy.ndarray):
        return x, lambda r: r
    if _is_numpy_like(x):
        raise TypeError(f"tcreduce.sum takes GPU arrays, not {type(x).__name__}: move the data with cupy.asarray(x), "
                        "or use tcreduce.emulate.sum(x, ...) to get on the CPU the exact result the GPU would give")
    mod = type(x).__module__.split(".")[0]
    if mod == "torch":
        import torch

        if not x.is_cuda:
            raise TypeError("tcreduce.sum takes CUDA tensors; this torch tensor is on the CPU: use x.cuda(), or "
                            "tcreduce.emulate.sum(x.numpy(), ...)")
        raw = _TORCH_RAW.get(str(x.dtype).replace("torch.", ""))
        if raw is not None:  # no CuPy dtype: its raw bits (as_cupy_input names the format)
            bits = cupy.from_dlpack(x.view(getattr(torch, raw)))
            return (bits.view(cupy.uint16) if raw == "int16" else bits), lambda r: torch.from_dlpack(r)
        return cupy.from_dlpack(x), lambda r: torch.from_dlpack(r)
    if hasattr(x, "__cuda_array_interface__"):
        return cupy.asarray(x), lambda r: r
    if hasattr(x, "__dlpack__"):
        return cupy.from_dlpack(x), lambda r: r
    raise TypeError(f"tcreduce.sum takes cupy.ndarray or CUDA arrays exposing __cuda_array_interface__ or "
                    f"__dlpack__, not {type(x).__name__}")


def as_cupy_input(x: Any, fmt: Any = None) -> tuple[Any, Callable[[Any], Any], str]:
    """(CuPy view of x, function turning a CuPy result back into x's kind, input format name).

    The format is ``fmt`` when given (raw bits: a uint16 array for "bfloat16", uint8 for the fp8 formats; or the
    array's own float16/float32 dtype), else the array's dtype (torch bfloat16 and fp8 tensors are recognised). Raises
    TypeError when ``fmt`` does not fit the array."""
    from .formats import get_format

    torch_name = str(getattr(x, "dtype", "")).replace("torch.", "") if type(x).__module__.startswith("torch") else ""
    xc, back = as_cupy(x)
    try:
        f = get_format(fmt) if fmt is not None else None
    except ValueError as e:
        raise TypeError(str(e)) from None
    if torch_name in _TORCH_RAW:
        if f is not None and f.name != torch_name:
            raise TypeError(f"format={fmt!r} does not match the tensor's dtype torch.{torch_name}")
        return xc, back, torch_name
    if f is None:
        return xc, back, DTYPE_NAMES.get(xc.dtype, str(xc.dtype))
    if xc.dtype == f.raw_dtype and f.name not in ("float16", "float32"):
        return xc, back, f.name
    if DTYPE_NAMES.get(xc.dtype) == f.name:
        return xc, back, f.name
    want = f"{f.raw_dtype} (its raw bits)" if f.name not in ("float16", "float32") else f.name
    raise TypeError(f"format={f.name!r} needs a {want} array, got {xc.dtype}; e.g. x.view(cupy.{f.raw_dtype})")
