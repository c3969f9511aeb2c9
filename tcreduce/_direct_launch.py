"""Kernel and graph launches straight through the CUDA driver (``cuLaunchKernel``, ``cuGraphLaunch`` by ctypes), for
the calls whose cost is the host's, not the GPU's.

CuPy's ``Function.__call__`` spends about 6.4 us of host time on a launch (``benchmarks/call_overhead.py``, "empty
CuPy kernel launch", an H200 host, session 16): more than the GPU spends summing 2^16 values, and most of a small
``tcreduce.sum``. A :class:`DirectStep` keeps one launch's arguments in a ctypes array of 8-byte slots (every
argument tcreduce passes is 8 bytes, pointers and int64, the bytes CuPy's ``CIntptr`` passes too) and the
``kernelParams`` array that points at them, built once; a call writes the input and output addresses into their slots
and calls ``cuLaunchKernel`` with the same function, grid, block, shared memory and stream as CuPy would, so the same
kernel runs on the same arguments and the sums are the same bits.

The driver library is loaded with ``ctypes.PyDLL``, which holds the GIL through each call: two Python threads never
interleave writing one step's slots and launching it (the driver copies the arguments during the call). A launch the
driver refuses (any error code, e.g. no current CUDA context in a thread that has made no CUDA call yet) is reported
to the caller, which launches that step through CuPy instead: CuPy sets the context up, or raises its usual error.

``TCREDUCE_DIRECT_LAUNCH=0`` in the environment (read at import), or :data:`ENABLED` set False before a launcher is
bound, keeps every launch on CuPy.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Optional, Sequence

__all__ = ["ENABLED", "DirectStep", "direct_step", "graph_launch_direct", "driver"]

ENABLED = os.environ.get("TCREDUCE_DIRECT_LAUNCH", "1") != "0"
_MASK = (1 << 64) - 1
_DRIVER: Any = None  # the loaded libcuda (PyDLL), False when it cannot be loaded


def driver() -> Optional[Any]:
    """libcuda with ``cuLaunchKernel`` and ``cuGraphLaunch`` typed, loaded once; None where it cannot be loaded
    (no NVIDIA driver: CPU-only machines, the fake GPU)."""
    global _DRIVER
    if _DRIVER is None:
        try:
            lib = ctypes.PyDLL("libcuda.so.1")
            u, p = ctypes.c_uint, ctypes.c_void_p
            lib.cuLaunchKernel.argtypes = [p, u, u, u, u, u, u, u, p, p, p]
            lib.cuLaunchKernel.restype = ctypes.c_int
            lib.cuGraphLaunch.argtypes = [p, p]
            lib.cuGraphLaunch.restype = ctypes.c_int
            _DRIVER = lib
        except (OSError, AttributeError):
            _DRIVER = False
    return _DRIVER or None


class DirectStep:
    """One kernel launch of a bound plan through ``cuLaunchKernel``: ``step(x_ptr, out_ptr, stream_ptr)`` writes the
    two addresses into their argument slots, launches, and returns the driver's error code (0: launched)."""

    __slots__ = ("_slots", "_params", "_head", "_xs", "_outs", "_launch")

    def __init__(self, lib: Any, fn_ptr: int, grid: Sequence[int], block: Sequence[int], shared: int,
                 args: Sequence[int], xs: Sequence[int], outs: Sequence[int]):
        n = max(len(args), 1)
        self._slots = (ctypes.c_uint64 * n)(*(int(a) & _MASK for a in args))
        base = ctypes.addressof(self._slots)
        self._params = (ctypes.c_void_p * n)(*(base + 8 * i for i in range(n)))
        gx, gy, gz = (tuple(grid) + (1, 1))[:3]
        bx, by, bz = (tuple(block) + (1, 1))[:3]
        self._head = (fn_ptr, gx, gy, gz, bx, by, bz, shared)
        self._xs, self._outs = tuple(xs), tuple(outs)
        self._launch = lib.cuLaunchKernel

    def __call__(self, x_ptr: int, out_ptr: int, stream_ptr: int) -> int:
        slots = self._slots
        for i in self._xs:
            slots[i] = x_ptr
        for i in self._outs:
            slots[i] = out_ptr
        return self._launch(*self._head, stream_ptr, self._params, None)


def direct_step(fn: Any, grid: Sequence[int], block: Sequence[int], shared: int, args: Sequence[int],
                xs: Sequence[int], outs: Sequence[int]) -> Optional[DirectStep]:
    """A :class:`DirectStep` for CuPy ``Function`` ``fn`` with every argument an integer (``args``; the slots ``xs``
    and ``outs`` take the per-call addresses), or None where launches stay on CuPy (switched off, no driver, a
    function that is not CuPy's)."""
    if not ENABLED:
        return None
    lib = driver()
    if lib is None:
        return None
    try:
        from cupy.cuda.function import Function
    except ImportError:  # pragma: no cover - CuPy is a dependency
        return None
    if not isinstance(fn, Function):
        return None
    return DirectStep(lib, int(fn.ptr), grid, block, shared, args, xs, outs)


def graph_launch_direct(graph_exec: int, stream_ptr: int) -> int:
    """``cuGraphLaunch`` of an instantiated graph on a raw stream; the driver's error code (0: launched), or -1
    where the driver is not loaded or the direct path is switched off."""
    lib = driver() if ENABLED else None
    if lib is None:
        return -1
    return lib.cuGraphLaunch(graph_exec, stream_ptr)
