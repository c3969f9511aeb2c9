"""Run a :class:`~tcreduce._plan.Plan` on the GPU: resolve its symbolic arguments and launch its kernels in order on
CuPy's current stream, without synchronising the host."""

from __future__ import annotations

import numpy as np

from ._compile import get_function
from ._plan import Buf, Plan

__all__ = ["run_plan", "counters_for", "workspace_for", "Launcher", "launcher_for"]

_COUNTERS: dict[tuple[int, int], object] = {}
_WORKSPACES: dict[tuple[int, int], object] = {}


def counters_for(device_id: int, stream_ptr: int, count: int):
    """Zeroed uint32 counters for single-pass kernels, one pool per (device, stream). Kernels reset every counter
    they use before they exit, so the pool stays zero between launches; launches on one stream never overlap."""
    import cupy

    key = (device_id, stream_ptr)
    buf = _COUNTERS.get(key)
    if buf is None or buf.size < count:
        buf = cupy.zeros(max(count, 1024), dtype=np.uint32)
        _COUNTERS[key] = buf
    return buf


def workspace_for(device_id: int, stream_ptr: int, floats: int):
    """fp32 scratch for the partials of multi-block plans, one buffer per (device, stream), grown on demand.
    Reuse is safe: launches on one stream run in order, and each plan finishes with its workspace before the next
    call's kernels start."""
    import cupy

    key = (device_id, stream_ptr)
    buf = _WORKSPACES.get(key)
    if buf is None or buf.size < floats:
        buf = cupy.empty(max(floats, 1 << 16), dtype=np.float32)
        _WORKSPACES[key] = buf
    return buf


class Launcher:
    """A plan bound to one device: kernels compiled and looked up once, arguments pre-converted, so that a call
    costs a few microseconds of Python."""

    def __init__(self, plan: Plan, device_id: int):
        self.plan = plan
        self.device_id = device_id
        self.steps = []
        for ln in plan.launches:
            template = []
            for a in ln.args:
                if isinstance(a, Buf):
                    if a.name not in ("x", "out", "ws", "counters"):
                        raise ValueError(f"unknown buffer {a.name!r} in {ln.kernel}")
                    if a.offset and a.name not in ("ws", "counters"):
                        raise ValueError(f"offsets are only supported into ws and counters, not {a.name}")
                    template.append((a.name, 4 * a.offset))
                else:
                    template.append(np.int64(a))
            fn = get_function(ln.source, ln.kernel, device_id, plan.device.arch)
            self.steps.append((fn, ln.grid, ln.block, ln.shared_bytes, ln.cooperative, template))

    def __call__(self, x_ptr: int, out_ptr: int, stream) -> None:
        plan = self.plan
        base = {"x": x_ptr, "out": out_ptr, "ws": 0, "counters": 0}
        if plan.workspace_floats:
            base["ws"] = workspace_for(self.device_id, stream.ptr, plan.workspace_floats).data.ptr
        if plan.counters:
            base["counters"] = counters_for(self.device_id, stream.ptr, plan.counters).data.ptr
        for fn, grid, block, shared, coop, template in self.steps:
            args = tuple(np.uint64(base[a[0]] + a[1]) if isinstance(a, tuple) else a for a in template)
            fn(grid, block, args, shared, stream, coop)


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
