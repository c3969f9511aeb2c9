"""Turn any array view and any set of reduced axes into one of three canonical problems (pure Python, no GPU).

Every kernel in ``kernels/`` solves one of these forms; the GPU launcher and the emulator both start from here.

- :class:`Flat`: sum ``n`` contiguous elements into one value (full reductions; order-free, so a Fortran-ordered or
  negatively strided array whose elements fill one contiguous block is flat too).
- :class:`Rows`: ``m`` rows of ``k`` contiguous elements, row ``i`` starting ``i * ld`` elements after the base;
  reduce each row (last-axis / segmented sums).
- :class:`Cols`: element ``(i, j, l)`` at ``i * sa + j * sr + l``; reduce over ``j`` into a contiguous ``(a, b)``
  output (reducing a non-last axis, the contiguous axis kept).

Anything else (broadcast strides, interleaved kept and reduced axes that merge into neither form) is first copied into
a contiguous array with the kept axes first; :attr:`Layout.copy_order` says so, and the copy costs one extra pass.
``align`` is the byte address of the first element modulo 16, which decides whether 16-byte vector loads are legal.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Sequence, Union

__all__ = ["Flat", "Rows", "Cols", "Problem", "Layout", "normalize_axes", "plan_layout", "host_layout",
           "host_align"]


@dataclass(frozen=True)
class Flat:
    n: int
    align: int = 0

    @property
    def outputs(self) -> int:
        return 1

    @property
    def length(self) -> int:
        """Elements summed into each output."""
        return self.n


@dataclass(frozen=True)
class Rows:
    m: int
    k: int
    ld: int
    align: int = 0

    @property
    def outputs(self) -> int:
        return self.m

    @property
    def length(self) -> int:
        return self.k


@dataclass(frozen=True)
class Cols:
    a: int
    r: int
    b: int
    sa: int
    sr: int
    align: int = 0

    @property
    def outputs(self) -> int:
        return self.a * self.b

    @property
    def length(self) -> int:
        return self.r


Problem = Union[Flat, Rows, Cols]


@dataclass(frozen=True)
class Layout:
    """How to run a reduction of one array view.

    ``problem`` is the canonical form; ``base_offset`` the element offset from the view's first element to the
    problem's base (nonzero when negative strides were flipped); ``copy_order`` is None when the view is used in
    place, else the axis permutation to apply before a C-contiguous copy (then ``base_offset`` is 0);
    ``out_shape`` the shape of the result without keepdims.
    """

    problem: Problem
    base_offset: int
    copy_order: tuple[int, ...] | None
    out_shape: tuple[int, ...]


def normalize_axes(axis: None | int | Sequence[int], ndim: int) -> tuple[int, ...]:
    """NumPy's rules: None means all axes; negative axes count from the end; out of range or repeated axes raise
    ``numpy.exceptions.AxisError`` (a ValueError and IndexError)."""
    from numpy.exceptions import AxisError

    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, bool):
        raise TypeError("axis must be None, an int or a tuple of ints, not bool")
    if not isinstance(axis, (int, tuple, list)):
        try:
            axis = operator.index(axis)  # numpy integers
        except TypeError:
            raise TypeError(f"axis must be None, an int or a tuple of ints, not {type(axis).__name__}") from None
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for ax in axes:
        if isinstance(ax, bool):
            raise TypeError("axis entries must be ints, not bool")
        ax = operator.index(ax)
        if not -ndim <= ax < ndim:
            raise AxisError(ax, ndim)
        ax %= ndim
        if ax in out:
            raise ValueError(f"duplicate value in 'axis': {axis}")
        out.append(ax)
    return tuple(sorted(out))


def _merge_c(dims: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge neighbouring (size, stride) pairs that address memory like one C-ordered axis."""
    merged: list[tuple[int, int]] = []
    for size, stride in dims:
        if merged and merged[-1][1] == stride * size:
            psize, _ = merged[-1]
            merged[-1] = (psize * size, stride)
        else:
            merged.append((size, stride))
    return merged


def _one_run(dims: list[tuple[int, int]]) -> tuple[int, int] | None:
    """Reorder freely (the caller reduces over them, so order is free) and merge into one (size, stride), or None."""
    if not dims:
        return (1, 1)
    ordered = sorted(dims, key=lambda d: -abs(d[1]))
    merged = _merge_c(ordered)
    return merged[0] if len(merged) == 1 else None


def plan_layout(shape: Sequence[int], strides: Sequence[int], axes: tuple[int, ...], itemsize: int,
                align: int) -> Layout:
    """Choose the canonical problem for a view with ``shape`` and ``strides`` (in elements), reducing ``axes``.

    ``align`` is the byte address of the view's first element modulo 16. The view must not be empty."""
    ndim = len(shape)
    out_shape = tuple(shape[i] for i in range(ndim) if i not in axes)
    base = 0
    flipped: list[tuple[int, int, bool]] = []  # (size, stride>=0, reduced)
    for i in range(ndim):
        size, stride = shape[i], strides[i]
        if size == 1:
            continue
        if stride < 0 and i in axes:  # order-free along reduced axes: walk them forwards
            base += (size - 1) * stride
            stride = -stride
        flipped.append((size, stride, i in axes))
    red = [(s, st) for s, st, r in flipped if r]
    kept = [(s, st) for s, st, r in flipped if not r]
    base_align = (align + base * itemsize) % 16

    def copy() -> Layout:
        kept_axes = tuple(i for i in range(ndim) if i not in axes)
        m, k = math.prod(out_shape), math.prod(shape[i] for i in axes)
        problem: Problem = Flat(k, 0) if not kept_axes else Rows(m, k, k, 0)
        return Layout(problem, 0, kept_axes + axes, out_shape)

    if any(st == 0 for _, st in red):  # broadcast along a reduced axis: no unit-stride run, copy
        return copy()
    run = _one_run(red)
    if not kept:  # full reduction (kept axes, if any, have size 1)
        if run is not None and (run[1] == 1 or run[0] == 1):
            return Layout(Flat(run[0], base_align), base, None, out_shape)
        return copy()
    kept_runs = _merge_c(kept)
    if run is not None and (run[1] == 1 or run[0] == 1) and len(kept_runs) == 1:
        m, ld = kept_runs[0]
        return Layout(Rows(m, run[0], ld, base_align), base, None, out_shape)
    if run is not None and kept_runs[-1][1] == 1 and len(kept_runs) <= 2:
        b = kept_runs[-1][0]
        a, sa = kept_runs[0] if len(kept_runs) == 2 else (1, 0)
        r, sr = run
        return Layout(Cols(a, r, b, sa, sr, base_align), base, None, out_shape)
    return copy()


def _owner(x):
    """The NumPy array whose contiguous memory holds the view ``x``, or None when no such array exists (memory owned
    by another library, a torch tensor's say, seen through a non-contiguous view)."""
    import numpy as np

    owner = x
    while isinstance(getattr(owner, "base", None), np.ndarray):
        owner = owner.base
    return owner if owner.flags.c_contiguous or owner.flags.f_contiguous else None


def host_align(x) -> int:
    """Byte offset mod 16 of a NumPy view's first element from the start of its owning array: the alignment the
    same view of a freshly allocated (256-byte aligned) GPU array would have. Without an owning NumPy array, the
    address itself mod 16."""
    if x.size == 0:
        return 0
    owner = _owner(x)
    base = owner.__array_interface__["data"][0] if owner is not None else 0
    return (x.__array_interface__["data"][0] - base) % 16


def _span(x):
    """A 1-D raw-byte NumPy view of the memory the view ``x`` spans (from its lowest to its highest element), and
    the byte offset of ``x``'s first element in it."""
    import numpy as np

    lo = sum((n - 1) * st for n, st in zip(x.shape, x.strides) if st < 0)
    hi = sum((n - 1) * st for n, st in zip(x.shape, x.strides) if st > 0) + x.itemsize

    class _Bytes:
        __array_interface__ = {"data": (x.__array_interface__["data"][0] + lo, True), "shape": (hi - lo,),
                               "typestr": "|u1", "version": 3}

    view = np.asarray(_Bytes())
    return view, -lo


def host_layout(x, axis) -> tuple[Layout | None, tuple[int, ...]]:
    """(layout, axes) for a NumPy array, as the GPU path would choose for the same view; layout is None when the
    reduction is empty (no outputs or nothing to add)."""
    axes = normalize_axes(axis, x.ndim)
    if x.size == 0:
        return None, axes
    itemsize = x.dtype.itemsize
    strides = tuple(s // itemsize for s in x.strides)
    return plan_layout(x.shape, strides, axes, itemsize, host_align(x)), axes


def host_problem_data(x, layout: Layout):
    """The exact memory a kernel reads for ``layout``, as NumPy views of ``x``'s memory: a 1-D array (Flat), an
    (m, k) array (Rows) or an (a, r, b) array (Cols), strided as the problem says. Used by the emulator."""
    import numpy as np
    from numpy.lib.stride_tricks import as_strided

    p = layout.problem
    if layout.copy_order is not None:
        memory, start = np.ascontiguousarray(x.transpose(layout.copy_order)).reshape(-1), 0
    else:
        owner = _owner(x)
        if owner is not None:
            memory = owner.reshape(-1, order="A").view(np.uint8).view(x.dtype)
            start = (x.__array_interface__["data"][0] - owner.__array_interface__["data"][0]) // x.itemsize
        else:  # no NumPy array owns the memory: address the span of the view itself
            raw, offset = _span(x)
            raw = raw[:len(raw) - len(raw) % x.itemsize] if offset % x.itemsize == 0 else raw
            memory, start = raw.view(x.dtype), offset // x.itemsize
        start += layout.base_offset
    isz = x.itemsize
    if isinstance(p, Flat):
        return memory[start:start + p.n]
    origin = memory[start:].view(f"u{isz}")  # as_strided cannot describe the ml_dtypes formats: stride the raw bits
    if isinstance(p, Rows):
        view = as_strided(origin, shape=(p.m, p.k), strides=(p.ld * isz, isz), writeable=False)
    else:
        view = as_strided(origin, shape=(p.a, p.r, p.b), strides=(p.sa * isz, p.sr * isz, isz), writeable=False)
    return view.view(x.dtype)
