"""A CPU stand-in for the GPU path of :func:`tcreduce.sum` and :func:`tcreduce.reducer`, for tests and the
``--cpu`` mode of ``benchmarks/call_overhead.py``: CuPy arrays over fake device addresses, a fake current stream and
device, a fake allocator, and kernels that record their launches (name, grid, block, argument values, stream) instead
of running. What it checks: the Python path, the launch arguments, the per-call Python cost. What it cannot: anything
a kernel computes. Never use it around real GPU work (it patches CuPy process-wide while active).

>>> with fake_gpu() as gpu:
...     x = gpu.array((1 << 16,), "float16")
...     tcreduce.sum(x)
...     name, grid, block, args, shared, stream, coop = gpu.launches[-1]
"""

from __future__ import annotations

import contextlib
import itertools
import types
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

__all__ = ["fake_gpu", "FakeGPU", "H100"]


class _Arg(int):
    """A kernel argument whose value the fake kernels can read back (what ``CIntptr`` is on a GPU)."""


@dataclass
class FakeGPU:
    """The state of one :func:`fake_gpu` session. ``launches``: (kernel name, grid, block, argument values, shared
    bytes, stream handle, cooperative) per launch (when recording). ``allocations``: sizes in bytes of every
    allocation through CuPy's allocator. ``capturing``: what ``streamIsCapturing`` answers (set it to test the
    capture rules). ``graphs``: graphs captured by tcreduce's graph replay (each the launches captured, in the same
    form as ``launches``); ``graph_launches``: how many times one was replayed (each replay appends its captured
    launches to ``launches`` with the replaying stream)."""

    record: bool = True
    launches: list = field(default_factory=list)
    allocations: list = field(default_factory=list)
    capturing: bool = False
    stream_ptr: int = 0x5000
    graphs: list = field(default_factory=list)
    graph_launches: int = 0
    _capture: list | None = None
    _next: Iterator[int] = field(default_factory=lambda: itertools.count(0x7F0000000000, 1 << 32))

    def array(self, shape: tuple[int, ...], dtype: Any, offset: int = 0):
        """A CuPy array of ``shape`` over fresh fake device memory, its first element ``offset`` bytes past a
        256-byte aligned address."""
        import cupy

        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize + offset + 256
        mem = cupy.cuda.UnownedMemory(next(self._next), max(n, 1), None, 0)
        return cupy.ndarray(shape, dtype, memptr=cupy.cuda.MemoryPointer(mem, offset))

    def _alloc(self, size: int):
        import cupy

        self.allocations.append(size)
        return cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(next(self._next), max(size, 1), None, 0), 0)


class _Stream:
    def __init__(self, gpu: FakeGPU):
        self._gpu = gpu

    @property
    def ptr(self) -> int:
        return self._gpu.stream_ptr


class _CaptureStream:
    """tcreduce's private capture stream: launches between begin_capture and end_capture go into a graph."""

    ptr = 0x6000

    def __init__(self, gpu: FakeGPU):
        self._gpu = gpu

    def begin_capture(self) -> None:
        self._gpu._capture = []

    def end_capture(self) -> "_Graph":
        g = _Graph(self._gpu._capture)
        self._gpu._capture = None
        self._gpu.graphs.append(g.launches)
        return g


class _Graph:
    def __init__(self, launches: list):
        self.launches = launches


def _graph_launch(gpu: FakeGPU, graph: _Graph, stream_ptr: int) -> None:
    gpu.graph_launches += 1
    if gpu.record:
        gpu.launches.extend(ln[:5] + (stream_ptr,) + ln[6:] for ln in graph.launches)


class _Device:
    def __init__(self, device_id: int = 0):
        if device_id != 0:
            raise ValueError("the fake GPU has one device, 0")
        self.id = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False


class _Kernel:
    def __init__(self, gpu: FakeGPU, name: str):
        self.gpu, self.name, self.ptr = gpu, name, 0x1234

    def __call__(self, grid, block, args, shared=0, stream=None, coop=False) -> None:
        if self.gpu._capture is not None and isinstance(stream, _CaptureStream):
            self.gpu._capture.append((self.name, tuple(grid), tuple(block), tuple(int(a) for a in args), shared,
                                      stream.ptr, coop))
        elif self.gpu.record:
            self.gpu.launches.append((self.name, tuple(grid), tuple(block), tuple(int(a) for a in args), shared,
                                      stream.ptr if stream is not None else None, coop))


def _tensor_map(x_ptr: int) -> Any:
    """A fake tensor-map argument: recorded as x's address (``arg``)."""
    return types.SimpleNamespace(arg=x_ptr)


def H100():
    from ._plan import DeviceSpec

    return DeviceSpec("NVIDIA H100 80GB HBM3", 132, (9, 0))


def _clear_caches() -> None:
    from . import _api, _launch

    _api._PREPARED.clear()
    _launch._LAUNCHERS.clear()
    _launch._COUNTERS.clear()
    _launch._WORKSPACES.clear()
    _launch._RETIRED.clear()
    _launch._CAPTURE_STREAMS.clear()


@contextlib.contextmanager
def fake_gpu(record: bool = True, device=None) -> Iterator[FakeGPU]:
    """Patch CuPy and tcreduce so that the GPU path runs on the CPU (see the module docstring). ``record``: keep
    every launch (off for timing: recording costs time). ``device``: the DeviceSpec planned for (an H100)."""
    import cupy

    from . import _device, _launch

    gpu = FakeGPU(record=record)
    spec = device or H100()
    stream = _Stream(gpu)
    saved: list[tuple[Any, str, Any]] = []

    def patch(obj: Any, name: str, value: Any) -> None:
        saved.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    _clear_caches()
    patch(cupy.cuda, "get_current_stream", lambda *a: stream)
    patch(cupy.cuda, "Device", _Device)
    patch(cupy.cuda.runtime, "getDevice", lambda: 0)
    patch(cupy.cuda.runtime, "streamIsCapturing", lambda ptr: gpu.capturing)
    patch(_launch, "_stream_is_capturing", lambda ptr: gpu.capturing)
    patch(cupy, "zeros", lambda shape, dtype=float, order="C": cupy.ndarray(shape, dtype))
    patch(_device, "current_device", lambda: (0, spec))
    patch(_launch, "get_function", lambda source, name, device_id, arch: _Kernel(gpu, name))
    patch(_launch, "allow_shared", lambda fn, nbytes: None)
    patch(_launch, "allow_cluster", lambda fn, blocks: None)
    patch(_launch, "tensor_map_arg", lambda spec, x_ptr: _tensor_map(x_ptr))
    capture = _CaptureStream(gpu)
    patch(_launch, "capture_stream", lambda device_id: capture)
    patch(_launch, "graph_launch", lambda graph, stream_ptr: _graph_launch(gpu, graph, stream_ptr))
    if record:
        patch(_launch, "kernel_arg", _Arg)
    allocator = cupy.cuda.get_allocator()
    cupy.cuda.set_allocator(gpu._alloc)
    try:
        yield gpu
    finally:
        cupy.cuda.set_allocator(allocator)
        for obj, name, value in reversed(saved):
            setattr(obj, name, value)
        _clear_caches()
