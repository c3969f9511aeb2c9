"""Method "exact" and tcreduce.exact: CPU tests of the state arithmetic, the correct rounding, merging and the
planner, compile checks of every kernel instantiation (bfloat16 included), and GPU tests that compare every result
bit for bit with the CPU twin (the exact sum, rounded once) across forms, views, dtypes, specials and partitions."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import tcreduce
from tcreduce.emulate.exact import CANONICAL_NAN, FORMATS, exact_states, normalize_limbs, round_state_bits
from tcreduce.exact import finalize, merge_states, partial_state, state_limbs
from tcreduce.testing import poisoned, random_input, to_numpy

UINT = {"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}


# ---------------------------------------------------------------------------------------------------- CPU: rounding
def _is_correct_rounding(bits: int, value: Fraction, out: str) -> bool:
    """Whether ``bits`` (of dtype ``out``) is ``value`` rounded to nearest, ties to even (overflow to inf)."""
    dt = np.dtype(out)
    r = np.array(bits, UINT[out]).view(dt)[()]
    p, emin, emax, nbits = FORMATS[out]
    big = Fraction(2) ** (emax + 1) - Fraction(2) ** (emax - p)  # max finite + half an ulp: the overflow threshold
    if np.isinf(r):
        return (value >= big and r > 0) or (value <= -big and r < 0)
    if abs(value) >= big:
        return False
    fr = Fraction(float(r))
    with np.errstate(over="ignore"):
        lo, hi = np.nextafter(r, dt.type(-np.inf)), np.nextafter(r, dt.type(np.inf))
    d = abs(fr - value)
    for nb in (lo, hi):
        if np.isfinite(nb):
            dn = abs(Fraction(float(nb)) - value)
            if dn < d:
                return False
            if dn == d and int(np.array(r, dt).view(UINT[out])) & 1:  # a tie must go to the even mantissa
                return False
    return True


@pytest.mark.parametrize("out", ["float16", "float32", "float64"])
def test_round_state_bits_is_correct_rounding(out, rng):
    p, emin, emax, _ = FORMATS[out]
    values = []
    for lsb in (-24, -149):
        for _ in range(400):
            nbits = int(rng.integers(1, 400))
            v = int(rng.integers(1, 1 << 62)) << max(0, nbits - 62) if nbits > 62 else int(rng.integers(1, 1 << nbits))
            values.append((v * (1 if rng.random() < 0.5 else -1), lsb))
        # ties, near-ties, the subnormal range and the overflow threshold of the format
        for e in (emin - p, emin - 1, emin, 0, emax):
            sh = e - (p - 1) - lsb
            if sh > 1:
                for m in ((1 << p) - 1, 1 << (p - 1), (1 << (p - 1)) + 1):
                    base = m << sh
                    values += [(base + (1 << (sh - 1)) + d, lsb) for d in (-1, 0, 1)]
    for v, lsb in values:
        bits = round_state_bits(v, lsb, out)
        assert _is_correct_rounding(bits, Fraction(v) * Fraction(2) ** lsb, out), (v, lsb, out, hex(bits))


def test_round_state_bits_boundaries():
    # fp16 input units (2^-24): 65519 rounds to 65504, 65520 is the tie between 65504 and 65536 -> inf (even)
    assert round_state_bits(65519 << 24, -24, "float16") == 0x7BFF
    assert round_state_bits(65520 << 24, -24, "float16") == 0x7C00
    assert round_state_bits(-(65520 << 24), -24, "float16") == 0xFC00
    assert round_state_bits(1, -24, "float16") == 0x0001  # the smallest subnormal
    assert round_state_bits(1, -149, "float32") == 0x00000001
    assert round_state_bits(1, -149, "float16") == 0  # far below half the smallest fp16 subnormal: +0
    assert round_state_bits(0, -149, "float64") == 0
    # double rounding would get this wrong: 1 + 2^-24 + 2^-80 rounds up to 1 + 2^-23 (through float64: to 1)
    v = (1 << 149) + (1 << 125) + (1 << 69)
    assert round_state_bits(v, -149, "float32") == 0x3F800001


def test_normalize_limbs_floor_carries(rng):
    s = rng.integers(-(1 << 60), 1 << 60, size=(50, 7))
    value = [sum(int(x) << (32 * i) for i, x in enumerate(row[:4])) for row in s]
    n = normalize_limbs(s.copy(), 4)
    assert np.all((n[:, :3] >= 0) & (n[:, :3] < (1 << 32)))
    assert [sum(int(x) << (32 * i) for i, x in enumerate(row[:4])) for row in n] == value
    np.testing.assert_array_equal(n[:, 4:], s[:, 4:])


# ---------------------------------------------------------------------------------------------------- CPU: states
def _state_value(st: np.ndarray, k: int) -> int:
    return sum(int(x) << (32 * i) for i, x in enumerate(st[:k]))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_states_are_exact_sums(dtype, rng):
    k, lsb = (4, -24) if dtype == "float16" else (11, -149)
    for shape in [(1, 1), (3, 17), (5, 1000), (2, 70_001)]:
        if dtype == "float32":
            x = (rng.standard_normal(shape) * np.exp2(rng.integers(-140, 120, shape))).astype(np.float32)
        else:
            x = (rng.standard_normal(shape) * np.exp2(rng.integers(-20, 14, shape))).astype(np.float16)
        st = exact_states(x, dtype)
        assert st.shape == shape[:1] + (k + 3,) and st.dtype == np.int64
        for row, s in zip(x, st):
            want = sum((Fraction(float(v)) for v in row), Fraction(0)) / Fraction(2) ** lsb
            assert want.denominator == 1 and _state_value(s, k) == want.numerator
            assert np.all((s[:k - 1] >= 0) & (s[:k - 1] < (1 << 32))) and not s[k:].any()


def test_bfloat16_states_match_float32(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = (rng.standard_normal((4, 999)) * np.exp2(rng.integers(-120, 120, (4, 999)))).astype(ml_dtypes.bfloat16)
    x[1, 3] = np.nan
    x[2, 4] = np.inf
    np.testing.assert_array_equal(exact_states(x, "bfloat16"), exact_states(x.astype(np.float32), "float32"))
    raw = x.view(np.uint16)  # the raw 16-bit array the GPU path receives
    np.testing.assert_array_equal(exact_states(raw, "bfloat16"), exact_states(x.astype(np.float32), "float32"))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("out", ["float16", "float32", "float64"])
def test_emulated_exact_is_the_rounded_exact_sum(dtype, out, rng):
    for shape, axis in [((1000,), None), ((1001,), None), ((30, 77), 1), ((30, 77), 0), ((4, 5, 6), (0, 2))]:
        x = random_input(rng, shape, dtype, -100, 100)
        got = tcreduce.emulate.sum(x, axis=axis, dtype=out, method="exact")
        assert got.dtype == np.dtype(out)
        ref = tcreduce.reference.exact_sum(x, axis=axis)  # exact, rounded once to float64
        if out == "float64":
            np.testing.assert_array_equal(got, ref)
        # the one rounding: within half an ulp of the exact sum, the bound error_bound reports
        bound = tcreduce.bounds.error_bound(x, axis, method="exact", dtype=out)
        assert np.all(np.abs(got.astype(np.float64) - ref) <= bound + np.abs(ref) * 2.0 ** -53)
        np.testing.assert_array_equal(bound, 0.5 * np.spacing(np.abs(got)).astype(np.float64))


def test_direct_rounding_not_through_float64():
    x = np.array([1.0, 2.0 ** -24, 2.0 ** -80], np.float32)  # exact: 1 + 2^-24 + 2^-80, just above a tie
    assert tcreduce.emulate.sum(x, method="exact") == np.float32(1 + 2.0 ** -23)
    assert float(tcreduce.reference.exact_sum(x)) == 1 + 2.0 ** -24  # float64 loses the 2^-80 ...
    assert np.float32(1 + 2.0 ** -24) == np.float32(1.0)  # ... and a second rounding would give 1.0


def test_overflow_and_specials():
    big = np.full(4, 3e38, np.float32)
    assert tcreduce.emulate.sum(big, method="exact") == np.inf
    assert tcreduce.emulate.sum(-big, method="exact") == -np.inf
    assert tcreduce.emulate.sum(big, method="exact", dtype="float64") == 4 * float(np.float32(3e38))
    h = np.array([65504, 16], np.float16)  # 65520: the tie 65504 / 65536 -> inf in fp16
    assert tcreduce.emulate.sum(h, method="exact", dtype="float16") == np.inf
    cases = {"nan": ([1, np.nan, np.inf], "nan"), "both": ([np.inf, 2, -np.inf], "nan"), "pinf": ([1, np.inf], np.inf),
             "ninf": ([-np.inf, 3], -np.inf)}
    for name, (vals, want) in cases.items():
        for dtype in ("float16", "float32"):
            for out in ("float16", "float32", "float64"):
                r = tcreduce.emulate.sum(np.array(vals, dtype), method="exact", dtype=out)
                if want == "nan":
                    assert int(np.asarray(r).view(UINT[out])) == CANONICAL_NAN[out], (name, dtype, out)
                else:
                    assert r == want, (name, dtype, out)
    zero = tcreduce.emulate.sum(np.array([-1.0, 1.0, -0.0], np.float32), method="exact")
    assert zero == 0 and not np.signbit(zero)  # an exact zero is +0.0


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_partition_invariance_and_merge(dtype, rng):
    x = random_input(rng, (6, 5000), dtype, -1000, 1000)
    x[2, 17] = np.inf
    x[3, 5] = np.nan
    whole = partial_state(x, axis=1)
    assert whole.shape == (6, state_limbs(dtype)) and whole.dtype == np.int64
    parts = np.stack([partial_state(x[:, a:b], axis=1) for a, b in ((0, 1), (1, 1234), (1234, 4000), (4000, 5000))])
    np.testing.assert_array_equal(merge_states(parts), whole)
    np.testing.assert_array_equal(merge_states(parts[::-1]), whole)
    full = partial_state(x)
    np.testing.assert_array_equal(merge_states(whole), full)  # the rows' states merge to the full sum's
    for out in ("float16", "float32", "float64"):
        np.testing.assert_array_equal(finalize(full, dtype, out), tcreduce.emulate.sum(x, dtype=out, method="exact"))
        np.testing.assert_array_equal(finalize(whole, dtype, out),
                                      tcreduce.emulate.sum(x, axis=1, dtype=out, method="exact"))


def test_merge_of_2_pow_20_states_stays_exact():
    k = 11
    st = np.zeros(k + 3, np.int64)
    st[:k - 1] = (1 << 32) - 1  # every low limb full
    st[k - 1] = (1 << 31) - 1
    st[k:] = [1, 2, 3]
    r = (1 << 20) + 5
    stack = np.broadcast_to(st, (r, 2, k + 3))
    merged = merge_states(stack)
    assert _state_value(merged[0], k) == r * _state_value(st, k)
    np.testing.assert_array_equal(merged[1, k:], [r, 2 * r, 3 * r])
    assert np.all((merged[:, :k - 1] >= 0) & (merged[:, :k - 1] < (1 << 32)))


def test_state_api_errors():
    with pytest.raises(TypeError):
        state_limbs("float64")
    with pytest.raises(ValueError):
        merge_states(np.zeros((2, 3, 5), np.int64))  # 5 is no state width
    with pytest.raises(TypeError):
        merge_states(np.zeros((2, 7), np.float64))
    with pytest.raises(ValueError):
        finalize(np.zeros(7, np.int64), "float32", "float32")  # a float32 state has 14 values
    with pytest.raises(TypeError):
        finalize(np.zeros(7, np.int64), "float16", "int32")
    with pytest.raises(TypeError):
        partial_state(np.zeros(5, np.float64))
    assert partial_state(np.zeros((0, 3), np.float16), axis=0).shape == (3, 7)
    assert not partial_state(np.zeros((0, 3), np.float16), axis=0).any()


def test_state_limbs():
    assert state_limbs("float16") == 7 and state_limbs("float32") == 14 and state_limbs("bfloat16") == 14


# ---------------------------------------------------------------------------------------------------- CPU: planner
def test_plans_keep_the_per_thread_limit():
    from tcreduce._device import KNOWN_GPUS
    from tcreduce._layout import Cols, Flat, Rows
    from tcreduce._plan import param_dict
    from tcreduce.plans.exact import MAX_PER_THREAD, plan_exact

    h100 = KNOWN_GPUS["H100"]
    for prob in (Flat(1 << 40, 0), Flat(3, 4), Rows(1, 1 << 36, 1 << 36, 0), Rows(1 << 20, 16, 16, 0),
                 Cols(1, 1 << 34, 3, 0, 3, 0), Cols(7, 1000, 1 << 20, 1000 << 20, 1 << 20, 0)):
        for dt in ("float16", "float32"):
            plan = plan_exact(prob, dt, "float32", h100)
            p = param_dict(plan)
            (ln,) = plan.launches
            threads = ln.grid[0] * ln.block[0]
            if p["kernel"] == "flat":
                assert math.ceil(prob.n / threads) <= MAX_PER_THREAD
                assert plan.workspace_floats >= 2 * state_limbs(dt) * ln.grid[0] or ln.grid[0] == 1
            else:
                r = prob.k if isinstance(prob, Rows) else prob.r
                assert math.ceil(math.ceil(r / p["splits"]) / p["group"]) <= MAX_PER_THREAD
                assert ln.grid[1] == p["splits"]
                if p["splits"] > 1:
                    assert plan.counters == p["tiles"]
                    assert plan.workspace_floats == 2 * state_limbs(dt) * prob.outputs * p["splits"]
    state_plan = plan_exact(Flat(100, 0), "float16", "int64", h100)
    assert "long long, 1," in state_plan.launches[0].kernel
    with pytest.raises(TypeError):
        plan_exact(Flat(100, 0), "float16", "int32", h100)


@pytest.mark.slow
@pytest.mark.parametrize("tag", ["exact_detail::InF16", "exact_detail::InF32", "exact_detail::InBF16"])
def test_every_kernel_compiles_clean(tag):
    from tcreduce.plans.exact import kernel_names
    from tcreduce.testing import assert_compiles_clean

    for name in kernel_names(tag):
        assert_compiles_clean("exact.cu", name, "sm_90")
    for name in kernel_names(tag)[:2]:
        assert_compiles_clean("exact.cu", name, "sm_80")


# ---------------------------------------------------------------------------------------------------- GPU
GPU_CASES = [
    ((1,), None, None), ((7,), None, None), ((17,), None, None), ((255,), None, None), ((257,), None, None),
    ((4097,), None, None), (((1 << 20) + 3,), None, None), (((1 << 22) + 1,), None, None),
    ((1000,), None, lambda x: x[1:]), ((1000,), None, lambda x: x[3:-2]), ((1000,), None, lambda x: x[::-1]),
    ((3001,), None, lambda x: x[::3]), ((20, 64), None, lambda x: x.T),
    ((64, 16), -1, None), ((100, 17), -1, None), ((33, 255), -1, None), ((16, 4097), -1, None),
    ((3, 100_001), -1, None), ((2, 1 << 20), -1, None), ((1 << 16, 16), -1, None), ((64, 257), -1, lambda x: x[:, 1:]),
    ((16, 1000), 0, None), ((1000, 40), 0, None), ((5, 17, 40), 1, None), ((3, 1 << 16, 8), 1, None),
    ((1 << 15, 64), 0, None), ((4, 1 << 18), 0, None), ((7, 3, 5), (0, 2), None), ((96, 80), 0, lambda x: x.T),
    ((96, 80), 0, lambda x: x[::-1]), ((6, 5, 4, 3), (1, 3), None),
]


def _gpu_input(xh, view):
    import cupy

    xd = cupy.asarray(xh)
    return (view(xd), view(xh)) if view else (xd, xh)


def _distributions(rng, shape, dtype):
    if dtype == "float16":
        yield "uniform", random_input(rng, shape, dtype)
        yield "wide", (rng.standard_normal(shape) * np.exp2(rng.integers(-24, 15, shape))).astype(dtype)
        yield "cancel", (rng.standard_normal(shape) * 1000).astype(dtype)
    else:
        yield "uniform", random_input(rng, shape, dtype)
        # the whole fp32 range: every element a different window, subnormals, zeros
        x = (rng.standard_normal(shape) * np.exp2(rng.integers(-150, 126, shape))).astype(dtype)
        x.reshape(-1)[::7] = 0
        yield "fullrange", x
        yield "lognormal", (rng.lognormal(0, 8, shape) * rng.choice([-1, 1], shape)).astype(dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_gpu_exact_equals_twin_bit_for_bit(dtype, rng):
    import cupy

    mismatches, count = [], 0
    for shape, axis, view in GPU_CASES:
        for dist, xh in _distributions(rng, shape, dtype):
            xd, xv = _gpu_input(xh, view)
            want = {out: tcreduce.emulate.sum(xv, axis=axis, dtype=out, method="exact")
                    for out in ("float16", "float32", "float64")}
            for out, w in want.items():
                res = poisoned(w.shape, out)
                got = to_numpy(tcreduce.sum(xd, axis=axis, dtype=out, method="exact", out=res))
                count += 1
                if not np.array_equal(got.view(UINT[out]), w.view(UINT[out])):
                    mismatches.append((shape, axis, dist, out, got.reshape(-1)[:3], w.reshape(-1)[:3]))
            st = to_numpy(partial_state(xd, axis=axis))
            np.testing.assert_array_equal(st, partial_state(xv, axis=axis), err_msg=f"state {shape} {axis} {dist}")
            for out in ("float16", "float32", "float64"):  # sum == finalize(partial_state), on the GPU
                f = to_numpy(finalize(cupy.asarray(st), dtype, out))
                assert np.array_equal(f.view(UINT[out]), want[out].view(UINT[out])), (shape, axis, dist, out)
            cupy.cuda.runtime.deviceSynchronize()
    print(f"\nexact GPU == twin: {count - len(mismatches)}/{count}")
    assert not mismatches, f"{len(mismatches)} of {count} differ; first: {mismatches[:5]}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_gpu_specials_and_slow_paths(dtype, rng):
    """Inf and NaN in every position kind (head, tail, body, every thread's first element), values that move the
    fp32 window up on every chunk, values below the window, overflow: GPU == twin, bits."""
    import cupy

    n = (1 << 20) + 5
    base = random_input(rng, n, dtype)
    cases = {}
    for name, pos, val in [("nan_head", 0, np.nan), ("nan_tail", n - 1, np.nan), ("inf_mid", n // 2, np.inf),
                           ("ninf_mid", n // 3, -np.inf)]:
        x = base.copy()
        x[pos] = val
        cases[name] = x
    x = base.copy()
    x[5], x[n - 2] = np.inf, -np.inf
    cases["both_inf"] = x
    x = base.copy()
    x[::4096] = np.nan
    cases["many_nan"] = x
    if dtype == "float32":
        cases["rising"] = (np.exp2(np.linspace(-149, 127, n)) * rng.choice([-1, 1], n)).astype(np.float32)
        cases["falling"] = cases["rising"][::-1].copy()
        tiny_big = np.where(np.arange(n) % 2 == 0, np.float32(1e30), np.float32(1e-40)).astype(np.float32)
        cases["tiny_big"] = tiny_big * rng.choice([-1, 1], n).astype(np.float32)
        cases["overflow"] = np.full(n, 3e38, np.float32)
    else:
        cases["overflow16"] = np.full(n, 60000, np.float16)
        cases["subnormals"] = (rng.integers(-1023, 1024, n) * 2.0 ** -24).astype(np.float16)
    bad = []
    for name, xh in cases.items():
        for view in (None, lambda x: x[1:]):
            xd, xv = _gpu_input(xh, view)
            for out in ("float16", "float32", "float64"):
                got = to_numpy(tcreduce.sum(xd, dtype=out, method="exact"))
                want = tcreduce.emulate.sum(xv, dtype=out, method="exact")
                if got.view(UINT[out]) != want.view(UINT[out]):
                    bad.append((name, view is not None, out, got, want))
            st = to_numpy(partial_state(xd))
            if not np.array_equal(st, partial_state(xv)):
                bad.append((name, view is not None, "state", st, partial_state(xv)))
        xd = cupy.asarray(xh.reshape(16, -1) if n % 16 == 0 else xh[: n - n % 16].reshape(16, -1))
        xv = to_numpy(xd)
        for axis in (0, 1):
            got = to_numpy(tcreduce.sum(xd, axis=axis, method="exact"))
            want = tcreduce.emulate.sum(xv, axis=axis, method="exact")
            if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                bad.append((name, f"axis {axis}", got[:3], want[:3]))
    assert not bad, bad[:5]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_gpu_partitions_merge_to_the_same_bits(dtype, rng):
    import cupy

    xh = (rng.standard_normal(3_000_017) * 100).astype(dtype)
    xd = cupy.asarray(xh)
    whole = partial_state(xd)
    cuts = [0, 1, 1000, 1_234_567, 2_999_999, 3_000_017]
    parts = cupy.stack([partial_state(xd[a:b]) for a, b in zip(cuts[:-1], cuts[1:])])
    merged = merge_states(parts)
    np.testing.assert_array_equal(to_numpy(merged), to_numpy(whole))
    r = to_numpy(tcreduce.sum(xd, method="exact"))
    assert to_numpy(finalize(merged, dtype, "float32")).view(np.uint32) == r.view(np.uint32)
    # the same data in other layouts (other plans and kernels): the same bits
    assert to_numpy(tcreduce.sum(xd[::-1], method="exact")).view(np.uint32) == r.view(np.uint32)
    prefix = to_numpy(tcreduce.sum(xd[:3_000_000], method="exact")).view(np.uint32)
    t = cupy.ascontiguousarray(xd[:3_000_000].reshape(1000, 3000).T)
    assert to_numpy(tcreduce.sum(t, method="exact")).view(np.uint32) == prefix
    assert to_numpy(tcreduce.sum(t[:, ::2], method="exact", axis=1)).shape == (3000,)
    m = xd[:3_000_000].reshape(3000, 1000)
    rows = tcreduce.exact.partial_state(m, axis=1)
    np.testing.assert_array_equal(to_numpy(merge_states(rows)), to_numpy(partial_state(xd[:3_000_000])))


@pytest.mark.gpu
def test_gpu_deterministic_and_input_untouched(rng):
    import cupy

    for dtype in ("float16", "float32"):
        for shape, axis in [((1 << 22) + 5, None), ((1 << 16, 64), -1), ((64, 1 << 16), 0)]:
            xh = random_input(rng, shape, dtype)
            xd = cupy.asarray(xh)
            first = to_numpy(tcreduce.sum(xd, axis=axis, method="exact"))
            s = cupy.cuda.Stream(non_blocking=True)
            with s:
                again = to_numpy(tcreduce.sum(xd, axis=axis, method="exact"))
            assert np.array_equal(first.view(np.uint32), again.view(np.uint32))
            assert np.array_equal(xd.get(), xh)


@pytest.mark.gpu
@pytest.mark.large
def test_gpu_more_than_2_31_elements():
    import cupy

    n = (1 << 31) + 3
    free, _ = cupy.cuda.runtime.memGetInfo()
    if free < 3 * n * 2:
        pytest.skip("needs about 13 GB of free GPU memory")
    rs = cupy.random.RandomState(11)
    x = rs.uniform(-0.25, 0.75, n, dtype=cupy.float32).astype(cupy.float16)
    x[-3:] = cupy.asarray([1000.0, 2.0 ** -24, -7.0], dtype=cupy.float16)  # the elements past 2^31 matter
    # the exact sum in int64 units of 2^-24 (every |value| < 2^30 units here, 2^31 of them: < 2^61)
    units = 0
    for a in range(0, n, 1 << 28):
        units += int(cupy.sum((x[a:a + (1 << 28)].astype(cupy.float64) * 2.0 ** 24).astype(cupy.int64)))
    want = round_state_bits(units, -24, "float32")
    got = to_numpy(tcreduce.sum(x, method="exact")).view(np.uint32)
    assert int(got) == want
    st = to_numpy(partial_state(x))
    assert _state_value(st, 4) == units and not st[4:].any()
    view = to_numpy(tcreduce.sum(x[1:], method="exact")).view(np.uint32)
    x0 = int(cupy.asnumpy(x[:1]).astype(np.float64)[0] * 2.0 ** 24)
    assert int(view) == round_state_bits(units - x0, -24, "float32")
