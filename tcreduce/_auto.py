"""The rule behind ``method="auto"``: the fastest correct method for the dtype, axes and shape.

Backed by the measurements in ``notes/performance.md`` (H200/H100, see the segment-size sweep in paper_figures/):
float16 sums go to the tensor cores, float32 sums to the CUDA-core shuffle kernel (tensor cores take no float32
here), max and min to the shuffle max/min kernels.
"""

from __future__ import annotations

from typing import Any

from ._plan import DeviceSpec

__all__ = ["choose_method"]


def choose_method(kind: str, x: Any, axes: tuple[int, ...], in_dtype: str, device: DeviceSpec) -> str:
    if kind != "sum":
        return "shuffle"
    if in_dtype == "float16":
        return "tensorcore"
    return "shuffle"
