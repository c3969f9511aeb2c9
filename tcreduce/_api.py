"""The public reductions: :func:`sum`, :func:`max`, :func:`min`, :func:`mean` and :func:`methods`.

Each call validates its arguments, turns the view and axes into a canonical problem (:mod:`tcreduce._layout`), asks the
method for a launch plan (cached) and launches it on CuPy's current stream without synchronising the host.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import registry
from ._arrays import DTYPE_NAMES, as_cupy, as_cupy_input
from ._auto import choose_method
from ._layout import normalize_axes, plan_layout
from ._plan import DeviceSpec, Plan

__all__ = ["sum", "max", "min", "mean", "methods", "MethodInfo", "get_plan", "validate", "Call"]

AxisLike = Union[None, int, Sequence[int]]
SUPPORTED_INPUT = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float32")
SUPPORTED_OUTPUT = ("float16", "float32", "float64")


@dataclass(frozen=True)
class MethodInfo:
    """One row of :func:`methods`."""

    name: str
    description: str
    dtypes: tuple[str, ...]
    reference: str
    deterministic: bool
    emulated: bool
    kind: str


def methods(kind: Optional[str] = "sum") -> list[MethodInfo]:
    """The registered methods (of one reduction ``kind``: "sum", "max", "min"; None for all)."""
    return [MethodInfo(m.name, m.description, m.dtypes, m.reference, m.deterministic, m.emulated, m.kind)
            for m in registry.methods(kind)]


@functools.lru_cache(maxsize=4096)
def get_plan(method: str, problem, in_dtype: str, out_dtype: str, device: DeviceSpec, kind: str = "sum") -> Plan:
    """The (cached) launch plan of ``method`` for a canonical problem on a device."""
    return registry.get(method, kind).plan(problem, in_dtype, out_dtype, device)


def _dtype_name(dtype: Any, what: str, allowed: tuple[str, ...]) -> str:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{what} {dtype!r} is not a dtype; supported: {', '.join(allowed)}") from None
    name = DTYPE_NAMES.get(dt, str(dt))
    if name not in allowed:
        raise TypeError(f"{what} {name} is not supported; supported: {', '.join(allowed)}")
    return name


def _input_dtype(x_dtype: Any, kind: str) -> str:
    from .formats import format_of_dtype

    f = format_of_dtype(x_dtype)
    name = f.name if f is not None else str(np.dtype(x_dtype))
    if name not in SUPPORTED_INPUT:
        hint = (" (float64: use cupy.sum; no tcreduce method takes float64 input, shuffle included)"
                if name == "float64" else
                " (raw bfloat16 or fp8 bits? name the format: tcreduce.sum(x, format='bfloat16'), 'float8_e4m3fn' "
                "or 'float8_e5m2')" if name in ("uint16", "uint8", "int16", "int8") else "")
        raise TypeError(f"tcreduce.{kind} does not take {name} input; supported input dtypes: "
                        f"{', '.join(SUPPORTED_INPUT)}{hint}")
    return name


@dataclass(frozen=True)
class Call:
    """A validated call (see :func:`validate`): everything but the data."""

    axes: tuple[int, ...]
    in_dtype: str
    out_dtype: str
    out_shape: tuple[int, ...]
    keep_shape: tuple[int, ...]
    method: str


def validate(kind: str, shape: tuple[int, ...], x_dtype: Any, axis: AxisLike, dtype: Any, method: Any) -> Call:
    """Check a reduction's arguments against the array's shape and dtype (or input format name) (no GPU needed);
    raise TypeError, ValueError or numpy's AxisError saying what is supported. Shared by the GPU API and the
    emulator."""
    in_dtype = _input_dtype(x_dtype, kind)
    if kind == "sum":
        out_dtype = "float32" if dtype is None else _dtype_name(dtype, "dtype", SUPPORTED_OUTPUT)
    else:
        out_dtype = in_dtype if dtype is None else _dtype_name(dtype, "dtype", SUPPORTED_OUTPUT)
    if not isinstance(method, str):
        raise TypeError(f"method must be a string, not {type(method).__name__}")
    if method != "auto":
        registry.get(method, kind).check_dtype(in_dtype)  # ValueError listing the methods / TypeError on dtype
    axes = normalize_axes(axis, len(shape))
    out_shape = tuple(s for i, s in enumerate(shape) if i not in axes)
    keep_shape = tuple(1 if i in axes else s for i, s in enumerate(shape))
    return Call(axes, in_dtype, out_dtype, out_shape, keep_shape, method)


@dataclass(frozen=True)
class _Prepared:
    """Everything a call with this signature needs, cached so that repeated calls cost little Python."""

    call: Call
    empty: bool
    runner: Any = None  # library method: runner(x, axes, out_dtype)
    launcher: Any = None
    copy_order: tuple[int, ...] | None = None
    byte_offset: int = 0


_PREPARED: dict[tuple, _Prepared] = {}


def _prepare(kind: str, xc: Any, in_format: str, axis: AxisLike, dtype: Any, method: Any,
             device_id: int) -> _Prepared:
    from ._device import current_device
    from ._launch import launcher_for

    p = validate(kind, tuple(xc.shape), in_format, axis, dtype, method)
    n_reduced = math.prod(xc.shape[i] for i in p.axes)
    if n_reduced == 0 or math.prod(p.out_shape) == 0:
        if kind != "sum" and math.prod(p.out_shape) != 0:
            raise ValueError(f"zero-size array to reduction operation {'maximum' if kind == 'max' else 'minimum'}"
                             " which has no identity")
        return _Prepared(p, True)
    _, device = current_device()
    name = p.method if p.method != "auto" else choose_method(kind, xc, p.axes, p.in_dtype, device)
    m = registry.get(name, kind)
    m.check_dtype(p.in_dtype)
    if m.runner is not None:
        return _Prepared(p, False, runner=m.runner)
    itemsize = xc.dtype.itemsize
    strides = tuple(s // itemsize for s in xc.strides)
    layout = plan_layout(xc.shape, strides, p.axes, itemsize, xc.data.ptr % 16)
    plan = get_plan(name, layout.problem, p.in_dtype, p.out_dtype, device, kind)
    return _Prepared(p, False, launcher=launcher_for(plan, device_id), copy_order=layout.copy_order,
                     byte_offset=layout.base_offset * itemsize)


def _reduce(kind: str, x: Any, axis: AxisLike, dtype: Any, keepdims: bool, method: str, out: Any,
            fmt: Any = None) -> Any:
    import cupy

    xc, back, in_format = as_cupy_input(x, fmt)
    with xc.device as dev:
        device_id = dev.id
        key = (kind, xc.shape, xc.strides, in_format, xc.data.ptr % 16,
               tuple(axis) if isinstance(axis, list) else axis, dtype, method, device_id)
        try:
            prep = _PREPARED.get(key)
        except TypeError:  # an unhashable argument: validate it the slow way
            key, prep = None, None
        if prep is None:
            prep = _prepare(kind, xc, in_format, axis, dtype, method, device_id)
            if key is not None:
                if len(_PREPARED) > 4096:
                    _PREPARED.clear()
                _PREPARED[key] = prep
        p = prep.call
        result_shape = p.keep_shape if keepdims else p.out_shape
        if out is not None:
            out_c, _ = as_cupy(out)
            if tuple(out_c.shape) != result_shape:
                raise ValueError(f"out has shape {tuple(out_c.shape)}, the result has shape {result_shape}")
            _dtype_name(out_c.dtype, "out dtype", SUPPORTED_OUTPUT)
        if prep.empty:
            res = cupy.zeros(p.out_shape, dtype=p.out_dtype)
        elif prep.runner is not None:
            res = prep.runner(xc, p.axes, p.out_dtype)
        else:
            stream = cupy.cuda.get_current_stream()
            if prep.copy_order is not None:
                src = cupy.ascontiguousarray(xc.transpose(prep.copy_order))
                x_ptr = src.data.ptr
            else:
                src = xc
                x_ptr = xc.data.ptr + prep.byte_offset
            direct = (out is not None and not keepdims and out_c.dtype == np.dtype(p.out_dtype)
                      and out_c.flags.c_contiguous)
            res = out_c if direct else cupy.empty(p.out_shape, dtype=p.out_dtype)
            prep.launcher(x_ptr, res.data.ptr, stream)
            del src
            if direct:
                return out
        if keepdims:
            res = res.reshape(p.keep_shape)
        if out is not None:
            out_c[...] = res
            return out
    return back(res)


def sum(x: Any, axis: AxisLike = None, dtype: Any = None, keepdims: bool = False, *, method: str = "auto",
        out: Any = None, format: Optional[str] = None) -> Any:  # noqa: A002 (format names the input format)
    """Sum of array elements over the given axes, on the GPU.

    x: a ``cupy.ndarray`` or CUDA array (``__cuda_array_interface__`` / ``__dlpack__``, e.g. a torch CUDA tensor) of
    float16, bfloat16, float8_e4m3fn, float8_e5m2 or float32; the result is of the same kind and stays on the GPU
    (0-d for a full sum). CuPy has no bfloat16 or fp8 dtype: pass such data as its raw bits (``x.view(cupy.uint16)``
    for bfloat16, ``cupy.uint8`` for fp8) and name it with ``format="bfloat16"`` (or "float8_e4m3fn",
    "float8_e5m2"); torch tensors of those dtypes need no ``format``. axis, keepdims, out: as in NumPy. dtype: the
    result dtype, float32 by default (every input is accumulated in float32); float16 or float64 round the float32
    result once at the end. method: a name from :func:`methods` or "auto" (fastest correct method for the dtype, axes
    and shape). Runs on CuPy's current stream and does not synchronise the host.
    """
    return _reduce("sum", x, axis, dtype, keepdims, method, out, format)


def max(x: Any, axis: AxisLike = None, dtype: Any = None, keepdims: bool = False, *, method: str = "auto",
        out: Any = None) -> Any:
    """Maximum over the given axes (NaN propagates as in NumPy). Same arguments as :func:`sum`; the default result
    dtype is the input dtype."""
    return _reduce("max", x, axis, dtype, keepdims, method, out)


def min(x: Any, axis: AxisLike = None, dtype: Any = None, keepdims: bool = False, *, method: str = "auto",
        out: Any = None) -> Any:
    """Minimum over the given axes (NaN propagates as in NumPy). Same arguments as :func:`sum`."""
    return _reduce("min", x, axis, dtype, keepdims, method, out)


def mean(x: Any, axis: AxisLike = None, dtype: Any = None, keepdims: bool = False, *, method: str = "auto",
         out: Any = None, format: Optional[str] = None) -> Any:  # noqa: A002
    """Arithmetic mean: :func:`sum` with ``method`` in float32, divided by the element count in float32, then cast
    to ``dtype`` (float32 by default). The mean of an empty reduction is NaN, as in NumPy."""
    xc, back, in_format = as_cupy_input(x, format)
    out_dtype = "float32" if dtype is None else _dtype_name(dtype, "dtype", SUPPORTED_OUTPUT)
    axes = normalize_axes(axis, xc.ndim)
    count = math.prod(xc.shape[i] for i in axes)
    s = _reduce("sum", xc, axis, "float32", keepdims, method, None, in_format)
    res = (s / np.float32(count)) if count else s * np.float32(np.nan)
    res = res.astype(out_dtype, copy=False)
    if out is not None:
        out_c, _ = as_cupy(out)
        out_c[...] = res
        return out
    return back(res)

