"""The shared planning helpers of tcreduce/plans/_common.py (CPU only): how streamed rows are spread over warps."""

from __future__ import annotations

import pytest

from tcreduce.plans._common import WorkSplit, cdiv, flagged_counters, spread_rows


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


# planner modules whose constants a GPU family may set apart (FAMILY_TUNING, read through _common.tuned)
FAMILY_TUNED = ("tcreduce.plans.tensorcore", "tcreduce.plans.tensorcore_fp32")


@pytest.mark.parametrize("module_name", FAMILY_TUNED)
def test_family_tuning_names_module_constants_of_the_same_type(module_name):
    import importlib

    from tcreduce._device import KNOWN_GPUS

    module = importlib.import_module(module_name)
    assert module.FAMILY_TUNING, module_name
    for family, own in module.FAMILY_TUNING.items():
        assert family in KNOWN_GPUS, family
        for name, value in own.items():
            default = getattr(module, name)  # a typo names no constant
            assert type(value) is type(default) and value != default, (family, name, value, default)


def test_tuned_takes_the_family_setting_and_falls_back_to_the_module_value():
    import types

    from tcreduce._device import named_device
    from tcreduce._plan import DeviceSpec
    from tcreduce.plans._common import tuned

    module = types.SimpleNamespace(UNROLL=4, STAGES=2, FAMILY_TUNING={"H200": {"UNROLL": 8}})
    h200 = named_device("H200")
    assert tuned(module, "UNROLL", h200) == 8
    assert tuned(module, "UNROLL", DeviceSpec("NVIDIA H200 NVL", 132, (9, 0))) == 8  # CuPy's names of the family
    assert tuned(module, "STAGES", h200) == 2  # not set apart: the module's value
    assert tuned(module, "UNROLL", named_device("H100")) == 4
    assert tuned(module, "UNROLL", DeviceSpec("NVIDIA B200", 148, (10, 0))) == 4  # an unknown GPU: the module's
    assert tuned(types.SimpleNamespace(UNROLL=4), "UNROLL", h200) == 4  # a module without FAMILY_TUNING


@pytest.mark.parametrize("dtype,shape,axis,h100,h200", [
    # tc_rows_stream: (chunks in flight, blocks per SM) in the kernel name and the plan
    ("float16", (1 << 16, 4096), -1, "tc_rows_stream<__half, 256, 4, 4, 1, float, 4, 0, 1>",
     "tc_rows_stream<__half, 256, 2, 8, 1, float, 3, 0, 1>"),
    # ... and 16-bit rows of more than 16 chunks, fp8 rows of more than 32, their own there (STREAM_LONG_CHUNKS,
    # STREAM_LONG_TUNING: 8 in flight at 4 blocks per SM)
    ("float16", (1 << 16, 8192), -1, "tc_rows_stream<__half, 256, 8, 4, 1, float, 4, 0, 1>",
     "tc_rows_stream<__half, 256, 4, 8, 1, float, 4, 0, 1>"),
    ("float8_e4m3fn", (1 << 14, 16384), -1, "tc_rows_stream<__nv_fp8_e4m3, 256, 8, 4, 1, float, 4, 0, 1>",
     "tc_rows_stream<__nv_fp8_e4m3, 256, 4, 8, 1, float, 3, 0, 1>"),  # 32 chunks
    ("float8_e4m3fn", (1 << 13, 32768), -1, "tc_rows_stream<__nv_fp8_e4m3, 256, 8, 4, 1, float, 4, 0, 1>",
     "tc_rows_stream<__nv_fp8_e4m3, 256, 8, 8, 1, float, 4, 0, 1>"),
    ("float8_e4m3fn", (1 << 14, 8192), -1, "tc_rows_stream<__nv_fp8_e4m3, 256, 4, 4, 1, float, 4, 0, 1>",
     "tc_rows_stream<__nv_fp8_e4m3, 256, 2, 8, 1, float, 3, 0, 1>"),  # 16 chunks: the H200's short-row values
    ("float16", (1 << 10, 1 << 18), -1, "tc_rows_stream<__half, 256, 8, 4, 1, float, 4, 0, 1>",
     "tc_rows_stream<__half, 256, 8, 8, 1, float, 4, 0, 1>"),
    ("bfloat16", (1 << 13, 1 << 15), -1, "tc_rows_stream<__nv_bfloat16, 256, 8, 4, 1, float, 4, 0, 1>",
     "tc_rows_stream<__nv_bfloat16, 256, 8, 8, 1, float, 4, 0, 1>"),
    # float32 first-axis sums of few long strips: TMA with splits on an H100, the register loop without on an H200
    ("float32", (1 << 20, 128), 0, "tc32_cols_tma<", "tc32_cols<"),
    # rows of 2-4 chunks: chunks in flight on an H100; whole tiles on an H200, as many as fit in 3 KiB (at least one,
    # at most what compiles without spilling)
    ("float16", (1 << 20, 40), -1, "tc_rows<__half, 256, 1, 8, true, 2, 1, float, 0>",
     "tc_rows<__half, 256, 1, 8, true, 2, 1, float, 2>"),
    ("float16", (1 << 20, 96), -1, "tc_rows<__half, 256, 1, 8, true, 2, 1, float, 0>",
     "tc_rows<__half, 256, 1, 8, true, 1, 1, float, 3>"),
    # ... but rows that fill a chunk 2-8 times over, back to back, packed there (ROWS_PACKED: (chunks in flight,
    # blocks per SM) and the rows per chunk in the name)
    ("float16", (1 << 20, 64), -1, "tc_rows<__half, 256, 1, 8, true, 2, 1, float, 0>",
     "tc_rows_stream<__half, 256, 1, 8, 1, float, 4, 1, 2, 4>"),
    ("bfloat16", (1 << 20, 128), -1, "tc_rows<__nv_bfloat16, 256, 1, 8, true, 4, 1, float, 0>",
     "tc_rows_stream<__nv_bfloat16, 256, 1, 8, 1, float, 4, 1, 2, 2>"),
    ("float8_e4m3fn", (1 << 20, 256), -1, "tc_rows_stream<__nv_fp8_e4m3, 256, 1, 4, 1, float, 4, 1, 8>",
     "tc_rows_stream<__nv_fp8_e4m3, 256, 1, 8, 1, float, 4, 1, 4, 2>"),
    ("float8_e4m3fn", (1 << 20, 40), -1, "tc_rows<__nv_fp8_e4m3, 256, 1, 8, true, 2, 1, float, 0>",
     "tc_rows<__nv_fp8_e4m3, 256, 1, 8, true, 2, 1, float, 2>"),  # 2 tiles in flight: 3 spill into fp16 outputs
    ("float8_e4m3fn", (1 << 20, 96), -1, "tc_rows<__nv_fp8_e4m3, 256, 1, 8, true, 2, 1, float, 0>",
     "tc_rows<__nv_fp8_e4m3, 256, 1, 8, true, 2, 1, float, 3>"),
])
def test_an_h200_plans_with_its_own_tuning_and_an_h100_with_the_module_values(dtype, shape, axis, h100, h200):
    from tcreduce._api import get_plan
    from tcreduce._device import named_device
    from tcreduce._layout import normalize_axes, plan_layout
    from tcreduce.formats import get_format

    problem = plan_layout(shape, [shape[1], 1], normalize_axes(axis, 2), get_format(dtype).itemsize, 0).problem
    for family, expected in (("H100", h100), ("H200", h200)):
        kernel = get_plan("tensorcore", problem, dtype, "float32", named_device(family)).launches[0].kernel
        assert kernel.startswith(expected), (family, kernel)


@pytest.mark.parametrize("dtype,k,h100_kernel,h200_kernel", [
    ("float8_e4m3fn", 16, "tc_rows16<", "tc_rows16<"), ("float16", 16, "tc_rows<", "tc_rows16<"),
    ("float16", 32, "tc_rows<", "tc_rows<"), ("float8_e4m3fn", 32, "tc_rows<", "tc_rows32<")])
def test_rows_of_16_through_tc_rows16_where_tuned_and_rows_of_32_through_tc_rows(dtype, k, h100_kernel, h200_kernel):
    """tc_rows SHORT: rows of up to 16 go through tc_rows16 (one 8-element load per lane) where the family tuned it on
    (fp8 on both, 16-bit formats on an H200), rows of 17-32 (8-element loads) through tc_rows (fp8 on an H200:
    tc_rows32's half-row loads); all in one pass, on the same grid on both families."""
    from tcreduce._api import get_plan
    from tcreduce._device import named_device
    from tcreduce._layout import plan_layout
    from tcreduce._plan import param_dict

    isz = 1 if dtype.startswith("float8") else 2
    problem = plan_layout((1 << 22, k), [k, 1], (1,), isz, 0).problem
    plans = [get_plan("tensorcore", problem, dtype, "float32", named_device(f)) for f in ("H100", "H200")]
    assert param_dict(plans[0])["grid"] == param_dict(plans[1])["grid"]
    assert plans[0].launches[0].kernel.startswith(h100_kernel), plans[0].launches[0].kernel
    assert plans[1].launches[0].kernel.startswith(h200_kernel), plans[1].launches[0].kernel


@pytest.mark.parametrize("dtype,k,ld,align,paired", [
    ("float16", 16, 16, 0, True), ("bfloat16", 16, 16, 0, True), ("float16", 12, 16, 0, True),
    ("float16", 8, 8, 0, True), ("float16", 1, 8, 0, True), ("float16", 16, 16, 2, False),
    ("float16", 12, 12, 0, False), ("float16", 17, 24, 0, False), ("float8_e4m3fn", 16, 16, 0, True),
    ("float8_e5m2", 9, 24, 0, True), ("float8_e4m3fn", 16, 12, 0, False), ("float8_e4m3fn", 16, 16, 4, False)])
def test_tc_rows16_takes_rows_of_at_most_16_aligned_to_8_elements_where_tuned(dtype, k, ld, align, paired,
                                                                              monkeypatch):
    """tc_rows16 (one load of 8 elements per lane) replaces tc_rows' SHORT path for rows of at most 16 elements whose
    starts are aligned to 8 elements, where ROWS16_PAIRED_LOADS has their format; the plan keeps every other
    parameter, so the twin (which reads only vec, splits, wpt and chain) sums the same 16-column blocks. Off:
    tc_rows."""
    from tcreduce._api import get_plan
    from tcreduce._device import named_device
    from tcreduce._layout import Rows
    from tcreduce._plan import param_dict
    from tcreduce.plans import tensorcore

    problem = Rows(70001, k, ld, align)
    h100 = named_device("H100")
    plans = []
    try:
        for on in (False, True):
            monkeypatch.setattr(tensorcore, "ROWS16_PAIRED_LOADS", {2: on, 1: on})
            get_plan.cache_clear()
            plans.append(get_plan("tensorcore", problem, dtype, "float32", h100))
    finally:
        get_plan.cache_clear()
    before, after = plans
    assert not param_dict(before).get("paired_loads", False) and before.launches[0].kernel.startswith("tc_rows<")
    assert param_dict(after)["paired_loads"] == paired
    assert after.launches[0].kernel.startswith("tc_rows16<" if paired else "tc_rows<"), after.launches[0].kernel
    assert after.launches[0].grid == before.launches[0].grid
    assert {name: v for name, v in param_dict(after).items() if name != "paired_loads"} == \
        {name: v for name, v in param_dict(before).items() if name != "paired_loads"}


@pytest.mark.parametrize("dtype,k,ld,align,whole", [
    ("float8_e4m3fn", 16, 16, 0, True), ("float8_e5m2", 12, 16, 0, True), ("float8_e4m3fn", 1, 32, 0, True),
    ("float8_e4m3fn", 16, 16, 8, False), ("float8_e4m3fn", 8, 8, 0, False), ("float8_e4m3fn", 16, 24, 0, False),
    ("float16", 16, 16, 0, False)])
def test_fp8_rows16_take_whole_row_loads_where_tuned(dtype, k, ld, align, whole):
    """ROWS16_WHOLE_ROWS (fp8): tc_rows16's whole-row walk (WHOLE_ROWS = true) for fp8 rows of at most 16 whose
    starts are 16-byte aligned, with half the units in flight (units of 32 rows, so the same bytes) and a one-pass
    grid over the units; rows 8-byte aligned only and 16-bit rows keep the 8-element loads. Every other parameter
    stays (the same sums: the twin reads vec, splits, wpt and chain). Empty, the H200 plans as before."""
    from tcreduce._api import get_plan
    from tcreduce._device import named_device
    from tcreduce._layout import Rows
    from tcreduce._plan import param_dict
    from tcreduce.plans import tensorcore
    from tcreduce.testing import patched_plans

    problem = Rows(70001, k, ld, align)
    h200 = named_device("H200")
    plans = []
    for on in (False, True):
        with patched_plans(tensorcore, dict(ROWS16_WHOLE_ROWS={1: on})):
            plans.append(get_plan("tensorcore", problem, dtype, "float32", h200))
    before, after = (param_dict(plan) for plan in plans)
    assert before["paired_loads"] and "whole_rows" not in before
    assert plans[0].launches[0].kernel.startswith("tc_rows16<") and not plans[0].launches[0].kernel.endswith("true>")
    if not whole:
        assert plans[1] == plans[0]
        return
    unroll = after.pop("unroll")
    assert after.pop("whole_rows") and unroll == before.pop("unroll") // 2 == 4
    assert after.pop("grid") == cdiv(cdiv(70001, 32), 8 * unroll) and before.pop("grid")
    assert after == before
    assert plans[1].launches[0].kernel == f"tc_rows16<{tensorcore.ctype(dtype)}, 256, 4, float, true>"


@pytest.mark.parametrize("dtype,k,ld,align,chain,half", [
    ("float8_e4m3fn", 32, 32, 0, 1, True), ("float8_e5m2", 17, 32, 0, 1, True), ("float8_e4m3fn", 20, 48, 16, 1, True),
    ("float8_e4m3fn", 32, 32, 0, 1 << 30, True), ("float8_e4m3fn", 32, 32, 8, 1, False),
    ("float8_e4m3fn", 24, 24, 0, 1, False), ("float8_e4m3fn", 33, 48, 0, 1, False), ("float16", 32, 32, 0, 1, False)])
def test_fp8_rows32_take_half_row_loads_where_tuned(dtype, k, ld, align, chain, half):
    """ROWS32_HALF_ROW_LOADS (fp8): tc_rows32 for the rows of 17-32 elements that tc_rows takes as one 32-element
    chunk per tile, where every row start is 16-byte aligned, with tc_rows' tiles in flight, grid and chain; rows
    8-byte aligned, longer rows and 16-bit rows plan as before. Every parameter but the flag stays (the twin reads vec,
    splits, wpt and chain: the same sums). Empty, the plans are as before."""
    from tcreduce._device import named_device
    from tcreduce._layout import Rows
    from tcreduce._plan import param_dict
    from tcreduce.plans import tensorcore
    from tcreduce.testing import patched_plans

    problem = Rows(70001, k, ld, align)
    plans = []
    for on in (False, True):
        with patched_plans(tensorcore, dict(ROWS32_HALF_ROW_LOADS={1: on})):
            plans.append(tensorcore.plan_tensorcore(problem, dtype, "float32", named_device("H200"), chain=chain))
    before, after = (param_dict(plan) for plan in plans)
    assert "half_rows" not in before and not plans[0].launches[0].kernel.startswith("tc_rows32<")
    if not half:
        assert plans[1] == plans[0]
        return
    assert plans[0].launches[0].kernel.startswith("tc_rows<") and before["vec"] == 8
    assert after.pop("half_rows") and after == before
    assert plans[1].launches[0].grid == plans[0].launches[0].grid
    assert plans[1].launches[0].kernel == \
        f"tc_rows32<{tensorcore.ctype(dtype)}, 256, {before['unroll']}, {chain}, float>"


@pytest.mark.parametrize("dtype,n,h100_rounds,h200_rounds", [
    ("float16", 1 << 30, 8, 32), ("bfloat16", 1 << 28, 8, 32), ("float16", 1 << 27, 8, 0),
    ("float16", (1 << 26) + 17, 0, 0), ("float8_e4m3fn", 1 << 31, 0, 4), ("float8_e5m2", 1 << 29, 0, 4),
    ("float8_e4m3fn", 1 << 28, 0, 0)])
def test_large_full_sums_walk_in_one_pass_from_a_few_waves(dtype, n, h100_rounds, h200_rounds):
    """tc_flat on an H200: fp16 and bf16 arrays that give the one-pass grid at least 3 waves (FLAT_ONE_PASS_MIN_WAVES)
    of 660 resident blocks go in one pass of 32 rounds (256 KiB blocks, from 2^28), fp8 ones from 6 waves
    (FLAT_ONE_PASS_SIZE_MIN_WAVES) of 264 in one pass of 16 vectors per thread on 2 blocks per SM (FLAT_ONE_PASS), 4
    rounds (256 KiB blocks, from 2^29); on an H100, 16-bit arrays from 4 waves in one pass of 8 rounds (64 KiB
    blocks, from 2^27); smaller ones and fp8 on the H100 on the resident grid: 2 vectors per thread on 6 blocks per
    SM, but on an H200 fp8 8 on 4 and 16-bit formats 8 on 3 (FLAT_RESIDENT)."""
    from tcreduce._api import get_plan
    from tcreduce._device import named_device
    from tcreduce._layout import Flat
    from tcreduce._plan import param_dict

    fp8 = dtype.startswith("float8")
    for family, rounds, waves in (("H100", h100_rounds, 4), ("H200", h200_rounds, 6 if fp8 else 3)):
        plan = get_plan("tensorcore", Flat(n, 0), dtype, "float32", named_device(family))
        assert param_dict(plan).get("rounds", 0) == rounds, family
        resident = {"H100": ", 2, 1, float, 2, 6>", "H200": ", 8, 1, float, 2, 4>" if fp8
                    else ", 8, 1, float, 2, 3>"}[family]
        unroll, minb = (16, 2) if fp8 else (2, 5)
        assert plan.launches[0].kernel.endswith(f", {unroll}, 1, float, 2, {minb}, {rounds}>" if rounds
                                                else resident), family
        assert param_dict(plan)["unroll"] == int(plan.launches[0].kernel.split(", ")[2])
        if not rounds:
            assert param_dict(plan)["grid"] == 132 * int(resident[-2]), family  # the full resident grid
        else:
            grid, groups = param_dict(plan)["grid"], -(-param_dict(plan)["grid"] // 256)
            assert grid >= waves * 132 * minb and plan.workspace_floats == 0
            assert plan.counters == flagged_counters(grid, groups)  # counters, then 64-bit slots


@pytest.mark.parametrize("method,n,h100_rounds,h200_rounds", [
    ("shuffle", 1 << 30, 4, 8), ("shuffle", 1 << 28, 4, 8), ("shuffle", (1 << 27) + 5, 4, 0),
    ("shuffle", 1 << 26, 0, 0), ("tensorcore", 1 << 30, 4, 32), ("tensorcore", 1 << 29, 4, 32),
    ("tensorcore", 1 << 28, 4, 0), ("tensorcore", 1 << 26, 0, 0), ("tensorcore_tf32", 1 << 28, 4, 8),
    ("tensorcore_tf32", 1 << 27, 0, 0)])
def test_large_fp32_full_sums_walk_in_one_pass_from_a_few_waves(method, n, h100_rounds, h200_rounds):
    """shuffle_flat and tc32_flat: fp32 arrays that give the one-pass grid enough waves of 528 resident blocks
    (FLAT_ONE_PASS_MIN_WAVES) go in one pass: on an H200 from 6 waves (shuffle and tf32: 8 rounds, from 2^28; the
    split: 32, from 2^29), on an H100 in 4 rounds from 6 waves (shuffle, from 2^27) or 12 (the split from 2^27, tf32
    from 2^28); smaller ones, and every fp32 full sum on an A100, on the resident grid."""
    from tcreduce._api import get_plan
    from tcreduce._device import named_device
    from tcreduce._layout import Flat
    from tcreduce._plan import param_dict

    waves = {"H100": 6 if method == "shuffle" else 12, "H200": 6}
    for family, rounds in (("H100", h100_rounds), ("A100", 0), ("H200", h200_rounds)):
        plan = get_plan(method, Flat(n, 0), "float32", "float32", named_device(family))
        p = param_dict(plan)
        assert p.get("rounds", 0) == rounds, family
        assert plan.launches[0].kernel.endswith(f", 4, {rounds}>" if rounds else ", 4>"), (family, plan.launches[0])
        groups = -(-p["grid"] // 256) if rounds else 0
        assert p["grid"] >= waves[family] * 132 * 4 if rounds else p["grid"] <= 4 * named_device(family).sm_count
        # no workspace: the counters, then a 64-bit flagged slot per partial and group total (the split's and tf32's
        # (s, e) pairs: two)
        slots = 1 if method == "shuffle" else 2
        assert (plan.workspace_floats, plan.counters) == (0, flagged_counters(p["grid"], groups, slots))


def test_tc_cols_takes_its_one_item_walk_where_tuned_at_the_first_setting_that_fills_the_gpu(monkeypatch):
    """tc_cols: where COLS_ONE_ITEM_TUNING has the element size, a plan in one pass without splits (a strip per group
    of warps) launches tc_cols<..., ONE_ITEM = true> at the first (chunks in flight, blocks per SM) whose
    blocks fill its resident slots within SPLIT_TOLERANCE of the general kernel's fill at 2 blocks per SM, else at the
    general kernel's own (chunks in flight capped by the chunks, and at 2 for unaligned scalar loads), or for strips of
    several warps the general kernel; strips of at least COLS_ONE_ITEM_LONG's rows take its candidates instead. Other
    plans, and every plan of an element size not tuned, keep the general kernel. The H200's own tuning; the H100 has
    none."""
    from tcreduce._device import named_device
    from tcreduce._layout import Cols
    from tcreduce._plan import param_dict
    from tcreduce.plans import tensorcore as tc

    h100, h200 = named_device("H100"), named_device("H200")  # 132 SMs each

    def kernel(r, b, dtype="float16", align=0, device=h100):
        plan = tc.plan_tensorcore(Cols(1, r, b, 0, b, align), dtype, "float32", device)
        return plan.launches[0].kernel, param_dict(plan), plan

    assert tc.COLS_ONE_ITEM_TUNING == {}
    assert kernel(128, 1 << 21)[0] == "tc_cols<__half, 256, 1, true, 1, float, 0, 2, 2, false>"
    assert kernel(16, 1 << 24)[0] == "tc_cols<__half, 256, 1, true, 1, float, 1, 1, 4, false>"
    # the H200: (2, 3) while 3 blocks per SM fill as well as 2, then (1, 4); from 128 rows (COLS_ONE_ITEM_LONG) (1, 4),
    # then (2, 2); fp8 (2, 4); evict-first (the last template argument, 3) from 64 rows
    for r, want in ((32, "1, true, 1, float, 0, 2, 3, true>"), (64, "1, true, 1, float, 0, 2, 3, true, 3>"),
                    (128, "1, true, 1, float, 0, 1, 4, true, 3>"),
                    (256, "1, true, 1, float, 0, 1, 4, true, 3>"), (1024, "1, true, 1, float, 0, 1, 4, true, 3>"),
                    (2048, "2, true, 1, float, 0, 1, 4, true, 3>"),  # 2048 rows: a strip per 2 warps
                    (16384, "8, true, 1, float, 0, 2, 2, true, 3>"),  # 256 blocks of 8 warps: 4 per SM fill too few
                    (32768, "8, true, 1, float, 0, 2, 2, false>")):  # 128 blocks: splits, so the general kernel
        assert kernel(r, (1 << 28) // r, device=h200)[0].endswith(want), r
    assert kernel(64, (1 << 22) + 8, align=2, device=h200)[0].endswith(", false, 1, float, 0, 2, 3, true>")
    assert kernel(128, (1 << 21) + 8, align=2, device=h200)[0].endswith(", false, 1, float, 0, 1, 4, true>")
    # ... fp8 rows only 8-byte aligned (16-byte aligned ones take COLS_WIDE_STRIPS' 128-column strips)
    assert kernel(128, (1 << 22) + 8, "float8_e4m3fn", device=h200)[0].endswith(", 2, 4, true>")
    monkeypatch.setattr(tc, "COLS_ONE_ITEM_TUNING", {2: ((1, 4),), 1: ((4, 3),)})
    name, p, plan = kernel(128, 1 << 21)
    assert name == "tc_cols<__half, 256, 1, true, 1, float, 0, 1, 4, true>"
    assert (p["one_item"], p["blocks_per_sm"], p["grid"], p["splits"]) == (True, 4, (1 << 21) // 64 // 8, 1)
    assert plan.workspace_floats == 0 and plan.counters == 0
    assert kernel(128, 1 << 21, "float8_e4m3fn")[0] == "tc_cols<__nv_fp8_e4m3, 256, 1, true, 1, float, 0, 4, 3, true>"
    assert kernel(32, 1 << 23, "float8_e4m3fn")[0].endswith(", 0, 2, 3, true>")  # 2 chunks per strip
    assert kernel(128, (1 << 21) - 1, align=2)[0] == "tc_cols<__half, 256, 1, false, 1, float, 0, 1, 4, true>"
    # 264 blocks fill 2 per SM but half of 4 per SM: the general kernel's (2, 2) through the one-item walk
    assert kernel(100, 64 * 8 * 264)[0].endswith(", 0, 2, 2, true>")
    monkeypatch.setattr(tc, "COLS_ONE_ITEM_TUNING", {2: ((4, 2),)})
    assert kernel(128, (1 << 21) - 1, align=2)[0].endswith(", false, 1, float, 0, 2, 2, true>")  # scalar loads: 2
    name, p, _ = kernel(2048, 1 << 17)  # a strip per 2 warps (they combine in the one-item kernel too)
    assert name.endswith("2, true, 1, float, 0, 4, 2, true>") and p["wps"] == 2
    for r, b in ((1 << 20, 256),  # splits
                 (16, 1 << 24)):  # columns of one chunk: the short path
        name, p, _ = kernel(r, b)
        assert name.endswith("false>") and not p["one_item"], (r, b, name)


def test_tc_cols_takes_128_column_strips_for_fp8_where_tuned():
    """COLS_WIDE_STRIPS (empty by default): with fp8 candidates, fp8 first-axis sums whose 128-column plan is a
    one-item walk and whose rows are 16-byte aligned launch tc_cols' LE = 16 (half the strips, the last template
    arguments ", 0, 16>", param strip = 128); 16-bit data, chained sums, rows aligned to 8 bytes only, columns of one
    chunk and plans that split keep the 64-column plan; the emulator twin gives the same bits either way (every
    column's additions are the same)."""
    import numpy as np

    import tcreduce
    from tcreduce._device import named_device
    from tcreduce._layout import Cols
    from tcreduce._plan import param_dict
    from tcreduce.plans import tensorcore as tc
    from tcreduce.testing import patched_plans, random_input

    h200 = named_device("H200")
    problems = {"wide": Cols(1, 256, 1 << 21, 0, 1 << 21),
                "rows 8-byte aligned": Cols(1, 256, 1 << 20, 0, (1 << 20) + 8),
                "short": Cols(1, 16, 1 << 24, 0, 1 << 24), "splits": Cols(1, 65536, 8192, 0, 8192),
                "several warps": Cols(1, 4096, 1 << 17, 0, 1 << 17)}
    # the strips' general walk, short path and long-strip candidates: not here
    others = dict(COLS_WIDE_GENERAL={}, COLS_WIDE_SHORT={}, COLS_WIDE_LONG_STRIPS={})
    with patched_plans(tc, dict(COLS_WIDE_STRIPS={}, **others)):
        before = {(k, dt, chain): tc.plan_tensorcore(prob, dt, "float32", h200, chain)
                  for k, prob in problems.items()
                  for dt in ("float8_e4m3fn", "float8_e5m2", "float16") for chain in (1, tc.NO_FLUSH)}
    assert tc.COLS_WIDE_STRIPS == {} and all("strip" not in param_dict(p) for p in before.values())
    with patched_plans(tc, dict(COLS_WIDE_STRIPS={1: ((1, 3), (2, 2))}, **others)):
        for (k, dt, chain), old in before.items():
            plan = tc.plan_tensorcore(problems[k], dt, "float32", h200, chain)
            if k in ("wide", "several warps") and dt != "float16" and chain == 1:
                p = param_dict(plan)
                assert plan.launches[0].kernel.endswith(", 2, 2, true, 0, 16>") and p["strip"] == 128, (k, plan)
                strips = problems[k].b // 128
                assert p["grid"] == strips // (8 // p["wps"]) and (p["splits"], plan.workspace_floats) == (1, 0)
                assert (p["wps"] > 1) == (k == "several warps")
            else:
                assert plan == old, (k, dt, chain)
    rng = np.random.default_rng(5)
    for shape in ((300, 2000), (64, 8208)):  # part-filled last strips, 8 and 4 warps per strip
        xh = random_input(rng, shape, "float8_e4m3fn")
        with patched_plans(tc, dict(COLS_WIDE_STRIPS={}, **others)):
            narrow = np.asarray(tcreduce.emulate.sum(xh, axis=0, method="tensorcore", gpu="H200"))
        with patched_plans(tc, dict(COLS_WIDE_STRIPS={1: ((1, 3), (2, 2))}, **others)):
            plan = tc.plan_tensorcore(Cols(1, *shape, 0, shape[1]), "float8_e4m3fn", "float32", h200)
            assert param_dict(plan)["strip"] == 128, plan
            wide = np.asarray(tcreduce.emulate.sum(xh, axis=0, method="tensorcore", gpu="H200"))
        assert wide.tobytes() == narrow.tobytes(), shape


def test_tc_cols_long_fp8_strips_take_their_own_candidates():
    """COLS_WIDE_LONG_STRIPS (empty by default): fp8 strips of at least its rows take its candidates in place of
    COLS_WIDE_STRIPS' (below: COLS_WIDE_STRIPS'); without COLS_WIDE_STRIPS it plans nothing wide; 16-bit data keeps
    the 64-column plan; the emulator twin gives the same bits at either candidate (the same additions per column)."""
    import numpy as np

    import tcreduce
    from tcreduce._device import named_device
    from tcreduce._layout import Cols
    from tcreduce._plan import param_dict
    from tcreduce.plans import tensorcore as tc
    from tcreduce.testing import patched_plans, random_input

    h200 = named_device("H200")
    others = dict(COLS_WIDE_GENERAL={}, COLS_WIDE_SHORT={})
    long = dict(COLS_WIDE_LONG_STRIPS={1: (512, ((2, 2),))})

    def kernel(r, dtype="float8_e4m3fn"):
        b = 1 << 29 >> 9
        return tc.plan_tensorcore(Cols(1, r, b, 0, b), dtype, "float32", h200).launches[0].kernel

    with patched_plans(tc, dict(COLS_WIDE_STRIPS={1: ((1, 2),)}, **long, **others)):
        assert kernel(511).endswith(", 1, 2, true, 0, 16>") and kernel(512).endswith(", 2, 2, true, 0, 16>")
        assert kernel(4096).endswith(", 2, 2, true, 0, 16>") and not kernel(4096, "float16").endswith(", 16>")
    with patched_plans(tc, dict(COLS_WIDE_STRIPS={}, **long, **others)):
        assert not kernel(4096).endswith(", 16>")
    xh = random_input(np.random.default_rng(11), (300, 2000), "float8_e5m2")
    sums = []
    for floor in (300, 301):  # (2, 2), then (1, 2): both 128-column one-item walks, 8 warps per strip
        with patched_plans(tc, dict(COLS_WIDE_STRIPS={1: ((1, 2),)}, COLS_WIDE_LONG_STRIPS={1: (floor, ((2, 2),))},
                                    **others)):
            p = param_dict(tc.plan_tensorcore(Cols(1, 300, 2000, 0, 2000), "float8_e5m2", "float32", h200))
            assert (p["strip"], p["unroll"]) == (128, 2 if floor == 300 else 1), p
            sums.append(np.asarray(tcreduce.emulate.sum(xh, axis=0, method="tensorcore", gpu="H200")).tobytes())
    assert sums[0] == sums[1]


def _plans_with_wide_knob(device, problems: list, keep: list, knob: str, values: tuple):
    """Tensor-core plans of each Cols problem of ``problems`` and ``keep`` for e4m3, e5m2, chained e4m3 and fp16, with
    COLS_WIDE_STRIPS set and ``knob`` ({1: value}) at each of ``values``. Asserts that ``keep``'s problems, chained
    sums and fp16 plan as without the knob; yields (problem, dtype, value, plan, plan without the knob) for the
    others."""
    from tcreduce.plans import tensorcore as tc
    from tcreduce.testing import patched_plans

    wide = dict(COLS_WIDE_STRIPS={1: ((4, 2), (1, 3))}, COLS_WIDE_GENERAL={}, COLS_WIDE_SHORT={})
    yielded = 0
    for prob in problems + keep:
        for dt, chain in (("float8_e4m3fn", 1), ("float8_e5m2", 1), ("float8_e4m3fn", tc.NO_FLUSH), ("float16", 1)):
            with patched_plans(tc, wide):
                before = tc.plan_tensorcore(prob, dt, "float32", device, chain)
            for value in values:
                with patched_plans(tc, dict(wide, **{knob: {1: value}})):
                    plan = tc.plan_tensorcore(prob, dt, "float32", device, chain)
                if prob in keep or dt == "float16" or chain != 1:
                    assert plan == before, (prob, dt, chain)
                else:
                    yielded += 1
                    yield prob, dt, value, plan, before
    assert yielded == 2 * len(problems) * len(values), yielded


@pytest.mark.parametrize("family", ["H100", "H200"])
def test_tc_cols_wide_strips_take_the_general_walk_where_tuned(family):
    """COLS_WIDE_GENERAL (empty by default): where the 128-column fp8 plan is no one-item walk (splits of the rows),
    it launches tc_cols' general walk in those strips (LE = 16, ONE_ITEM false) at the knob's chunks in flight, on
    the same split rule as ever (half the strips, so the workspace holds the same floats per column and split);
    without the knob, and for rows of at most 16, rows aligned to 8 bytes only, chained sums and 16-bit data, the
    64-column plans stay. The twin reads splits, warps per strip and chain: the same walk per column."""
    from tcreduce._device import named_device
    from tcreduce._layout import Cols
    from tcreduce._plan import param_dict
    from tcreduce.plans import tensorcore as tc
    from tcreduce.testing import patched_plans

    device = named_device(family)
    problems = [Cols(1, 40001, 2000, 0, 2000), Cols(1, 1 << 20, 512, 0, 512), Cols(2, 20001, 2000, 20001 * 2000, 2000),
                Cols(1, (1 << 20) + 3, 16, 0, 16)]
    keep = [Cols(1, 16, 1 << 24, 0, 1 << 24), Cols(1, 40001, 2000, 0, 2008), Cols(1, 300, 400000, 0, 400000)]
    for prob, dt, unroll, plan, before in _plans_with_wide_knob(device, problems, keep, "COLS_WIDE_GENERAL", (1, 2)):
        p, old = param_dict(plan), param_dict(before)
        assert "strip" not in old and old["splits"] > 1 and not old["one_item"], old
        assert p["strip"] == 128 and p["splits"] > 1 and not p["one_item"] and p["unroll"] == unroll, p
        assert plan.launches[0].kernel == (f"tc_cols<{tc.ctype(dt)}, 256, {p['wps']}, true, 1, float, 0, "
                                           f"{unroll}, 2, false, 0, 16>")
        strips = prob.a * -(-prob.b // 128)
        assert plan.launches[0].grid == (-(-strips // (8 // p["wps"])), p["splits"], 1)
        assert (plan.workspace_floats, plan.counters) == (strips * 128 * p["splits"], strips)
    with patched_plans(tc, dict(COLS_WIDE_STRIPS={1: ((4, 2), (1, 3))}, COLS_WIDE_GENERAL={1: 2})):
        assert param_dict(tc.plan_tensorcore(keep[2], "float8_e4m3fn", "float32", device))["one_item"]  # as before


@pytest.mark.parametrize("family", ["H100", "H200"])
def test_tc_cols_wide_strips_take_the_short_path_where_tuned(family):
    """COLS_WIDE_SHORT (empty by default): fp8 first-axis sums of at most 16 rows (one chunk per strip) in 128-column
    strips launch tc_cols' short path with LE = 16 at the knob's strips in flight and blocks per SM, on a grid of one
    pass over the warps' groups of strips or a resident grid, as the knob says; without the knob, and for 17 rows,
    rows aligned to 8 bytes only, chained sums and 16-bit data, the plans stay. The twin reads splits (1), warps per
    strip (1) and chain: the same sums."""
    from tcreduce._device import named_device
    from tcreduce._layout import Cols
    from tcreduce._plan import param_dict
    from tcreduce.plans import tensorcore as tc

    device = named_device(family)
    problems = [Cols(1, 16, 1 << 25, 0, 1 << 25), Cols(1, 9, 100000, 0, 100000), Cols(3, 16, 5008, 16 * 5008, 5008)]
    keep = [Cols(1, 17, 1 << 20, 0, 1 << 20), Cols(1, 16, 100000, 0, 100008)]
    for prob, dt, (short, minb, once), plan, before in _plans_with_wide_knob(
            device, problems, keep, "COLS_WIDE_SHORT", ((1, 4, True), (2, 3, True), (4, 2, True), (1, 4, False))):
        p = param_dict(plan)
        assert "strip" not in param_dict(before) and param_dict(before)["short_unroll"] == 1
        assert (p["strip"], p["short_unroll"], p["blocks_per_sm"], p["splits"], p["wps"]) == (128, short, minb, 1, 1), p
        assert plan.launches[0].kernel == f"tc_cols<{tc.ctype(dt)}, 256, 1, true, 1, float, {short}, 1, " \
                                          f"{minb}, false, 0, 16>"
        groups = -(-prob.a * -(-prob.b // 128) // short)  # warps' groups of `short` strips
        grid = -(-groups // 8) if once else min(-(-groups // 8), device.sm_count * minb)  # one pass, or resident
        assert p["grid"] == grid and (plan.workspace_floats, plan.counters) == (0, 0), p


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_h200_plans_its_own_fp8_tensorcore_paths(dtype):
    """The H200's own fp8 choices (FAMILY_TUNING, tune_plans sessions 37-38): rows of 16 through tc_rows16's whole-row
    walk, rows of 17-32 through tc_rows32, rows of 257-512 streamed 4 in flight per warp on 6 blocks per SM,
    first-axis sums in 128-column strips at (4, 2), or (1, 3) for strips of fewer than 4 chunks (COLS_WIDE_STRIPS'
    candidates skip more chunks in flight than a strip has), at (2, 2) from 1024 rows (COLS_WIDE_LONG_STRIPS; session
    40), their splits through the strips' general walk at 2 chunks in flight and at most 16 rows through their short
    path at 1 strip in flight on a resident grid of 4 blocks per SM (session 42); the H100 keeps the module's plans
    (none of these)."""
    from tcreduce._device import named_device
    from tcreduce._layout import Cols, Rows
    from tcreduce._plan import param_dict
    from tcreduce.plans import tensorcore as tc

    h100, h200 = named_device("H100"), named_device("H200")
    t = tc.ctype(dtype)

    def kernel(problem, device):
        return tc.plan_tensorcore(problem, dtype, "float32", device).launches[0].kernel

    assert kernel(Rows(1 << 20, 16, 16), h200) == f"tc_rows16<{t}, 256, 4, float, true>"
    assert kernel(Rows(1 << 20, 32, 32), h200).startswith(f"tc_rows32<{t}, 256, ")
    for r, want in ((32, ", 1, 3, true, 0, 16>"), (48, ", 1, 3, true, 0, 16>"), (64, ", 4, 2, true, 0, 16>"),
                    (1023, ", 4, 2, true, 0, 16>"), (1024, ", 2, 2, true, 0, 16>"), (16384, ", 2, 2, true, 0, 16>")):
        b = (1 << 29) // r // 128 * 128
        assert kernel(Cols(1, r, b, 0, b), h200).endswith(want), r
        assert "strip" not in param_dict(tc.plan_tensorcore(Cols(1, r, b, 0, b), dtype, "float32", h100))
    assert kernel(Rows(1 << 20, 16, 16), h100).startswith(f"tc_rows16<{t}, 256, 8, float")  # 8-element loads
    assert kernel(Rows(1 << 20, 32, 32), h100).startswith("tc_rows<")
    for k in (304, 512):  # one 512-byte chunk per row (16-byte aligned)
        assert kernel(Rows(1 << 20, k, k), h200) == f"tc_rows_stream<{t}, 256, 1, 8, 1, float, 6, 1, 4>"
        assert kernel(Rows(1 << 20, k, k), h100) == f"tc_rows_stream<{t}, 256, 1, 4, 1, float, 4, 1, 8>"
    assert kernel(Rows(1 << 20, 1024, 1024), h200) == f"tc_rows_stream<{t}, 256, 1, 8, 1, float, 3, 2, 4>"
    for r, b in ((1 << 20, 512), (32768, 16384)):  # splits of the rows
        assert kernel(Cols(1, r, b, 0, b), h200).endswith(", float, 0, 2, 2, false, 0, 16>"), r
        assert "strip" not in param_dict(tc.plan_tensorcore(Cols(1, r, b, 0, b), dtype, "float32", h100))
    short16 = tc.plan_tensorcore(Cols(1, 16, 1 << 25, 0, 1 << 25), dtype, "float32", h200)
    assert short16.launches[0].kernel.endswith(", float, 1, 1, 4, false, 0, 16>")
    assert param_dict(short16)["grid"] == h200.sm_count * 4  # a resident grid
    assert "strip" not in param_dict(tc.plan_tensorcore(Cols(1, 16, 1 << 25, 0, 1 << 25), dtype, "float32", h100))


@pytest.mark.parametrize("family", ["H100", "H200"])
def test_evict_first_knobs_change_only_the_load_hint(family):
    """Every case of the GPU test of evict-first loads (tests/test_emulate_gpu.py: EVICT_FIRST) plans the hinted kernel
    on an H100 and an H200, and differs from the plan without the hint in one template argument, the load hint (the
    last, or tc_cols' LOAD before LE): the same launch geometry and the same order parameters, so the twin's bits."""
    import importlib

    from test_emulate_gpu import EVICT_FIRST

    from tcreduce import registry
    from tcreduce._device import named_device
    from tcreduce.testing import contiguous_problem, patched_plans

    device = named_device(family)
    for method, module, knobs, dtype, shape, axis, suffix in EVICT_FIRST:
        problem = contiguous_problem(shape, axis, dtype)
        planner = importlib.import_module(f"tcreduce.plans.{module}")
        with patched_plans(planner, {k: {} if "EVICT_FIRST" in k else v for k, v in knobs.items()}):
            plain = registry.get(method, "sum").plan(problem, dtype, "float32", device)
        with patched_plans(planner, knobs):
            hinted = registry.get(method, "sum").plan(problem, dtype, "float32", device)
        (ln,), (lp,) = hinted.launches, plain.launches
        h, p = (k[k.index("<") + 1:-1].split(", ") for k in (ln.kernel, lp.kernel))
        differ = [i for i in range(max(len(h), len(p))) if h[i:i + 1] != p[i:i + 1]]
        assert ln.kernel.endswith(suffix) and len(differ) == 1, (ln.kernel, lp.kernel)
        assert h[differ[0]] in ("1", "3") and p[differ[0]:differ[0] + 1] in ([], ["0"]), (ln.kernel, lp.kernel)
        assert (ln.grid, ln.block, ln.args, hinted.params) == (lp.grid, lp.block, lp.args, plain.params), shape


@pytest.mark.parametrize("method,dtype", [("tensorcore", "float16"), ("tensorcore", "float8_e4m3fn"),
                                          ("tensorcore_chained", "bfloat16"), ("shuffle", "float16"),
                                          ("shuffle", "float32"), ("shuffle", "float8_e5m2")])
def test_small_full_sums_run_as_one_cluster_where_allowed(method, dtype, rng):
    """FLAT_CLUSTER_MAX_BLOCKS (16, the committed setting, against 0, the last-block combination): a resident grid of
    2..16 blocks on a GPU with clusters runs as one cluster of that many blocks (tc_flat_cluster /
    shuffle_flat_cluster: arguments x, n, out; no workspace, no counters); one block, more blocks, a one-pass grid or
    an A100 keep their plans. The order of additions is the last-block combination's, so the twin's bits and the
    bound are the same either way."""
    import numpy as np

    import tcreduce
    from tcreduce._api import get_plan
    from tcreduce._device import named_device
    from tcreduce._layout import Flat
    from tcreduce._plan import Buf, param_dict
    from tcreduce.bounds import error_bound
    from tcreduce.formats import get_format
    from tcreduce.plans import shuffle, tensorcore
    from tcreduce.testing import patched_plans, random_input

    module = shuffle if method == "shuffle" else tensorcore
    h100, a100 = named_device("H100"), named_device("A100")
    isz = get_format(dtype).itemsize
    unroll = shuffle.FLAT_TUNING[dtype][0] if method == "shuffle" else tensorcore.flat_resident(isz, h100)[0]
    per_block = module.BLOCK * unroll * 16 // isz  # elements of a resident block's round
    sizes = [77, per_block + 64, 5 * per_block - 3, 16 * per_block, 16 * per_block + 64, 1 << 28]
    assert module.FLAT_CLUSTER_MAX_BLOCKS == 16
    xs = {n: random_input(rng, (n,), dtype) for n in sizes[:5]}
    with patched_plans(module, dict(FLAT_CLUSTER_MAX_BLOCKS=0)):
        before = {n: get_plan(method, Flat(n, 0), dtype, "float32", h100) for n in sizes}
        assert not any(ln.cluster for plan in before.values() for ln in plan.launches)
        want = {n: np.asarray(tcreduce.emulate.sum(x, method=method, gpu="H100")) for n, x in xs.items()}
        bound = {n: error_bound(x, None, method=method, gpu="H100") for n, x in xs.items()}
    seen = set()  # the committed setting against the last-block plans
    for n in sizes:
        plan = get_plan(method, Flat(n, 0), dtype, "float32", h100)
        (ln,), p, old = plan.launches, param_dict(plan), param_dict(before[n])
        if 2 <= old["grid"] <= 16 and not old.get("rounds"):
            seen.add(old["grid"])
            assert "_cluster<" in ln.kernel and ln.kernel.endswith(f", {old['grid']}>"), ln.kernel
            assert ln.cluster == p["cluster"] == old["grid"] == ln.grid[0]
            assert ln.args == (Buf("x"), n, Buf("out")) and (plan.workspace_floats, plan.counters) == (0, 0)
            assert {k: v for k, v in p.items() if k != "cluster"} == old
        else:
            assert plan == before[n]
        if isz > 1:  # an A100 takes no fp8
            assert "_cluster<" not in get_plan(method, Flat(n, 0), dtype, "float32", a100).launches[0].kernel
    assert seen == {2, 5, 16}, seen
    for n, x in xs.items():
        got = np.asarray(tcreduce.emulate.sum(x, method=method, gpu="H100"))
        assert got.tobytes() == want[n].tobytes() and error_bound(x, None, method=method, gpu="H100") == bound[n]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float8_e4m3fn"])
def test_small_full_sums_run_as_one_block_where_allowed(dtype):
    """FLAT_ONE_BLOCK (an H200's setting; an H100 has none): a full sum of at most 256 x 16 vectors that the resident
    grid would spread over several blocks runs as one tc_flat block of 16 vectors per thread compiled for 2 blocks per
    SM (x, n, out, counters; one block writes out itself, no counters used); one vector more takes the resident grid,
    as one cluster. An H100 keeps the cluster, and runs one block too where the H200's setting is patched in."""
    from tcreduce._api import get_plan
    from tcreduce._device import named_device
    from tcreduce._layout import Flat
    from tcreduce._plan import param_dict
    from tcreduce.formats import get_format
    from tcreduce.plans import tensorcore
    from tcreduce.testing import patched_plans

    assert tensorcore.FLAT_ONE_BLOCK == {} and "FLAT_ONE_BLOCK" not in tensorcore.FAMILY_TUNING["H100"]
    vec = 16 // get_format(dtype).itemsize
    limit = 256 * 16 * vec  # elements of one block's trip
    h200, h100 = named_device("H200"), named_device("H100")

    def plan(n: int, device):
        return get_plan("tensorcore", Flat(n, 0), dtype, "float32", device)

    def is_one_block(p) -> bool:
        return (param_dict(p)["grid"], param_dict(p)["unroll"], p.counters, p.workspace_floats) == (1, 16, 0, 0) and \
            p.launches[0].kernel.endswith(", 16, 1, float, 2, 2>")

    for n in (limit * 3 // 4 + 3, limit):  # more than one resident block of 8 vectors per thread
        assert is_one_block(plan(n, h200))
        p = param_dict(plan(n, h100))
        assert p["grid"] > 1 and p["cluster"] == p["grid"]
        with patched_plans(tensorcore, dict(FLAT_ONE_BLOCK={2: (16, 2, 1), 1: (16, 2, 1)})):
            assert is_one_block(plan(n, h100))
    p = param_dict(plan(limit + vec, h200))
    assert p["grid"] > 1 and p["cluster"] == p["grid"] and p["unroll"] == 8
    assert param_dict(plan(40, h200))["unroll"] == 8  # one resident block anyway: the resident grid's plan


def test_flagged_counters_hold_the_counters_then_a_slot_per_partial():
    """combine_grid_slots' layout in the counters pool (kernels/common.cuh computes the slots' offset itself): the
    counters (1, or groups + 1 for two levels) padded to an even count, then two 32-bit words per block partial and
    per group total (four for pairs); nothing for one block."""
    assert flagged_counters(1, 0) == 0
    assert flagged_counters(5, 0) == 2 + 2 * 5  # one counter, a pad word, 5 slots
    assert flagged_counters(2048, 8) == 10 + 2 * (2048 + 8)  # 9 counters, a pad word, 2056 slots
    assert flagged_counters(257, 2) == 4 + 2 * (257 + 2)  # 3 counters, a pad word
    assert flagged_counters(512, 2) == 4 + 2 * 514
    # tc32_flat's (s, e) pairs: two slots (four words) per block pair and group total
    assert flagged_counters(5, 0, slots_per_value=2) == 2 + 4 * 5
    assert flagged_counters(257, 2, slots_per_value=2) == 4 + 4 * (257 + 2)
    assert flagged_counters(1, 0, slots_per_value=2) == 0
