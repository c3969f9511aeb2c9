"""Methods "kahan" and "tensorcore_kahan": CPU tests of the plans, of the emulator twins against literal scalar
replays of kernels/kahan.cu's orders (full sums and every axis), of accuracy and NaN/Inf semantics, compile checks,
and GPU tests (bit for bit against the twin, within the bound, specials, determinism)."""

from __future__ import annotations

import numpy as np
import pytest

import tcreduce
from tcreduce._device import KNOWN_GPUS
from tcreduce._layout import Cols, Flat, Rows
from tcreduce._plan import DeviceSpec, param_dict
from tcreduce.emulate.kahan import emulate
from tcreduce.plans.kahan import chain_lengths, kernel_names, plan_kahan, plan_tensorcore_kahan
from tcreduce.registry import UnsupportedDtype
from tcreduce.testing import adversarial_inputs, check_sum, poisoned, random_input, to_numpy

F32 = np.float32
METHODS = [("kahan", "float16"), ("kahan", "float32"), ("tensorcore_kahan", "float16")]
TINY = DeviceSpec("H100", 2, (9, 0))  # an H100 with 2 SMs: small grids, several blocks, cheap literal replays


# ---------------------------------------------------------------------------------------------------- CPU
def test_forms():
    h100 = KNOWN_GPUS["H100"]
    for prob in (Rows(4, 100, 100, 0), Cols(2, 30, 5, 150, 5, 0)):
        with pytest.raises(ValueError, match="axis=None"):
            plan_tensorcore_kahan(prob, "float16", "float32", h100)
        assert param_dict(plan_kahan(prob, "float16", "float32", h100))["kernel"] == "kahan_seg"
    with pytest.raises(UnsupportedDtype):
        plan_tensorcore_kahan(Flat(100, 0), "float32", "float32", h100)
    x = np.ones((4, 8), np.float16)
    with pytest.raises(ValueError, match="axis=None"):
        tcreduce.emulate.sum(x, axis=1, method="tensorcore_kahan")
    np.testing.assert_array_equal(tcreduce.emulate.sum(x, axis=1, method="kahan"), np.full(4, 8, np.float32))
    assert tcreduce.emulate.sum(x, method="kahan") == 32  # a full sum of a 2-D array is a Flat problem


def _f(v):
    return F32(v)


def _kahan_add(st, x):
    s, c, p = st
    with np.errstate(invalid="ignore", over="ignore"):
        y = _f(x - c)
        t = _f(s + y)
        return t, _f(_f(t - s) - y), _f(p + x)


def _pair_add(a, b):
    def two_sum(a, b):
        s = _f(a + b)
        bb = _f(s - a)
        return s, _f(_f(a - _f(s - bb)) + _f(b - bb))

    with np.errstate(invalid="ignore", over="ignore"):
        s, e = two_sum(a[0], b[0])
        e = _f(e + _f(a[1] + b[1]))
        hi, lo = two_sum(s, e)
        return hi, lo, _f(a[2] + b[2])


def _butterfly(vals, offsets):
    vals = list(vals)
    for off in offsets:
        vals = [_pair_add(vals[i], vals[i ^ off]) for i in range(len(vals))]
    return vals


def _result(t):
    with np.errstate(invalid="ignore", over="ignore"):
        r = _f(t[0] + t[1])
    return t[2] if np.isnan(r) and not np.isnan(t[2]) else r


def _literal_kahan_flat(plan, x):
    """kernels/kahan.cu kahan_flat, one thread at a time, one operation at a time, with the butterflies done lane
    by lane (not as halving folds)."""
    p = param_dict(plan)
    vec, block, grid, head, nv = p["vec"], p["block"], p["grid"], p["head"], p["nv"]
    n = x.shape[0]
    threads = grid * block
    pairs = []
    for g in range(threads):
        st = (_f(0), _f(0), _f(0))
        if g == 0:
            for e in list(range(head)) + list(range(head + nv * vec, n)):
                st = _kahan_add(st, _f(x[e]))
        for v in range(g, nv, threads):
            for e in range(vec):
                st = _kahan_add(st, _f(x[head + v * vec + e]))
        pairs.append((st[0], _f(-st[1]), st[2]))
    return _combine_blocks(pairs, grid, block, (16, 8, 4, 2, 1))


def _combine_blocks(lane_pairs, grid, block, offsets):
    zero = (_f(0), _f(0), _f(0))
    block_totals = []
    for b in range(grid):
        lanes = lane_pairs[b * block:(b + 1) * block]
        warp_totals = [_butterfly(lanes[w * 32:(w + 1) * 32], offsets)[0] for w in range(block // 32)]
        block_totals.append(_butterfly(warp_totals + [zero] * (32 - len(warp_totals)), (16, 8, 4, 2, 1))[0])
    if grid == 1:
        return _result(block_totals[0])
    acc = [zero] * block
    for i, t in enumerate(block_totals):
        acc[i % block] = _pair_add(acc[i % block], t)
    warp_totals = [_butterfly(acc[w * 32:(w + 1) * 32], (16, 8, 4, 2, 1))[0] for w in range(block // 32)]
    return _result(_butterfly(warp_totals + [zero] * (32 - len(warp_totals)), (16, 8, 4, 2, 1))[0])


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("n,align", [(1, 0), (7, 2), (1000, 4), (40_000, 0), (300_001, 8), (1 << 19, 6)])
def test_twin_equals_literal_replay(dtype, n, align, rng):
    isz = np.dtype(dtype).itemsize
    if align % isz:
        pytest.skip("not element-aligned")
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-10, 10, n))).astype(dtype)
    plan = plan_kahan(Flat(n, align), dtype, "float32", TINY)
    want = _literal_kahan_flat(plan, x)
    got = emulate(plan, x, "H100")
    assert got.view(np.uint32)[0] == np.array(want, F32).view(np.uint32), (got, want)


def _literal_kahan_seg(plan, rows):
    """kernels/kahan.cu kahan_seg, one output, split and lane at a time, the group butterfly lane by lane."""
    p = param_dict(plan)
    g, splits, block = p["group"], p["splits"], p["block"]
    outputs, r = rows.shape
    per = -(-r // splits)
    zero = (_f(0), _f(0), _f(0))
    res = []
    for o in range(outputs):
        acc = zero
        for sp in range(splits):
            begin, end = sp * per, min(r, (sp + 1) * per)
            lanes = []
            for t in range(g):
                st = zero
                for j in range(begin + t, end, g):
                    st = _kahan_add(st, _f(rows[o, j]))
                lanes.append((st[0], _f(-st[1]), st[2]))
            if g == block:
                warps = [_butterfly(lanes[w * 32:(w + 1) * 32], (16, 8, 4, 2, 1))[0] for w in range(block // 32)]
                v = _butterfly(warps + [zero] * (32 - len(warps)), (16, 8, 4, 2, 1))[0]
            else:
                offs = tuple(1 << e for e in reversed(range(g.bit_length() - 1)))
                v = _butterfly(lanes, offs)[0] if g > 1 else lanes[0]
            if splits == 1:
                acc = v
            else:
                acc = _pair_add(acc, v)
        res.append(_result(acc))
    return np.array(res, F32)


@pytest.mark.parametrize("shape,axis", [((3, 1), 1), ((5, 17), 1), ((7, 300), 1), ((2, 20_000), 1), ((40, 3), 0),
                                        ((3, 50, 5), 1), ((2, 3, 4), (0, 2)), ((3, 70_001), 1)])
def test_seg_twin_equals_literal_replay(shape, axis, rng):
    from tcreduce._layout import host_layout, host_problem_data
    from tcreduce.emulate.exact import problem_rows

    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-10, 10, shape))).astype(np.float16)
    layout, _ = host_layout(x, axis)
    plan = plan_kahan(layout.problem, "float16", "float32", TINY)
    data = host_problem_data(x, layout)
    got = emulate(plan, data, "H100")
    want = _literal_kahan_seg(plan, np.asarray(problem_rows(plan, data)))
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist(), (shape, axis, param_dict(plan))


def test_tensorcore_twin_equals_literal_replay(rng):
    from tcreduce.emulate.mma_model import fused_rowsum
    from tcreduce.emulate.tensorcore import _fragment_rows

    for n, align in [(5, 2), (4097, 0), (100_003, 6), (1 << 18, 0)]:
        x = (rng.standard_normal(n) * 30).astype(np.float16)
        plan = plan_tensorcore_kahan(Flat(n, align), "float16", "float32", TINY)
        p = param_dict(plan)
        head, nvec, block, grid, unroll = p["head"], p["nvec"], p["block"], p["grid"], p["unroll"]
        tail = n - head - 8 * nvec
        nthreads = grid * block
        lane_pairs = []
        for w in range(nthreads // 32):  # one warp at a time: 16 row accumulators (rows g and g + 8)
            rows_st = [(_f(0), _f(0), _f(0))] * 16

            def mma(frags):
                d = fused_rowsum(_fragment_rows(np.asarray(frags, np.float16)), np.float32(0), model="H100")
                for r in range(16):
                    rows_st[r] = _kahan_add(rows_st[r], d[r])

            if w == 0 and head + tail:
                extras = np.zeros(256, np.float16)
                extras[:head + tail] = np.concatenate([x[:head], x[n - tail:]])
                mma(extras.reshape(32, 8))
            warp_base = 32 * w
            while warp_base < nvec:
                for u in range(unroll):
                    if warp_base + u * nthreads >= nvec:
                        break
                    frags = np.zeros((32, 8), np.float16)
                    for lane in range(32):
                        i = warp_base + lane + u * nthreads
                        if i < nvec:
                            frags[lane] = x[head + 8 * i: head + 8 * i + 8]
                    mma(frags)
                warp_base += nthreads * unroll
            for lane in range(32):
                g = lane >> 2
                lo, hi = rows_st[g], rows_st[g + 8]
                lane_pairs.append(_pair_add((lo[0], _f(-lo[1]), lo[2]), (hi[0], _f(-hi[1]), hi[2])))
        want = _combine_blocks(lane_pairs, grid, block, (16, 8, 4))
        got = emulate(plan, x, "H100")
        assert got.view(np.uint32)[0] == np.array(want, F32).view(np.uint32), (n, align, got, want)


@pytest.mark.parametrize("method,dtype", METHODS)
def test_accuracy_and_bound(method, dtype, rng):
    from tcreduce.bounds import error_bound
    from tcreduce.reference import exact_sum

    for name, x in adversarial_inputs(rng, 1 << 18).items():
        x = x.astype(dtype)
        got = float(tcreduce.emulate.sum(x, method=method))
        exact = float(exact_sum(x))
        err = abs(got - exact)
        assert err <= float(error_bound(x, method=method)), (method, name)
        if method == "kahan":  # compensated: within an ulp or two of the exact sum, whatever shuffle loses
            assert err <= 2 * np.spacing(np.float32(abs(exact))), (name, err)


def test_kahan_beats_shuffle_where_shuffle_loses(rng):
    from tcreduce.reference import exact_sum

    x = adversarial_inputs(rng, 1 << 22)["big_every_32"]  # shuffle: 55.8, 3.5 fp32 ulps of the sum (measured)
    exact = float(exact_sum(x))
    e_k = abs(float(tcreduce.emulate.sum(x, method="kahan")) - exact)
    e_s = abs(float(tcreduce.emulate.sum(x, method="shuffle")) - exact)
    assert e_k <= 0.5 * np.spacing(np.float32(exact)) and e_k * 4 < e_s


@pytest.mark.parametrize("method,dtype", METHODS)
def test_nan_inf_semantics(method, dtype, rng):
    base = random_input(rng, 100_003, dtype)
    for vals, want in (([np.inf], np.inf), ([-np.inf], -np.inf), ([np.inf, -np.inf], np.nan), ([np.nan], np.nan),
                       ([np.nan, np.inf], np.nan)):
        x = base.copy()
        x[rng.choice(x.size, len(vals), replace=False)] = vals
        r = tcreduce.emulate.sum(x, method=method)
        if np.isnan(want):
            assert r.view(np.uint32) == 0x7FC00000
        else:
            assert r == want
    big = np.full(1000, 60000, np.float16).astype(dtype)
    if dtype == "float32":
        big = np.full(1000, 3e38, np.float32)
        assert tcreduce.emulate.sum(big, method=method) == np.inf  # overflow: the plain sum's inf


def test_chain_lengths_and_factor():
    from tcreduce.bounds import U_RN, error_bound_factor

    h100 = KNOWN_GPUS["H100"]
    plan = plan_kahan(Flat(1 << 28, 0), "float16", "float32", h100)
    ch = chain_lengths(plan)
    assert ch["n"] == 8 * -(-(1 << 25) // (132 * 8 * 256)) and not ch["mma"]
    c = error_bound_factor(plan)
    assert 3 * U_RN < c < 3.01 * U_RN
    tc = plan_tensorcore_kahan(Flat(1 << 28, 0), "float16", "float32", h100)
    assert chain_lengths(tc)["mma"] and error_bound_factor(tc) > c


@pytest.mark.slow
def test_kernels_compile_clean():
    from tcreduce.testing import assert_compiles_clean

    for dt in ("float16", "float32"):
        for out in ("float16", "float32", "float64"):
            for name in kernel_names(dt, out):
                for arch in ("sm_90", "sm_80"):
                    assert_compiles_clean("kahan.cu", name, arch, needle="mma.sync" if "tc_" in name else None)


# ---------------------------------------------------------------------------------------------------- GPU
SIZES = [1, 2, 7, 8, 15, 16, 17, 31, 255, 256, 257, 1023, 1025, 4095, 4097, 65535, 65537, (1 << 20) + 3,
         10 ** 6 + 3, (1 << 24) + 1]


@pytest.mark.gpu
@pytest.mark.parametrize("method,dtype", METHODS)
def test_gpu_equals_twin_and_within_bound(method, dtype, rng):
    import cupy

    bad = []
    for n in SIZES:
        xh = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n)).astype(dtype)
        for view in (None, lambda x: x[1:], lambda x: x[::-1], lambda x: x[3::2]):
            xd = cupy.asarray(xh)
            xv, xdv = (view(xh), view(xd)) if view else (xh, xd)
            if xv.size == 0:
                continue
            for out in ("float32", "float16", "float64"):
                res = poisoned((), out)
                got = to_numpy(tcreduce.sum(xdv, method=method, dtype=out, out=res))
                want = tcreduce.emulate.sum(xv, method=method, dtype=out)
                if got.tobytes() != want.tobytes():
                    bad.append((n, view is not None, out, got, want))
            check_sum(tcreduce.sum(xdv, method=method), xv, None, method=method)
    assert not bad, bad[:5]


AXIS_CASES = [((64, 16), -1, None), ((100, 17), -1, None), ((33, 255), -1, None), ((3, 100_001), -1, None),
              ((4, 1 << 20), -1, None), ((1 << 16, 16), -1, None), ((64, 257), -1, lambda x: x[:, 1:]),
              ((16, 1000), 0, None), ((1000, 40), 0, None), ((5, 17, 40), 1, None), ((16, 1 << 18), 0, None),
              ((7, 3, 5), (0, 2), None), ((96, 80), 0, lambda x: x.T), ((6, 5, 4, 3), (1, 3), None)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_gpu_kahan_axes_equal_twin_and_within_bound(dtype, rng):
    import cupy

    bad = []
    for shape, axis, view in AXIS_CASES:
        xh = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 3, shape)).astype(dtype)
        xd = cupy.asarray(xh)
        xv, xdv = (view(xh), view(xd)) if view else (xh, xd)
        want = tcreduce.emulate.sum(xv, axis=axis, method="kahan")
        res = poisoned(want.shape, "float32")
        got = to_numpy(tcreduce.sum(xdv, axis=axis, method="kahan", out=res))
        if got.tobytes() != want.tobytes():
            bad.append((shape, axis, got.reshape(-1)[:3], want.reshape(-1)[:3]))
        check_sum(res, xv, axis, method="kahan")
    assert not bad, bad[:5]


@pytest.mark.gpu
@pytest.mark.parametrize("method,dtype", METHODS)
def test_gpu_specials_deterministic_axis_refused(method, dtype, rng):
    import cupy

    xh = random_input(rng, (1 << 20) + 7, dtype)
    for vals in ([np.inf], [-np.inf], [np.inf, -np.inf], [np.nan]):
        x = xh.copy()
        x[rng.choice(x.size, len(vals), replace=False)] = vals
        got = to_numpy(tcreduce.sum(cupy.asarray(x), method=method))
        want = tcreduce.emulate.sum(x, method=method)
        assert got.view(np.uint32) == want.view(np.uint32), (vals, got, want)
    xd = cupy.asarray(xh)
    first = to_numpy(tcreduce.sum(xd, method=method))
    for _ in range(5):
        assert to_numpy(tcreduce.sum(xd, method=method)).view(np.uint32) == first.view(np.uint32)
    assert np.array_equal(xd.get(), xh)
    if method == "tensorcore_kahan":
        with pytest.raises(ValueError, match="axis=None"):
            tcreduce.sum(xd[: 1 << 20].reshape(1024, -1), axis=1, method=method)
