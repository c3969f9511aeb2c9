"""The shared planning helpers of tcreduce/plans/_common.py (CPU only): how streamed rows are spread over warps."""

from __future__ import annotations

import pytest

from tcreduce.plans._common import WorkSplit, cdiv, spread_rows


@pytest.mark.parametrize("rows,chunks,per_step,max_steps", [
    (1 << 14, 64, 4, 1), (1 << 14, 64, 4, 2), (1 << 16, 16, 2, 4), (4500, 9, 4, 1), (100, 1000, 4, 1),
    (1 << 20, 5, 4, 1), (7, 3, 2, 2)])
def test_spread_rows_bounds_the_steps_of_a_warp(rows, chunks, per_step, max_steps):
    warps = 8
    work = spread_rows(WorkSplit(1, 1, cdiv(rows, warps)), rows, chunks, per_step, warps, max_steps)
    wpt = work.warps_per_tile
    assert wpt & (wpt - 1) == 0 and 1 <= wpt <= warps and work.splits == 1
    steps = cdiv(cdiv(chunks, wpt), per_step)  # warp q takes chunks q, q + wpt, ...: per_step of them per step
    if wpt < warps:  # the bound holds unless the whole block already shares the row
        assert steps <= max_steps
    if wpt > 1:  # the fewest warps that meet it
        assert cdiv(cdiv(chunks, wpt // 2), per_step) > max_steps
    assert work.grid_x == cdiv(rows, warps // wpt)  # one pass: every row group once


def test_spread_rows_leaves_split_or_disabled_work_alone():
    split = WorkSplit(8, 5, 40)
    assert spread_rows(split, 40, 10_000, 4, 8, 1) is split
    work = WorkSplit(1, 1, 100)
    assert spread_rows(work, 800, 64, 4, 8, 0) is work
    assert spread_rows(work, 800, 4, 4, 8, 1) is work  # one step already
