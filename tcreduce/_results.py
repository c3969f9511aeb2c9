"""Result arrays of small reductions without a trip through CuPy's memory pool.

A 2^16-element sum costs the GPU a few microseconds, and its call about 10 us of host time, of which CuPy's pool
allocation of the result (with the free of the previous one) is 1-3 us (``benchmarks/call_overhead.py``, pieces
``cupy.ndarray((), float32)`` against a view). :class:`ResultSlots` keeps two result buffers of one shape and dtype,
allocated once from the pool on one stream, and hands out a view of whichever is free: a buffer is free when nothing
but the slots references it (its array, its ``MemoryPointer`` and its memory: every view, slice, DLPack export or
pointer derived from a result holds one of the three). When both are taken (a caller keeping results), the result
comes from the pool as before.

The same rules as the pool's: a buffer is reused only by calls on the stream it was allocated on (one
:class:`ResultSlots` per stream), so the stream orders the next kernel after everything enqueued on it before; work
another stream enqueued on a result that was then dropped is the caller's to order, as it is for any CuPy array whose
memory the pool hands out again. A result is a view (``base`` is the slot's buffer). The two addresses repeat, so
tcreduce's graph replay of small calls (:mod:`tcreduce._launch`) keeps recognising a repeated call.

Reference counts are exact in CPython with the GIL; on a free-threaded build the slots are never used (every result
comes from the pool).
"""

from __future__ import annotations

import math
import sys
from typing import Any

__all__ = ["ResultSlots", "result_slots", "remember", "RESULT_SLOT_MAX_BYTES", "SLOTS_ENABLED", "PER_STREAM_MAX"]

# results of at most this many bytes are recycled (larger ones: the kernels' time dwarfs the pool's microseconds, and
# two spare buffers per call signature and stream would hold real memory)
RESULT_SLOT_MAX_BYTES = 4096
SLOTS_ENABLED = getattr(sys, "_is_gil_enabled", lambda: True)()
# entries a per-stream table keeps (a call signature's stream states, a handle's result buffers); more streams: the
# oldest entry is forgotten (a program that makes a stream per call must not grow them without bound)
PER_STREAM_MAX = 32

_refs = sys.getrefcount


def _view_and_counts(buf: Any) -> tuple[Any, tuple[int, int, int]]:
    """A new view of ``buf`` and the references then held to ``buf``, its MemoryPointer and its memory object. The
    baseline is taken by the same code at the same depth as every check, so that the frames' own references (which
    differ between Python versions) cancel."""
    view = buf.view()
    mp = buf.data
    return view, (_refs(buf), _refs(mp), _refs(mp.mem))


class ResultSlots:
    """Two result buffers of ``shape`` and ``dtype`` on the current device and stream (allocated from CuPy's pool at
    construction); :meth:`take` returns a view of a free one, or None when both are in use."""

    __slots__ = ("buffers", "busy")

    def __init__(self, shape: tuple[int, ...], dtype: Any):
        import cupy

        self.buffers = [cupy.ndarray(shape, dtype), cupy.ndarray(shape, dtype)]
        counted = []
        for buf in self.buffers:  # the counts with this frame's view and nothing else: as in take
            view, counts = _view_and_counts(buf)
            counted.append(counts)
            del view
        # two buffers made alike count alike; if not, no count matches and every result comes from the pool
        self.busy = counted[0] if counted[0] == counted[1] else (-1, -1, -1)

    def take(self) -> Any:
        """A new view of a free buffer (the one used last first, so a loop that drops each result reuses one
        address), or None."""
        bufs = self.buffers
        for buf in bufs:
            view, counts = _view_and_counts(buf)
            if counts == self.busy:
                if buf is not bufs[0]:
                    bufs.reverse()
                return view
            del view
        return None


def result_slots(shape: tuple[int, ...], dtype: Any, stream_ptr: int) -> Any:
    """New :class:`ResultSlots` of ``shape`` and ``dtype`` (a numpy dtype) on the current device and the stream whose
    handle is ``stream_ptr``; False where results are not recycled (more than RESULT_SLOT_MAX_BYTES, or slots off);
    None while that stream captures a CUDA graph (allocating them then would bake a pool allocation into the graph:
    the caller asks again later). Callers keep one per stream."""
    from ._launch import is_capturing

    if not SLOTS_ENABLED or math.prod(shape) * dtype.itemsize > RESULT_SLOT_MAX_BYTES:
        return False
    if is_capturing(stream_ptr):
        return None
    return ResultSlots(shape, dtype)


def remember(table: dict, key: Any, value: Any) -> Any:
    """``table[key] = value`` for a per-stream table, first forgetting its oldest entry when it holds PER_STREAM_MAX;
    returns ``value``."""
    if len(table) >= PER_STREAM_MAX:
        del table[next(iter(table))]
    table[key] = value
    return value
