"""Method "tensorcore_tf32" (kernels/tensorcore_tf32.cu on the forms of kernels/tensorcore_f32.cuh): float32 values
rounded to tf32, mma.sync m16n8k8.tf32 against ones, fp32 accumulation.

CPU: the rounding (round to nearest, ties away, 10 fraction bits; NaN stays NaN, infinities stay, the largest finite
values do not overflow, subnormals), the twin against the literal lane-by-lane replay (tests/tc32_literal.py) on every
form and work split and on special values, every form and awkward size within the bound, the bound within 100x of the
worst adversarial error, the planner. GPU (``-m gpu``): GPU == twin bit for bit, every form within the bound with
poisoned outputs, NaN and infinities, determinism (the bounds at 2^24 and > 2^31 elements: test_tensorcore_fp32.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tc32_literal as literal
import tcreduce
from tc32_literal import H100, ONE_SM, REPLAY_CASES, random_bits, replay_case, same_bits, values
from tcreduce._api import get_plan
from tcreduce._layout import Cols, Flat, Rows
from tcreduce.bounds import error_bound
from tcreduce.emulate.tensorcore_tf32 import emulate_tensorcore_tf32, round_tf32
from tcreduce.plans.tensorcore_tf32 import plan_tensorcore_tf32
from tcreduce.reference import exact_sum
from tcreduce.testing import bound_for, check_sum, poisoned, to_numpy

F32 = np.float32
METHOD = "tensorcore_tf32"


# ------------------------------------------------------------------------------------------------ rounding
def test_rounding_is_to_nearest_ties_away_on_10_fraction_bits(rng):
    x = random_bits(rng, 1 << 18)
    x = x[np.abs(x) < 2.0 ** 127 * (2 - 2.0 ** -11)]  # below the values that are truncated instead
    y = round_tf32(x)
    assert np.all((y.view(np.uint32) & np.uint32(0x1FFF)) == 0)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    # the tf32 spacing at x: 2^(e - 10) for normal x, 2^-136 for fp32 subnormals
    _, e = np.frexp(np.abs(x64))
    spacing = np.where(np.abs(x64) < 2.0 ** -126, 2.0 ** -136, np.ldexp(1.0, e - 11))
    err = np.abs(y64 - x64)
    assert np.all(err <= spacing / 2)
    tie = err == spacing / 2
    assert np.any(tie) and np.all(np.abs(y64[tie]) > np.abs(x64[tie]))  # ties away from zero
    assert np.all(np.abs(y64 - x64) <= 2.0 ** -11 * np.abs(x64) + 2.0 ** -137)


def test_rounding_keeps_nan_and_infinities_and_does_not_overflow():
    bits = np.array([0x7F800001, 0xFF800001, 0x7FC00000, 0x7FFFFFFF, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FF000,
                     0x7F7FEFFF, 0x00000001, 0x80001000], np.uint32)
    y = round_tf32(bits.view(F32))
    assert np.all(np.isnan(y[:4]))  # low-payload NaNs too (cvt.rna.tf32.f32 would make them infinite)
    assert y[4] == np.inf and y[5] == -np.inf
    assert np.isfinite(y[6]) and y[6] == np.uint32(0x7F7FE000).view(F32)  # truncated, not overflowed to inf
    assert y[7] == np.uint32(0xFF7FE000).view(F32)
    assert y[8] == np.uint32(0x7F7FE000).view(F32)  # just below the cut: rounded (down)
    assert y[9] == 0 and y[10] == np.uint32(0x80002000).view(F32)  # subnormals: the encoding's bit 13, ties away


# ------------------------------------------------------------------------------------------------ twin == literal
@pytest.mark.parametrize("case", REPLAY_CASES)
def test_twin_equals_literal_replay(case, rng):
    plan, got, want = replay_case(METHOD, lambda: literal.LiteralTf32(), emulate_tensorcore_tf32, case, rng)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (case, got[:4], want[:4])


@pytest.mark.parametrize("case", ["tie roundings", "every exponent", "specials"])
def test_twin_equals_literal_replay_on_hard_values(case, rng):
    def data(shape):
        if case == "tie roundings":  # low 13 bits exactly 0x1000 (and neighbours)
            x = rng.uniform(0.5, 2, shape).astype(F32).view(np.uint32)
            x = (x & np.uint32(0xFFFFE000)) | rng.choice([0x0FFF, 0x1000, 0x1001], shape).astype(np.uint32)
            return x.view(F32)
        if case == "every exponent":
            return random_bits(rng, shape) * F32(2.0 ** -40)
        x = values(rng, shape)
        x.reshape(-1)[3] = np.uint32(0x7F800001).view(F32)
        x.reshape(-1)[-2] = np.uint32(0x7F7FFFFF).view(F32)
        return x

    for replay in ("flat, 4 blocks, partial last iteration", "rows, a group of 4 warps, scalar loads",
                   "stream, a group per row", "cols, splits"):
        plan, got, want = replay_case(METHOD, lambda: literal.LiteralTf32(), emulate_tensorcore_tf32, replay, rng,
                                      data)
        assert same_bits(got, want), (case, replay, got[:4], want[:4])


# ------------------------------------------------------------------------------------------------ forms and bounds


def test_every_form_on_awkward_sizes_is_within_the_bound(rng):
    for shape, axis, view in literal.AWKWARD_CASES:
        x = values(rng, shape)
        x = view(x) if view else x
        for out_dtype in ("float32", "float64"):
            got = tcreduce.emulate.sum(x, axis=axis, dtype=out_dtype, method=METHOD)
            exact = np.asarray(exact_sum(x, axis=axis), np.float64)
            assert got.shape == exact.shape and got.dtype == np.dtype(out_dtype), (shape, axis, out_dtype)
            err = np.abs(got.astype(np.float64) - exact)
            assert np.all(err <= bound_for(x, axis, METHOD, out_dtype)), (shape, axis, out_dtype)
            if x.size == 0:
                assert np.all(got == 0) and not np.any(np.signbit(got)), (shape, axis)


@pytest.mark.parametrize("n", [1 << 16, 1 << 20])
def test_bound_holds_and_is_within_100x_of_the_worst_adversarial_error(n):
    literal.assert_bound_tight(METHOD, n)


def test_subnormal_inputs_stay_within_the_bound(rng):
    x = (rng.standard_normal(5000) * 1e-40).astype(F32)
    err = abs(float(tcreduce.emulate.sum(x, method=METHOD)) - float(exact_sum(x)))
    assert err <= float(error_bound(x, method=METHOD))


def test_planner_picks_a_kernel_per_form():
    cases = {Flat(1 << 28, 0): "tc32_flat<tcr32::Tf32, 256, 8, float, 2, 4, 4>",  # one pass on an H100 (4 rounds)
             Rows(1 << 20, 16, 16, 0): "tc32_rows<tcr32::Tf32, 256, 1, true, 4, float, true, 4>",
             # 4096 values = 16 chunks of 256, 2 per step: 8 steps, spread over 2 warps of at most
             # STREAM_MAX_STEPS = 4 steps each (_common.spread_rows)
             Rows(1 << 16, 4096, 4096, 0): "tc32_rows_stream<tcr32::Tf32, 256, 2, 2, float, 2, 4>",
             # TMA boxes into 2 buffers per warp (16 MiB or more, aligned, no splits): 3 blocks per SM below
             # COLS_TMA_LONG_ROWS rows, 2 from there
             Cols(1, 512, 1 << 18, 0, 1 << 18, 0): "tc32_cols_tma<tcr32::Tf32, 256, 4, float, 3, 2>",
             Cols(1, 4096, 1 << 16, 0, 1 << 16, 0): "tc32_cols_tma<tcr32::Tf32, 256, 1, float, 2, 2>",
             # COLS_PREFETCH: otherwise tf32's tc32_cols loads a chunk ahead, at 2 blocks per SM; few chunks per
             # strip do not
             Cols(1, 4096, 1 << 16, 0, 1 << 16, 4): "tc32_cols<tcr32::Tf32, 256, 1, false, 1, float, 0, 2, true>",
             Cols(1, 64, 1 << 21, 0, 1 << 21, 4): "tc32_cols<tcr32::Tf32, 256, 1, false, 1, float, 0, 4>",
             # tf32 takes TMA from 2 chunks per strip (COLS_TMA_MIN_CHUNKS)
             Cols(1, 32, 1 << 22, 0, 1 << 22, 0): "tc32_cols_tma<tcr32::Tf32, 256, 1, float, 3, 2>"}
    for prob, name in cases.items():
        plan = get_plan(METHOD, prob, "float32", "float32", H100)
        assert plan.method == METHOD and plan.launches[0].kernel == name
        assert plan.launches[0].source == "tensorcore_tf32.cu"
    from tcreduce.registry import UnsupportedDtype, get

    assert get(METHOD).dtypes == ("float32",) and get(METHOD).emulated
    with pytest.raises(UnsupportedDtype):
        get(METHOD).plan(Flat(100, 0), "float16", "float32", H100)
    with pytest.raises(ValueError, match="element-aligned"):
        plan_tensorcore_tf32(Flat(100, 6), "float32", "float32", ONE_SM)


# ------------------------------------------------------------------------------------------------ GPU
def _gpu_dists(rng, shape) -> dict:
    return {"uniform": rng.uniform(-0.25, 0.75, shape).astype(F32),
            "lognormal": (rng.lognormal(0, 4, shape) * rng.choice([-1, 1], shape)).astype(F32),
            "every exponent": random_bits(rng, shape) * F32(2.0 ** -30),
            "ties": ((rng.uniform(0.5, 2, shape).astype(F32).view(np.uint32) & np.uint32(0xFFFFE000))
                     | np.uint32(0x1000)).view(F32)}


@pytest.mark.gpu
@pytest.mark.parametrize("group", list(literal.GPU_CASE_GROUPS), ids=literal.case_group_id)
def test_gpu_equals_twin_bit_for_bit(group, rng):
    literal.gpu_equals_twin(METHOD, lambda shape: _gpu_dists(rng, shape), literal.GPU_CASE_GROUPS[group])


def test_cases_plan_their_paths():
    literal.cases_plan_their_paths(METHOD)


@pytest.mark.gpu
def test_gpu_prepared_variants_equal_twin(rng):
    literal.gpu_prepared_equal_twin(METHOD, lambda shape: {k: v for k, v in _gpu_dists(rng, shape).items()
                                                           if k in ("lognormal", "every exponent")})


def test_tma_cases_plan_tma_where_marked(monkeypatch):
    literal.tma_cases_plan_as_marked(METHOD, monkeypatch)


@pytest.mark.gpu
def test_gpu_tma_equals_twin_bit_for_bit(rng, monkeypatch):
    literal.gpu_tma_equals_twin(
        METHOD, lambda shape: dict(_gpu_dists(rng, shape), specials=literal.specials(rng, shape)), monkeypatch)


GPU_FULL_SIZES = [1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 255, 256, 257, 1023, 1025, 4095, 4097, 65535, 65537,
                  (1 << 20) + 3, 10 ** 6 + 3, (1 << 24) + 1]
GPU_AXIS_CASES = [
    ((1, 1), -1, None), ((3, 15), -1, None), ((17, 16), -1, None), ((100, 17), 1, None), ((33, 255), -1, None),
    ((65537, 16), -1, None), ((64, 4097), -1, None), ((3, (1 << 20) + 1), -1, None), ((300, 1032), -1, None),
    ((4, 1 << 18), -1, None), ((5000, 1024), -1, None), ((64, 2048), -1, lambda x: x[:, :1500]),
    ((16, 1000), 0, None), ((1000, 16), 0, None), ((257, 33), 0, None), ((5, 17, 40), 1, None), ((65537, 8), 0, None),
    ((3000, 3), 0, None), ((7, 3, 5), (0, 2), None), ((64, 257), -1, lambda x: x[:, 1:]),
    ((64, 257), 0, lambda x: x[1:, 1:]), ((1000,), None, lambda x: x[1:]), ((1000,), None, lambda x: x[::-1]),
    ((96, 80), 0, lambda x: x.T), ((96, 80), -1, lambda x: x[:, ::2]), ((32, 48, 16), 1, lambda x: x.transpose(2, 0, 1)),
    ((256, 16416), 0, None),  # 16 MiB: tc32_cols_tma on an H100
    ((3, 16, 80), 1, None), ((4, 16, 128), 1, None),  # short columns: adjacent strips across two i, within one
]


@pytest.mark.gpu
@pytest.mark.parametrize("n", GPU_FULL_SIZES)
def test_gpu_full_sums_within_bound(n, rng):
    import cupy

    xh = values(rng, n)
    xd = cupy.asarray(xh)
    for view in (None, lambda x: x[1:], lambda x: x[3:]):
        xv, xdv = (view(xh), view(xd)) if view else (xh, xd)
        if xv.size == 0:
            continue
        out = poisoned((), "float32")
        assert tcreduce.sum(xdv, method=METHOD, out=out) is out
        check_sum(out, xv, None, method=METHOD)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,axis,view", GPU_AXIS_CASES,
                         ids=[f"{s}-{a}-{'view' if v else 'c'}{i}" for i, (s, a, v) in enumerate(GPU_AXIS_CASES)])
def test_gpu_axis_sums_within_bound(shape, axis, view, rng):
    import cupy

    xh = values(rng, shape, spread=3)
    xd = cupy.asarray(xh)
    xv, xdv = (view(xh), view(xd)) if view else (xh, xd)
    expected_shape = np.sum(xv, axis=axis).shape
    for out_dtype in ("float32", "float64"):
        out = poisoned(expected_shape, out_dtype)
        res = tcreduce.sum(xdv, axis=axis, dtype=out_dtype, method=METHOD, out=out)
        check_sum(res, xv, axis, method=METHOD, out_dtype=out_dtype)


@pytest.mark.gpu
def test_gpu_nan_and_infinities_propagate(rng):
    import cupy

    xh = rng.standard_normal((8, 3000)).astype(F32)
    xh[1, 5] = np.nan
    xh[2, 7] = np.inf
    xh[3, 9] = -np.inf
    xh[4, 1], xh[4, 2] = np.inf, -np.inf
    xh[5, 3] = np.uint32(0x7F800001).view(F32)  # cvt.rna.tf32.f32 would make this NaN an infinity
    xh[6, 4] = np.uint32(0x7F7FFFFF).view(F32)  # cvt.rna.tf32.f32 would make this finite value an infinity
    for axis, data in ((1, xh), (0, np.ascontiguousarray(xh.T))):
        res = to_numpy(tcreduce.sum(cupy.asarray(data), axis=axis, method=METHOD))
        with np.errstate(invalid="ignore", over="ignore"):
            ref = data.astype(np.float64).sum(axis=axis)
        np.testing.assert_array_equal(np.isnan(res), np.isnan(ref))
        np.testing.assert_array_equal(res[[2, 3]], ref[[2, 3]])
        assert np.isfinite(res[6]) and abs(float(res[6]) - ref[6]) <= 2.0 ** -10 * abs(ref[6])
    full = float(to_numpy(tcreduce.sum(cupy.asarray(xh[2:4]), method=METHOD)))
    assert math.isnan(full)


@pytest.mark.gpu
def test_gpu_deterministic_and_input_untouched(rng):
    literal.assert_deterministic_and_untouched(METHOD, rng)
