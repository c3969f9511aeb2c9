"""Run a :class:`~tcreduce._plan.Plan` on the GPU: resolve its symbolic arguments and launch its kernels in order on
CuPy's current stream, without synchronising the host.

Per-call cost: a :class:`Launcher` looks its kernels up once; :meth:`Launcher.bind` turns every argument that does not
change between calls (the workspace and counter addresses, the integers) into CuPy kernel-argument objects once, so
that a call builds only the input and output addresses (:class:`BoundLaunch`). ``tcreduce.sum`` binds each launcher
once per stream, to that stream's workspace and counters; a :func:`tcreduce.reducer` binds its own.

Launch path: where the CUDA driver library is loaded (libcuda, as CuPy loads it) a step calls ``cuLaunchKernel``
through ctypes with its argument array built once (:class:`DriverStep`): a call writes the two addresses into that
array and makes one foreign call, about a microsecond of host time where CuPy's ``Function.__call__`` takes several
(benchmarks/call_overhead.py measures both). Any failure of that call (no current context, a bad launch) falls back
to CuPy's launch, which raises CuPy's error where there is one. ``TCREDUCE_LAUNCH=cupy`` always launches through
CuPy.

Workspace and counters (``workspace_for``, ``counters_for``): one pool per (device, stream), allocated on first use
and grown when a plan needs more. A pool that grows is replaced, never freed: launches bound to the old buffer (and
CUDA graphs that captured them) keep valid memory. Allocating a pool while the stream captures a CUDA graph would
bake a fresh allocation into the graph: that raises :class:`CaptureError` instead (warm up outside the capture).
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from ._compile import get_function
from ._plan import Buf, Plan

__all__ = ["run_plan", "counters_for", "workspace_for", "Launcher", "BoundLaunch", "DriverStep", "launcher_for",
           "kernel_arg", "CaptureError", "is_capturing", "driver_launch"]

try:  # an 8-byte kernel argument CuPy passes through as is (no conversion per launch)
    from cupy.cuda.function import CIntptr as kernel_arg
except ImportError:  # pragma: no cover - older CuPy: numpy scalars, converted by CuPy at every launch
    kernel_arg = np.int64

_COUNTERS: dict[tuple[int, int], Any] = {}
_WORKSPACES: dict[tuple[int, int], Any] = {}
_RETIRED: list = []  # pools replaced by larger ones: kept alive for launches and graphs bound to them


class CaptureError(RuntimeError):
    """Something tcreduce would have to allocate or free is needed while the stream is capturing a CUDA graph."""


def is_capturing(stream_ptr: int) -> bool:
    """Whether the stream (a raw handle) is capturing a CUDA graph (False for the legacy and per-thread default
    streams, which cannot capture)."""
    if stream_ptr in (0, 1, 2):
        return False
    import cupy

    try:
        return bool(cupy.cuda.runtime.streamIsCapturing(stream_ptr))
    except Exception:  # an illegal query counts as capturing: the caller then refuses to allocate
        return True


def _pool(pools: dict, device_id: int, stream_ptr: int, size: int, what: str, make):
    key = (device_id, stream_ptr)
    buf = pools.get(key)
    if buf is None or buf.size < size:
        if is_capturing(stream_ptr):
            raise CaptureError(
                f"tcreduce needs {size} {what} on this stream and allocates them on first use; the stream is "
                "capturing a CUDA graph, where that would be unsafe. Call tcreduce.sum once with the same shapes "
                "on this stream before the capture (a warm-up), or capture a tcreduce.reducer built beforehand.")
        if buf is not None:
            _RETIRED.append(buf)
            size = max(size, 2 * buf.size)
        buf = pools[key] = make(size)
    return buf


def counters_for(device_id: int, stream_ptr: int, count: int):
    """Zeroed uint32 counters for single-pass kernels, one pool per (device, stream). Kernels reset every counter
    they use before they exit, so the pool stays zero between launches; launches on one stream never overlap."""
    import cupy

    return _pool(_COUNTERS, device_id, stream_ptr, count, "counters",
                 lambda n: cupy.zeros(max(n, 1024), dtype=np.uint32))


def workspace_for(device_id: int, stream_ptr: int, floats: int):
    """fp32 scratch for the partials of multi-block plans, one buffer per (device, stream), grown on demand.
    Reuse is safe: launches on one stream run in order, and each plan finishes with its workspace before the next
    call's kernels start."""
    import cupy

    return _pool(_WORKSPACES, device_id, stream_ptr, floats, "workspace floats",
                 lambda n: cupy.empty(max(n, 1 << 16), dtype=np.float32))


_DRIVER_LAUNCH: Any = None  # cuLaunchKernel from libcuda through ctypes; False where unavailable or turned off


def driver_launch() -> Any:
    """libcuda's ``cuLaunchKernel`` as a ctypes function (loaded once), or None when the library cannot be loaded
    or ``TCREDUCE_LAUNCH=cupy``."""
    global _DRIVER_LAUNCH
    if _DRIVER_LAUNCH is None:
        _DRIVER_LAUNCH = False
        if os.environ.get("TCREDUCE_LAUNCH", "driver") != "cupy":
            try:
                f = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
            except (OSError, AttributeError):
                pass
            else:
                C = ctypes
                f.argtypes = [C.c_void_p] + [C.c_uint] * 7 + [C.c_void_p] * 3
                f.restype = C.c_int
                _DRIVER_LAUNCH = f
    return _DRIVER_LAUNCH or None


def _is_cupy_function(fn: Any) -> bool:
    from cupy.cuda.function import Function

    return isinstance(fn, Function)


class DriverStep:
    """One launch through ``cuLaunchKernel`` with its kernel-parameter array built once: every parameter is 8 bytes
    (tcreduce kernels take i64 and pointers only), held in ``values``; ``params`` points at each. A call writes the
    input and output addresses into ``values`` and launches; the driver copies the parameters at launch, so the
    array is free again when the call returns (the caller serialises calls: :class:`BoundLaunch`)."""

    __slots__ = ("head", "values", "params", "xs", "outs", "launch")

    def __init__(self, launch, fn_ptr: int, grid: tuple, block: tuple, shared: int, values: list,
                 xs: tuple[int, ...], outs: tuple[int, ...]):
        C = ctypes
        n = len(values)
        self.values = (C.c_uint64 * max(n, 1))(*[(v or 0) & 0xFFFFFFFFFFFFFFFF for v in values])
        base = C.addressof(self.values)
        self.params = (C.c_void_p * max(n, 1))(*[base + 8 * i for i in range(n)])
        self.head = (C.c_void_p(fn_ptr), *(C.c_uint(int(v)) for v in (*grid, *block)), C.c_uint(int(shared)))
        self.xs, self.outs, self.launch = xs, outs, launch

    def __call__(self, x_ptr: int, out_ptr: int, stream_ptr: int) -> int:
        values = self.values
        for i in self.xs:
            values[i] = x_ptr
        for i in self.outs:
            values[i] = out_ptr
        return self.launch(*self.head, stream_ptr, self.params, None)


class BoundLaunch:
    """A plan's launches with every argument but the input and output addresses converted once (the workspace and
    counters resolved): ``self(x_ptr, out_ptr, stream)`` launches them in order on ``stream``, through
    ``cuLaunchKernel`` (:class:`DriverStep`) where it can, else through CuPy."""

    __slots__ = ("steps", "direct", "lock", "workspace_ptr", "counters_ptr")

    def __init__(self, launcher: "Launcher", workspace_ptr: int, counters_ptr: int):
        self.workspace_ptr = workspace_ptr
        self.counters_ptr = counters_ptr
        steps, direct = [], []
        drv = driver_launch()
        for fn, grid, block, shared, coop, template in launcher.steps:
            values: list = []
            xs, outs = [], []
            for i, a in enumerate(template):
                if isinstance(a, tuple):
                    name, byte_offset = a
                    if name == "x":
                        xs.append(i)
                        values.append(None)
                    elif name == "out":
                        outs.append(i)
                        values.append(None)
                    elif name == "ws":
                        values.append(workspace_ptr + byte_offset)
                    else:
                        values.append(counters_ptr + byte_offset)
                else:
                    values.append(int(a))
            const = tuple(None if v is None else kernel_arg(v) for v in values)
            steps.append((fn, grid, block, shared, coop, const, tuple(xs), tuple(outs)))
            fn_ptr = fn.ptr if drv is not None and _is_cupy_function(fn) else 0
            if fn_ptr and not coop:
                direct.append(DriverStep(drv, fn_ptr, grid, block, shared, values, tuple(xs), tuple(outs)))
        self.steps = tuple(steps)
        # every step or none through the driver: a fallback then re-launches from the failed step on
        self.direct = tuple(direct) if len(direct) == len(steps) else ()
        self.lock = threading.Lock()

    def __call__(self, x_ptr: int, out_ptr: int, stream) -> None:
        if self.direct:
            sp = stream.ptr
            with self.lock:
                for i, step in enumerate(self.direct):
                    if step(x_ptr, out_ptr, sp):
                        self._launch_cupy(x_ptr, out_ptr, stream, i)
                        return
            return
        self._launch_cupy(x_ptr, out_ptr, stream, 0)

    def _launch_cupy(self, x_ptr: int, out_ptr: int, stream, first: int) -> None:
        xa = kernel_arg(x_ptr)
        oa = kernel_arg(out_ptr)
        for fn, grid, block, shared, coop, const, xs, outs in self.steps[first:]:
            args = list(const)
            for i in xs:
                args[i] = xa
            for i in outs:
                args[i] = oa
            fn(grid, block, args, shared, stream, coop)


class Launcher:
    """A plan bound to one device: kernels compiled and looked up once, arguments pre-converted per stream (see the
    module docstring), so that a call costs a few microseconds of Python."""

    def __init__(self, plan: Plan, device_id: int):
        self.plan = plan
        self.device_id = device_id
        self.steps = []
        self._bound: dict[int, BoundLaunch] = {}
        for ln in plan.launches:
            template: list = []
            for a in ln.args:
                if isinstance(a, Buf):
                    if a.name not in ("x", "out", "ws", "counters"):
                        raise ValueError(f"unknown buffer {a.name!r} in {ln.kernel}")
                    if a.offset and a.name not in ("ws", "counters"):
                        raise ValueError(f"offsets are only supported into ws and counters, not {a.name}")
                    template.append((a.name, 4 * a.offset))
                else:
                    template.append(int(a))
            fn = get_function(ln.source, ln.kernel, device_id, plan.device.arch)
            self.steps.append((fn, ln.grid, ln.block, ln.shared_bytes, ln.cooperative, tuple(template)))

    def bind(self, workspace_ptr: int, counters_ptr: int) -> BoundLaunch:
        """The launches with this workspace and these counters (which the caller keeps alive)."""
        return BoundLaunch(self, workspace_ptr, counters_ptr)

    def bound_for(self, stream_ptr: int) -> BoundLaunch:
        """The launches bound to the workspace and counter pools of ``stream_ptr`` (bound once per stream)."""
        b = self._bound.get(stream_ptr)
        if b is None:
            plan = self.plan
            ws = workspace_for(self.device_id, stream_ptr, plan.workspace_floats).data.ptr \
                if plan.workspace_floats else 0
            ctr = counters_for(self.device_id, stream_ptr, plan.counters).data.ptr if plan.counters else 0
            b = self._bound[stream_ptr] = self.bind(ws, ctr)
        return b

    def __call__(self, x_ptr: int, out_ptr: int, stream) -> None:
        b = self._bound.get(stream.ptr)
        if b is None:
            b = self.bound_for(stream.ptr)
        b(x_ptr, out_ptr, stream)


_LAUNCHERS: dict[tuple[Plan, int], Launcher] = {}


def launcher_for(plan: Plan, device_id: int) -> Launcher:
    key = (plan, device_id)
    ln = _LAUNCHERS.get(key)
    if ln is None:
        ln = _LAUNCHERS[key] = Launcher(plan, device_id)
    return ln


def run_plan(plan: Plan, x_ptr: int, out_ptr: int, device_id: int) -> None:
    """Launch ``plan`` reading the problem whose base element is at device address ``x_ptr`` and writing the
    contiguous output (``plan.out_dtype``) at ``out_ptr``, on CuPy's current stream. The caller keeps both buffers
    alive until the stream has used them."""
    import cupy

    launcher_for(plan, device_id)(x_ptr, out_ptr, cupy.cuda.get_current_stream())
