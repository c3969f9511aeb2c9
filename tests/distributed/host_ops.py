"""Test doubles for running tcreduce.distributed.sum whole on the host (CPU tests only, never library code).

``HostOps`` stands in for ``tcreduce.distributed._CudaOps``: shards are NumPy arrays or torch CPU tensors, the local
partials come from ``tcreduce.emulate.sum`` (the GPU's bits, computed on the CPU), the collectives are the real
ones over gloo. ``EXACT`` stands in for ``tcreduce.exact`` (being built on another branch) with its interface:
partial_state, merge_states, finalize, state_limbs. Its state is the exact sum scaled by 2^149 (every finite fp16 and
fp32 value is an integer multiple of 2^-149) as L = 10 signed 32-bit limbs in int64; merging adds limbs, so merged
and single-process states describe the same integer.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import numpy as np

LIMBS = 10
SCALE = 149


def _scaled(v: float) -> int:
    n, d = float(v).as_integer_ratio()  # d is a power of two <= 2^149 for fp16/fp32 values
    return n * ((1 << SCALE) // d)


def partial_state(x, axis=None) -> np.ndarray:
    from tcreduce._layout import normalize_axes

    x = np.asarray(x)
    axes = normalize_axes(axis, x.ndim)
    kept = [i for i in range(x.ndim) if i not in axes]
    out_shape = tuple(x.shape[i] for i in kept)
    rows = np.transpose(x, kept + list(axes)).reshape(math.prod(out_shape), -1)
    state = np.zeros((rows.shape[0], LIMBS), np.int64)
    for i, row in enumerate(rows):
        s = sum(_scaled(v) for v in row.tolist())
        for k in range(LIMBS - 1):
            state[i, k] = (s >> (32 * k)) & 0xFFFFFFFF
        state[i, LIMBS - 1] = s >> (32 * (LIMBS - 1))
    return state.reshape(out_shape + (LIMBS,))



def merge_states(states) -> np.ndarray:
    return np.sum(np.asarray(states, np.int64), axis=0)


def finalize(state, in_dtype: str, out_dtype: str) -> np.ndarray:
    state = np.asarray(state, np.int64)
    out_shape = state.shape[:-1]
    flat = state.reshape(-1, LIMBS)
    vals = [float(Fraction(sum(int(v) << (32 * k) for k, v in enumerate(row)), 1 << SCALE)) for row in flat]
    return np.asarray(vals, np.float64).reshape(out_shape).astype(out_dtype)


def state_limbs(in_dtype: str) -> int:
    if in_dtype not in ("float16", "float32"):
        raise TypeError(f"exact takes float16 or float32, not {in_dtype}")
    return LIMBS


EXACT = SimpleNamespace(partial_state=partial_state, merge_states=merge_states, finalize=finalize,
                        state_limbs=state_limbs)


class HostOps:
    """tcreduce.distributed._CudaOps on the host (see the module docstring)."""

    gpu = "H100"

    @staticmethod
    def xp():
        return np

    @staticmethod
    def as_array(x: Any):
        if type(x).__module__.split(".")[0] == "torch":
            import torch

            if x.is_cuda:
                raise TypeError("HostOps takes host tensors")
            # a NumPy view of the tensor's whole storage, so that the emulator sees the view's offset from the
            # start of its allocation (as the GPU path sees its alignment) and its strides
            storage = x.untyped_storage()
            whole = torch.empty(0, dtype=x.dtype).set_(storage, 0, (storage.nbytes() // x.element_size(),))
            owner = whole.numpy()
            view = np.ndarray(tuple(x.shape), owner.dtype, buffer=owner, offset=x.storage_offset() * x.element_size(),
                              strides=tuple(st * x.element_size() for st in x.stride()))
            return view, lambda r: torch.as_tensor(np.asarray(r))
        if isinstance(x, np.ndarray):
            return x, lambda r: r
        raise TypeError(f"HostOps takes NumPy arrays or torch CPU tensors, not {type(x).__name__}")

    @staticmethod
    def local_sum(x, axes, dtype, keepdims, method):
        import tcreduce.emulate

        return tcreduce.emulate.sum(x, axis=axes, dtype=dtype, keepdims=keepdims, method=method, gpu=HostOps.gpu)

    @staticmethod
    def prepare_partial(x, axes, method):
        partial = HostOps.local_sum(x, axes, "float32", False, method)  # fails now, as the GPU handle's build would

        def gather(torch, dist, group, world, cuda_comm, device):
            return HostOps.gather(torch, dist, partial, group, world, cuda_comm, device)

        return SimpleNamespace(launch=lambda x: partial, gather=gather)

    @staticmethod
    def fold(gathered, active, out_dtype):
        from tcreduce._dist import fold_ranks

        return fold_ranks([gathered[r] for r in active], out_dtype)

    @staticmethod
    def exact():
        return EXACT

    @staticmethod
    def enter(torch, x):
        return 0, nullcontext()

    @staticmethod
    def gather(torch, dist, a, group, world, cuda_comm, device):
        from tcreduce.distributed import _all_gather

        t = torch.from_numpy(np.ascontiguousarray(a))
        return _all_gather(torch, dist, t, group, world, cuda_comm).numpy().reshape((world,) + tuple(a.shape))
