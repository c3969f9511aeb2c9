"""The public reductions: :func:`sum`, :func:`max`, :func:`min`, :func:`mean` and :func:`methods`.

Each call validates its arguments, turns the view and axes into a canonical problem (:mod:`tcreduce._layout`), asks the
method for a launch plan (cached) and launches it on CuPy's current stream without synchronising the host.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import registry
from ._arrays import DTYPE_NAMES, as_cupy, as_cupy_input
from ._auto import choose_method
from ._layout import normalize_axes, plan_layout
from ._plan import DeviceSpec, Plan
from ._results import remember, result_slots

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
    """Everything a call with this signature needs, cached so that repeated calls cost little Python. ``fast``: a
    plan launched in place (no copy, no library runner, not empty): the path :func:`_reduce` takes without further
    checks when no ``out`` is given."""

    call: Call
    empty: bool
    runner: Any = None  # library method: runner(x, axes, out_dtype)
    launcher: Any = None
    copy_order: tuple[int, ...] | None = None
    byte_offset: int = 0
    out_np: Any = None  # the result dtype as a numpy dtype
    fast: bool = False
    # fast plans, per stream handle: [the launches bound to the stream's pools, recycled result buffers for keepdims
    # False, for keepdims True] (tcreduce._results.result_slots; None until made), made on the stream's first call
    streams: dict = field(default_factory=dict)


def _stream_state(prep: _Prepared, stream: Any) -> list:
    """A new ``prep.streams[stream.ptr]``: the launcher bound to the stream's workspace and counters (which raises
    CaptureError when they must be allocated while the stream captures a CUDA graph); result buffers come later."""
    return remember(prep.streams, stream.ptr, [prep.launcher.bound_for(stream.ptr), None, None])


_PREPARED: dict[tuple, _Prepared] = {}
# (format=, CuPy dtype) -> the input format as_cupy_input named for that pair: raw bf16 / fp8 bits passed with
# format= skip its checks after the first call (they cost 3-6 us a call, about what the launch costs)
_RAW_FORMATS: dict[tuple, str] = {}


def _prepare(kind: str, xc: Any, in_format: str, axis: AxisLike, dtype: Any, method: Any,
             device_id: int) -> _Prepared:
    from ._device import current_device
    from ._launch import launcher_for

    p = validate(kind, tuple(xc.shape), in_format, axis, dtype, method)
    out_np = np.dtype(p.out_dtype)
    n_reduced = math.prod(xc.shape[i] for i in p.axes)
    if n_reduced == 0 or math.prod(p.out_shape) == 0:
        if kind != "sum" and math.prod(p.out_shape) != 0:
            raise ValueError(f"zero-size array to reduction operation {'maximum' if kind == 'max' else 'minimum'}"
                             " which has no identity")
        return _Prepared(p, True, out_np=out_np)
    _, device = current_device()
    name = p.method if p.method != "auto" else choose_method(kind, xc, p.axes, p.in_dtype, device)
    m = registry.get(name, kind)
    m.check_dtype(p.in_dtype)
    if m.runner is not None:
        return _Prepared(p, False, runner=m.runner, out_np=out_np)
    itemsize = xc.dtype.itemsize
    strides = tuple(s // itemsize for s in xc.strides)
    layout = plan_layout(xc.shape, strides, p.axes, itemsize, xc.data.ptr % 16)
    plan = get_plan(name, layout.problem, p.in_dtype, p.out_dtype, device, kind)
    return _Prepared(p, False, launcher=launcher_for(plan, device_id), copy_order=layout.copy_order,
                     byte_offset=layout.base_offset * itemsize, out_np=out_np, fast=layout.copy_order is None)


_cupy: Any = None


def _reduce(kind: str, x: Any, axis: AxisLike, dtype: Any, keepdims: bool, method: str, out: Any,
            fmt: Any = None) -> Any:
    """One reduction. The common case (a CuPy array seen before with these arguments, a plan launched in place, no
    ``out``) costs a dictionary lookup, a recycled result buffer (:mod:`tcreduce._results`; an allocation when both
    are in use) and the launches; everything else goes through
    :func:`_reduce_general`. CUDA graph capture: see :mod:`tcreduce._reducer` for the rules."""
    global _cupy
    cp = _cupy
    if cp is None:
        import cupy as cp

        _cupy = cp
    if type(x) is cp.ndarray and fmt is None:
        xc, back, in_format = x, None, None  # the format is the array's dtype
    elif type(x) is cp.ndarray and type(fmt) is str and (fmt, x.dtype) in _RAW_FORMATS:
        xc, back, in_format = x, None, _RAW_FORMATS[fmt, x.dtype]  # a format checked against this dtype before
    else:
        xc, back, in_format = as_cupy_input(x, fmt)
        if type(x) is cp.ndarray and type(fmt) is str and len(_RAW_FORMATS) < 64:
            _RAW_FORMATS[fmt, x.dtype] = in_format
    mem = xc.data
    device_id = mem.device_id
    if device_id != cp.cuda.runtime.getDevice():
        with cp.cuda.Device(device_id):
            res = _reduce(kind, xc, axis, dtype, keepdims, method, out, in_format)
        return res if back is None or out is not None else back(res)
    key = (kind, xc.shape, xc.strides, in_format or xc.dtype, mem.ptr & 15,
           tuple(axis) if type(axis) is list else axis, dtype,
           method, device_id)
    try:
        prep = _PREPARED.get(key)
    except TypeError:  # an unhashable argument: validate it the slow way
        key, prep = None, None
    if prep is None:
        from ._launch import CaptureError, is_capturing

        if is_capturing(cp.cuda.get_current_stream().ptr):
            raise CaptureError(f"the first tcreduce.{kind} call with these arguments plans, compiles and loads its "
                               "kernels: make it outside the CUDA graph capture (a warm-up call with the same shapes "
                               "on this stream), or capture a tcreduce.reducer built beforehand")
        prep = _prepare(kind, xc, in_format or DTYPE_NAMES.get(xc.dtype, str(xc.dtype)), axis, dtype, method,
                        device_id)
        if key is not None:
            if len(_PREPARED) > 4096:
                _PREPARED.clear()
            _PREPARED[key] = prep
    if prep.fast:
        p = prep.call
        shape = p.keep_shape if keepdims else p.out_shape
        stream = cp.cuda.get_current_stream()
        state = prep.streams.get(stream.ptr)
        if state is None:
            state = _stream_state(prep, stream)
        if out is None:
            i = 2 if keepdims else 1
            slots = state[i]
            if slots is None:
                slots = state[i] = result_slots(shape, prep.out_np, stream.ptr)
            res = slots.take() if slots else None
            if res is None:
                res = cp.ndarray(shape, prep.out_np)
            state[0](mem.ptr + prep.byte_offset, res.data.ptr, stream)
            return res if back is None else back(res)
        if (type(out) is cp.ndarray and out.dtype == prep.out_np and out.shape == shape and out.flags.c_contiguous
                and out.data.device_id == device_id):
            state[0](mem.ptr + prep.byte_offset, out.data.ptr, stream)
            return out
    res = _reduce_general(cp, kind, prep, xc, keepdims, out)
    if out is not None:
        return out
    return res if back is None else back(res)


def _reduce_general(cp: Any, kind: str, prep: _Prepared, xc: Any, keepdims: bool, out: Any) -> Any:
    """The other paths of :func:`_reduce`: empty reductions, library runners, a contiguous copy first, ``out``.
    Paths that allocate a temporary and free it before returning refuse to run while the stream captures a CUDA
    graph (a replay would write into memory the pool has handed out again): :class:`~tcreduce._launch.CaptureError`
    names the way out."""
    from ._launch import CaptureError, is_capturing

    p = prep.call
    result_shape = p.keep_shape if keepdims else p.out_shape
    out_c = None
    if out is not None:
        out_c, _ = as_cupy(out)
        if tuple(out_c.shape) != result_shape:
            raise ValueError(f"out has shape {tuple(out_c.shape)}, the result has shape {result_shape}")
        _dtype_name(out_c.dtype, "out dtype", SUPPORTED_OUTPUT)
    stream = cp.cuda.get_current_stream()

    def no_capture(why: str) -> None:
        if is_capturing(stream.ptr):
            raise CaptureError(f"this tcreduce.{kind} call {why}, which "
                               "cannot be captured in a CUDA graph (a replay would use memory freed after the "
                               "capture); build a tcreduce.reducer before the capture, or pass a C-contiguous out of "
                               "the result dtype and a view that needs no copy")

    if prep.empty:
        if out_c is not None:
            out_c.fill(0)
            return out_c
        return cp.zeros(result_shape, dtype=prep.out_np)
    direct = (out_c is not None and out_c.dtype == prep.out_np and out_c.flags.c_contiguous
              and out_c.data.device_id == xc.data.device_id)
    if prep.runner is not None:
        no_capture(f"delegates to a library ({prep.runner.__name__}) that allocates and frees temporary memory")
        res = prep.runner(xc, p.axes, p.out_dtype)
    else:
        if prep.copy_order is not None:
            no_capture("first copies a strided view into a temporary contiguous array")
            src = cp.ascontiguousarray(xc.transpose(prep.copy_order))
            x_ptr = src.data.ptr
        else:
            src = xc
            x_ptr = xc.data.ptr + prep.byte_offset
        if not direct and out_c is not None:
            no_capture("writes into out through a temporary (out is not C-contiguous or not of the result dtype)")
        res = out_c if direct else cp.ndarray(result_shape, prep.out_np)
        prep.launcher(x_ptr, res.data.ptr, stream)
        del src
        if direct or out_c is None:
            return res
    if keepdims:
        res = res.reshape(p.keep_shape)
    if out_c is not None:
        out_c[...] = res
        return out_c
    return res


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

