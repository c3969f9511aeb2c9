"""Run a :class:`~tcreduce._plan.Plan` on the GPU: resolve its symbolic arguments and launch its kernels in order on
CuPy's current stream, without synchronising the host."""

from __future__ import annotations

import numpy as np

from ._compile import get_function
from ._plan import Buf, Plan

__all__ = ["run_plan", "counters_for"]

_COUNTERS: dict[tuple[int, int], object] = {}


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


def run_plan(plan: Plan, x_ptr: int, out_ptr: int, device_id: int) -> None:
    """Launch ``plan`` reading the problem whose base element is at device address ``x_ptr`` and writing the
    contiguous output (``plan.out_dtype``) at ``out_ptr``. The caller keeps both buffers alive."""
    import cupy

    stream = cupy.cuda.get_current_stream()
    ws = cupy.empty(max(plan.workspace_floats, 1), dtype=np.float32) if plan.workspace_floats else None
    counters = counters_for(device_id, stream.ptr, plan.counters) if plan.counters else None
    base = {"x": x_ptr, "out": out_ptr,
            "ws": ws.data.ptr if ws is not None else 0,
            "counters": counters.data.ptr if counters is not None else 0}
    arch = plan.device.arch
    for ln in plan.launches:
        args = []
        for a in ln.args:
            if isinstance(a, Buf):
                scale = 4 if a.name in ("ws", "counters") else 0
                if a.offset and not scale:
                    raise ValueError(f"offsets are only supported into ws and counters, not {a.name}")
                args.append(np.uint64(base[a.name] + a.offset * scale))
            else:
                args.append(np.int64(a))
        fn = get_function(ln.source, ln.kernel, device_id, arch)
        fn(ln.grid, ln.block, tuple(args), ln.shared_bytes, stream, ln.cooperative)
    # keep the workspace alive until the stream has used it (CuPy's pool reuses freed blocks only in stream order)
    del ws
