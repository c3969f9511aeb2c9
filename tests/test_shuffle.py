"""Method "shuffle" (kernels/shuffle.cu, tcreduce/plans/shuffle.py).

CPU: the planner (grids fill the device, splits for few long rows or few columns, 16-byte loads only where legal),
the chain-length bound, a NumPy replay of the documented order of additions, and every kernel the planner can name
compiled for sm_80 and sm_90 without warnings or spills.

GPU (``-m gpu``): full, last-axis and other-axis sums of fp16 and fp32 over awkward sizes and views against float64
references, with tolerances from the plan's error bound (gamma_L * sum|x|, L from :func:`chain_length`); results
bitwise equal to the NumPy replay of the kernel comments (what the emulator twin will do); outputs poisoned with NaN;
ten repeated calls bitwise equal; NaN and Inf propagation as NumPy's float64 sum.
"""

from __future__ import annotations

import re

from typing import Any

import numpy as np
import pytest

from tcreduce import registry
from tcreduce._device import KNOWN_GPUS
from tcreduce._layout import Cols, Flat, Layout, Rows, host_problem_data, normalize_axes, plan_layout
from tcreduce.emulate.shuffle import replay
from tcreduce._plan import DeviceSpec, Plan, param_dict
from tcreduce.plans import shuffle as sh
from tcreduce.plans._common import flagged_counters
from tcreduce.testing import patched_plans

H100, A100, H200 = KNOWN_GPUS["H100"], KNOWN_GPUS["A100"], KNOWN_GPUS["H200"]
U = 2.0 ** -24


# ============================================================================================== bound helpers
def gamma(n: int) -> float:
    """gamma_n = n u / (1 - n u) for fp32 round to nearest."""
    return n * U / (1 - n * U)


def tolerance(plan: Plan, abs_sum: np.ndarray, out_dtype: str) -> np.ndarray:
    """Per-output absolute error bound of ``plan``: gamma_L * sum|x|, plus the final rounding to ``out_dtype``."""
    b = gamma(sh.chain_length(plan)) * np.asarray(abs_sum, dtype=np.float64)
    if out_dtype == "float16":
        b = b + 2.0 ** -11 * (np.asarray(abs_sum, dtype=np.float64) + b)
    return b


# ============================================================================================== NumPy replay
# The emulator twin (tcreduce/emulate/shuffle.py) transcribes the order comments of kernels/shuffle.cu.
def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def problem_elements(xh: np.ndarray, layout: Layout) -> np.ndarray:
    """The problem's elements of a NumPy view (same offsets as the GPU view), shaped (n,), (m, k) or (a, r, b)."""
    return host_problem_data(xh, layout)


# ============================================================================================== CPU: registration
def test_registered():
    m = registry.get("shuffle")
    assert m.dtypes == ("float16", "float32", "bfloat16", "float8_e4m3fn", "float8_e5m2")
    assert m.deterministic and m.emulated and m.runner is None
    assert "seed 003" in m.reference and "reduce7" in m.reference


def test_float64_input_is_refused():
    with pytest.raises(TypeError, match="float64"):
        registry.get("shuffle").plan(Flat(100), "float64", "float32", H100)


def test_unknown_problem_is_refused():
    with pytest.raises(TypeError):
        sh.plan_shuffle(object(), "float32", "float32", H100)  # type: ignore[arg-type]


# ============================================================================================== CPU: planner
@pytest.mark.parametrize("dev", [H100, A100], ids=["H100", "A100"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_flat_grid_fills_the_device(dev, dtype):
    """The resident grid-stride walk (arrays too small for a one-pass walk on the GPU's FLAT_ROUNDS, if any)."""
    unroll, minb = sh.FLAT_TUNING[dtype]
    cap = dev.sm_count * minb
    big = sh.plan_shuffle(Flat(1 << 26), dtype, "float32", dev)
    p = param_dict(big)
    assert p["grid"] == cap and big.launches[0].grid == (cap, 1, 1)
    assert big.workspace_floats == 0 and big.counters == 2 + 2 * cap  # a counter, a pad, a 64-bit slot per block
    assert len(big.launches) == 1
    small = sh.plan_shuffle(Flat(1000), dtype, "float32", dev)
    assert param_dict(small)["grid"] == 1 and small.workspace_floats == 0 and small.counters == 0
    mid = sh.plan_shuffle(Flat(1 << 20), dtype, "float32", dev)
    pm = param_dict(mid)
    assert 1 < pm["grid"] <= cap
    assert pm["unroll"] == unroll and pm["minb"] == minb
    assert pm["nv"] >= pm["grid"] * sh.BLOCK * unroll // 2  # every thread has work


@pytest.mark.parametrize("dtype,align,head", [("float16", 0, 0), ("float16", 2, 7), ("float16", 14, 1),
                                              ("float32", 4, 3), ("float32", 12, 1)])
def test_flat_misaligned_head(dtype, align, head):
    plan = sh.plan_shuffle(Flat(1001, align), dtype, "float32", H100)
    p = param_dict(plan)
    assert p["aligned"] == (align == 0)
    assert p["head"] == head
    vec = 16 // (2 if dtype == "float16" else 4)
    assert p["head"] + p["nv"] * vec + p["tail"] == 1001 and 0 <= p["tail"] < vec
    assert ("true" if align == 0 else "false") in plan.launches[0].kernel


def test_flat_head_never_exceeds_n():
    p = param_dict(sh.plan_shuffle(Flat(3, 2), "float16", "float32", H100))
    assert (p["head"], p["nv"], p["tail"]) == (3, 0, 0)


def test_not_element_aligned_is_refused():
    with pytest.raises(ValueError, match="element-aligned"):
        sh.plan_shuffle(Flat(100, 2), "float32", "float32", H100)


@pytest.mark.parametrize("dtype,k,group", [("float16", 1, 1), ("float16", 8, 1), ("float16", 9, 2), ("float16", 16, 2),
                                           ("float16", 17, 4), ("float16", 64, 8), ("float16", 256, 32),
                                           ("float32", 16, 4), ("float32", 64, 16), ("float32", 128, 32)])
def test_rows_group_covers_short_rows(dtype, k, group):
    plan = sh.plan_shuffle(Rows(1 << 20, k, k), dtype, "float32", H100)
    p = param_dict(plan)
    assert p["group"] == group and p["splits"] == 1
    vec = p["vec"]
    assert p["group"] * vec >= k  # one pass of the group covers the row
    assert plan.workspace_floats == 0 and plan.counters == 0
    # one pass over the rows (ONE_PASS_ROWS): every row once, no grid stride
    assert p["grid"] == _cdiv(1 << 20, p["unroll"] * (sh.BLOCK // group))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_rows_few_long_rows_are_split(dtype):
    cap = H100.sm_count * sh.BLOCKS_PER_SM["rows"]
    plan = sh.plan_shuffle(Rows(256, 1 << 20, 1 << 20), dtype, "float32", H100)
    p = param_dict(plan)
    assert p["group"] == sh.BLOCK and p["splits"] > 1
    items = 256 * p["splits"]
    assert items / (cap * _cdiv(items, cap)) >= 0.9  # the GPU is evenly filled
    assert plan.workspace_floats == 256 * p["splits"] and plan.counters == 256
    assert plan.launches[0].args[-1] == p["splits"]
    # every thread of a split still has several chunks
    assert p["chunks"] // (p["splits"] * sh.BLOCK) >= sh.MIN_CHUNKS_PER_THREAD
    # many long rows: no split
    many = param_dict(sh.plan_shuffle(Rows(1 << 14, 1 << 16, 1 << 16), dtype, "float32", H100))
    assert many["group"] == sh.BLOCK and many["splits"] == 1


def test_rows_medium_rows_use_a_warp_or_a_group():
    """Rows of 33-255 chunks get a warp; plentiful rows of 256-1023 chunks a group of 64 or 128 threads (fp16, bf16,
    fp32: ROWS_GROUP_CHUNKS_PER_THREAD), fp8 a warp."""
    def plan(k: int, dtype: str) -> dict:
        return param_dict(sh.plan_shuffle(Rows(1 << 16, k, k), dtype, "float32", H100))

    p128 = plan(1024, "float16")  # 128 chunks
    assert (p128["group"], p128["splits"]) == (32, 1)
    assert plan(2048, "float16")["group"] == 64 and plan(4096, "float16")["group"] == 128
    assert plan(1024, "float32")["group"] == 64 and plan(4000, "float32")["group"] == 128
    assert plan(4096, "float8_e4m3fn")["group"] == 32


@pytest.mark.parametrize("dtype,isz", [("float16", 2), ("float32", 4)])
def test_rows_aligned_flag(dtype, isz):
    vec = 16 // isz
    assert param_dict(sh.plan_shuffle(Rows(100, 64, 64), dtype, "float32", H100))["aligned"]
    assert param_dict(sh.plan_shuffle(Rows(100, 64, 64 + vec), dtype, "float32", H100))["aligned"]
    assert not param_dict(sh.plan_shuffle(Rows(100, 63, 63), dtype, "float32", H100))["aligned"]  # ld*isz % 16
    assert not param_dict(sh.plan_shuffle(Rows(100, 64, 65), dtype, "float32", H100))["aligned"]
    assert not param_dict(sh.plan_shuffle(Rows(100, 64, 64, isz), dtype, "float32", H100))["aligned"]  # x[:, 1:]


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_cols_many_columns(dtype):
    """[16, 2^24] axis 0: one thread per column chunk, no split, the grid fills the device."""
    plan = sh.plan_shuffle(Cols(1, 16, 1 << 24, 0, 1 << 24), dtype, "float32", H100)
    p = param_dict(plan)
    assert p["ct"] == sh.BLOCK and p["splits"] == 1 and p["aligned"]
    assert p["grid"] == p["strips"]  # one pass over the column strips (ONE_PASS_COLS)
    assert plan.workspace_floats == 0 and plan.counters == 0


def test_cols_one_item_per_block_and_its_tuning(monkeypatch):
    """Plans with no splits and one pass launch shuffle_cols<..., ONE_ITEM = true> with COLS_ONE_ITEM_TUNING's rows in
    flight and blocks per SM (the H200's own for fp16 and bf16); split plans and resident grids keep the general
    kernel at (COLS_UNROLL, BLOCKS_PER_SM["cols"]). (COLS_TILE_AT_ONCE, which takes over from 64 rows on an H200, is
    off here: test_cols_tile_at_once.)"""
    with patched_plans(sh, dict(COLS_TILE_AT_ONCE={})):
        _one_item_and_its_tuning(monkeypatch)


def test_cols_tile_at_once():
    """COLS_TILE_AT_ONCE (H200: 16-bit and fp32 data of 64-512 rows): first-axis sums with many column chunks run the
    one-item kernel in strips of max(16, BLOCK * rows in flight / rows) chunks at the tile's rows in flight and
    blocks per SM; fp8, fewer or more rows, split plans and an H100 plan as before; kernel_names lists the kernels.
    A patched tile over any number of rows plans strips of 16 chunks from BLOCK * rows in flight / 16 rows (5458a8e
    failed to plan from 2049 rows)."""
    u, m = 8, 4
    for dtype, isz in (("float32", 4), ("float16", 2), ("bfloat16", 2)):
        assert sh.FAMILY_TUNING["H200"]["COLS_TILE_AT_ONCE"][isz] == (64, 512, u, m)
        for r, ct in ((64, 32), (96, 16), (128, 16), (256, 16), (512, 16)):
            n = (1 << 29) // isz // r
            prob = Cols(1, r, n, 0, n)
            p = param_dict(sh.plan_shuffle(prob, dtype, "float32", H200))
            assert (p["ct"], p["unroll"], p["minb"], p["splits"], p["grid"]) == (ct, u, m, 1, _cdiv(n // (16 // isz),
                                                                                                     ct)), (r, p)
            name = sh.plan_shuffle(prob, dtype, "float32", H200).launches[0].kernel
            assert name.split(":")[-1] in sh.kernel_names(dtype, "float32")
            with patched_plans(sh, dict(COLS_TILE_AT_ONCE={})):
                assert param_dict(sh.plan_shuffle(prob, dtype, "float32", H200))["ct"] == sh.BLOCK
            assert param_dict(sh.plan_shuffle(prob, dtype, "float32", H100))["ct"] == sh.BLOCK
        # too few rows; too few column chunks for strips of BLOCK alone (splits or wider); more rows than measured,
        # with many column chunks (2^21-2^22 elements per row)
        many = 132 * 2 * sh.BLOCK * 16 // isz
        for r, n in ((16, (1 << 29) // isz // 16), (32, (1 << 29) // isz // 32), (1024, (1 << 29) // isz // 1024),
                     (513, many), (2049, many), (4099, many + 3)):
            with patched_plans(sh, dict(COLS_TILE_AT_ONCE={})):
                before = sh.plan_shuffle(Cols(1, r, n, 0, n), dtype, "float32", H200)
            assert sh.plan_shuffle(Cols(1, r, n, 0, n), dtype, "float32", H200) == before, (r, n)
        with patched_plans(sh, dict(COLS_TILE_AT_ONCE={isz: (64, 1 << 40, u, m)})):
            for r, ct in ((2048, 16), (2049, 16), (1 << 20, 16)):
                p = param_dict(sh.plan_shuffle(Cols(1, r, many, 0, many), dtype, "float32", H200))
                assert (p["ct"], p["unroll"], p["minb"], p["splits"]) == (ct, u, m, 1), (r, p)
    fp8 = Cols(1, 128, 1 << 22, 0, 1 << 22)
    assert param_dict(sh.plan_shuffle(fp8, "float8_e4m3fn", "float32", H200))["ct"] == sh.BLOCK


def _one_item_and_its_tuning(monkeypatch):
    many = Cols(1, 128, 1 << 21, 0, 1 << 21)
    for dtype in ("float16", "bfloat16"):
        h100, h200 = (param_dict(sh.plan_shuffle(many, dtype, "float32", d)) for d in (H100, H200))
        assert (h100["unroll"], h100["minb"]) == (sh.COLS_UNROLL, sh.BLOCKS_PER_SM["cols"])
        assert (h200["unroll"], h200["minb"]) == sh.FAMILY_TUNING["H200"]["COLS_ONE_ITEM_TUNING"][2] == (4, 4)
        assert {k: v for k, v in h100.items() if k not in ("unroll", "minb")} == \
            {k: v for k, v in h200.items() if k not in ("unroll", "minb")}
    name = sh.plan_shuffle(many, "float16", "float32", H200).launches[0].kernel
    assert name == "shuffle_cols<__half, float, 256, 4, 256, true, 4, true, 1>"  # evict-first loads from 64 rows
    # strips that the general kernel's blocks hold at once (256 on 132 SMs x 2) keep its rows in flight and blocks
    # per SM, through the one-item kernel; more strips take the tuning
    for r, want in ((512, (8, 2)), (16384, (8, 2)), (1024, (4, 4)), (2048, (4, 4))):
        p = param_dict(sh.plan_shuffle(Cols(1, r, (1 << 28) // r, 0, (1 << 28) // r), "float16", "float32", H200))
        assert (p["unroll"], p["minb"]) == want and p["splits"] == 1, (r, p)
    split = sh.plan_shuffle(Cols(1, 1 << 24, 16, 0, 16), "float16", "float32", H200)
    assert param_dict(split)["splits"] > 1 and split.launches[0].kernel.endswith(", 8, 2, true, 2, false, 1>")
    # fp32 has no tuning of its own: the one-item kernel at the module's defaults (loads evict-first from 64 rows)
    assert sh.plan_shuffle(many, "float32", "float32", H200).launches[0].kernel.endswith(
        ", 8, 256, true, 2, true, 1>")
    monkeypatch.setattr(sh, "ONE_PASS_COLS", False)  # a resident grid strides over the strips: the general kernel
    assert sh.plan_shuffle(many, "float16", "float32", H200).launches[0].kernel.endswith(
        ", 8, 256, true, 2, false, 1>")


def test_short_rows_and_general_columns_take_their_tuning():
    """ROWS_SHORT_TUNING (keyed by bytes per element and chunks per row) sets the rows in flight and blocks per SM of
    rows that G <= 32 threads take, and COLS_TUNING (keyed by bytes per element) those of the general first-axis
    kernel and of the one-item kernel where COLS_ONE_ITEM_TUNING lacks the size; other keys, longer rows and other
    formats plan as before, and kernel_names lists every name the tuned plans launch."""
    rows32, rows48 = Rows(1 << 20, 32, 32), Rows(1 << 20, 48, 48)  # fp8: 2 and 3 chunks per row
    few_cols = Cols(1, 1 << 20, 512, 0, 512)  # fp8: 32 column chunks, so the reduced axis is split
    before = {(prob, dt): sh.plan_shuffle(prob, dt, "float32", H100)
              for prob in (rows32, rows48, few_cols) for dt in ("float8_e4m3fn", "float16")}
    with patched_plans(sh, dict(ROWS_SHORT_TUNING={(1, 2): (8, 3)}, COLS_TUNING={1: (16, 3)})):
        p = param_dict(sh.plan_shuffle(rows32, "float8_e4m3fn", "float32", H100))
        assert (p["unroll"], p["minb"], p["group"]) == (8, 3, 2)
        assert p["grid"] == _cdiv(rows32.m, 8 * (sh.BLOCK // 2))
        split = sh.plan_shuffle(few_cols, "float8_e4m3fn", "float32", H100)
        q = param_dict(split)
        assert (q["unroll"], q["minb"]) == (16, 3) and q["splits"] > 1
        assert split.launches[0].kernel == "shuffle_cols<__nv_fp8_e4m3, float, 256, 16, 16, true, 3, false>"
        one_item = sh.plan_shuffle(Cols(1, 128, 1 << 22, 0, 1 << 22), "float8_e4m3fn", "float32", H100)
        assert one_item.launches[0].kernel == "shuffle_cols<__nv_fp8_e4m3, float, 256, 16, 256, true, 3, true>"
        names = set(sh.kernel_names("float8_e4m3fn", "float32"))
        assert {sh.plan_shuffle(rows32, "float8_e4m3fn", "float32", H100).launches[0].kernel,
                split.launches[0].kernel, one_item.launches[0].kernel} <= names
        for key, plan in before.items():  # untouched: another chunk count, another format
            if key not in ((rows32, "float8_e4m3fn"), (few_cols, "float8_e4m3fn")):
                assert sh.plan_shuffle(*key, "float32", H100) == plan, key


def test_h200_short_fp8_rows_take_six_blocks_per_sm():
    """An H200 plans fp8 rows of 2-32 chunks (32-512 elements) with 4 rows in flight and 6 blocks per SM (session 36's
    sweep, FAMILY_TUNING); rows of one chunk, 16-bit rows and an H100 keep (UNROLL, BLOCKS_PER_SM["rows"])."""
    default = (sh.UNROLL, sh.BLOCKS_PER_SM["rows"])
    for k, dt, device, want in ((32, "float8_e4m3fn", H200, (4, 6)), (48, "float8_e4m3fn", H200, (4, 6)),
                                (512, "float8_e4m3fn", H200, (4, 6)), (16, "float8_e4m3fn", H200, default),
                                (32, "float8_e4m3fn", H100, default), (32, "float16", H200, default)):
        p = param_dict(sh.plan_shuffle(Rows(1 << 20, k, k), dt, "float32", device))
        assert p["group"] <= 32 and (p["unroll"], p["minb"]) == want, (k, dt, device.name)


def test_cols_evict_first_loads_from_the_tuned_rows(monkeypatch):
    """COLS_EVICT_FIRST_MIN_ROWS: an H200 loads aligned first-axis sums of 64 rows or more (fp8: 128) evict-first
    (LOAD 1, the last template argument); fewer rows, misaligned views and every GPU without the tuning (an H100)
    keep ld.global.nc. The loads carry the same values: the plan's order parameters do not change."""
    floors = sh.FAMILY_TUNING["H200"]["COLS_EVICT_FIRST_MIN_ROWS"]
    assert floors == {2: 64, 4: 64, 1: 128}
    for dtype in ("float16", "bfloat16", "float32", "float8_e4m3fn"):
        floor = floors[sh.ITEMSIZE[dtype]]
        for r in (floor // 2, floor - 1, floor, 4 * floor, 1 << 20):
            prob = Cols(1, r, (1 << 24) // r, 0, (1 << 24) // r)
            name = sh.plan_shuffle(prob, dtype, "float32", H200).launches[0].kernel
            assert name.endswith(", 1>") == (r >= floor), (dtype, r, name)
            assert not sh.plan_shuffle(prob, dtype, "float32", H100).launches[0].kernel.endswith(", 1>")
            misaligned = Cols(1, r, (1 << 24) // r, 0, (1 << 24) // r, sh.ITEMSIZE[dtype])
            assert not sh.plan_shuffle(misaligned, dtype, "float32", H200).launches[0].kernel.endswith(", 1>")
    prob = Cols(1, 4 * floor, 1 << 16, 0, 1 << 16)
    hinted = sh.plan_shuffle(prob, "float16", "float32", H200)
    monkeypatch.setitem(sh.FAMILY_TUNING["H200"], "COLS_EVICT_FIRST_MIN_ROWS", {})
    plain = sh.plan_shuffle(prob, "float16", "float32", H200)
    assert hinted.launches[0].kernel == plain.launches[0].kernel[:-1] + ", 1>"
    assert param_dict(hinted) == param_dict(plain) and hinted.launches[0].args == plain.launches[0].args


def test_rows_evict_first_loads_where_tuned():
    """ROWS_EVICT_FIRST_MIN_CHUNKS: an H200 loads aligned last-axis sums of fp16, bf16 and fp32 rows of 16 chunks or
    more evict-first (LOAD 1, the last template argument), at every group size; shorter rows, fp8, misaligned rows and
    an H100 keep ld.global.nc; the same launch otherwise (fp32 rows of 1024-2047 chunks aside, which an H200 gives
    groups of threads: test_rows_of_1024_chunks_by_family; fp8 rows of 2-32 chunks, ROWS_SHORT_TUNING)."""
    assert sh.FAMILY_TUNING["H200"]["ROWS_EVICT_FIRST_MIN_CHUNKS"] == {2: 16, 4: 16}
    for dtype in ("float16", "bfloat16", "float32", "float8_e4m3fn"):
        vec = 16 // sh.ITEMSIZE[dtype]
        for m, k in ((1 << 20, 16), (1 << 20, 32), (1 << 18, 64), (1 << 18, 128), (1 << 16, 1024), (1 << 14, 8192),
                     (64, 1 << 20)):
            hinted = sh.plan_shuffle(Rows(m, k, k), dtype, "float32", H200)
            plain = sh.plan_shuffle(Rows(m, k, k), dtype, "float32", H100)
            assert hinted.launches[0].kernel.endswith(", 1>") == (dtype != "float8_e4m3fn" and k >= 16 * vec), \
                (dtype, k)
            assert not plain.launches[0].kernel.endswith(", 1>")
            assert not sh.plan_shuffle(Rows(m, k - 1, k - 1), dtype, "float32", H200).launches[0].kernel.endswith(
                ", 1>")
            if (sh.ITEMSIZE[dtype], k // vec) in sh.FAMILY_TUNING["H200"]["ROWS_SHORT_TUNING"]:
                continue  # short fp8 rows: another launch geometry (test_h200_short_fp8_rows_take_six_blocks_per_sm)
            assert param_dict(hinted) == param_dict(plain) and hinted.launches[0].args == plain.launches[0].args


def test_rows_of_1024_chunks_by_family():
    """ROWS_BLOCK_MIN_CHUNKS: rows of 1024 chunks get a block each on an H100 (fp16, bf16, fp32) and, on an H200,
    for 16-bit data only: plentiful fp32 rows of 4096 there go to groups of 128 threads (ROWS_GROUP_CHUNKS_PER_THREAD),
    few of them still to blocks."""
    assert sh.FAMILY_TUNING["H200"]["ROWS_BLOCK_MIN_CHUNKS"] == {2: 4 * sh.BLOCK}
    for dtype, k in (("float32", 4096), ("float16", 8192), ("bfloat16", 8192)):
        for dev, want in ((H100, sh.BLOCK), (H200, 128 if dtype == "float32" else sh.BLOCK)):
            assert param_dict(sh.plan_shuffle(Rows(1 << 15, k, k), dtype, "float32", dev))["group"] == want
        assert param_dict(sh.plan_shuffle(Rows(100, k, k), dtype, "float32", H200))["group"] == sh.BLOCK


def test_cols_one_item_tuning_replays_the_same_bits(rng):
    """Where the strips do not depend on the blocks per SM (enough column chunks for strips of BLOCK), the H200's
    one-item tuning changes only launch geometry: its replay equals the H100 plan's bit for bit. (Elsewhere its larger
    cap may choose other strips, another order that the twin follows.)"""
    r, b = 21, 8 * 132 * 512 + 5  # more strips of BLOCK chunks than 2 blocks per SM hold, a partial last chunk
    x = rng.standard_normal((1, r, b)).astype(np.float16)
    plans = [sh.plan_shuffle(Cols(1, r, b, 0, b), "float16", "float32", d) for d in (H100, H200)]
    assert [param_dict(pl)["minb"] for pl in plans] == [2, 4] and {param_dict(pl)["ct"] for pl in plans} == {sh.BLOCK}
    outs = [replay(pl, x) for pl in plans]
    np.testing.assert_array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_cols_few_columns_are_split(dtype):
    """[2^24, 16] axis 0: 16 columns: the reduced axis is split over the block and over blocks."""
    cap = H100.sm_count * sh.BLOCKS_PER_SM["cols"]
    plan = sh.plan_shuffle(Cols(1, 1 << 24, 16, 0, 16), dtype, "float32", H100)
    p = param_dict(plan)
    vec = p["vec"]
    assert p["ct"] == 16 // vec and p["strips"] == 1
    assert p["splits"] >= 0.9 * cap
    assert plan.workspace_floats == p["strips"] * p["ct"] * vec * p["splits"] and plan.counters == 1


def test_cols_aligned_flag():
    assert param_dict(sh.plan_shuffle(Cols(4, 100, 64, 6400, 64), "float16", "float32", H100))["aligned"]
    assert not param_dict(sh.plan_shuffle(Cols(4, 100, 63, 6300, 63), "float16", "float32", H100))["aligned"]
    assert not param_dict(sh.plan_shuffle(Cols(4, 100, 64, 6401, 64), "float16", "float32", H100))["aligned"]
    assert param_dict(sh.plan_shuffle(Cols(1, 100, 64, 0, 64), "float16", "float32", H100))["aligned"]
    assert not param_dict(sh.plan_shuffle(Cols(1, 100, 64, 0, 64, 2), "float16", "float32", H100))["aligned"]


SWEEP = ([Flat(n, a) for n in (0, 1, 17, 1 << 20, 1 << 28, (1 << 31) + 3) for a in (0, 4, 8)]
         + [Rows(m, k, ld, a) for (m, k, ld) in ((1, 1, 1), (1 << 24, 16, 16), (1000, 17, 17), (1 << 16, 4096, 4096),
                                                  (16, 1 << 20, 1 << 20), (3, 1000, 1000), (256, 64, 72),
                                                  (1 << 20, 256, 256), (5000, 300, 304), (600, 70000, 70000))
            for a in (0, 4)]
         + [Cols(a, r, b, sa, sr, al) for (a, r, b, sa, sr) in ((1, 16, 1 << 24, 0, 1 << 24), (1, 1 << 24, 16, 0, 16),
                                                                 (64, 1000, 96, 96000, 96), (3, 5, 7, 35, 7),
                                                                 (1, 8192, 8192, 0, 8192), (7, 100000, 3, 300000, 3),
                                                                 (1, 4096, 100, 0, 104))
            for al in (0, 4)])


@pytest.mark.parametrize("dev", [H100, A100, H200], ids=["H100", "A100", "H200"])
@pytest.mark.parametrize("in_dt", ["float16", "float32"])
@pytest.mark.parametrize("out_dt", ["float16", "float32", "float64"])
def test_plans_are_consistent(dev, in_dt, out_dt):
    names = set(sh.kernel_names(in_dt, out_dt))
    for prob in SWEEP:
        plan = sh.plan_shuffle(prob, in_dt, out_dt, dev)
        assert plan == sh.plan_shuffle(prob, in_dt, out_dt, dev) and hash(plan)
        (ln,) = plan.launches
        p = param_dict(plan)
        assert ln.kernel in names, ln.kernel
        cap = dev.sm_count * p["minb"]
        if p["kernel"] == "rows":  # one pass over the rows, or row splits with a block per row (ONE_PASS_ROWS)
            want = (_cdiv(prob.m, p["unroll"] * (sh.BLOCK // p["group"])) if p["group"] <= 32
                    else _cdiv(prob.m, sh.BLOCK // p["group"]) * p["splits"])
            assert ln.grid[0] == max(1, want) if sh.ONE_PASS_ROWS else 1 <= ln.grid[0] <= cap
        elif p["kernel"] == "cols":  # one pass over the (strip, split) items (ONE_PASS_COLS)
            items = p["strips"] * p["splits"]
            assert ln.grid[0] == max(1, items) if sh.ONE_PASS_COLS else 1 <= ln.grid[0] <= cap
        elif p.get("rounds"):  # a one-pass full sum: every block its rounds of BLOCK * unroll chunks
            assert ln.grid[0] == max(1, _cdiv(p["nv"], sh.BLOCK * p["unroll"] * p["rounds"])) and ln.grid[0] > cap
            groups = _cdiv(ln.grid[0], sh.BLOCK)
            assert plan.counters == flagged_counters(ln.grid[0], groups)
        else:
            assert 1 <= ln.grid[0] <= cap
        assert ln.block == (sh.BLOCK, 1, 1)
        assert _minb(ln.kernel) == p["minb"], ln.kernel
        if p.get("splits", 1) > 1:
            assert plan.workspace_floats > 0 and plan.counters > 0
        if p["kernel"] != "flat":
            assert ln.args[-1] == p["splits"]
        length = sh.chain_length(plan)
        assert 1 <= length <= prob.length + 64  # never worse than one running sum plus the folds
        if prob.length >= 1 << 20 and prob.outputs == 1:
            assert length * 64 < prob.length  # a big full sum is spread over many short chains


def _minb(kernel: str) -> int:
    """The MINB template argument of a shuffle kernel name: the last but cols' ONE_ITEM and LOAD, rows' LOAD and
    flat's ROUNDS."""
    pattern = r", (\d+)(, \d+)?>$" if kernel.startswith("shuffle_flat") else r", (\d+)(, (true|false))?(, 1)?>$"
    return int(re.search(pattern, kernel).group(1))


# ============================================================================================== CPU: replay and bound
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("prob", [Flat(100003, 0), Flat(100003, 4), Flat(1 << 20, 0), Rows(300, 17, 17),
                                  Rows(64, 5000, 5000), Rows(3, 300000, 300000), Cols(1, 1000, 100, 0, 100),
                                  Cols(3, 20000, 5, 100000, 5), Cols(2, 7, 4000, 28000, 4000)],
                         ids=lambda p: repr(p))
def test_replay_is_within_the_bound(prob, dtype, rng):
    """The replay of the documented order, on the CPU, is within gamma_L * sum|x| of the exact sum (checks the
    replay helper and chain_length against each other; the GPU tests then check the GPU against the replay)."""
    plan = sh.plan_shuffle(prob, dtype, "float32", H100)
    if isinstance(prob, Flat):
        shape = (prob.n,)
    elif isinstance(prob, Rows):
        shape = (prob.m, prob.k)
    else:
        shape = (prob.a, prob.r, prob.b)
    x = rng.uniform(-0.25, 0.75, size=shape).astype(dtype)
    got = replay(plan, x).astype(np.float64)
    red = None if isinstance(prob, Flat) else 1  # Rows (m, k) and Cols (a, r, b) both reduce axis 1
    exact = np.sum(x.astype(np.float64), axis=red)
    abs_sum = np.sum(np.abs(x.astype(np.float64)), axis=red)
    exact, abs_sum = np.atleast_1d(exact).reshape(got.shape), np.atleast_1d(abs_sum).reshape(got.shape)
    assert np.all(np.abs(got - exact) <= tolerance(plan, abs_sum, "float32"))


# ============================================================================================== CPU: compile
@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("in_dt", ["float16", "float32"])
@pytest.mark.parametrize("out_dt", ["float16", "float32", "float64"])
def test_every_kernel_compiles_clean(arch, in_dt, out_dt):
    """Every instantiation the planner can name, with the run-time NVRTC options: no warnings, no spills, and a
    register count that allows the blocks per SM the planner assumes."""
    from tcreduce.testing import assert_compiles_clean

    for name in sh.kernel_names(in_dt, out_dt):
        if "_cluster<" in name and arch < "sm_90":
            continue  # thread-block clusters: Hopper and newer
        ck = assert_compiles_clean("shuffle.cu", name, arch)
        minb = _minb(name)
        assert ck.registers is not None and ck.registers * sh.BLOCK * minb <= 65536, (name, ck.registers)
        assert "ld.global.nc.v4" in ck.ptx or "shuffle_cols" in name or "shuffle_rows" in name


# ========================================================================================= CPU: the kernel code itself
# The real kernels/shuffle.cu (common.cuh inlined), compiled for the CPU with g++ against a small SIMT shim: one
# std::thread per CUDA thread, a std::barrier per block (__syncthreads) and per warp (__shfl_xor_sync), blocks run one
# after another. It checks, without a GPU, that the kernel code does what its order comment says (bitwise equal to
# the replay above), that every output is written and that the counters are left at zero. The GPU tests remain the
# authority on the hardware; this catches logic errors early. Skipped where g++ (C++20, _Float16) is missing.
import simt  # noqa: E402  (tests/simt.py: the shim, shared with test_simt.py)
from simt import simt_main  # noqa: E402

_SIMT_CT = {"float16": "__half", "float32": "float", "float64": "double"}


def _simt_main(plan: Plan, kernel_file: str) -> str:
    return simt_main(plan, kernel_file, _SIMT_CT[plan.in_dtype], plan.problem.outputs)


SIMT_DEVICE = DeviceSpec("tiny", 2, (9, 0))  # 2 SMs: few blocks, and splits are still exercised
SIMT_CASES = [  # (shape, axis, view, out dtype); every kernel path: heads, splits, group sizes, j groups, stores
    ((40000,), None, None, "float32"), ((40011,), None, lambda x: x[3:], "float16"),
    ((5,), None, lambda x: x[1:], "float32"),
    ((300, 16), -1, None, "float32"), ((3000, 17), -1, None, "float32"),
    ((200, 201), -1, lambda x: x[:, 1:], "float64"),
    ((5, 40000), -1, None, "float32"), ((2, 40003), -1, lambda x: x[:, 1:], "float16"),
    ((16, 8000), 0, None, "float32"), ((16, 8000), 0, None, "float16"), ((16, 8003), 0, None, "float64"),
    ((20000, 16), 0, None, "float32"), ((3000, 1000), 0, None, "float32"), ((3, 30000, 3), 1, None, "float32"),
    # strips narrowed from 32 chunks: to 16 (fp32) or 8 (fp16) with no split; to 16 with splits
    ((4000, 200), 0, None, "float32"), ((3000, 80), 0, None, "float32"),
]


# rows of a few hundred chunks with a group of 64 or 128 threads (ROWS_GROUP_CHUNKS_PER_THREAD): G = 64 (fp32 275
# chunks; fp16 263), G = 128 (fp32 513 chunks), a misaligned view, rows past the last one in the last block
ROW_GROUP_CASES = [((300, 1100), -1, None, "float32"), ((301, 2052), -1, None, "float32"),
                   ((300, 2100), -1, None, "float16"), ((257, 1101), -1, lambda x: x[:, 1:], "float64")]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_kernel_code_matches_its_order_comment_on_the_cpu(dtype, tmp_path, rng):
    _simt_cases_match_the_twin(SIMT_CASES, dtype, tmp_path, rng)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_row_groups_match_their_order_comment_on_the_cpu(dtype, tmp_path, rng, monkeypatch):
    monkeypatch.setattr(sh, "ROWS_GROUP_CHUNKS_PER_THREAD", {2: 4, 4: 4})
    groups = set()
    for shape, axis, view, _ in ROW_GROUP_CASES:
        x = _rand(rng, shape, dtype)
        xh = view(x) if view else x
        p = param_dict(sh.plan_shuffle(Rows(xh.shape[0], xh.shape[1], x.shape[1]), dtype, "float32", SIMT_DEVICE))
        groups.add(p["group"])
    assert groups >= {64, 128} if dtype == "float32" else 64 in groups
    _simt_cases_match_the_twin(ROW_GROUP_CASES, dtype, tmp_path, rng)


# first-axis sums through the one-item kernel at 4 rows in flight (the H200's COLS_ONE_ITEM_TUNING and evict-first
# floors: the 64- and 1000-row cases load evict-first, a plain load in the shim): a last partial round of 3 rows, a
# partial last chunk, a misaligned view (scalar loads), strips narrowed to a few chunks
ONE_ITEM_CASES = [((19, 12003), 0, None, "float32"), ((16, 12000), 0, None, "float16"),
                  ((21, 12001), 0, lambda x: x[:, 1:], "float64"), ((1000, 400), 0, None, "float32"),
                  ((64, 2000), 0, None, "float16")]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_one_item_columns_match_their_order_comment_on_the_cpu(dtype, tmp_path, rng, monkeypatch):
    monkeypatch.setattr(sh, "COLS_ONE_ITEM_TUNING", {2: (4, 4), 4: (4, 4)})
    monkeypatch.setattr(sh, "COLS_EVICT_FIRST_MIN_ROWS", sh.FAMILY_TUNING["H200"]["COLS_EVICT_FIRST_MIN_ROWS"])
    for shape, axis, view, _ in ONE_ITEM_CASES:
        xh = view(_rand(rng, shape, dtype)) if view else _rand(rng, shape, dtype)
        plan = sh.plan_shuffle(Cols(1, xh.shape[0], xh.shape[1], 0, shape[1]), dtype, "float32", SIMT_DEVICE)
        name = plan.launches[0].kernel
        assert name.endswith(", 4, true, 1>" if shape[0] >= 64 else ", 4, true>") and param_dict(plan)["unroll"] == 4
    _simt_cases_match_the_twin(ONE_ITEM_CASES, dtype, tmp_path, rng)


# full sums over a one-pass grid (FLAT_ROUNDS, one round of 1 chunk per thread, no minimum of waves, so that 256
# thread blocks of 1 KiB make groups cheaply): one block; several blocks in one group; a head and a tail; two groups of
# block partials (257 and 258 blocks), the last block's range partly filled
ONE_PASS_FLAT_CASES = [((1000,), None, None, "float32"), ((40000,), None, None, "float32"),
                       ((40011,), None, lambda x: x[3:], "float16"), ((263_000,), None, None, "float32"),
                       ((526_501,), None, lambda x: x[1:], "float64")]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_one_pass_full_sums_match_their_order_comment_on_the_cpu(dtype, tmp_path, rng, monkeypatch):
    monkeypatch.setattr(sh, "FLAT_ROUNDS", {2: 1, 4: 1})
    monkeypatch.setattr(sh, "FLAT_ONE_PASS_MIN_WAVES", 0)
    monkeypatch.setattr(sh, "FLAT_TUNING", dict(sh.FLAT_TUNING, float16=(1, 8), float32=(1, 4)))
    groups = set()
    for shape, _, view, _ in ONE_PASS_FLAT_CASES:
        xh = view(_rand(rng, shape, dtype)) if view else _rand(rng, shape, dtype)
        plan = sh.plan_shuffle(Flat(xh.shape[0], 0), dtype, "float32", SIMT_DEVICE)
        p = param_dict(plan)
        assert p["rounds"] == 1 and plan.launches[0].kernel.endswith(", 1>")
        g = -(-p["grid"] // sh.BLOCK) if p["grid"] > 1 else 0
        assert (plan.workspace_floats, plan.counters) == ((0, flagged_counters(p["grid"], g)) if g else (0, 0))
        groups.add(g)
    assert groups >= {0, 1, 2}
    _simt_cases_match_the_twin(ONE_PASS_FLAT_CASES, dtype, tmp_path, rng)


def _simt_cases_match_the_twin(cases: list, dtype: str, tmp_path: Any, rng: np.random.Generator) -> None:
    """Runs shuffle.cu's code on the CPU (tests/simt.py) for every case and compares the bits with the twin. Small full
    sums take the last-block combination: shuffle_flat_cluster's walk is the same code and its cluster combination
    adds in the same order (checked on the GPU, test_emulate_gpu.py)."""
    import subprocess

    gxx = simt.prepare(tmp_path, {"kernel.cu": "shuffle.cu"})
    jobs = []
    for idx, (shape, axis, view, out_dtype) in enumerate(cases):
        owner = _rand(rng, shape, dtype)
        xh = view(owner) if view else owner
        isz = xh.itemsize
        view_off = xh.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
        layout = plan_layout(xh.shape, tuple(s // isz for s in xh.strides), normalize_axes(axis, xh.ndim), isz,
                             view_off % 16)
        raw, off = simt.input_bytes(owner, xh, layout)
        with patched_plans(sh, dict(FLAT_CLUSTER_MAX_BLOCKS=0)):  # the shim has no clusters: the last-block path
            plan = sh.plan_shuffle(layout.problem, dtype, out_dtype, SIMT_DEVICE)  # (the same walk and order)
        src = tmp_path / f"case{idx}.cpp"
        src.write_text(_simt_main(plan, str(tmp_path / "kernel.cu")))
        (tmp_path / f"case{idx}.bin").write_bytes(raw)
        jobs.append((idx, xh, layout, plan, off, src))

    exes = simt.build(gxx, tmp_path, [job[5] for job in jobs])
    for (idx, xh, layout, plan, off, _), exe in zip(jobs, exes):
        outf = tmp_path / f"case{idx}.out"
        r = subprocess.run([str(exe), str(tmp_path / f"case{idx}.bin"), str(off), str(outf)], capture_output=True,
                           text=True, timeout=600, check=False)
        assert r.returncode == 0, f"{plan.describe()}\n{r.stderr}"
        got = np.fromfile(outf, dtype=plan.out_dtype)
        assert not np.isnan(got).any(), f"an output was not written\n{plan.describe()}"
        want = replay(plan, problem_elements(xh, layout)).astype(plan.out_dtype).reshape(-1)
        assert got.tobytes() == want.tobytes(), f"kernel code and order comment disagree\n{plan.describe()}"


# ============================================================================================== GPU helpers
def _cupy():
    import cupy

    return cupy


def run_raw(xd, axis, out_dtype: str = "float32"):
    """Launch the shuffle plan for ``xd`` reduced over ``axis`` straight into a NaN-poisoned output (no API copy in
    between), the way tcreduce.sum does it. Returns (out, plan, layout)."""
    cupy = _cupy()
    from tcreduce._api import get_plan
    from tcreduce._device import current_device
    from tcreduce._launch import run_plan

    axes = normalize_axes(axis, xd.ndim)
    isz = xd.dtype.itemsize
    layout = plan_layout(xd.shape, tuple(s // isz for s in xd.strides), axes, isz, xd.data.ptr % 16)
    if layout.copy_order is not None:
        src = cupy.ascontiguousarray(xd.transpose(layout.copy_order))
        ptr = src.data.ptr
    else:
        src, ptr = xd, xd.data.ptr + layout.base_offset * isz
    dev_id, device = current_device()
    plan = get_plan("shuffle", layout.problem, str(xd.dtype), out_dtype, device)
    out = cupy.full(layout.out_shape, np.nan, dtype=out_dtype)
    run_plan(plan, ptr, out.data.ptr, dev_id)
    cupy.cuda.get_current_stream().synchronize()
    del src
    return out, plan, layout


def check_against_references(xd, xh, axis, out_dtype: str = "float32", exact_replay: bool = True):
    """One raw launch: every output written, within the bound of the float64 sum, and (exact_replay) bitwise equal
    to the NumPy replay of the kernel's documented order."""
    out, plan, layout = run_raw(xd, axis, out_dtype)
    got = out.get()
    assert not np.isnan(got).any(), "an output was not written (still NaN)"
    axes = normalize_axes(axis, xh.ndim)
    x64 = xh.astype(np.float64)
    exact = np.sum(x64, axis=axes)
    abs_sum = np.sum(np.abs(x64), axis=axes)
    err = np.abs(got.astype(np.float64) - exact)
    tol = tolerance(plan, abs_sum, out_dtype)
    worst = int(np.argmax(np.ravel(err - tol)))
    assert np.all(err <= tol), (f"err {np.ravel(err)[worst]:.3e} > tol {np.ravel(tol)[worst]:.3e} at flat index "
                                f"{worst}\n{plan.describe()}")
    if exact_replay:
        want = replay(plan, problem_elements(xh, layout)).astype(out_dtype).reshape(-1)
        np.testing.assert_array_equal(np.ascontiguousarray(got).reshape(-1).view(np.uint8), want.view(np.uint8),
                                      err_msg=f"GPU bits differ from the documented order\n{plan.describe()}")
    return got, plan


def _rand(rng, shape, dtype, low=-0.25, high=0.75):
    x = rng.uniform(low, high, size=shape).astype(dtype)
    if x.size and not np.any(x):
        x.flat[0] = 1
    return x


DTYPES = ["float16", "float32"]
FULL_SIZES = [1, 2, 7, 8, 9, 15, 16, 17, 255, 256, 257, 1023, 1025, 65535, 65537, (1 << 20) - 1, (1 << 20) + 1,
              10 ** 6 + 3, (1 << 22) + 5]


# ============================================================================================== GPU: full sums
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", FULL_SIZES)
def test_gpu_full(dtype, n, rng):
    cupy = _cupy()
    xh = _rand(rng, n + 8, dtype)
    xd = cupy.asarray(xh)
    for lo in (0, 1, 3):  # aligned, x[1:], x[3:]
        hv, dv = xh[lo:lo + n], xd[lo:lo + n]
        _, plan = check_against_references(dv, hv, None)
        assert param_dict(plan)["aligned"] == ((lo * xh.itemsize) % 16 == 0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("out_dtype", ["float16", "float32", "float64"])
def test_gpu_full_out_dtypes(dtype, out_dtype, rng):
    cupy = _cupy()
    xh = _rand(rng, 100_003, dtype)
    check_against_references(cupy.asarray(xh)[1:], xh[1:], None, out_dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_full_large(dtype):
    """2^28 elements (the performance case): bound against a float64 sum computed on the GPU, and repeatable."""
    cupy = _cupy()
    import tcreduce

    g = cupy.random.default_rng(7)
    xd = (g.random(1 << 28, dtype=cupy.float32) - 0.25).astype(dtype)
    exact = float(cupy.sum(xd, dtype=cupy.float64))
    abs_sum = float(cupy.sum(cupy.abs(xd), dtype=cupy.float64))
    res = [tcreduce.sum(xd, method="shuffle") for _ in range(3)]
    out, plan, _ = run_raw(xd, None)
    assert abs(float(res[0]) - exact) <= tolerance(plan, np.float64(abs_sum), "float32")
    assert all(r.get().tobytes() == out.get().tobytes() for r in res)


@pytest.mark.gpu
@pytest.mark.large
def test_gpu_full_over_2_pow_31():
    """2^31 + 3 fp16 elements (64-bit indexing), and a misaligned view of them."""
    cupy = _cupy()
    import tcreduce

    n = (1 << 31) + 3
    g = cupy.random.default_rng(11)
    xd = cupy.empty(n + 1, dtype=cupy.float16)
    step = 1 << 28
    for s in range(0, n + 1, step):
        e = min(n + 1, s + step)
        xd[s:e] = (g.random(e - s, dtype=cupy.float32) - 0.25).astype(cupy.float16)
    for view in (xd[:n], xd[1:]):
        exact = float(cupy.sum(view, dtype=cupy.float64))
        abs_sum = float(cupy.sum(cupy.abs(view.astype(cupy.float32)), dtype=cupy.float64))
        out, plan, _ = run_raw(view, None)
        assert abs(float(out) - exact) <= tolerance(plan, np.float64(abs_sum), "float32")
        assert float(tcreduce.sum(view, method="shuffle")) == float(out)


# ============================================================================================== GPU: axes
AXIS_CASES = [
    # (shape, axis, view) -- view(x) is what gets reduced (applied to the host and the device array alike)
    ((1, 1), -1, None), ((3, 15), -1, None), ((1000, 16), -1, None), ((1000, 17), -1, None), ((33, 255), -1, None),
    ((16, 257), -1, None), ((7, 1025), -1, None), ((300, 4097), -1, None), ((5, 65537), -1, None),
    ((2, (1 << 20) + 3), -1, None), ((4, 33, 64), -1, None), ((2000, 1), -1, None), ((6000, 300), -1, None),
    ((16, 1000), 0, None), ((1000, 16), 0, None), ((257, 33), 0, None), ((5, 17, 40), 1, None),
    ((65537, 8), 0, None), ((16, 1 << 18), 0, None), ((3, 40000, 5), 1, None), ((1, 100000, 24), 1, None),
    ((7, 3, 5), (0, 2), None), ((6, 5, 4, 3), (1, 3), None), ((40, 50), (0, 1), None),
    # few long columns: about 250 splits on an H100, so the last block's combination runs several batches of
    # split indices per lane (kernels/shuffle.cu, step 4), with KC = 4 (fp32, 4 columns) or 8 columns at once
    ((1 << 20, 4), 0, None), ((1 << 19, 40), 0, None),
    # strips narrowed from 32 chunks on an H100: to 8 chunks with no split, and to 16 chunks with splits
    ((300, 8192), 0, None), ((2048, 4096), 0, None),
    # views: misaligned, strided, transposed, reversed
    ((64, 257), -1, lambda x: x[:, 1:]), ((64, 256), -1, lambda x: x[:, 1:]), ((64, 257), 0, lambda x: x[1:, 1:]),
    ((96, 80), 0, lambda x: x.T), ((96, 80), 1, lambda x: x.T), ((96, 80), -1, lambda x: x[:, ::2]),
    ((96, 80), -1, lambda x: x[::2]), ((96, 80), 0, lambda x: x[::-1]), ((96, 80), -1, lambda x: x[:, ::-1]),
    ((96, 80), 0, lambda x: x[:, ::-1]), ((32, 48, 16), 1, lambda x: x.transpose(2, 0, 1)),
    ((20, 64), None, lambda x: x.T), ((1000,), None, lambda x: x[::-1]), ((1000,), None, lambda x: x[::3]),
    ((50, 64), 0, lambda x: x[:, 3:35]), ((50, 64), 1, lambda x: x[:, 3:35]),
    # first-axis sums in COLS_TILE_AT_ONCE's tile on an H200 (16-bit and fp32: at least 132 x 2 x 128 column chunks):
    # 64 rows in strips of 32 chunks, the last chunk of a row partial; 131 rows (not a multiple of the 16 j lanes) in
    # strips of 16, rows 16-byte aligned
    ((64, 270403), 0, None), ((131, 270336), 0, None),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis,view", AXIS_CASES,
                         ids=[f"{s}-{a}-{'view' if v else 'c'}{i}" for i, (s, a, v) in enumerate(AXIS_CASES)])
def test_gpu_axes(dtype, shape, axis, view, rng):
    cupy = _cupy()
    import tcreduce

    xh = _rand(rng, shape, dtype)
    xd = cupy.asarray(xh)
    hv, dv = (view(xh), view(xd)) if view else (xh, xd)
    got, _ = check_against_references(dv, hv, axis)
    # the public API gives the same bits, keepdims and out= included
    res = tcreduce.sum(dv, axis=axis, method="shuffle")
    assert res.get().tobytes() == got.tobytes()
    kd = tcreduce.sum(dv, axis=axis, method="shuffle", keepdims=True)
    assert kd.shape == np.sum(hv, axis=axis, keepdims=True).shape
    assert kd.get().tobytes() == got.tobytes()
    out = cupy.full(got.shape, np.nan, dtype=cupy.float32)
    assert tcreduce.sum(dv, axis=axis, method="shuffle", out=out) is out
    assert out.get().tobytes() == got.tobytes()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", [((1 << 24, 16), -1), ((16, 1 << 24), 0), ((1 << 24, 16), 0),
                                        ((64, 1 << 20), -1), ((1 << 22, 64), -1)])
def test_gpu_big_shapes(dtype, shape, axis):
    """The benchmark shapes: bound against float64 sums computed on the GPU; the plan's structure as expected."""
    cupy = _cupy()
    g = cupy.random.default_rng(3)
    xd = (g.random(shape, dtype=cupy.float32) - 0.25).astype(dtype)
    out, plan, _ = run_raw(xd, axis)
    exact = cupy.sum(xd, axis=axis, dtype=cupy.float64)
    abs_sum = cupy.sum(cupy.abs(xd.astype(cupy.float32)), axis=axis, dtype=cupy.float64)
    assert not bool(cupy.isnan(out).any())
    err = cupy.abs(out.astype(cupy.float64) - exact).get()
    assert np.all(err <= tolerance(plan, abs_sum.get(), "float32"))
    again, _, _ = run_raw(xd, axis)
    assert again.get().tobytes() == out.get().tobytes()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("out_dtype", ["float16", "float64"])
@pytest.mark.parametrize("shape,axis", [((300, 100), -1), ((300, 100), 0), ((8, 3000), -1), ((3000, 8), 0)])
def test_gpu_axes_out_dtypes(dtype, out_dtype, shape, axis, rng):
    cupy = _cupy()
    xh = _rand(rng, shape, dtype)
    check_against_references(cupy.asarray(xh), xh, axis, out_dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_misaligned_rows_match_aligned_copy(dtype, rng):
    """Rows and columns are chunked from their own start, so a misaligned view (scalar loads) and its aligned copy
    (16-byte loads) give the same bits."""
    cupy = _cupy()
    xh = _rand(rng, (333, 1001), dtype)
    xd = cupy.asarray(xh)
    for axis in (-1, 0):
        a, pa, _ = run_raw(xd[:, 1:], axis)
        b, pb, _ = run_raw(cupy.ascontiguousarray(xd[:, 1:]), axis)
        da, db = param_dict(pa), param_dict(pb)
        assert not da["aligned"] and db["aligned"]
        assert {k: v for k, v in da.items() if k != "aligned"} == {k: v for k, v in db.items() if k != "aligned"}
        assert a.get().tobytes() == b.get().tobytes()


# ============================================================================================== GPU: determinism, NaN
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", [((1 << 22,), None), ((256, 1 << 14), -1), ((1 << 16, 16), -1),
                                        ((1 << 16, 16), 0), ((16, 1 << 16), 0), ((24, 1 << 16), -1)])
def test_gpu_ten_calls_bitwise_equal(dtype, shape, axis, rng):
    cupy = _cupy()
    import tcreduce

    xd = cupy.asarray(_rand(rng, shape, dtype))
    first = tcreduce.sum(xd, axis=axis, method="shuffle").get().tobytes()
    for _ in range(9):
        assert tcreduce.sum(xd, axis=axis, method="shuffle").get().tobytes() == first


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", [((4000,), None), ((1 << 21,), None), ((12, 1000), -1), ((12, 1 << 18), -1),
                                        ((1000, 12), 0), ((1 << 18, 12), 0), ((12, 1000), 0)])
def test_gpu_nan_inf_propagate(dtype, shape, axis, rng):
    cupy = _cupy()
    import tcreduce

    xh = _rand(rng, shape, dtype)
    flat = xh.reshape(-1)
    size = flat.size
    picks = rng.choice(size, size=4, replace=False)
    flat[picks[0]] = np.nan
    flat[picks[1]] = np.inf
    flat[picks[2]] = np.inf
    flat[picks[3]] = -np.inf
    want = np.sum(xh.astype(np.float64), axis=axis)
    got = tcreduce.sum(cupy.asarray(xh), axis=axis, method="shuffle").get().astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf])
    np.testing.assert_array_equal(np.isinf(got), inf)
    # a lone +inf and a lone -inf
    for v in (np.inf, -np.inf):
        yh = _rand(rng, shape, dtype)
        yh.reshape(-1)[picks[0]] = v
        want = np.sum(yh.astype(np.float64), axis=axis)
        got = tcreduce.sum(cupy.asarray(yh), axis=axis, method="shuffle").get().astype(np.float64)
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
        np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])


@pytest.mark.gpu
def test_gpu_empty_and_input_untouched(rng):
    cupy = _cupy()
    import tcreduce

    assert float(tcreduce.sum(cupy.zeros(0, dtype=cupy.float16), method="shuffle")) == 0.0
    assert tcreduce.sum(cupy.zeros((0, 5), dtype=cupy.float32), axis=0, method="shuffle").shape == (5,)
    xh = _rand(rng, (100, 37), "float16")
    xd = cupy.asarray(xh)
    for axis in (None, 0, 1):
        tcreduce.sum(xd, axis=axis, method="shuffle")
    assert xd.get().tobytes() == xh.tobytes()


@pytest.mark.gpu
def test_gpu_counters_left_at_zero(rng):
    """Single-pass kernels leave their counters at zero for the next launch (no memset between calls)."""
    cupy = _cupy()
    from tcreduce._launch import counters_for

    xd = cupy.asarray(_rand(rng, (200, 1 << 16), "float16"))
    for axis in (None, -1, 0):
        run_raw(xd, axis)
        run_raw(xd[:3], axis)
    dev = cupy.cuda.Device().id
    c = counters_for(dev, cupy.cuda.get_current_stream().ptr, 1)
    assert int(c.sum()) == 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_gpu_row_groups_match_the_twin(dtype, rng, monkeypatch):
    """Rows with a group of 64 or 128 threads (ROWS_GROUP_CHUNKS_PER_THREAD): every output
    written, within the bound, bitwise the twin's replay; a misaligned view takes scalar loads."""
    cupy = _cupy()
    from tcreduce import _api

    monkeypatch.setattr(sh, "ROWS_GROUP_CHUNKS_PER_THREAD", {2: 4, 4: 4})
    _api.get_plan.cache_clear()
    try:
        groups = set()
        for shape, view in (((300, 1100), None), ((300, 2048), None), ((300, 4096), None),
                            ((257, 2101), lambda x: x[:, 1:])):
            xh = _rand(rng, shape, dtype)
            xd = cupy.asarray(xh)
            hv, dv = (view(xh), view(xd)) if view else (xh, xd)
            _, plan = check_against_references(dv, hv, -1)
            groups.add(param_dict(plan)["group"])
        assert {64, 128} <= groups
    finally:
        _api.get_plan.cache_clear()
