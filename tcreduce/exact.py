"""Exact sums as mergeable states: ``tcreduce.sum(x, method="exact")`` is ``finalize(partial_state(x))``, bit for bit,
and a sum over several devices or pieces is ``finalize(merge_states(stack of their states))`` with the same bits.

The state of a reduction output (``state_limbs(in_dtype) = L`` int64 values, last axis of every state array):

- ``state[..., 0:K]``: the exact sum of the output's finite elements as the integer ``V = sum_i state[..., i] *
  2^(32 i)`` in units of ``2^LSB``: float16 input K = 4, LSB = -24 (every fp16 value is a multiple of 2^-24);
  float32 and bfloat16 input K = 11, LSB = -149 (fp32's smallest subnormal). Normalised: limbs 0..K-2 in [0, 2^32),
  limb K-1 signed (it carries the sign of V). 4 limbs hold 2^104 times the largest fp16 value's units; 11 limbs
  hold 2^64 times fp32's largest.
- ``state[..., K]``, ``state[..., K+1]``, ``state[..., K+2]``: how many NaN, +inf and -inf elements it summed.

So L = 7 for float16 and 14 for float32/bfloat16. The state of a set of elements depends only on the set (integer
sums are associative): every GPU, plan, stream and partition gives the same bits. :func:`merge_states` adds states
limb by limb and normalises the carries; sums of up to 2^20 normalised states stay far inside int64 (larger stacks
are merged 2^20 at a time), so merging is exact. :func:`finalize` rounds once (to nearest, ties to even) to the
output dtype: NaN if the output summed a NaN or both infinities, else the infinity it summed, else the exact value
rounded (to +-inf where it rounds beyond the dtype's range; an exact zero is +0.0). NaN is the canonical quiet NaN
(float16 0x7E00, float32 0x7FC00000, float64 0x7FF8000000000000).

Every function takes CuPy arrays (the GPU path: kernels/exact.cu) or NumPy arrays (the CPU path:
:mod:`tcreduce.emulate.exact`, the same bits).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .plans.exact import LIMBS, NCOUNT, state_limbs

__all__ = ["partial_state", "merge_states", "finalize", "state_limbs"]

MERGE_CHUNK = 1 << 20  # states added before the carries are normalised


def _is_numpy(x: Any) -> bool:
    return isinstance(x, np.ndarray) or type(x).__module__.split(".")[0] == "numpy"


def _k_of(states_last: int) -> int:
    for dt, k in LIMBS.items():
        if k + NCOUNT == states_last:
            return k
    raise ValueError(f"an exact state has {sorted({k + NCOUNT for k in LIMBS.values()})} int64 values per output "
                     f"(last axis), not {states_last}")


def partial_state(x: Any, axis: Any = None) -> Any:
    """The exact state of ``x``'s sum over ``axis``: int64, shape ``(*out_shape, L)`` (module docstring).

    x: a CuPy array (one kernel launch on the current stream, no host synchronisation) or a NumPy array (computed
    on the CPU, same bits), float16 or float32, any view. axis: as in :func:`tcreduce.sum`."""
    from ._api import validate
    from ._layout import host_layout, host_problem_data

    if _is_numpy(x):
        from ._api import get_plan
        from ._device import named_device
        from .emulate.exact import exact_states, problem_rows

        x = np.asarray(x)
        call = validate("sum", x.shape, x.dtype, axis, None, "exact")
        L = state_limbs(call.in_dtype)
        if math.prod(x.shape[i] for i in call.axes) == 0 or math.prod(call.out_shape) == 0:
            return np.zeros(call.out_shape + (L,), np.int64)
        layout, _ = host_layout(x, call.axes)
        plan = get_plan("exact", layout.problem, call.in_dtype, "int64", named_device("H100"))
        return exact_states(problem_rows(plan, host_problem_data(x, layout)), call.in_dtype).reshape(
            call.out_shape + (L,))
    return _gpu_state(x, axis)


def _gpu_state(x: Any, axis: Any) -> Any:
    import cupy

    from ._api import get_plan, validate
    from ._arrays import as_cupy
    from ._device import current_device
    from ._launch import launcher_for
    from ._layout import plan_layout

    xc, _ = as_cupy(x)
    call = validate("sum", tuple(xc.shape), xc.dtype, axis, None, "exact")
    L = state_limbs(call.in_dtype)
    with xc.device as dev:
        out = cupy.zeros(call.out_shape + (L,), np.int64)
        if math.prod(xc.shape[i] for i in call.axes) == 0 or math.prod(call.out_shape) == 0:
            return out
        itemsize = xc.dtype.itemsize
        strides = tuple(s // itemsize for s in xc.strides)
        layout = plan_layout(xc.shape, strides, call.axes, itemsize, xc.data.ptr % 16)
        plan = get_plan("exact", layout.problem, call.in_dtype, "int64", current_device()[1])
        if layout.copy_order is not None:
            src = cupy.ascontiguousarray(xc.transpose(layout.copy_order))
            x_ptr = src.data.ptr
        else:
            src = xc
            x_ptr = xc.data.ptr + layout.base_offset * itemsize
        launcher_for(plan, dev.id)(x_ptr, out.data.ptr, cupy.cuda.get_current_stream())
        del src
    return out


def merge_states(states: Any) -> Any:
    """The state of the union: ``states`` is an int64 array ``(R, *out_shape, L)`` of R normalised states (from
    :func:`partial_state` or :func:`merge_states`, any device or process); returns ``(*out_shape, L)``, normalised.
    Exact for any R (carries are normalised every 2^20 states). CuPy in, CuPy out; NumPy in, NumPy out."""
    xp = np if _is_numpy(states) else __import__("cupy")
    s = xp.asarray(states)
    if s.dtype != np.int64:
        raise TypeError(f"exact states are int64, not {s.dtype}")
    if s.ndim < 2:
        raise ValueError(f"merge_states takes a stack (R, *out_shape, L) of states, got shape {s.shape}")
    k = _k_of(s.shape[-1])
    total = xp.zeros(s.shape[1:], np.int64)
    for r0 in range(0, s.shape[0], MERGE_CHUNK):
        total = total + s[r0:r0 + MERGE_CHUNK].sum(axis=0)
        for i in range(k - 1):  # normalise: limbs 0..k-2 in [0, 2^32), the top limb signed
            c = total[..., i] >> 32
            total[..., i] -= c << 32
            total[..., i + 1] += c
    return total


def finalize(state: Any, in_dtype: str, out_dtype: str) -> Any:
    """The correctly rounded sums (round to nearest, ties to even) of normalised states ``(*out_shape, L)`` of
    ``in_dtype`` input ("float16", "float32", "bfloat16"), as ``out_dtype`` ("float16", "float32", "float64"),
    shape ``out_shape``. CuPy states: one kernel launch (kernels/exact.cu exact_finalize, the rounding the sum
    kernels use); NumPy states: the CPU twin, same bits."""
    from .emulate.exact import finalize_states
    from .plans.exact import finalize_kernel

    in_dtype = in_dtype if isinstance(in_dtype, str) else str(np.dtype(in_dtype))
    out_dtype = out_dtype if isinstance(out_dtype, str) else str(np.dtype(out_dtype))
    name = finalize_kernel(in_dtype, out_dtype)  # TypeError for unsupported dtypes
    L = state_limbs(in_dtype)
    if _is_numpy(state):
        st = np.asarray(state)
        if st.shape[-1:] != (L,) or st.dtype != np.int64:
            raise ValueError(f"a {in_dtype} exact state is int64 (..., {L}); got {st.dtype} {st.shape}")
        return finalize_states(st, in_dtype, out_dtype)
    import cupy

    from ._compile import get_function
    from ._device import current_device

    st = cupy.ascontiguousarray(cupy.asarray(state))
    if st.shape[-1:] != (L,) or st.dtype != np.int64:
        raise ValueError(f"a {in_dtype} exact state is int64 (..., {L}); got {st.dtype} {st.shape}")
    with st.device:
        out = cupy.empty(st.shape[:-1], out_dtype)
        count = out.size
        if count:
            dev_id, spec = current_device()
            fn = get_function("exact.cu", name, dev_id, spec.arch)
            fn(((count + 127) // 128, 1, 1), (128, 1, 1),
               (np.uint64(st.data.ptr), np.int64(count), np.uint64(out.data.ptr)), 0, cupy.cuda.get_current_stream(),
               False)
    return out
