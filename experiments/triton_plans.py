"""The host side of the tuned Triton competitors, in pure Python (no torch, no Triton, no GPU): which kernel problem
a sum is (:func:`problem_of`), the sweep of block shapes per problem (:func:`candidates`), how a two-pass column sum
splits its rows (:func:`split_rows`) and the error bound's summation depth (:func:`depth`). The kernels and their
launch are in :mod:`experiments.triton_kernels`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

__all__ = ["Config", "Problem", "problem_of", "candidates", "split_rows", "depth", "cdiv", "next_pow2",
           "COMBINE_BLOCK", "COLS_COMBINE_BLOCK", "FULL_SHAPES", "ROW_TILE"]

COMBINE_BLOCK = 1024  # lanes of the full sum's second stage
COLS_COMBINE_BLOCK = 1024  # columns per program of the two-pass column sum's second pass
FULL_SHAPES = ((4096, 8), (8192, 4), (2048, 16))  # (BLOCK, ITERS) of the two-stage full sum
ROW_TILE = 4096  # elements of a row-sum tile: BLOCK_N = min(next_pow2(n), ROW_TILE / ROWS)
COLS_ONE_PASS = ((1, 1024, 4), (2, 1024, 8), (4, 512, 4), (8, 256, 4), (8, 512, 8), (16, 256, 8), (32, 128, 4),
                 (32, 256, 8))  # (BR, BC, num_warps)
COLS_TWO_PASS = ((8, 256, 4), (16, 256, 8), (32, 128, 4))


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(v: int) -> int:
    return 1 << max(0, (int(v) - 1).bit_length())


@dataclass(frozen=True)
class Config:
    """One point of a sweep. kind "full": (a, b) = (BLOCK, ITERS); "rows": (ROWS, BLOCK_N); "cols": (BR, BC);
    "cols_split": (BR, BC) and ``splits`` row splits (the number actually used: :func:`split_rows`)."""

    kind: str
    a: int
    b: int
    num_warps: int
    splits: int = 1

    @property
    def label(self) -> str:
        names = {"full": ("block", "iters"), "rows": ("rows", "block_n"), "cols": ("br", "bc"),
                 "cols_split": ("br", "bc")}[self.kind]
        s = f"{self.kind} {names[0]}={self.a} {names[1]}={self.b} warps={self.num_warps}"
        return s + (f" splits={self.splits}" if self.kind == "cols_split" else "")


@dataclass(frozen=True)
class Problem:
    """What a kernel sees: form "full" (``m`` contiguous elements), "rows" (``m`` rows of ``n`` contiguous elements,
    row stride ``ld``) or "cols" (``m`` rows of ``n`` contiguous columns, row stride ``ld``, reduced over the rows);
    ``shape`` is the result's shape. Strides are in elements."""

    form: str
    m: int
    n: int
    ld: int
    shape: tuple[int, ...]


def _contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    expect = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expect:
            return False
        expect *= size
    return True


def problem_of(shape: Sequence[int], strides: Sequence[int], axis: Optional[int]) -> Problem:
    """The kernel problem of summing an array (``shape``, ``strides`` in elements) over ``axis``: None (all axes; a
    contiguous array), the last axis (unit stride along it; one row stride, so 2-D or contiguous) or axis 0 of a
    2-D array with contiguous columns. Raises ValueError for anything else (the study records it, times the rest)."""
    shape, strides = tuple(int(s) for s in shape), tuple(int(s) for s in strides)
    nd = len(shape)
    if axis is None:
        if not _contiguous(shape, strides):
            raise ValueError("the Triton full sum takes contiguous arrays")
        return Problem("full", math.prod(shape), 1, 1, ())
    if nd == 0 or not -nd <= axis < nd:
        raise ValueError(f"axis {axis} is out of range for a {nd}-D array")
    ax = axis % nd
    if ax == nd - 1:
        if shape[-1] > 1 and strides[-1] != 1:
            raise ValueError("the Triton row sum needs a unit stride along the last axis")
        if nd > 2 and not _contiguous(shape, strides):
            raise ValueError("the Triton row sum takes contiguous arrays of more than 2 dimensions")
        ld = strides[-2] if nd == 2 else shape[-1]
        return Problem("rows", math.prod(shape[:-1]), shape[-1], ld, shape[:-1])
    if nd == 2 and ax == 0:
        if shape[1] > 1 and strides[1] != 1:
            raise ValueError("the Triton column sum needs contiguous columns")
        return Problem("cols", shape[0], shape[1], strides[0], (shape[1],))
    raise ValueError(f"the Triton competitors sum over all axes, the last axis or axis 0 of a 2-D array, not axis "
                     f"{axis} of a {nd}-D array")


def split_rows(r: int, br: int, splits: int) -> tuple[int, int]:
    """(rows per split, a positive multiple of ``br``; the number of splits that then cover ``r`` rows, none empty).
    Split ``s`` owns rows ``[s * rows_per, (s + 1) * rows_per)``: disjoint, covering every row exactly once."""
    rows_per = max(1, cdiv(cdiv(max(r, 1), max(splits, 1)), br)) * br
    return rows_per, max(1, cdiv(r, rows_per))


def candidates(p: Problem, sms: int) -> list[Config]:
    """The sweep of one problem on a GPU of ``sms`` multiprocessors (see :mod:`experiments.triton_kernels`)."""
    if p.form == "full":
        return [Config("full", b, i, w) for b, i in FULL_SHAPES for w in (4, 8)]
    if p.form == "rows":
        rows = [r for r in (256, 128, 64, 32) if cdiv(p.m, r) >= 2 * sms]
        if not rows:  # few long rows: fewer rows per program so that every SM gets work
            rows = [r for r in (16, 8, 4, 2, 1) if cdiv(p.m, r) >= 2 * sms][:2] or [1]
        out = []
        for r in rows:
            block_n = max(1, min(next_pow2(max(p.n, 1)), ROW_TILE // r))
            out += [Config("rows", r, block_n, w) for w in (4, 8)]
        return out
    r, c = p.m, p.n
    out = [Config("cols", br, bc, w) for br, bc, w in COLS_ONE_PASS if br <= next_pow2(max(r, 1))]
    for br, bc, w in COLS_TWO_PASS:
        blocks = cdiv(c, bc)
        if blocks >= 2 * sms or r < 4 * br:
            continue  # enough column blocks already, or too few rows to split
        for per_sm in (4, 16):
            s = min(next_pow2(cdiv(per_sm * sms, blocks)), cdiv(r, br))
            if s >= 2:
                cfg = Config("cols_split", br, bc, w, split_rows(r, br, s)[1])
                if cfg.splits >= 2 and cfg not in out:
                    out.append(cfg)
    return out


def depth(cfg: Config, p: Problem) -> int:
    """An upper bound on the number of fp32 roundings any input element goes through on its way to the result (lane
    accumulation, ``tl.sum`` counted as if it added its whole tile one by one, the second pass): the error is at most
    gamma(depth) * sum|x| (plus the rounding of the result)."""
    if p.form == "full":
        progs = cdiv(max(p.m, 1), cfg.a * cfg.b)
        return cfg.b + cfg.a + cdiv(progs, COMBINE_BLOCK) + COMBINE_BLOCK
    if p.form == "rows":
        return cdiv(max(p.n, 1), cfg.b) + cfg.a * cfg.b
    if cfg.kind == "cols":
        return cdiv(max(p.m, 1), cfg.a) + cfg.a * cfg.b
    rows_per, splits = split_rows(p.m, cfg.a, cfg.splits)
    return cdiv(rows_per, cfg.a) + cfg.a * cfg.b + splits
