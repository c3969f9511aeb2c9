"""The bandwidth ceiling, measured in the same run as the methods: a device-to-device copy (counting bytes read plus
bytes written) and the plain read kernel of ``kernels/bandwidth.cu`` (its best launch configuration);
``ceiling_gbs`` is the larger of the two."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .env import device_info, l2_bytes
from .inputs import random_pool
from .timing import Timing, TimingConfig, time_gpu

__all__ = ["READ_CONFIGS", "describe_read_config", "read_launcher", "time_read_kernel", "time_copy", "Ceiling",
           "measure_ceiling"]

# Read-kernel launch configurations tried for the ceiling: (loads in flight per thread, ld.global.cs, blocks per SM,
# rounds per block). Rounds 0: a resident grid of that many blocks per SM looping over the buffer (read16); rounds k:
# a one-pass grid of blocks that each read k rounds of 256 x UNROLL words and exit (read16_blocks; blocks per SM
# unused, 0), which benchmarks/read_probe.py read 1.5-3% faster on an H100 and an H200 (notes/performance.md).
READ_CONFIGS = ((4, True, 4, 0), (8, True, 4, 0), (8, False, 4, 0), (4, True, 8, 0), (8, True, 2, 0), (16, True, 2, 0),
                (2, False, 0, 1), (4, False, 0, 1), (2, False, 0, 4), (4, True, 0, 1))
ReadConfig = tuple[int, bool, int, int]
SCRUB_READ: ReadConfig = (8, False, 4, 0)  # l2_scrubber's read: plain loads (they stay in L2), a resident grid


def l2_scrubber() -> Callable[[], None]:
    """A function that reads a buffer of twice the L2 cache's size on CuPy's current stream (the read kernel, plain
    loads, so the L2 ends up full of that buffer's clean lines): run before each interleaved sample
    (:func:`experiments.timing.interleaved_samples`'s ``before``), it keeps a call from finding in L2 the bytes of
    its input that the call before it read last (session 43: `shuffle`'s fp16 [2^20, 256] sum read 6% faster after
    `tensorcore`'s than after its own)."""
    import cupy

    scrub = cupy.ones(2 * l2_bytes() // 4, dtype=np.float32)
    launch = read_launcher(SCRUB_READ)
    return lambda: launch(scrub)


def describe_read_config(config: ReadConfig) -> str:
    """A read-kernel configuration as the studies' CSVs note it."""
    return "unroll=%d stream=%s blocks_per_sm=%d rounds=%d" % config


def _read_fn(unroll: int, stream: bool, one_pass: bool):
    from tcreduce._compile import get_function
    from tcreduce._device import current_device

    dev_id, spec = current_device()
    kernel = "read16_blocks" if one_pass else "read16"
    return get_function("bandwidth.cu", f"tcr_bw::{kernel}<{unroll}, {'true' if stream else 'false'}>", dev_id,
                        spec.arch)


@functools.lru_cache(maxsize=1)
def _sink():
    import cupy

    return cupy.zeros(4, dtype=np.uint32)


def read_launcher(config: ReadConfig) -> Callable[[Any], None]:
    """A function launching the read kernel over one CuPy array (its whole 16-byte words)."""
    import cupy

    unroll, stream, bps, rounds = config
    fn = _read_fn(unroll, stream, rounds > 0)
    sms = device_info().get("sm_count", 132)
    sink = _sink()

    def launch(x) -> None:
        n16 = x.nbytes // 16
        if rounds > 0:
            per = 256 * unroll * rounds
            args = (np.uint64(x.data.ptr), np.int64(n16), np.int64(per), np.uint64(sink.data.ptr))
            grid = int(max(1, -(-n16 // per)))
        else:
            args = (np.uint64(x.data.ptr), np.int64(n16), np.uint64(sink.data.ptr))
            grid = int(max(1, min(sms * bps, -(-n16 // 256))))
        fn((grid, 1, 1), (256, 1, 1), args, 0, cupy.cuda.get_current_stream(), False)

    return launch


def time_read_kernel(inputs: Sequence[Any], cfg: TimingConfig, config: Optional[ReadConfig] = None
                     ) -> tuple[Timing, ReadConfig]:
    """(timing, config) of the read kernel over ``inputs``: the given config, or the best of :data:`READ_CONFIGS`."""
    configs = [config] if config is not None else list(READ_CONFIGS)
    best = None
    for c in configs:
        t = time_gpu(read_launcher(c), inputs, cfg)
        if best is None or t.median_s < best[0].median_s:
            best = (t, c)
    assert best is not None
    return best


def time_copy(nbytes: int, cfg: TimingConfig) -> Timing:
    """Timing of a device-to-device copy of ``nbytes`` (cudaMemcpyAsync) between two random buffers."""
    import cupy

    n = nbytes // 4
    src = random_pool("float32", n, seed=7)
    dst = cupy.empty_like(src)
    rt = cupy.cuda.runtime

    def copy(_):
        rt.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, rt.memcpyDeviceToDevice,
                       cupy.cuda.get_current_stream().ptr)

    return time_gpu(copy, [None], cfg)


@dataclass(frozen=True)
class Ceiling:
    """The bandwidth ceiling measured in this run."""

    read_gbs: float
    copy_gbs: float
    bytes: int
    read_config: ReadConfig

    @property
    def gbs(self) -> float:
        return max(self.read_gbs, self.copy_gbs)

    def as_dict(self) -> dict[str, Any]:
        return {"ceiling_gbs": self.gbs, "read_kernel_gbs": self.read_gbs, "copy_gbs": self.copy_gbs,
                "ceiling_bytes": self.bytes, "read_kernel_config": describe_read_config(self.read_config)}


def measure_ceiling(nbytes: int, cfg: TimingConfig) -> Ceiling:
    """The read kernel (best configuration) over a random buffer of ``nbytes`` and a device-to-device copy of
    ``nbytes`` (counting read + written bytes)."""
    import cupy

    x = random_pool("float32", nbytes // 4, seed=3)
    t_read, config = time_read_kernel([x], cfg)
    del x
    cupy.get_default_memory_pool().free_all_blocks()
    t_copy = time_copy(nbytes, cfg)
    cupy.get_default_memory_pool().free_all_blocks()
    return Ceiling(nbytes / t_read.median_s / 1e9, 2 * nbytes / t_copy.median_s / 1e9, nbytes, config)
