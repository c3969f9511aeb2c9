"""Method "tensorcore" on float32 input (kernels/tensorcore_fp32.cu on the forms of kernels/tensorcore_f32.cuh):
each value split into bf16 pieces on a grid common to its quad, exact row sums, compensated pair accumulation.

CPU (no GPU needed):
- the split's claims (kernel comment): hi + mid + r2 = x exactly for every finite x, hi and mid bf16, |r2| <=
  2^(E-16), and the mma rows of hi then mid pieces exact in the tensor-core model, for values over the whole fp32
  range; the wide path's split exact above 2^-110;
- the emulator twin equals a literal lane-by-lane replay of the kernels (tests/tc32_literal.py) on every form and
  work split, special values included;
- every form, awkward size, view and output dtype within the a-priori bound of the exact sum;
- the bound holds and is within 100x of the worst error on the float32 adversarial family;
- the accuracy goal: on the accuracy study's distributions the error is at most twice shuffle's plus one ulp of
  the result (N up to 2^20 here; notes/performance.md records the check to 2^26);
- the planner: kernels per form, errors for what it does not take.
GPU (``-m gpu``): GPU == twin bit for bit over shapes, distributions and views; every form and awkward size against
the exact sum within the bound with poisoned outputs; NaN and infinities; run-to-run determinism; bounds on the
adversarial family at 2^24; more than 2^31 elements (``large``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tcreduce
import tc32_literal as literal
from tc32_literal import ONE_SM, REPLAY_CASES, random_bits, replay_case, values
from tcreduce._api import get_plan
from tcreduce._device import KNOWN_GPUS
from tcreduce._layout import Cols, Flat, Rows, host_layout
from tcreduce._plan import TensorMapOfX, param_dict
from tcreduce.bounds import error_bound
from tcreduce.emulate.mma_model import fused_rowsum
from tcreduce.emulate.tensorcore import _fragment_rows
from tcreduce.emulate.tensorcore_fp32 import (ROW_SLOTS, emulate_tensorcore_fp32, lane_sigmas, row_sigmas,
                                              split_common, split_own)
from tcreduce.plans._common import flagged_counters
from tcreduce.plans.tensorcore_fp32 import plan_tensorcore_fp32
from tcreduce.reference import exact_sum
from tcreduce.testing import adversarial_inputs, bound_for, check_sum, mixed_sign_inputs, poisoned, to_numpy

F32 = np.float32
H100 = KNOWN_GPUS["H100"]
METHOD = "tensorcore"


# ------------------------------------------------------------------------------------------------ the split
def test_the_common_grid_split_is_exact_and_its_rows_sum_exactly(rng):
    """Rows whose values span a random number of binades anywhere in the fp32 range (below the wide path's 2^112):
    hi + mid + r2 == x, hi and mid are bf16, |r2| <= 2^(E-16) (E: the row maximum's exponent, at least -110), and
    the tensor-core model sums a row's 16 hi pieces and then its 16 mid pieces without any rounding."""
    warps = 400
    top = rng.integers(-149, 112, (warps, 16))  # each row's largest exponent
    span = rng.integers(0, 40, (warps, 16))
    e = np.clip(top[..., None] - rng.integers(0, 1 + span[..., None], (warps, 16, 16)), -149, 111)
    rows = (rng.choice([-1, 1], e.shape) * np.ldexp(1 + rng.random(e.shape), e)).astype(F32)
    rows[rng.random(rows.shape) < 0.05] = 0
    # rows [warp, 16 rows, 16 values] -> lanes [warp, 32, 8]: row g takes v0, v1, v4, v5 of lanes 4g..4g+3
    lanes = np.zeros((warps, 8, 4, 8), F32)
    for row, slots in enumerate(ROW_SLOTS):
        lanes[..., list(slots)] = rows[:, 8 * row:8 * row + 8].reshape(warps, 8, 4, 4)
    lanes = lanes.reshape(warps, 32, 8)
    assert np.array_equal(_fragment_rows(lanes), rows)
    eb, s1, s2 = row_sigmas(lanes)
    assert np.all(eb <= 238)
    hi, mid, r2 = split_common(lanes, lane_sigmas(s1), lane_sigmas(s2))
    assert np.array_equal(hi.astype(np.float64) + mid.astype(np.float64) + r2.astype(np.float64),
                          lanes.astype(np.float64))
    emax = np.maximum(eb.astype(np.int64), 17) - 127
    assert np.all(np.abs(_fragment_rows(r2)) <= np.ldexp(1.0, emax - 16)[..., None])
    rows_h, rows_m = _fragment_rows(hi), _fragment_rows(mid)
    got = fused_rowsum(np.concatenate([rows_h, rows_m], axis=-1), np.zeros(rows_h.shape[:-1], F32))
    want = rows_h.astype(np.float64).sum(-1) + rows_m.astype(np.float64).sum(-1)
    assert np.array_equal(got.astype(np.float64), want)
    # the kernel's cut (split_common, kernels/tensorcore_fp32.cu): t = (sigma2 + x) - sigma2 = hi + mid, r2 = x - t,
    # hi' = t truncated to bf16, mid' = t - hi': bf16 pieces, the same remainders bit for bit (signed zeros
    # included) and the same block sums, so the same bits as the twin's cut
    s2 = lane_sigmas(s2)
    with np.errstate(all="ignore"):
        t = (s2 + lanes) - s2
        hi_k = (t.view(np.uint32) & np.uint32(0xFFFF0000)).view(F32)
        mid_k = t - hi_k
        r2_k = lanes - t
    assert np.array_equal(r2_k.view(np.uint32), r2.view(np.uint32))
    assert not np.any(mid_k.view(np.uint32) & np.uint32(0xFFFF))
    assert np.array_equal(t.astype(np.float64), hi.astype(np.float64) + mid.astype(np.float64))
    rows_hk, rows_mk = _fragment_rows(hi_k), _fragment_rows(mid_k)
    got_k = fused_rowsum(np.concatenate([rows_hk, rows_mk], axis=-1), np.zeros(rows_hk.shape[:-1], F32))
    assert np.array_equal(got_k.view(np.uint32), got.view(np.uint32))


def test_the_wide_split_is_exact_above_2_pow_minus_110(rng):
    x = random_bits(rng, 1 << 16)
    hi, mid, lo = split_own(x)
    total = hi.astype(np.float64) + mid.astype(np.float64) + lo.astype(np.float64)
    big = np.abs(x) >= 2.0 ** -110
    assert np.array_equal(total[big], x[big].astype(np.float64))
    assert np.all(np.abs(total - x.astype(np.float64)) < 2.0 ** -133)


# ------------------------------------------------------------------------------------------------ twin == literal
def test_the_replay_cases_cover_every_form_and_work_split():
    seen = set()
    for case, (shape, axis, view, device) in REPLAY_CASES.items():
        x = np.ones(shape, F32)
        xv = view(x) if view else x
        p = param_dict(get_plan(METHOD, host_layout(xv, axis)[0].problem, "float32", "float32", device))
        seen.add(p["form"])
        if p["form"] == "flat":
            seen.add("flat grid > 1" if p["grid"] > 1 else "flat grid 1")
            seen.add("head/tail" if p["head"] or p["tail"] else "aligned")
        else:
            seen.add(f"{p['form']} wpt {'> 1' if p['wpt'] > 1 else '1'}")
            if p["splits"] > 1:
                seen.add(f"{p['form']} splits")
            if p.get("short"):
                seen.add(f"{p['form']} short")
            if p.get("vector"):
                seen.add("vector loads")
            if p["form"] == "cols":
                seen.add(f"cols {'16-byte' if p['aligned'] else 'scalar'} loads{' short' if p['short'] else ''}")
                if p["splits"] > 1 and p["aligned"]:
                    seen.add("cols 16-byte loads splits")
    want = {"flat grid > 1", "flat grid 1", "head/tail", "aligned", "rows wpt 1", "rows wpt > 1", "rows splits",
            "rows short", "cols short", "cols wpt > 1", "cols splits", "stream wpt 1", "stream wpt > 1",
            "stream splits", "vector loads", "cols 16-byte loads", "cols scalar loads", "cols 16-byte loads short",
            "cols scalar loads short", "cols 16-byte loads splits"}
    assert want <= seen, want - seen


@pytest.mark.parametrize("case", REPLAY_CASES)
def test_twin_equals_literal_replay(case, rng):
    plan, got, want = replay_case(METHOD, lambda: literal.LiteralSplit(), emulate_tensorcore_fp32, case, rng)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (case, got[:4], want[:4])


def _flat_plan(method: str, n: int, device, align: int = 0):
    """``method``'s plan for a full sum of ``n`` float32 values starting at byte ``align`` mod 16 on ``device``."""
    return tcreduce.registry.get(method).plan(Flat(n, align), "float32", "float32", device)


@pytest.mark.parametrize("method", [METHOD, "tensorcore_tf32"])
@pytest.mark.parametrize("trips", [1, 2])
def test_one_block_flat_plans_and_twin_equals_literal_replay(method, trips, rng, monkeypatch):
    """FLAT_ONE_BLOCK patched on ((16 vectors per thread, 2 blocks per SM, trips)) for the 1-SM test GPU: a full sum
    the resident grid (4 blocks on the 1-SM test GPU) spreads over several blocks, of up to trips x 256 x 16 vectors,
    runs as one tc32_flat block that writes its value itself (no counters); one vector more keeps the resident grid,
    and so does a sum the resident grid gives one block anyway. The twin equals the literal replay of a one-block plan
    with a head and a tail."""
    from tcreduce.plans import tensorcore_fp32 as tc32

    monkeypatch.setattr(tc32, "FLAT_ONE_BLOCK", {method: (16, 2, trips)})
    limit = trips * tc32.BLOCK * 16 * 4  # elements one block of (16, 2, trips) holds

    def plan(n: int, align: int = 0):
        return _flat_plan(method, n, ONE_SM, align)

    one = plan(limit)
    assert (param_dict(one)["grid"], param_dict(one)["unroll"], param_dict(one)["minb"], one.counters) == (1, 16, 2, 0)
    assert one.launches[0].kernel.endswith(", 16, float, 2, 2>"), one.launches[0]
    more = param_dict(plan(limit + 4))
    assert more["grid"] > 1 and more["unroll"] == tc32.FLAT_UNROLL[method], more
    resident_one = tc32.BLOCK * tc32.FLAT_UNROLL[method] * 4
    assert (param_dict(plan(resident_one))["grid"], param_dict(plan(resident_one))["unroll"]) == (
        1, tc32.FLAT_UNROLL[method])
    from tcreduce.emulate.tensorcore_tf32 import emulate_tensorcore_tf32

    start, n = 1, limit // 2 + 4103  # more vectors than one resident block holds, a misaligned start, a tail
    x = values(rng, (n + start,))
    layout, _ = host_layout(x[start:], None)
    p = plan(n, layout.problem.align)
    assert param_dict(p)["grid"] == 1 and param_dict(p)["unroll"] == 16
    new_format, twin = ((literal.LiteralSplit, emulate_tensorcore_fp32) if method == METHOD
                        else (literal.LiteralTf32, emulate_tensorcore_tf32))
    want = literal.flat(p, x, start, new_format)
    got = np.asarray(twin(p, np.asarray(x[start:]), "H100"), F32).reshape(-1)
    assert got[0].view(np.uint32) == F32(want).view(np.uint32), (n, got, want)


def test_h200_runs_small_full_sums_as_one_block():
    """FAMILY_TUNING["H200"]'s FLAT_ONE_BLOCK (session 26): the split's sums of 4,097-8,195 elements (2 resident blocks)
    run as one block of 8 vectors per thread, tf32's of 8,196-16,387 (2-4 blocks) as one of 16, both compiled for 2
    blocks per SM and writing their value themselves (no counters); one vector more keeps the resident grid, and an
    H100 (no setting) keeps it everywhere."""
    h200, h100 = KNOWN_GPUS["H200"], KNOWN_GPUS["H100"]
    for method, unroll, lo, hi in ((METHOD, 8, 4100, 8192), ("tensorcore_tf32", 16, 8196, 16384)):
        for n in (lo, hi + 3):
            one = _flat_plan(method, n, h200)
            assert (param_dict(one)["grid"], param_dict(one)["unroll"], one.counters) == (1, unroll, 0), (method, n)
            assert one.launches[0].kernel.endswith(f", {unroll}, float, 2, 2>"), one.launches[0]
            assert param_dict(_flat_plan(method, n, h100))["grid"] > 1, (method, n)
        assert param_dict(_flat_plan(method, hi + 4, h200))["grid"] > 1
        below = param_dict(_flat_plan(method, lo - 4, h200))  # one resident block anyway
        assert below["grid"] == 1 and below["unroll"] == tcreduce.plans.tensorcore_fp32.FLAT_UNROLL[method]


def test_h200_plans_first_axis_sums_on_the_register_loop():
    """FAMILY_TUNING["H200"]'s COLS_TMA_STAGES (session 27) and COLS_TMA_STAGES_LONG (session 28): on an H200 the
    split's first-axis sums of 128-16384 rows take tc32_cols (the register loop, whose whole chunks load without end
    checks) where an H100 takes tc32_cols_tma; tensorcore_tf32 keeps TMA on an H200 below COLS_TMA_LONG_ROWS rows
    (128) and takes its one-chunk pipeline from there (1024, 16384)."""
    kernels = {}
    for gpu in ("H100", "H200"):
        for method in (METHOD, "tensorcore_tf32"):
            for r in (128, 1024, 16384):
                b = (1 << 27) // r  # 512 MiB: past COLS_TMA_MIN_BYTES
                plan = tcreduce.registry.get(method).plan(Cols(1, r, b, 0, b, 0), "float32", "float32",
                                                          KNOWN_GPUS[gpu])
                kernels[gpu, method, r] = plan.launches[0].kernel.split("<")[0]
    for r in (128, 1024, 16384):
        assert (kernels["H200", METHOD, r], kernels["H100", METHOD, r]) == ("tc32_cols", "tc32_cols_tma"), r
    assert kernels["H200", "tensorcore_tf32", 128] == kernels["H100", "tensorcore_tf32", 1024] == "tc32_cols_tma"
    assert kernels["H200", "tensorcore_tf32", 1024] == kernels["H200", "tensorcore_tf32", 16384] == "tc32_cols"


@pytest.mark.parametrize("method", [METHOD, "tensorcore_tf32"])
@pytest.mark.parametrize("n,start", [(1000, 0), (20000, 1), (70001, 3)])
def test_one_pass_flat_twin_equals_literal_replay(method, n, start, rng, monkeypatch):
    """tc32_flat over a one-pass grid (FLAT_ROUNDS = 1 and BLOCK = 64 patched in, no minimum of waves, so that short
    blocks make groups cheaply): one block; 20 blocks in one group with a head and a tail; 69 blocks in two groups."""
    from tcreduce.emulate.tensorcore_tf32 import emulate_tensorcore_tf32
    from tcreduce.plans import tensorcore_fp32 as tc32

    monkeypatch.setattr(tc32, "FLAT_ROUNDS", {method: 1})
    monkeypatch.setattr(tc32, "FLAT_ONE_PASS_MIN_WAVES", 0)
    monkeypatch.setattr(tc32, "BLOCK", 64)
    x = values(rng, (n + start,))
    layout, _ = host_layout(x[start:], None)
    plan = tcreduce.registry.get(method).plan(layout.problem, "float32", "float32", ONE_SM)
    p = param_dict(plan)
    groups = -(-p["grid"] // 64) if p["grid"] > 1 else 0
    assert p["rounds"] == 1 and plan.launches[0].kernel.endswith(", 1>")
    # no workspace: the counters, then two 64-bit flagged slots (s, e) per block pair and group total (combine_grid2)
    assert (plan.workspace_floats, plan.counters) == ((0, flagged_counters(p["grid"], groups, slots_per_value=2))
                                                      if groups else (0, 0))
    new_format, twin = ((literal.LiteralSplit, emulate_tensorcore_fp32) if method == METHOD
                        else (literal.LiteralTf32, emulate_tensorcore_tf32))
    want = literal.flat(plan, x, start, new_format)
    got = np.asarray(twin(plan, np.asarray(x[start:]), "H100"), F32).reshape(-1)
    assert got[0].view(np.uint32) == F32(want).view(np.uint32), (n, start, got, want)


# tc32_rows4: on the 1-SM test GPU 32 resident warps, so 128 rows or more take it; ROWS4_K set from 64 here so that
# rows of one chunk are replayed too; (shape, view)
ROWS4_CASES = {"one chunk": ((128, 64), None), "a partial last chunk, a partial last tile": ((130, 100), None),
               "several chunks": ((129, 300), None), "a 16-byte aligned view": ((132, 264), lambda x: x[:, 4:]),
               "long rows, 4 chunks in flight": ((97, 652), None)}


@pytest.mark.parametrize("case", ROWS4_CASES)
@pytest.mark.parametrize("method", [METHOD, "tensorcore_tf32"])
def test_rows4_twin_equals_literal_and_is_within_the_bound(case, method, rng, monkeypatch):
    import tcreduce.plans.tensorcore_fp32 as P
    from tcreduce import _api
    from tcreduce._layout import host_problem_data
    from tcreduce.emulate.tensorcore_tf32 import emulate_tensorcore_tf32

    monkeypatch.setattr(P, "ROWS4_K", dict.fromkeys((METHOD, "tensorcore_tf32"), ((64, 1024),)))  # tf32's long rows too
    _api.get_plan.cache_clear()
    try:
        shape, view = ROWS4_CASES[case]
        x = values(rng, shape)
        x[3, 7], x[5, 2] = F32(3e36), F32(-1e30)  # one tile on the split's wide path
        x[9, 1], x[10, 60], x[11, 5], x[11, 40] = np.nan, np.inf, np.inf, -np.inf  # NaN, inf, inf - inf
        xv = view(x) if view else x
        layout, _ = host_layout(xv, -1)
        plan = get_plan(method, layout.problem, "float32", "float32", ONE_SM)
        assert param_dict(plan)["form"] == "rows4", plan.describe()
        d = host_problem_data(xv, layout)
        split = method == METHOD
        want = literal.run(plan, d, (lambda: literal.LiteralSplit()) if split else (lambda: literal.LiteralTf32()))
        twin = emulate_tensorcore_fp32 if split else emulate_tensorcore_tf32
        got = np.asarray(twin(plan, d, "H100"), F32).reshape(-1)
        assert literal.same_bits(got, want), (case, method, got[:4], want[:4])
        with np.errstate(invalid="ignore"):
            ref = np.ascontiguousarray(xv).astype(np.float64).sum(axis=-1)
        special = ~np.isfinite(ref)
        np.testing.assert_array_equal(got[special], ref[special].astype(F32))  # NaN where NumPy's is NaN, inf signs
        finite = np.ascontiguousarray(xv)[~special]
        err = np.abs(got[~special].astype(np.float64) - exact_sum(finite, axis=-1))
        assert np.all(err <= bound_for(finite, -1, method)), (case, method)
    finally:
        _api.get_plan.cache_clear()


SPECIALS = {
    "a value >= 2^112 (wide path)": lambda x: x.__setitem__(5, 3e36),
    "huge values cancelling": lambda x: (x.__setitem__(5, 3e36), x.__setitem__(700, -2.9e36)),
    "+inf": lambda x: x.__setitem__(5, np.inf),
    "+inf and -inf": lambda x: (x.__setitem__(5, np.inf), x.__setitem__(9, -np.inf)),
    "NaN": lambda x: x.__setitem__(5, np.nan),
    "NaN with its payload in the low 16 bits": lambda x: x.__setitem__(5, np.uint32(0x7F800001).view(F32)),
    "subnormals": lambda x: x.__imul__(F32(1e-40)),
    "values around 2^-120": lambda x: (x.__imul__(F32(2.0 ** -120)), x[::7].__imul__(F32(2.0 ** 60))),
    "overflow to inf": lambda x: x.__setitem__(slice(None), F32(3e38)),
}


@pytest.mark.parametrize("case", SPECIALS)
def test_special_values_twin_equals_literal_and_numpy(case, rng):
    x = rng.standard_normal(3000).astype(F32)
    SPECIALS[case](x)
    plan = plan_tensorcore_fp32(Flat(x.size, 0), "float32", "float32", ONE_SM)
    want = literal.run(plan, x, lambda: literal.LiteralSplit(), memory=x, start=0)
    got = np.asarray(emulate_tensorcore_fp32(plan, x, "H100"), F32)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~np.isnan(got)],
                                                                             want[~np.isnan(want)]), (got, want)
    with np.errstate(all="ignore"):
        exact = float(exact_sum(x))
    if math.isnan(exact) or math.isinf(exact) or abs(exact) > np.finfo(F32).max:
        assert np.isnan(got[0]) == math.isnan(exact) and (math.isnan(exact) or np.isinf(got[0])), (got, exact)
        if math.isinf(exact):
            assert np.sign(got[0]) == np.sign(exact)
    else:
        assert abs(float(got[0]) - exact) <= float(error_bound(x, method=METHOD)), (got, exact)


@pytest.mark.parametrize("case", ["cols, a group of 8 warps", "cols, 16-byte loads, a partial last strip",
                                  "cols short"])
def test_cols_wide_path_twin_equals_literal(case, rng):
    """tc32_cols: a huge value (the wide path) and an infinity in some columns; the wide path is a warp-wide choice
    per step, so the columns that share a step with them (mma rows g and g + 8 of the strip) change with it."""
    def data(shape):
        x = values(rng, shape)
        x[3, 2] = 3e36
        x[-1, 5] = np.inf
        return x

    plan, got, want = replay_case(METHOD, lambda: literal.LiteralSplit(), emulate_tensorcore_fp32, case, rng, data)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (case, got, want)
    assert np.isinf(got).sum() == 1 and np.isfinite(got).sum() == got.size - 1, got


# ------------------------------------------------------------------------------------------------ forms and bounds
def test_every_form_on_awkward_sizes_is_within_the_bound(rng):
    for shape, axis, view in literal.AWKWARD_CASES:
        x = values(rng, shape)
        x = view(x) if view else x
        for out_dtype in ("float32", "float16", "float64"):
            got = tcreduce.emulate.sum(x, axis=axis, dtype=out_dtype, method=METHOD)
            exact = np.asarray(exact_sum(x, axis=axis), np.float64)
            assert got.shape == exact.shape and got.dtype == np.dtype(out_dtype), (shape, axis, out_dtype)
            with np.errstate(over="ignore"):
                err = np.abs(got.astype(np.float64) - exact)
            finite = np.isfinite(exact)
            if out_dtype == "float16":  # the bound's fp16 output rounding is relative: fp16's normal range only
                finite &= (np.abs(exact) < 65504) & (np.abs(exact) >= 2.0 ** -14)
            assert np.all(err[finite] <= bound_for(x, axis, METHOD, out_dtype)[finite]), (shape, axis, out_dtype)
            if x.size == 0:
                assert np.all(got == 0) and not np.any(np.signbit(got)), (shape, axis)


@pytest.mark.parametrize("period", [8, 1])
def test_segments_of_very_different_size_keep_their_own_bounds(rng, period):
    """The 16 segments of a tile share warps and quads: each segment's error must stay within its own bound even
    when the segment in the other half of the mma is 10^8 times larger (row g + 8 beside row g: segments 8 apart in
    tc32_rows, adjacent columns in tc32_cols, so the scale alternates every ``period`` segments)."""
    for shape, axis in (((64, 40), -1), ((64, 1000), -1), ((64, 999), -1), ((40, 64), 0), ((17, 5000), 0)):
        x = rng.uniform(0.25, 1, shape).astype(F32)
        seg_axis = 0 if axis == -1 else 1
        scale = np.where((np.arange(shape[seg_axis]) // period) % 2 == 0, 1e-4, 1e4).astype(F32)
        x *= scale[:, None] if seg_axis == 0 else scale[None, :]
        got = tcreduce.emulate.sum(x, axis=axis, method=METHOD).astype(np.float64)
        err = np.abs(got - exact_sum(x, axis=axis))
        assert np.all(err <= bound_for(x, axis, METHOD)), (shape, axis, np.max(err / bound_for(x, axis, METHOD)))


@pytest.mark.parametrize("n", [1 << 16, 1 << 20])
def test_bound_holds_and_is_within_100x_of_the_worst_adversarial_error(n):
    literal.assert_bound_tight(METHOD, n)


def test_bounds_of_plans_without_data_cover_the_wide_path():
    """error_bound_factor(plan) must hold for any data (the wide path included); with data below 2^112 the bound
    drops the wide path's block truncation."""
    from tcreduce.bounds import error_bound_factor, split_bound_factor

    for n in (1000, 1 << 20, 1 << 28, 1 << 30):
        plan = plan_tensorcore_fp32(Flat(n, 0), "float32", "float32", H100)
        c, c_narrow = error_bound_factor(plan), split_bound_factor(plan, wide=False)
        assert c == split_bound_factor(plan, wide=True) and c_narrow < c < 40 * 2.0 ** -24
        assert c_narrow < 5 * 2.0 ** -24, c_narrow / 2.0 ** -24  # 1.0u at 2^16 .. 4.1u at 2^30


# the accuracy study's float32 distributions (experiments/common.py)
ACCURACY_DISTS = ("uniform", "normal", "mixed", "lognormal")


@pytest.mark.parametrize("dist", ACCURACY_DISTS)
def test_accuracy_goal_error_at_most_twice_shuffles_plus_one_ulp(dist):
    from experiments.inputs import case_seed, make_input

    for k in range(10, 21, 2):
        n = 1 << k
        for seed in range(2):
            x = make_input(dist, "float32", n, case_seed(dist, "float32", n, seed))
            exact = float(exact_sum(x))
            ulp = float(np.spacing(F32(abs(exact))))
            tc = abs(float(tcreduce.emulate.sum(x, method=METHOD)) - exact)
            sh = abs(float(tcreduce.emulate.sum(x, method="shuffle")) - exact)
            assert tc <= 2 * sh + ulp, (dist, n, seed, tc / ulp, sh / ulp)


def test_emulation_speed_on_2_pow_22_elements(rng):
    """Emulating 2^22 float32 elements in each form takes a few seconds each here; the limit is generous."""
    import time

    x = rng.uniform(-0.25, 0.75, 1 << 22).astype(F32)
    t = time.perf_counter()
    tcreduce.emulate.sum(x, method=METHOD)
    tcreduce.emulate.sum(x.reshape(1 << 18, 16), axis=-1, method=METHOD)  # rows, short
    tcreduce.emulate.sum(x.reshape(1 << 10, 1 << 12), axis=-1, method=METHOD)  # stream
    tcreduce.emulate.sum(x.reshape(64, 1 << 16), axis=0, method=METHOD)  # cols
    elapsed = time.perf_counter() - t
    print(f"four 2^22-element emulations in {elapsed:.2f} s")
    assert elapsed < 120


# ------------------------------------------------------------------------------------------------ planner
def test_planner_picks_a_kernel_per_form():
    cases = {Flat(1 << 28, 0): "tc32_flat<tcr32::Split, 256, 4, float, 2, 4, 4>",  # one pass on an H100 (4 rounds)
             Rows(1 << 20, 16, 16, 0): "tc32_rows<tcr32::Split, 256, 1, true, 4, float, true, 4>",
             Rows(1 << 20, 17, 17, 0): "tc32_rows<tcr32::Split, 256, 1, false, 2, float, false, 4>",
             Rows(1 << 16, 4096, 4096, 0): "tc32_rows_stream<tcr32::Split, 256, 2, 2, float, 2, 4>",
             Rows(1 << 17, 1024, 1024, 0): "tc32_rows_stream<tcr32::Split, 256, 1, 2, float, 2, 4>",  # past ROWS4_K
             Rows(4000, 512, 512, 0): "tc32_rows_stream<tcr32::Split, 256, 2, 2, float, 2, 4>",  # too few for rows4
             Rows(1 << 18, 512, 512, 0): "tc32_rows4<tcr32::Split, 256, 4, float, 3>",  # ROWS4_LONG
             Rows(1 << 18, 508, 508, 0): "tc32_rows4<tcr32::Split, 256, 2, float, 4>",  # in ROWS4_K
             Rows(12672, 600, 600, 0): "tc32_rows4<tcr32::Split, 256, 4, float, 3>",  # 3168 tiles, one per warp
             Rows(12668, 600, 600, 0): "tc32_rows_stream<tcr32::Split, 256, 1, 2, float, 2, 4>",  # one tile fewer
             Rows(1 << 18, 508, 509, 4): "tc32_rows<tcr32::Split, 256, 1, false, 2, float, false, 4>",
             Rows(1 << 20, 64, 64, 0): "tc32_rows<tcr32::Split, 256, 1, true, 2, float, false, 4>",
             Rows(4000, 256, 256, 0): "tc32_rows<tcr32::Split, 256, 8, true, 2, float, false, 4>",  # too few
             Rows(1 << 16, 4096, 4097, 4): "tc32_rows<tcr32::Split, 256, 2, false, 2, float, false, 4>",
             Cols(1, 16, 1 << 20, 0, 1 << 20, 0): "tc32_cols<tcr32::Split, 256, 1, true, 1, float, 2, 4>",
             # aligned strips of more than 4 chunks, no splits, 16 MiB or more: TMA boxes into 2 buffers per warp,
             # from COLS_TMA_LONG_ROWS rows at 2 blocks per SM (2048 strips: 256 blocks of a warp per strip)
             Cols(1, 4096, 1 << 16, 0, 1 << 16, 0): "tc32_cols_tma<tcr32::Split, 256, 1, float, 2, 2>",
             Cols(1, 1024, 1 << 17, 0, 1 << 17, 0): "tc32_cols_tma<tcr32::Split, 256, 1, float, 2, 2>",
             # ... below it at 3: 8192 strips, a warp each would make 1024 blocks (2.59 waves on 396 slots); 4 warps
             # each: 4096 blocks
             Cols(1, 512, 1 << 18, 0, 1 << 18, 0): "tc32_cols_tma<tcr32::Split, 256, 4, float, 3, 2>",
             Cols(1, 1024, 1024, 0, 1024, 0): "tc32_cols<tcr32::Split, 256, 8, true, 1, float, 0, 3>",  # 4 MiB
             # the split takes TMA from 4 chunks per strip (COLS_TMA_MIN_CHUNKS); fewer: the register loop at 4
             # blocks per SM (an H200: the few-chunk path at 2 chunks, test_cases_plan_their_paths)
             Cols(1, 64, 1 << 21, 0, 1 << 21, 0): "tc32_cols_tma<tcr32::Split, 256, 1, float, 3, 2>",
             Cols(1, 32, 1 << 22, 0, 1 << 22, 0): "tc32_cols<tcr32::Split, 256, 1, true, 1, float, 0, 4>",
             # the register loop (rows not 16-byte aligned), 3 blocks per SM: 512 strips, 256 blocks of 2 strips
             # would fill 65% of a wave; a block per strip and 3 splits instead
             Cols(1, 8192, 1 << 14, 0, 1 << 14, 4): "tc32_cols<tcr32::Split, 256, 8, false, 1, float, 0, 3>",
             # TMA at 2 blocks per SM: 256 blocks of 2 strips fill 97% of a wave, no splits
             Cols(1, 8192, 1 << 14, 0, 1 << 14, 0): "tc32_cols_tma<tcr32::Split, 256, 4, float, 2, 2>",
             Cols(1, 4096, 1 << 16, 0, 1 << 16, 4): "tc32_cols<tcr32::Split, 256, 4, false, 1, float, 0, 3>"}
    for prob, name in cases.items():
        plan = get_plan(METHOD, prob, "float32", "float32", H100)
        assert plan.method == METHOD and plan.launches[0].kernel == name and plan.launches[0].source == \
            "tensorcore_fp32.cu", (prob, plan.describe())
    # sm_80 has no TMA: the register loop
    a100 = get_plan(METHOD, Cols(1, 1024, 1 << 17, 0, 1 << 17, 0), "float32", "float32", KNOWN_GPUS["A100"])
    assert a100.launches[0].kernel == "tc32_cols<tcr32::Split, 256, 8, true, 1, float, 0, 3>", a100.describe()
    # the tensor map of a TMA plan: x as [a][r][b] floats, boxes of 16 rows x 32 columns, at x's address
    tma = get_plan(METHOD, Cols(3, 1024, 1 << 15, 1024 << 15, 1 << 15, 0), "float32", "float32", H100).launches[0]
    assert tma.kernel.startswith("tc32_cols_tma<") and tma.kernel.endswith(", 2, 2>")  # 1024 rows: 2 blocks per SM
    assert tma.shared_bytes == 8 * 2 * 2048
    assert tma.args[-1] == TensorMapOfX("float32", (1 << 15, 1024, 3), (4 << 15, 4096 << 15), (32, 16, 1))
    # tf32 streams rows of 512 (ROWS4_K is per method)
    plan = get_plan("tensorcore_tf32", Rows(1 << 18, 512, 512, 0), "float32", "float32", H100)
    assert plan.launches[0].kernel.startswith("tc32_rows_stream<tcr32::Tf32,"), plan.describe()
    plan = get_plan(METHOD, Rows(4, 1 << 20, 1 << 20, 0), "float32", "float32", H100)
    p = param_dict(plan)
    assert p["splits"] > 1 and plan.workspace_floats == 2 * 4 * p["splits"] and plan.counters == 4
    plan = get_plan(METHOD, Cols(1, 8192, 1 << 14, 0, 1 << 14, 4), "float32", "float32", H100)
    p = param_dict(plan)
    assert (p["wpt"], p["splits"], p["grid"]) == (8, 3, 512) and plan.counters == 512
    p = param_dict(get_plan(METHOD, Cols(1, 4096, 1 << 15, 0, 1 << 15, 4), "float32", "float32", H100))
    assert (p["wpt"], p["splits"], p["grid"]) == (8, 1, 1024)  # 2.59 waves: grouped, not split


def test_planner_refuses_what_it_does_not_take():
    from tcreduce.registry import UnsupportedDtype, get

    with pytest.raises(ValueError, match="not element-aligned"):
        plan_tensorcore_fp32(Flat(100, 2), "float32", "float32", H100)
    with pytest.raises(ValueError, match="chain"):
        plan_tensorcore_fp32(Flat(100, 0), "float32", "float32", H100, chain=16)
    with pytest.raises(UnsupportedDtype):
        get("tensorcore_chained").plan(Flat(100, 0), "float32", "float32", H100)
    assert {"float16", "float32"} <= set(get(METHOD).dtypes) and get(METHOD).emulated


# ------------------------------------------------------------------------------------------------ GPU
def _gpu_dists(rng: np.random.Generator, shape) -> dict[str, np.ndarray]:
    return {
        "uniform": rng.uniform(-0.25, 0.75, shape).astype(F32),
        "lognormal": (rng.lognormal(0, 4, shape) * rng.choice([-1, 1], shape)).astype(F32),
        "every exponent": random_bits(rng, shape) * F32(2.0 ** -30),  # subnormals to 2^98, zeros
        "huge (wide path)": huge(rng, shape),
    }


def huge(rng: np.random.Generator, shape) -> np.ndarray:
    """N(0, 1e20^2) with every 997th value +-6e33 (>= 2^112: the split's wide path), sums far from overflow."""
    x = (rng.standard_normal(shape) * 1e20).astype(F32)
    x.reshape(-1)[::997] = rng.choice([-6e33, 6e33], x.reshape(-1)[::997].shape)
    return x


@pytest.mark.gpu
@pytest.mark.parametrize("group", list(literal.GPU_CASE_GROUPS), ids=literal.case_group_id)
def test_gpu_equals_twin_bit_for_bit(group, rng):
    literal.gpu_equals_twin(METHOD, lambda shape: _gpu_dists(rng, shape), literal.GPU_CASE_GROUPS[group])


def test_cases_plan_their_paths():
    literal.cases_plan_their_paths(METHOD)


@pytest.mark.gpu
def test_gpu_prepared_variants_equal_twin(rng):
    literal.gpu_prepared_equal_twin(METHOD, lambda shape: {k: v for k, v in _gpu_dists(rng, shape).items()
                                                           if k in ("lognormal", "huge (wide path)")})


def test_few_loop_takes_long_strips_without_splits():
    """COLS_FEW_LOOP (an H200's tf32 only): first-axis sums of more than COLS_FEW_PATH_MAX_CHUNKS chunks per strip off
    TMA take the few-chunk path in trips (FEW_LOOP, the last template argument) where the plan has no splits; with
    splits (few strips) the register loop; up to 4 chunks per strip keep the one-trip path."""
    from tcreduce.plans import tensorcore_fp32 as plan
    from tcreduce.testing import patched_plans

    def few_loop(method: str, r: int, b: int, gpu: str = "H200") -> bool:
        p = param_dict(get_plan(method, Cols(1, r, b, 0, b, 0), "float32", "float32", KNOWN_GPUS[gpu]))
        assert not (p["few_loop"] and p["splits"] > 1), (r, b)
        return p["few_loop"]

    # an H200's tf32: strips of 1024 rows or more (no TMA there) and inputs under 16 MiB; the split and an H100 not
    assert few_loop("tensorcore_tf32", 1024, 1 << 17) and few_loop("tensorcore_tf32", 128, 2000)
    assert not few_loop("tensorcore_tf32", 128, 1 << 20)  # TMA
    assert not any(few_loop(m, 1024, 1 << 17, gpu) for m, gpu in ((METHOD, "H200"), ("tensorcore_tf32", "H100")))
    everywhere = dict(COLS_FEW_LOOP=dict.fromkeys(plan.COLS_FEW_LOOP, True), **literal.NO_TMA)
    with patched_plans(plan, everywhere):
        for r in (128, 1024, 4096):
            assert few_loop(METHOD, r, (1 << 27) // r), r
        assert not few_loop(METHOD, 64, 1 << 21) and not few_loop(METHOD, 1 << 20, 128)  # one trip; splits


def test_load8_goes_to_rows_8_byte_aligned_only():
    """COLS_LOAD8 (an H200's split only): first-axis sums whose rows are 8-byte aligned but not 16 take ALIGNED8 (the
    last template argument), rows 16-byte aligned keep 16-byte loads, rows 4-byte aligned scalar loads."""
    def aligned8(r: int, b: int, align: int = 0, method: str = METHOD, gpu: str = "H200") -> bool:
        plan = get_plan(method, Cols(1, r, b, 0, b, align), "float32", "float32", KNOWN_GPUS[gpu])
        kernel, on = plan.launches[0].kernel, param_dict(plan)["aligned8"]
        assert kernel.startswith("tc32_cols<") and kernel.endswith(", true>") == on, kernel  # ALIGNED8, the last
        return on

    assert not aligned8(48, (1 << 20) + 2, gpu="H100") and not aligned8(48, (1 << 20) + 2, method="tensorcore_tf32")
    for r in (16, 32, 48, 128, 1024):
        assert aligned8(r, (1 << 20) + 2) and aligned8(r, 1 << 20, align=8), r
        assert not aligned8(r, 1 << 20) and not aligned8(r, (1 << 20) + 1) and not aligned8(r, 1 << 20, align=4), r


def test_tma_cases_plan_tma_where_marked(monkeypatch):
    literal.tma_cases_plan_as_marked(METHOD, monkeypatch)


@pytest.mark.gpu
def test_gpu_tma_equals_twin_bit_for_bit(rng, monkeypatch):
    literal.gpu_tma_equals_twin(
        METHOD, lambda shape: dict(_gpu_dists(rng, shape), specials=literal.specials(rng, shape)), monkeypatch)


GPU_FULL_SIZES = [1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 255, 256, 257, 1023, 1025, 4095, 4097, 65535, 65537,
                  (1 << 20) - 1, (1 << 20) + 3, 10 ** 6 + 3, (1 << 24) + 1]
GPU_AXIS_CASES = [
    ((1, 1), -1, None), ((3, 15), -1, None), ((17, 16), -1, None), ((100, 17), 1, None), ((33, 255), -1, None),
    ((16, 257), -1, None), ((5, 1000), -1, None), ((65537, 16), -1, None), ((64, 4097), -1, None),
    ((3, (1 << 20) + 1), -1, None), ((4, 33, 64), -1, None), ((300, 1032), -1, None), ((2000, 1025 + 7), -1, None),
    ((4, 1 << 18), -1, None), ((5000, 1024), -1, None), ((70, 1024), -1, lambda x: x[:, :700]),
    ((64, 2048), -1, lambda x: x[:, :1500]), ((3, 8, 4096), -1, lambda x: x[:, ::2]),
    ((16, 1000), 0, None), ((1000, 16), 0, None), ((257, 33), 0, None), ((5, 17, 40), 1, None), ((65537, 8), 0, None),
    ((16, 1 << 18), 0, None), ((3000, 3), 0, None), ((7, 3, 5), (0, 2), None), ((6, 5, 4, 3), (1, 3), None),
    ((40, 50), None, None), ((64, 257), -1, lambda x: x[:, 1:]), ((64, 257), 0, lambda x: x[1:, 1:]),
    ((17001, 200), -1, None), ((16900, 264), -1, lambda x: x[:, 4:]),  # tc32_rows4 on an H100 (and a 16-byte view)
    ((12800, 904), -1, lambda x: x[:, 4:]),  # the split's tc32_rows4 at 4 chunks in flight (tf32: streamed)
    ((1000,), None, lambda x: x[1:]), ((1000,), None, lambda x: x[3:-2]), ((1000,), None, lambda x: x[::-1]),
    ((1000,), None, lambda x: x[::3]), ((96, 80), 0, lambda x: x.T), ((96, 80), 1, lambda x: x.T),
    ((96, 80), -1, lambda x: x[:, ::2]), ((96, 80), 0, lambda x: x[::-1]),
    ((32, 48, 16), 1, lambda x: x.transpose(2, 0, 1)),
    ((256, 16416), 0, None),  # 16 MiB: tc32_cols_tma on an H100
    ((3, 16, 80), 1, None), ((4, 16, 128), 1, None),  # short columns: adjacent strips across two i, within one
]


@pytest.mark.gpu
@pytest.mark.parametrize("n", GPU_FULL_SIZES)
def test_gpu_full_sums_within_bound(n, rng):
    import cupy

    xh = values(rng, n)
    for view in (None, lambda x: x[1:], lambda x: x[2:], lambda x: x[3:]):
        xv = view(xh) if view else xh
        if xv.size == 0:
            continue
        xd = cupy.asarray(xh)
        xdv = view(xd) if view else xd
        out = poisoned((), "float32")
        res = tcreduce.sum(xdv, method=METHOD, out=out)
        assert res is out
        check_sum(res, xv, None, method=METHOD)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,axis,view", GPU_AXIS_CASES,
                         ids=[f"{s}-{a}-{'view' if v else 'c'}{i}" for i, (s, a, v) in enumerate(GPU_AXIS_CASES)])
def test_gpu_axis_sums_within_bound(shape, axis, view, rng):
    import cupy

    xh = values(rng, shape)
    xd = cupy.asarray(xh)
    xv, xdv = (view(xh), view(xd)) if view else (xh, xd)
    expected_shape = np.sum(xv, axis=axis).shape
    for out_dtype in ("float32", "float16", "float64"):
        out = poisoned(expected_shape, out_dtype)
        res = tcreduce.sum(xdv, axis=axis, dtype=out_dtype, method=METHOD, out=out)
        if out_dtype == "float16":
            xs = xv.astype(np.float64).sum(axis=axis)
            if np.any(np.abs(xs) > 6e4):  # fp16 outputs overflow: compare only that they are inf where NumPy's are
                continue
        check_sum(res, xv, axis, method=METHOD, out_dtype=out_dtype)


@pytest.mark.gpu
def test_gpu_nan_and_infinities_propagate(rng):
    import cupy

    xh = rng.standard_normal((8, 3000)).astype(F32)
    xh[1, 5] = np.nan
    xh[2, 7] = np.inf
    xh[3, 9] = -np.inf
    xh[4, 1], xh[4, 2] = np.inf, -np.inf
    xh[5, 3] = np.uint32(0x7F800001).view(F32)  # a NaN whose payload sits in the low bits
    xh[6, 4] = 3e36  # the wide path, finite
    many = rng.standard_normal((17000, 200)).astype(F32)  # tc32_rows4 on an H100 (rows of 128-511, many of them)
    many[:8] = xh[:, :200]  # the same specials in the same rows (all in the first 10 columns)
    many[2, 70], many[4, 150] = np.inf, -np.inf  # and in other mma rows of their 4-row tile
    for axis, data in ((1, xh), (0, np.ascontiguousarray(xh.T)), (1, many)):
        res = to_numpy(tcreduce.sum(cupy.asarray(data), axis=axis, method=METHOD))
        with np.errstate(invalid="ignore"):
            ref = data.astype(np.float64).sum(axis=axis)
        np.testing.assert_array_equal(np.isnan(res), np.isnan(ref))
        np.testing.assert_array_equal(res[[2, 3]], ref[[2, 3]])
        assert abs(float(res[6]) - ref[6]) <= 1e-6 * abs(ref[6])
    for row in range(8):
        full = float(to_numpy(tcreduce.sum(cupy.asarray(xh[row]), method=METHOD)))
        with np.errstate(invalid="ignore"):
            ref = float(xh[row].astype(np.float64).sum())
        assert (math.isnan(full) and math.isnan(ref)) or full == ref or abs(full - ref) <= 1e-5 * abs(ref), (row, full)


@pytest.mark.gpu
def test_gpu_deterministic_and_input_untouched(rng):
    literal.assert_deterministic_and_untouched(METHOD, rng)


@pytest.mark.gpu
def test_gpu_bounds_hold_and_are_tight_at_2_pow_24():
    import cupy

    from tcreduce._device import current_device

    device = current_device()[1]
    n = 1 << 24
    rng = np.random.default_rng(3)
    same_sign = adversarial_inputs(rng, n, "float32")
    worst = {m: (0.0, np.inf, "") for m in (METHOD, "tensorcore_tf32", "shuffle")}
    for name, x in {**same_sign, **mixed_sign_inputs(rng, n, "float32")}.items():
        exact = float(exact_sum(x))
        xd = cupy.asarray(x)
        for m in worst:
            err = abs(float(tcreduce.sum(xd, method=m)) - exact)
            bound = float(error_bound(x, method=m, gpu=device))
            assert err <= bound, (m, name, err, bound)
            scale = float(np.sum(np.abs(x), dtype=np.float64))  # inputs differ in scale: compare relative errors
            if name in same_sign and err / scale > worst[m][0]:
                worst[m] = (err / scale, bound / scale, name)
    print("\nbound / worst error (relative to sum|x|) at 2^24:",
          {m: (b / e if e else np.inf, src) for m, (e, b, src) in worst.items()})
    assert all(e > 0 and b / e <= 100 for e, b, _ in worst.values()), worst


@pytest.mark.gpu
@pytest.mark.large
def test_gpu_more_than_2_pow_31_elements():
    import cupy

    from tcreduce._device import current_device
    from tcreduce.bounds import error_bound_factor

    n = (1 << 31) + 3
    free, _ = cupy.cuda.runtime.memGetInfo()
    if free < 3 * n * 4:
        pytest.skip("needs about 26 GB of free GPU memory")
    x = cupy.random.RandomState(7).uniform(-0.25, 0.75, n, dtype=cupy.float32)
    x[-3:] = cupy.asarray([1000.0, 2000.0, 4000.0], dtype=cupy.float32)  # the elements past 2^31 matter
    ref = float(cupy.sum(x, dtype=cupy.float64))  # float64 of 2^31 fp32 values: error far below the fp32 bound
    abs_sum = float(cupy.sum(cupy.abs(x), dtype=cupy.float64))
    for method in (METHOD, "tensorcore_tf32"):
        plan = get_plan(method, Flat(n, 0), "float32", "float32", current_device()[1])
        bound = error_bound_factor(plan) * abs_sum + abs_sum * 2.0 ** -40
        res = float(tcreduce.sum(x, method=method))
        assert abs(res - ref) <= bound, (method, res, ref, bound)
        res_view = float(tcreduce.sum(x[1:], method=method))
        assert abs(res_view - (ref - float(x[0]))) <= bound, (method, "misaligned view")
        rows = to_numpy(tcreduce.sum(x[:(1 << 31)].reshape(2, 1 << 30), axis=-1, method=method))
        ref_rows = to_numpy(cupy.sum(x[:(1 << 31)].reshape(2, 1 << 30), axis=-1, dtype=cupy.float64))
        assert np.all(np.abs(rows - ref_rows) <= bound), (method, rows, ref_rows)
