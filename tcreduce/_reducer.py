"""Build once, call many: :func:`reducer` fixes everything about a reduction but the data, in the spirit of
``cuda.compute.make_reduce_into`` (NVIDIA CCCL), so that a call costs a few checks and the launches.

>>> r = tcreduce.reducer(like=x, axis=-1)        # validates, plans, compiles, allocates, warms up
>>> s = r(x)                                     # a new result array
>>> r(y, out=s)                                  # y like x (shape, strides, dtype, 16-byte alignment, device)

At build time: the arguments are validated as :func:`tcreduce.sum` validates them, the method is chosen ("auto"), the
launch plan made and its kernels compiled and loaded, the arguments that do not change between calls converted once,
and the handle's own fp32 workspace and zeroed counters allocated (plus a contiguous copy buffer when the view must be
copied first). Unless ``warmup=False`` (or the stream is capturing), one call is made on ``like`` so that every
kernel has been launched once before any capture. A call checks that ``x`` matches what the handle was built for
(shape, strides, dtype, address modulo 16, device: each a cheap attribute comparison; a mismatch raises ValueError
naming the difference) and launches on CuPy's current stream without synchronising the host.

Concurrency: the workspace and counters belong to the handle, so calls of one handle must not overlap on different
streams (as with CUB's temporary storage); use one handle per stream. ``tcreduce.sum`` instead keeps one workspace
per stream.

CUDA graphs (CuPy: ``stream.begin_capture()`` ... ``graph = stream.end_capture()``; ``graph.launch(stream)``):

- A handle call is capturable whenever its method launches tcreduce kernels (every method but "cub"): nothing is
  allocated but the result (none with ``out=``), nothing is freed, nothing synchronises. The kernels leave their
  counters at zero, so replays are safe; a replay reads the input buffer's current contents and rewrites the result
  captured (keep ``x``, the result, ``out`` and the handle alive as long as the graph).
- ``tcreduce.sum`` is capturable after one eager warm-up call with the same shapes on the capturing stream (it
  compiles, loads the kernels and allocates that stream's workspace and counters on first use; doing so during a
  capture raises :class:`~tcreduce._launch.CaptureError`), for views that need no copy, with ``out`` either absent
  or C-contiguous of the result dtype. Its result array (a recycled buffer of :mod:`tcreduce._results` when one
  is free, else allocated from CuPy's memory pool at capture time) is the one every replay rewrites: keep it (or
  pass a preallocated ``out``, which is the simplest rule). Paths that would free a temporary (a copy of a strided
  view, a non-contiguous ``out``, method "cub") raise CaptureError.
"""

from __future__ import annotations

import weakref
from typing import Any, Optional

import numpy as np

from ._arrays import as_cupy, as_cupy_input
from ._results import remember, result_slots

__all__ = ["reducer", "Reducer"]

_NONE = (lambda: None, 0)  # no array remembered: (a dead reference, its address)


class Reducer:
    """A reduction fixed at build time (see :func:`reducer`). Attributes: ``kind``, ``method`` (the method chosen),
    ``plan`` (None for empty reductions and library methods), ``shape``, ``strides`` (bytes), ``dtype``, ``align``
    (address of the first element modulo 16), ``device_id``, ``result_shape``, ``result_dtype``."""

    __slots__ = ("kind", "method", "plan", "shape", "strides", "dtype", "align", "device_id", "result_shape",
                 "result_dtype", "axes", "_cupy", "_ndarray", "_launch", "_offset", "_copy_order", "_copy_buf",
                 "_workspace", "_counters", "_runner", "_empty", "_out_strides", "_keep", "_x_ok", "_out_ok",
                 "_results")

    def __init__(self, like: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, method: str = "auto",
                 *, kind: str = "sum", warmup: bool = True, format: Optional[str] = None):  # noqa: A002
        import cupy

        from . import registry
        from ._api import get_plan, validate
        from ._auto import choose_method
        from ._device import current_device
        from ._launch import CaptureError, Launcher, is_capturing
        from ._layout import plan_layout

        if kind not in ("sum", "max", "min"):
            raise ValueError(f"kind must be 'sum', 'max' or 'min', not {kind!r}")
        xc, _, in_format = as_cupy_input(like, format)
        self._cupy = cupy
        self._ndarray = cupy.ndarray
        with cupy.cuda.Device(xc.data.device_id):
            p = validate(kind, tuple(xc.shape), in_format, axis, dtype, method)
            self.kind = kind
            self.axes = p.axes
            self.shape = tuple(xc.shape)
            self.strides = tuple(xc.strides)
            self.dtype = xc.dtype
            self.align = xc.data.ptr & 15
            self.device_id = xc.data.device_id
            self.result_shape = p.keep_shape if keepdims else p.out_shape
            self.result_dtype = np.dtype(p.out_dtype)
            self._keep = keepdims
            itemsize = self.result_dtype.itemsize
            out_strides, acc = [], itemsize
            for s in reversed(self.result_shape):
                out_strides.append(acc)
                acc *= s
            self._out_strides = tuple(reversed(out_strides))
            self.plan = None
            self._launch = self._runner = None
            self._copy_order = self._copy_buf = self._workspace = self._counters = None
            self._offset = 0
            self._x_ok = self._out_ok = _NONE
            self._results: dict = {}  # stream handle -> recycled result buffers (tcreduce._results)
            n_reduced = int(np.prod([xc.shape[i] for i in p.axes], dtype=np.int64))
            n_out = int(np.prod(p.out_shape, dtype=np.int64))
            self._empty = n_reduced == 0 or n_out == 0
            if self._empty:
                if kind != "sum" and n_out != 0:
                    raise ValueError(f"zero-size array to reduction operation "
                                     f"{'maximum' if kind == 'max' else 'minimum'} which has no identity")
                self.method = p.method
                return
            _, device = current_device()
            name = p.method if p.method != "auto" else choose_method(kind, xc, p.axes, p.in_dtype, device)
            m = registry.get(name, kind)
            m.check_dtype(p.in_dtype)
            self.method = name
            if m.runner is not None:
                self._runner = m.runner
                return
            isz = xc.dtype.itemsize
            layout = plan_layout(xc.shape, tuple(s // isz for s in xc.strides), p.axes, isz, self.align)
            self.plan = get_plan(name, layout.problem, p.in_dtype, p.out_dtype, device, kind)
            launcher = Launcher(self.plan, self.device_id)
            stream = cupy.cuda.get_current_stream()
            if is_capturing(stream.ptr):
                raise CaptureError("build the tcreduce.reducer before the CUDA graph capture: building allocates "
                                   "its workspace and counters")
            if self.plan.workspace_floats:
                self._workspace = cupy.empty(self.plan.workspace_floats, dtype=np.float32)
            if self.plan.counters:
                self._counters = cupy.zeros(self.plan.counters, dtype=np.uint32)
            self._launch = launcher.bind(self._workspace.data.ptr if self._workspace is not None else 0,
                                         self._counters.data.ptr if self._counters is not None else 0)
            if layout.copy_order is not None:
                self._copy_order = layout.copy_order
                self._copy_buf = cupy.empty(tuple(xc.shape[i] for i in layout.copy_order), dtype=xc.dtype)
            else:
                self._offset = layout.base_offset * isz
            if warmup:  # every kernel (and the copy, if any) launched once, outside any capture
                self(xc)

    def __call__(self, x: Any, out: Any = None) -> Any:
        """Reduce ``x`` (like the array the handle was built for) into a new array, or into ``out`` (a C-contiguous
        array of the result's shape and dtype on the same device), on CuPy's current stream. Returns the result
        (``out`` when given; a torch tensor for a torch input without ``out``).

        The CuPy arrays of the last call that passed the checks are remembered (weakly, with their addresses): passing
        the same array objects again re-checks only their shapes, the one layout attribute CuPy lets a caller change
        in place."""
        cp = self._cupy
        ok = self._x_ok
        if x is ok[0]() and x.shape == self.shape:
            xc, back, x_ptr = x, None, ok[1]
        else:
            if type(x) is self._ndarray:
                xc, back = x, None
            else:
                xc, back = as_cupy(x)
            mem = xc.data
            if (xc.shape != self.shape or xc.strides != self.strides or xc.dtype != self.dtype
                    or mem.ptr & 15 != self.align or mem.device_id != self.device_id):
                raise ValueError(self._mismatch(xc))
            x_ptr = mem.ptr
            if back is None:
                self._x_ok = (weakref.ref(x), x_ptr)
        if cp.cuda.runtime.getDevice() != self.device_id:
            with cp.cuda.Device(self.device_id):
                return self(x, out)
        launch = self._launch
        stream = cp.cuda.get_current_stream() if launch is not None else None
        if out is None:
            res = None
            if launch is not None:
                slots = self._results.get(stream.ptr)
                if slots is None:
                    slots = result_slots(self.result_shape, self.result_dtype, stream.ptr)
                    if slots is not None:  # None: the stream is capturing, ask again later
                        remember(self._results, stream.ptr, slots)
                if slots:
                    res = slots.take()
                if res is None:
                    res = self._ndarray(self.result_shape, self.result_dtype)
            out_ptr = res.data.ptr if res is not None else 0
        else:
            ok = self._out_ok
            if out is ok[0]() and out.shape == self.result_shape:
                res, out_ptr = out, ok[1]
            else:
                res, _ = as_cupy(out) if type(out) is not self._ndarray else (out, None)
                if (res.shape != self.result_shape or res.dtype != self.result_dtype
                        or (res.strides != self._out_strides and not res.flags.c_contiguous)
                        or res.data.device_id != self.device_id):
                    raise ValueError(f"out must be a C-contiguous {self.result_dtype} array of shape "
                                     f"{self.result_shape} on device {self.device_id}; got {res.dtype} "
                                     f"{tuple(res.shape)} with strides {tuple(res.strides)} on device "
                                     f"{res.data.device_id}")
                out_ptr = res.data.ptr
                if res is out:
                    self._out_ok = (weakref.ref(out), out_ptr)
        if launch is not None:
            if self._copy_buf is None:
                launch(x_ptr + self._offset, out_ptr, stream)
            else:
                self._copy_buf[...] = xc.transpose(self._copy_order)
                launch(self._copy_buf.data.ptr, out_ptr, stream)
        else:
            r = self._library_or_empty(xc)
            if res is None:
                res = r
            else:
                res[...] = r
        if out is not None:
            return out
        return res if back is None else back(res)

    def _library_or_empty(self, xc: Any) -> Any:
        cp = self._cupy
        if self._empty:
            return cp.zeros(self.result_shape, dtype=self.result_dtype)
        from ._launch import CaptureError, is_capturing

        if is_capturing(cp.cuda.get_current_stream().ptr):
            raise CaptureError(f"method {self.method!r} delegates to a library that allocates and frees temporary "
                               "memory: it cannot be captured in a CUDA graph")
        res = self._runner(xc, self.axes, self.result_dtype.name)
        return res.reshape(self.result_shape) if self._keep else res

    def _mismatch(self, xc: Any) -> str:
        got = (tuple(xc.shape), tuple(xc.strides), str(xc.dtype), xc.data.ptr & 15, xc.data.device_id)
        want = (self.shape, self.strides, str(self.dtype), self.align, self.device_id)
        names = ("shape", "strides (bytes)", "dtype", "address modulo 16", "device")
        diff = "; ".join(f"{n} {g} instead of {w}" for n, g, w in zip(names, got, want) if g != w)
        return (f"this tcreduce.reducer was built for another array: {diff} (build one per layout with "
                "tcreduce.reducer(like=x, ...))")

    def __repr__(self) -> str:
        return (f"tcreduce.reducer(kind={self.kind!r}, method={self.method!r}, shape={self.shape}, "
                f"strides={self.strides}, dtype={self.dtype}, align={self.align}, axes={self.axes}, "
                f"result={self.result_dtype}{list(self.result_shape)}, device={self.device_id})")


def reducer(like: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, method: str = "auto", *,
            kind: str = "sum", warmup: bool = True, format: Optional[str] = None) -> Reducer:  # noqa: A002
    """A reduction of arrays like ``like`` built once (see the module docstring): ``r = tcreduce.reducer(like=x,
    axis=-1)`` then ``r(x)`` or ``r(x, out=out)``. Arguments as :func:`tcreduce.sum` (``kind``: "sum", "max" or
    "min"). ``warmup``: make one call on ``like`` at build time (every kernel launched once before any CUDA graph
    capture). ``format``: as for :func:`tcreduce.sum` (raw bf16 / fp8 bits); calls then take arrays of the same raw
    dtype. Raises what :func:`tcreduce.sum` raises for bad arguments, at build time."""
    return Reducer(like, axis, dtype, keepdims, method, kind=kind, warmup=warmup, format=format)
