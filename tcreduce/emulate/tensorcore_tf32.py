"""Emulator twin of ``kernels/tensorcore_tf32.cu`` (method "tensorcore_tf32"): the forms of
``kernels/tensorcore_f32.cuh`` (replayed by :func:`tcreduce.emulate.tensorcore_fp32.emulate_forms`) with the tf32
format: each value rounded as ``round_tf32`` does, two m16n8k8.tf32 mmas per step through the tensor-core model
(blocks of 8 on Hopper, of 4 on the A100), each flushed into round-to-nearest row sums."""

from __future__ import annotations

import numpy as np

from .._plan import Plan
from .mma_model import fused_rowsum
from .tensorcore_fp32 import emulate_forms

__all__ = ["emulate_tensorcore_tf32", "round_tf32", "Tf32Format"]

F32 = np.float32
U32 = np.uint32


def round_tf32(x: np.ndarray) -> np.ndarray:
    """float32 values as the tf32 the tensor core reads after ``round_tf32`` (kernels/tensorcore_tf32.cu): round to
    nearest, ties away from zero, to 10 fraction bits for |x| < 0x1.ffep127; NaN stays NaN; +-inf and the largest
    finite values truncated. Returns float32 with the low 13 bits clear."""
    x = np.asarray(x, F32)
    u = x.view(U32)
    a = u & U32(0x7FFFFFFF)
    r = np.where(a < U32(0x7F7FF000), u + U32(0x1000), np.where(a > U32(0x7F800000), u | U32(0x00400000), u))
    return (r.astype(U32) & U32(0xFFFFE000)).view(F32)


class Tf32Format:
    """Tf32 of kernels/tensorcore_tf32.cu for a batch of warps ``shape``: per step, t = the rounded values;
    c0 = mma rows (row g: v0, v1 of lanes 4g..4g+3; row g + 8: v2, v3), c1 = mma rows (v4, v5; v6, v7), each from
    0; acc = (acc + c0) + c1 per row (round to nearest); row pairs (acc, 0)."""

    def __init__(self, shape: tuple[int, ...], model: str):
        self.acc = np.zeros(shape + (16,), F32)
        self.model = model

    def step(self, lanes: np.ndarray, active: np.ndarray | bool = True) -> None:
        t = round_tf32(lanes).reshape(lanes.shape[:-2] + (8, 4, 8))  # [..., g, lane t, v]
        zero = np.zeros(self.acc.shape, F32)
        sums = []
        for lo_cols, hi_cols in (([0, 1], [2, 3]), ([4, 5], [6, 7])):
            rows = np.concatenate([t[..., lo_cols].reshape(t.shape[:-3] + (8, 8)),
                                   t[..., hi_cols].reshape(t.shape[:-3] + (8, 8))], axis=-2)  # [..., 16, 8]
            sums.append(fused_rowsum(rows, zero, model=self.model))
        act = np.broadcast_to(np.asarray(active)[..., None], self.acc.shape)
        with np.errstate(invalid="ignore", over="ignore"):
            new = (self.acc + sums[0]) + sums[1]
        self.acc = np.where(act, new, self.acc)

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        return self.acc, np.zeros_like(self.acc)


def emulate_tensorcore_tf32(plan: Plan, data: np.ndarray, model: str) -> np.ndarray:
    """fp32 outputs (flattened) of a "tensorcore_tf32" plan for the problem's data."""
    return emulate_forms(plan, data, lambda shape: Tf32Format(shape, model))
