"""The library sums timed beside tcreduce: torch.sum, cupy.sum with CUB on and off (fp32 accumulation; float64 too
for the trade-off study)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from .env import torch_cuda

__all__ = ["cupy_accelerators", "Competitor", "competitors", "torch_stream_guard"]


@contextlib.contextmanager
def cupy_accelerators(on: bool):
    """CuPy's CUB accelerator on (routines and reductions) or off, restored afterwards."""
    from cupy._core import _accelerator as acc

    saved = (acc.get_routine_accelerators(), acc.get_reduction_accelerators())
    names = ["cub"] if on else []
    acc.set_routine_accelerators(names)
    acc.set_reduction_accelerators(names)
    try:
        yield
    finally:
        acc.set_routine_accelerators([_acc_name(a) for a in saved[0]])
        acc.set_reduction_accelerators([_acc_name(a) for a in saved[1]])


def _acc_name(a: Any) -> str:
    from cupy._core import _accelerator as acc

    if isinstance(a, str):
        return a
    return {acc.ACCELERATOR_CUB: "cub", acc.ACCELERATOR_CUTENSOR: "cutensor",
            getattr(acc, "ACCELERATOR_CUTENSORNET", -99): "cutensornet"}.get(a, "cub")


@dataclass(frozen=True)
class Competitor:
    """A library sum timed beside tcreduce: ``call(x)`` on a CuPy array; ``wrap`` turns a CuPy input into what
    ``call`` takes (a zero-copy torch view for torch)."""

    label: str
    call: Callable[[Any], Any]
    wrap: Callable[[Any], Any] = lambda x: x
    context: Callable[[], Any] = contextlib.nullcontext


def competitors(axis: Optional[int] = None, *, float64: bool = False, native: bool = True) -> list[Competitor]:
    """torch.sum (fp32 accumulation; where torch imports and sees the GPU), cupy.sum with CUB on and off (fp32
    accumulation); with ``float64``, also both libraries accumulating in float64."""
    import cupy

    out: list[Competitor] = []
    torch = torch_cuda()
    if torch is not None:
        def to_torch(x):
            return torch.from_dlpack(x)

        def t32(t):
            return torch.sum(t, dtype=torch.float32) if axis is None else torch.sum(t, dim=axis, dtype=torch.float32)

        out.append(Competitor("torch.sum", t32, to_torch))
        if float64:
            def t64(t):
                return torch.sum(t, dtype=torch.float64) if axis is None else torch.sum(t, dim=axis,
                                                                                        dtype=torch.float64)

            out.append(Competitor("torch.sum fp64", t64, to_torch))

    def c32(x):
        return cupy.sum(x, axis=axis, dtype=np.float32)

    out.append(Competitor("cupy.sum CUB", c32, context=lambda: cupy_accelerators(True)))
    if native:
        out.append(Competitor("cupy.sum no CUB", c32, context=lambda: cupy_accelerators(False)))
    if float64:
        def c64(x):
            return cupy.sum(x, axis=axis, dtype=np.float64)

        out.append(Competitor("cupy.sum fp64", c64, context=lambda: cupy_accelerators(True)))
    return out


def torch_stream_guard():
    """Make torch launch on CuPy's current stream (so CuPy's events time torch's work)."""
    torch = torch_cuda()
    import cupy

    ptr = cupy.cuda.get_current_stream().ptr
    if torch is None or ptr == 0:
        return contextlib.nullcontext()
    return torch.cuda.stream(torch.cuda.ExternalStream(ptr))
