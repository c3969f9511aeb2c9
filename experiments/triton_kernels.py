"""Tuned Triton sums: the competitor a user of the seeds' Genesis/FlagGems approach would write (seed 000), tuned per
problem the way a user would tune it. Imported only when Triton is wanted: importing this module imports ``triton``
and ``torch`` (``pip install -e ".[bench]"``).

Kernels (Triton 3.x; every one loads fp16 or fp32, converts to fp32 and accumulates in fp32; fp32 result):

- :func:`full_partials` + :func:`full_combine`: the two-stage full sum. Program ``p`` of stage 1 reads ``ITERS``
  consecutive blocks of ``BLOCK`` elements starting at element ``p * BLOCK * ITERS`` into a ``BLOCK``-lane fp32
  accumulator (lane ``j`` adds elements ``j, j + BLOCK, ...`` in turn), reduces it with ``tl.sum`` and writes one
  partial; stage 2 (one program, 1024 lanes) adds the partials the same way. Swept: (BLOCK, ITERS) in (4096, 8),
  (8192, 4), (2048, 16) x num_warps 4 and 8.
- :func:`rows_sum`: last-axis sums of ``m`` rows of ``n`` elements (row stride ``ld``): program ``p`` owns rows
  ``[p * ROWS, (p + 1) * ROWS)`` and walks them in ``[ROWS, BLOCK_N]`` tiles into an fp32 tile accumulator, then
  ``tl.sum`` over the columns. Swept: ROWS in 32..256 (down to 1 where fewer rows would leave SMs idle: long rows)
  x num_warps 4 and 8, ``BLOCK_N = min(next_pow2(n), 4096 / ROWS)``.
- :func:`cols_sum`: first-axis sums of an ``[r, c]`` array (row stride ``ld``, contiguous columns), one pass:
  program ``p`` owns columns ``[p * BC, (p + 1) * BC)`` and walks all rows in ``[BR, BC]`` tiles, then ``tl.sum``
  over the rows. :func:`cols_partials` + :func:`cols_combine`: the two-pass variant for tall arrays (few column
  blocks): the rows are split ``S`` ways (each split a multiple of BR rows), every split writes an fp32 partial row,
  and a second kernel adds the ``S`` partial rows in order. Swept: BR 1..32 x BC 128..1024 (tiles of 1024 to 8192
  elements) x num_warps, and S in two values giving about 4 and 16 programs per SM.

The host side (problems, sweeps, row splits, error-bound depths) is :mod:`experiments.triton_plans`.
Before any configuration is timed it is checked (:func:`experiments.competitors.check_exact`): run on integer-valued
data of the same shape and strides (values in {-2, -1, 1, 2}: every partial sum is an integer far below 2^24, so
exact in fp32 in any order) into NaN-poisoned output and workspace, its result must equal the float64 sum bit for
bit; a mismatch raises :class:`~experiments.competitors.WrongResult` (a wrong competitor is worse than none). The
configuration kept is then checked on the real input against a float64 sum within the fp32 error bound of its
summation depth (:func:`depth`, :func:`experiments.competitors.check_real`). Timing of the sweep:
``triton.testing.do_bench`` (median).
"""

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
import triton
import triton.language as tl

from .competitors import WrongResult, check_exact, check_real, integer_data, tensor_key
from .triton_plans import (COLS_COMBINE_BLOCK, COMBINE_BLOCK, Config, Problem, candidates, cdiv, depth, problem_of,
                           split_rows)

__all__ = ["full_partials", "full_combine", "rows_sum", "cols_sum", "cols_partials", "cols_combine", "run",
           "TunedSum", "Tuned"]


# ---------------------------------------------------------------------------------------------------- kernels
@triton.jit
def full_partials(x_ptr, part_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """Stage 1 of the two-stage full sum: partial ``p`` of elements ``[p * BLOCK * ITERS, (p + 1) * BLOCK * ITERS)``."""
    pid = tl.program_id(0).to(tl.int64)
    base = pid * (BLOCK * ITERS)
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.static_range(ITERS):
        offs = base + i * BLOCK + lanes
        v = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        acc += v.to(tl.float32)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def full_combine(part_ptr, out_ptr, m, BLOCK: tl.constexpr):
    """Stage 2: one program adds the ``m`` fp32 partials (lane ``j`` adds partials ``j, j + BLOCK, ...``)."""
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, m, BLOCK):
        idx = start + offs
        acc += tl.load(part_ptr + idx, mask=idx < m, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


@triton.jit
def rows_sum(x_ptr, out_ptr, m, n, ld, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    """Row ``i`` (elements ``i * ld + [0, n)``) summed into ``out[i]``; ``ROWS`` rows per program."""
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * ROWS + tl.arange(0, ROWS)
    rmask = rows < m
    row_ptr = x_ptr + rows[:, None] * ld
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    for start in range(0, n, BLOCK_N):
        c = start + cols
        v = tl.load(row_ptr + c[None, :], mask=rmask[:, None] & (c[None, :] < n), other=0.0)
        acc += v.to(tl.float32)
    tl.store(out_ptr + rows, tl.sum(acc, axis=1), mask=rmask)


@triton.jit
def cols_sum(x_ptr, out_ptr, r, c, ld, BR: tl.constexpr, BC: tl.constexpr):
    """Column ``j`` (elements ``i * ld + j``, ``i < r``) summed into ``out[j]``; ``BC`` columns per program."""
    pid = tl.program_id(0).to(tl.int64)
    cols = pid * BC + tl.arange(0, BC)
    cmask = cols < c
    rr = tl.arange(0, BR).to(tl.int64)
    acc = tl.zeros((BR, BC), dtype=tl.float32)
    for start in range(0, r, BR):
        rows = start + rr
        v = tl.load(x_ptr + rows[:, None] * ld + cols[None, :], mask=(rows[:, None] < r) & cmask[None, :],
                    other=0.0)
        acc += v.to(tl.float32)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0), mask=cmask)


@triton.jit
def cols_partials(x_ptr, part_ptr, r, c, ld, rows_per, BR: tl.constexpr, BC: tl.constexpr):
    """Two-pass column sums, pass 1: split ``s`` (program axis 1) adds rows ``[s * rows_per, (s + 1) * rows_per)``
    (``rows_per`` a multiple of BR) of its ``BC`` columns into ``part[s, :]``."""
    pid_c = tl.program_id(0).to(tl.int64)
    pid_s = tl.program_id(1).to(tl.int64)
    cols = pid_c * BC + tl.arange(0, BC)
    cmask = cols < c
    r0 = pid_s * rows_per
    rr = tl.arange(0, BR).to(tl.int64)
    acc = tl.zeros((BR, BC), dtype=tl.float32)
    for i in range(0, rows_per, BR):
        rows = r0 + i + rr
        v = tl.load(x_ptr + rows[:, None] * ld + cols[None, :], mask=(rows[:, None] < r) & cmask[None, :],
                    other=0.0)
        acc += v.to(tl.float32)
    tl.store(part_ptr + pid_s * c + cols, tl.sum(acc, axis=0), mask=cmask)


@triton.jit
def cols_combine(part_ptr, out_ptr, s, c, BC: tl.constexpr):
    """Two-pass column sums, pass 2: ``out[j] = part[0, j] + part[1, j] + ... + part[s - 1, j]`` in that order."""
    pid = tl.program_id(0).to(tl.int64)
    cols = pid * BC + tl.arange(0, BC)
    cmask = cols < c
    offs = cols
    acc = tl.zeros((BC,), dtype=tl.float32)
    for _ in range(0, s):
        acc += tl.load(part_ptr + offs, mask=cmask, other=0.0)
        offs += c
    tl.store(out_ptr + cols, acc, mask=cmask)


# ------------------------------------------------------------------------------------------------ host side
def run(cfg: Config, t: "torch.Tensor", p: Problem, poison: bool = False) -> "torch.Tensor":
    """Launch ``cfg`` on ``t`` (problem ``p``) on torch's current stream; returns the fp32 result. ``poison``: fill
    the output and the workspace with NaN first (checks: anything left unwritten or read before written shows)."""
    dev = t.device

    def buf(shape):
        return (torch.full(shape, math.nan, dtype=torch.float32, device=dev) if poison
                else torch.empty(shape, dtype=torch.float32, device=dev))

    out = buf(p.shape)
    if math.prod(p.shape) == 0:
        return out
    if (p.form == "rows" and p.n == 0) or (p.form != "rows" and p.m == 0):  # nothing to add: zeros
        out.zero_()
        return out
    if p.form == "full":
        progs = cdiv(p.m, cfg.a * cfg.b)
        part = buf((progs,))
        full_partials[(progs,)](t, part, p.m, BLOCK=cfg.a, ITERS=cfg.b, num_warps=cfg.num_warps)
        full_combine[(1,)](part, out, progs, BLOCK=COMBINE_BLOCK, num_warps=4)
        return out
    if p.form == "rows":
        rows_sum[(cdiv(p.m, cfg.a),)](t, out, p.m, p.n, p.ld, ROWS=cfg.a, BLOCK_N=cfg.b, num_warps=cfg.num_warps)
        return out
    r, c = p.m, p.n
    if cfg.kind == "cols":
        cols_sum[(cdiv(c, cfg.b),)](t, out, r, c, p.ld, BR=cfg.a, BC=cfg.b, num_warps=cfg.num_warps)
        return out
    rows_per, splits = split_rows(r, cfg.a, cfg.splits)
    part = buf((splits, c))
    cols_partials[(cdiv(c, cfg.b), splits)](t, part, r, c, p.ld, rows_per, BR=cfg.a, BC=cfg.b,
                                             num_warps=cfg.num_warps)
    cols_combine[(cdiv(c, COLS_COMBINE_BLOCK),)](part, out, splits, c, BC=COLS_COMBINE_BLOCK, num_warps=4)
    return out


def _bench_ms(fn: Callable[[], Any]) -> float:
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=5, rep=25, return_mode="median"))


@dataclass
class Tuned:
    """The configuration kept for one problem and what the sweep saw (label -> median ms, or an error)."""

    config: Config
    problem: Problem
    sweep: dict[str, Any]


class TunedSum:
    """A tuned Triton sum over ``axis`` (None, -1 or 0): ``self(t)`` sums the CUDA tensor ``t`` into fp32, with the
    configuration swept, checked and kept per (shape, strides, dtype, 16-byte alignment) on first sight
    (:meth:`prepare`). Launches on torch's current stream."""

    def __init__(self, axis: Optional[int]):
        self.axis = axis
        self.kept: dict[tuple, Tuned] = {}

    key = staticmethod(tensor_key)

    def prepare(self, t: "torch.Tensor") -> Tuned:
        """Sweep, check and keep the configuration for ``t``'s problem (idempotent)."""
        key = self.key(t)
        hit = self.kept.get(key)
        if hit is not None:
            return hit
        p = problem_of(tuple(t.shape), tuple(t.stride()), self.axis)
        sweep: dict[str, Any] = {}
        y = integer_data(t)
        best: Optional[tuple[float, Config]] = None
        sms = torch.cuda.get_device_properties(t.device).multi_processor_count
        for cfg in candidates(p, int(sms)):
            try:
                check_exact(lambda v, cfg=cfg: run(cfg, v, p, poison=True), t, self.axis, f"triton {cfg.label}",
                            y=y)
            except WrongResult:
                raise
            except Exception as e:  # compile or launch failure of one configuration: skip it, keep the reason
                sweep[cfg.label] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                continue
            ms = _bench_ms(lambda cfg=cfg: run(cfg, t, p))
            sweep[cfg.label] = ms
            if best is None or ms < best[0]:
                best = (ms, cfg)
        del y
        if best is None:
            raise RuntimeError(f"no Triton configuration ran for {p}: {sweep}")
        cfg = best[1]
        check_real(run(cfg, t, p), t, self.axis, depth(cfg, p), f"triton {cfg.label}")
        tuned = self.kept[key] = Tuned(cfg, p, sweep)
        return tuned

    def __call__(self, t: "torch.Tensor") -> "torch.Tensor":
        tuned = self.kept.get(self.key(t)) or self.prepare(t)
        return run(tuned.config, t, tuned.problem)

    def describe(self, t: "torch.Tensor") -> str:
        """The configuration kept for ``t``'s problem, for the studies' CSV notes ("" before :meth:`prepare`)."""
        tuned = self.kept.get(self.key(t))
        return f"kept {tuned.config.label}" if tuned is not None else ""
