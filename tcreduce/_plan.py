"""Launch plans: what a method launches, computed in pure Python from the problem, the dtypes and the device.

A :class:`Plan` is the single description shared by the GPU launcher (:mod:`tcreduce._launch`) and the CPU emulator
(:mod:`tcreduce.emulate`): the kernels, their grids and blocks, their template parameters and their arguments. Given
the plan, the order of every addition is fixed, which is what lets the emulator reproduce the GPU's bits.

Kernel arguments are symbolic (:class:`Buf` names a buffer, ints are passed as 64-bit ``long long``) so that plans are
hashable, cacheable and readable without a GPU.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Union

from ._layout import Problem

__all__ = ["Buf", "TensorMapOfX", "Arg", "KernelLaunch", "Plan", "DeviceSpec", "param_dict"]


@dataclass(frozen=True)
class Buf:
    """A device buffer named in a kernel's argument list.

    Names the launcher resolves: ``"x"`` (the input, at its true address), ``"out"`` (the contiguous output in the
    plan's output dtype), ``"ws"`` (the plan's fp32 workspace, ``Plan.workspace_floats`` long; ``offset`` in floats)
    and ``"counters"`` (``Plan.counters`` zeroed uint32 counters that every kernel leaves at zero again).
    """

    name: str
    offset: int = 0


@dataclass(frozen=True)
class TensorMapOfX:
    """A kernel argument: a TMA descriptor (CUtensorMap, 128 bytes by value) of the input ``x`` at its true address,
    which the launcher encodes per input address (cuTensorMapEncodeTiled; tcreduce._launch.tensor_map_arg).

    ``dims``: the array's extents in elements, innermost first; ``strides``: the byte strides of the outer
    dimensions (one fewer); ``box``: the extents of the box one copy brings to shared memory; elements outside the
    array read as zero. ``dtype``: the element format ("float32")."""

    dtype: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]


Arg = Union[Buf, int, TensorMapOfX]


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel launch.

    ``source`` is a file in ``kernels/``; ``kernel`` the C++ name expression compiled and looked up there (template
    arguments included); ``args`` the arguments in order (ints become ``long long``)."""

    source: str
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Arg, ...]
    shared_bytes: int = 0
    cooperative: bool = False  # launched with cudaLaunchCooperativeKernel (grid-wide sync)
    cluster: int = 0  # blocks per thread-block cluster the kernel declares (__cluster_dims__); above 8: non-portable


@dataclass(frozen=True)
class DeviceSpec:
    """What a plan needs to know of a GPU: its name, multiprocessor count and compute capability."""

    name: str
    sm_count: int
    cc: tuple[int, int]

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"


@dataclass(frozen=True)
class Plan:
    """Everything a method does for one problem on one device.

    ``params`` holds the method's tunables (block size, unroll, chain length, splits...) as a sorted tuple of pairs so
    the plan stays hashable; :func:`param_dict` turns it back into a dict. ``launches`` run in order on one stream.
    ``host_call`` is set instead of launches for methods that delegate to a library (cub): the launcher calls it.
    """

    method: str
    problem: Problem
    in_dtype: str
    out_dtype: str
    device: DeviceSpec
    launches: tuple[KernelLaunch, ...] = ()
    workspace_floats: int = 0
    counters: int = 0
    params: tuple[tuple[str, Any], ...] = field(default=())
    host_call: str | None = None

    def replace(self, **changes: Any) -> "Plan":
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """A human-readable summary: one line per launch."""
        lines = [f"{self.method}: {self.problem} {self.in_dtype}->{self.out_dtype} on {self.device.name}"]
        lines.append("  params: " + ", ".join(f"{k}={v}" for k, v in self.params))
        for ln in self.launches:
            lines.append(f"  {ln.source}:{ln.kernel} grid={ln.grid} block={ln.block} smem={ln.shared_bytes}")
        if self.host_call:
            lines.append(f"  host call: {self.host_call}")
        return "\n".join(lines)


def param_dict(plan: Plan) -> dict[str, Any]:
    return dict(plan.params)
