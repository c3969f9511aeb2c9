"""Accept CuPy arrays and any CUDA array (``__cuda_array_interface__`` or ``__dlpack__``, e.g. torch CUDA tensors);
return results of the same kind."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["as_cupy", "DTYPE_NAMES"]

DTYPE_NAMES = {np.dtype(np.float16): "float16", np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}


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
        if x.dtype == torch.bfloat16:
            raise TypeError("bfloat16 input is not supported yet; supported input dtypes: float16, float32")
        return cupy.from_dlpack(x), lambda r: torch.from_dlpack(r)
    if hasattr(x, "__cuda_array_interface__"):
        return cupy.asarray(x), lambda r: r
    if hasattr(x, "__dlpack__"):
        return cupy.from_dlpack(x), lambda r: r
    raise TypeError(f"tcreduce.sum takes cupy.ndarray or CUDA arrays exposing __cuda_array_interface__ or "
                    f"__dlpack__, not {type(x).__name__}")
