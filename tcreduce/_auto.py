"""The rule behind ``method="auto"``: the fastest correct method for the dtype, axes and shape.

Backed by the H200 measurements committed in ``paper_figures/`` (throughput.csv, segments.csv; 512 MiB inputs,
batched CUDA-event timing) and ``notes/performance.md``:

| input | form | measured (GB/s) | choice |
|---|---|---|---|
| fp16 | full sum, 2^28 | tensorcore 4281, shuffle 4312, torch 4032, CUB 1559 | tensorcore (tie within 1%) |
| fp16 | last axis, n <= 32 | tensorcore 4142-4152, shuffle 4148-4207 | tensorcore (tie within 2%) |
| fp16 | last axis, n >= 64 | shuffle 4026-4333, tensorcore 2358-3748 (tc_rows) | shuffle |
| fp16 | other axes | shuffle 3174-4184, tensorcore 1672-3277 | shuffle |
| fp32 | every form | shuffle (tensor-core methods take fp16 only) | shuffle |

Since that sweep, aligned rows of n >= 256 stream through tc_rows_stream and tie shuffle on an H100 (within 1.5%
or ahead: notes/performance.md); the rule stays with shuffle there until the sweep is redone.

Ties go to the tensor cores: one fused 16-term block per mma replaces 15 round-to-nearest additions, and its error
bound is the smaller. Max and min use the shuffle max/min kernels.
"""

from __future__ import annotations

import math
from typing import Any

from ._plan import DeviceSpec

__all__ = ["choose_method", "TENSORCORE_MAX_ROW"]

TENSORCORE_MAX_ROW = 32  # last-axis segments up to this length go to the tensor cores
TENSORCORE_FIRST = ("float16", "bfloat16")  # the 16-bit formats follow the fp16 measurements; fp8: shuffle


def choose_method(kind: str, x: Any, axes: tuple[int, ...], in_dtype: str, device: DeviceSpec) -> str:
    if kind != "sum" or in_dtype not in TENSORCORE_FIRST:
        return "shuffle"
    ndim = len(x.shape)
    if len(axes) == ndim or all(x.shape[i] == 1 for i in range(ndim) if i not in axes):
        return "tensorcore"  # a full sum
    reduced_last = axes == tuple(range(ndim - len(axes), ndim))
    if reduced_last and math.prod(x.shape[i] for i in axes) <= TENSORCORE_MAX_ROW:
        return "tensorcore"
    return "shuffle"
