"""Tests of method "wmma" (Dakkak et al. on nvcuda::wmma; kernels/wmma.cu, tcreduce/plans/wmma.py), fp16 and bf16.

CPU: the planner (variant choice, splits, workspace, counters, arguments, both input formats), the exactness of the
fp32 -> 3 x fp16 hand-off split (the bf16 split: tests/test_emulate_wmma.py), and every kernel instantiation the
planner can produce compiled for sm_80 and sm_90 (no warnings, no spills, wmma.mma in the PTX with the format's
types). GPU (``-m gpu``), for fp16 and for bf16 (raw uint16 bits with ``format="bfloat16"``): full, last-axis and
other-axis sums over awkward sizes, every variant forced, misaligned and non-contiguous views, keepdims and out=,
outputs poisoned with NaN, bitwise repeatability, NaN/Inf propagation, against exact references with a tolerance from
the plan's error bound; and every variant bit for bit against the emulator twin on data that stresses the hand-off.

The tolerance (see ``_bound``): every input value reaches its output through at most ``d_mma`` tensor-core products
(the chain of products into one accumulator, plus 3 per fp32 -> fp16 hand-off) and ``d_rn`` fp32 round-to-nearest
operations (the grid combination of partials; plus one per hand-off for its split, exact to 2^-39 of the largest
value). A tensor-core product adds 16 exact products to the fp32 accumulator, truncating every aligned term and
rounding the sum toward zero, so it is not an IEEE addition: its relative error against the sum of the magnitudes of
its terms is below u_mma = 17 * 2^-(23+e) + 2^-23 (1 + 17 * 2^-(23+e)) (e extra alignment bits: 2 on H100/H200; at
least 2^-23 per step, the round-toward-zero unit). Errors of one sign do not cancel (truncation of same-sign data), so
the bound is the worst case ``((1 + u_mma)^d_mma (1 + 2^-24)^d_rn - 1) * sum|x|`` per output
(:func:`tcreduce.bounds.error_bound_factor` with the wmma structure of :mod:`tcreduce.bounds`), plus the rounding to a
float16 output (2^-11 relative) and the reference's own error.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tcreduce import registry
from tcreduce._device import KNOWN_GPUS
from tcreduce._layout import Cols, Flat, Rows
from tcreduce._plan import Buf, param_dict
from tcreduce.plans import wmma as W

H100 = KNOWN_GPUS["H100"]
A100 = KNOWN_GPUS["A100"]
FMTS = W.DTYPES  # ("float16", "bfloat16")
CT = {"float16": "__half", "bfloat16": "__nv_bfloat16"}

# ==================================================================================================== CPU: planner
PROBLEMS = (
    [Flat(n, a) for n in (1, 15, 16, 17, 255, 256, 257, 4097, 65537, 1 << 20, (1 << 28) + 1, (1 << 31) + 3)
     for a in (0, 2, 8)]
    + [Rows(m, k, ld, a) for (m, k, ld) in ((1, 1, 1), (3, 15, 15), (17, 16, 16), (1 << 20, 16, 16), (1 << 24, 16, 16),
                                             (1000, 17, 17), (33, 255, 256), (16, 257, 264), (1 << 16, 4096, 4096),
                                             (16, 4097, 4097), (16, 1 << 20, 1 << 20), (3, 1000, 1000), (256, 64, 72),
                                             (2, (1 << 30) + 5, (1 << 30) + 5), (5, 9, -16))
       for a in (0, 2)]
    + [Cols(a, r, b, sa, sr, al) for (a, r, b, sa, sr) in ((1, 16, 1 << 20, 0, 1 << 20), (1, 1 << 20, 16, 0, 16),
                                                            (64, 1000, 96, 96000, 96), (3, 5, 7, 35, 7),
                                                            (1, 65537, 5, 0, 5), (5, 17, 40, 680, 40))
       for al in (0, 2)]
)


def _plans():
    for fmt, dev, out, prob, variant in itertools.product(FMTS, (H100, A100), W.OUT_TYPES, PROBLEMS,
                                                          ("auto",) + W.VARIANTS):
        if variant in ("r16n", "r256n") and prob.length > 1 << 22:
            continue  # forced warp-per-segment variants on huge rows: legal but not worth planning here
        yield W.plan_wmma(prob, fmt, out, dev, variant=variant)


ALL_PLANS = list(_plans())


def test_registered():
    m = registry.get("wmma")
    assert m.dtypes == ("float16", "bfloat16")
    assert "Dakkak" in m.reference and "ICS 2019" in m.reference and "tcu_scope" in m.reference
    assert m.description and m.deterministic


def test_float32_rejected_with_the_methods_that_take_it():
    with pytest.raises(TypeError, match="float32") as e:
        registry.get("wmma").plan(Flat(100), "float32", "float32", H100)
    assert isinstance(e.value, registry.UnsupportedDtype)
    for dt in ("float32", "float8_e4m3fn", "float8_e5m2"):
        with pytest.raises(TypeError, match="float16 and bfloat16"):
            W.plan_wmma(Rows(4, 4, 4), dt, "float32", H100)


def test_bf16_plans_are_fp16_plans_with_bf16_kernels():
    """Same bytes per element, same schedule: a bf16 plan differs from the fp16 plan of the same problem only in the
    kernels' input type (the transposing copy is shared)."""
    for prob, dev in itertools.product(PROBLEMS[::3], (H100, A100)):
        for variant in ("auto",) + W.VARIANTS:
            if variant in ("r16n", "r256n") and prob.length > 1 << 22:
                continue
            a = W.plan_wmma(prob, "float16", "float32", dev, variant=variant)
            b = W.plan_wmma(prob, "bfloat16", "float32", dev, variant=variant)
            assert b.in_dtype == "bfloat16" and a.params == b.params
            assert (a.workspace_floats, a.counters) == (b.workspace_floats, b.counters)
            for la, lb in zip(a.launches, b.launches, strict=True):
                assert (la.grid, la.block, la.args) == (lb.grid, lb.block, lb.args)
                want = la.kernel.replace("<__half,", "<__nv_bfloat16,") if la.kernel.startswith("wmma_rows") \
                    else la.kernel
                assert lb.kernel == want


def test_bad_variant_and_empty_problems():
    with pytest.raises(ValueError, match="variant"):
        W.plan_wmma(Flat(100), "float16", "float32", H100, variant="r64")
    for prob in (Flat(0), Rows(0, 5, 5), Rows(5, 0, 0), Cols(1, 0, 4, 0, 4), Cols(2, 3, 0, 0, 0)):
        with pytest.raises(ValueError, match="empty"):
            W.plan_wmma(prob, "float16", "float32", H100)


def test_default_variants():
    def variant(prob):
        return param_dict(W.plan_wmma(prob, "float16", "float32", H100))["variant"]

    assert variant(Rows(1 << 20, 16, 16)) == "r16n"
    assert variant(Rows(7, 256, 256)) == "r16n"
    assert variant(Rows(1 << 16, 4096, 4096)) == "r256n"
    assert variant(Rows(1 << 16, 4097, 4097)) == "block"
    assert variant(Rows(16, 1 << 20, 1 << 20)) == "block"
    assert variant(Rows(100, 1000, 1000)) == "block"  # too few rows for one warp per row
    assert variant(Flat(17)) == "block"
    assert variant(Cols(1, 16, 1 << 20, 0, 1 << 20)) == "r16n"


@pytest.mark.parametrize("plan", ALL_PLANS[::7] + ALL_PLANS[1::7], ids=lambda p: f"{p.problem}-{p.out_dtype}")
def test_plan_invariants(plan):
    p = param_dict(plan)
    names = set(W.kernel_names())
    rows: Rows = p["rows"]
    assert hash(plan) is not None
    for ln in plan.launches:
        assert ln.source == "wmma.cu" and ln.kernel in names
        assert 1 <= ln.grid[0] <= W.MAX_GRID and ln.grid[1:] == (1, 1)
        assert all(isinstance(a, (Buf, int)) for a in ln.args)
    main = plan.launches[-1]
    out_t = {"float16": "__half", "float32": "float", "float64": "double"}[plan.out_dtype]
    assert main.kernel.startswith("wmma_rows")
    assert f"<{CT[plan.in_dtype]}, {out_t}, {str(p['vec']).lower()}," in main.kernel
    assert main.block == (p["block"], 1, 1) and p["block"] == 32 * p["warps"]
    assert main.args[1:4] == (rows.m, rows.k, rows.ld)
    assert main.args[4] == Buf("out") and main.args[6] == Buf("counters")
    # 16-byte loads only when every row starts 16-byte aligned
    assert p["vec"] == (rows.align == 0 and (rows.m == 1 or (2 * rows.ld) % 16 == 0))
    ws_off = p.get("ws_offset", 0)
    if isinstance(plan.problem, Cols):
        pr = plan.problem
        tj = 16 if pr.r <= 16 else 32
        assert len(plan.launches) == 2 and plan.launches[0].kernel == f"wmma_transpose<{tj}>"
        assert plan.launches[0].grid[0] == pr.a * math.ceil(pr.r / tj) * math.ceil(pr.b / (2048 // tj))
        assert plan.launches[0].args == (Buf("x"), pr.a, pr.r, pr.b, pr.sa, pr.sr, Buf("ws"), p["transpose_ld"])
        assert rows == Rows(pr.a * pr.b, pr.r, p["transpose_ld"], 0) and rows.ld % 8 == 0 and rows.ld >= pr.r
        assert ws_off % 64 == 0 and 2 * ws_off >= rows.m * rows.ld  # the fp16 copy fits below the partials
        assert main.args[0] == Buf("ws") and main.args[5] == Buf("ws", ws_off)
    else:
        assert len(plan.launches) == 1 and main.args[0] == Buf("x") and main.args[5] == Buf("ws", 0)
        expect = Rows(1, plan.problem.n, plan.problem.n, plan.problem.align) if isinstance(plan.problem, Flat) \
            else plan.problem
        assert rows == expect
    if p["variant"] == "block":
        tiles, splits, tpb = math.ceil(rows.k / 256), p["splits"], p["tpb"]
        assert main.args[7:] == (splits, tpb)
        assert (splits - 1) * tpb < tiles <= splits * tpb  # every block has work, all tiles covered
        assert main.grid[0] == rows.m * splits
        assert p["chain"] == math.ceil(tpb / p["warps"]) <= W.BLOCK_CHAIN
        assert plan.workspace_floats == ws_off + (rows.m * splits if splits > 1 else 0)
        assert plan.counters == (rows.m if splits > 1 else 0)
    else:
        assert main.args[7:] == (1,) and plan.counters == 0 and plan.workspace_floats == ws_off
        assert p["chain"] == math.ceil(rows.k / (16 if p["variant"] == "r16n" else 256))


def test_auto_chains_are_short():
    """The default choices never chain more than CHAIN (BLOCK_CHAIN in the block variant) products into one fp32
    accumulator."""
    for fmt, dev, prob in itertools.product(FMTS, (H100, A100), PROBLEMS):
        auto = W.plan_wmma(prob, fmt, "float32", dev)
        p = param_dict(auto)
        assert p["chain"] <= (W.BLOCK_CHAIN if p["variant"] == "block" else W.CHAIN), auto.describe()


def test_block_split_fills_the_gpu():
    plan = W.plan_wmma(Rows(16, 1 << 20, 1 << 20), "float16", "float32", H100)
    assert plan.launches[0].grid[0] >= H100.sm_count * 4
    plan = W.plan_wmma(Flat(1 << 28), "float16", "float32", H100)
    p = param_dict(plan)
    assert p["splits"] == (1 << 20) // (8 * W.BLOCK_CHAIN) and p["chain"] == W.BLOCK_CHAIN
    plan = W.plan_wmma(Flat(1000), "float16", "float32", H100)
    assert param_dict(plan)["splits"] == 1 and plan.counters == 0 and plan.workspace_floats == 0


def test_depth():
    from tcreduce.bounds import STRUCTURES

    depth = STRUCTURES["wmma"]  # the bound of tcreduce.bounds follows this plan's structure
    d = depth(W.plan_wmma(Rows(1 << 20, 100, 100), "float16", "float32", H100))
    assert (d.mma, d.rn) == (7, 0)  # r16n: a chain of ceil(100 / 16) products
    d = depth(W.plan_wmma(Rows(1 << 16, 4000, 4000), "float16", "float32", H100))
    assert (d.mma, d.rn) == (16 + 3, 1)  # r256n: 16 tiles, then the hand-off (3 products, 1 RN step)
    d = depth(W.plan_wmma(Flat(1 << 28), "float16", "float32", H100))
    splits = (1 << 20) // (8 * W.BLOCK_CHAIN)
    # block: the warp chain and two hand-offs; the splits: serial ceil(splits / 256) - 1 (the first add to 0 is
    # exact), warp_fold (5) and block_combine (log2 8 = 3)
    assert (d.mma, d.rn) == (W.BLOCK_CHAIN + 6, 2 + (splits // 256 - 1) + 5 + 3)
    # bf16: the same products, and no rounding step for the hand-offs (their split is exact)
    d = depth(W.plan_wmma(Flat(1 << 28), "bfloat16", "float32", H100))
    assert (d.mma, d.rn) == (W.BLOCK_CHAIN + 6, (splits // 256 - 1) + 5 + 3)
    d = depth(W.plan_wmma(Rows(1 << 16, 4000, 4000), "bfloat16", "float32", H100))
    assert (d.mma, d.rn) == (16 + 3, 0)


# ------------------------------------------------------------------------------------- CPU: the hand-off arithmetic
def _handoff_parts(v: np.ndarray):
    """NumPy model of kernels/wmma.cu HANDOFF's scaling and split for rows of 16 fp32 values (finite)."""
    v = v.astype(np.float32)
    amax = np.max(np.abs(v), axis=-1, keepdims=True)
    _, e = np.frexp(np.where(amax > 0, amax, 1).astype(np.float64))  # amax = f * 2^e, f in [0.5, 1)
    sh = np.where(amax > 0, 14 - (e.astype(np.int64) - 1), 0)
    w = np.ldexp(v, sh.astype(np.int32)).astype(np.float32)
    hi = w.astype(np.float16)
    r1 = w - hi.astype(np.float32)
    mid = r1.astype(np.float16)
    r2 = r1 - mid.astype(np.float32)
    lo = r2.astype(np.float16)
    return w, hi, mid, lo, sh, amax


def test_handoff_split_is_exact(rng):
    """The documented claim: every w = v * 2^sh with |w| >= 2^-1 is exactly hi + mid + lo; smaller w lose < 2^-25;
    the largest |w| of a row lies in [2^14, 2^15), so no part overflows fp16."""
    exps = rng.integers(-140, 120, size=(4000, 1))
    spread = rng.integers(-40, 1, size=(4000, 16))  # values up to 2^40 below the row's largest
    mant = rng.uniform(1, 2, size=(4000, 16)) * rng.choice([-1, 1], size=(4000, 16))
    v = np.ldexp(mant, exps + spread).astype(np.float32)
    v = v[np.all(np.isfinite(v), axis=1)]
    w, hi, mid, lo, sh, amax = _handoff_parts(v)
    big = np.max(np.abs(w), axis=-1)
    assert np.all((big >= 2.0 ** 14) & (big < 2.0 ** 15))
    assert np.all(np.isfinite(hi)) and np.all(np.isfinite(mid)) and np.all(np.isfinite(lo))
    recon = hi.astype(np.float64) + mid.astype(np.float64) + lo.astype(np.float64)
    err = np.abs(recon - w.astype(np.float64))
    large = np.abs(w) >= 0.5
    assert np.all(err[large] == 0)
    assert np.all(err[~large] <= 2.0 ** -25)
    # in unscaled units: at most 2^-39 of the row's largest value
    assert np.all(np.ldexp(err, -sh) <= 2.0 ** -39 * amax.astype(np.float64) + 1e-300)


# ------------------------------------------------------------------------------------------- CPU: kernel sources
def test_kernel_comments_name_the_paper_variants():
    from tcreduce._compile import kernel_dir

    text = (kernel_dir() / "wmma.cu").read_text()
    for needle in ("Reduction16 / Reduction16n", "Reduction256 / Reduction256n", "seg_wmma_256n_block",
                   "Transposing copy", "HANDOFF", "tcr::arrive_last"):
        assert needle in text
    assert "atomicAdd(" not in text.replace("tcr::arrive_last", "")  # no float atomics of our own


def test_planner_uses_only_listed_kernels():
    names = set(W.kernel_names())
    used = {ln.kernel for plan in ALL_PLANS for ln in plan.launches}
    assert used <= names
    assert used == names  # and every listed instantiation is reachable
    for fmt in FMTS:
        used = {ln.kernel for plan in ALL_PLANS if plan.in_dtype == fmt for ln in plan.launches}
        assert used == set(W.kernel_names((fmt,)))


@pytest.mark.slow
@pytest.mark.parametrize("kernel", W.kernel_names())
def test_compiles_for_sm80_and_sm90(kernel):
    """Every instantiation: no warnings, no spills, and the wmma products in the PTX with the format's types
    (m16n16k16, fp32 accumulator: ``.m16n16k16.f32.bf16.bf16.f32`` for bf16, ``.m16n16k16.f32.f32`` for fp16, whose
    PTX form leaves the f16 operand types implicit), the operands loaded as that format."""
    import re

    from tcreduce.testing import assert_compiles_clean

    for arch in ("sm_80", "sm_90"):
        rows = kernel.startswith("wmma_rows")
        ck = assert_compiles_clean("wmma.cu", kernel, arch, needle="wmma.mma.sync" if rows else None)
        if not rows:  # the transposing copy does no arithmetic
            assert "wmma.mma" not in ck.ptx
            continue
        bf16 = "__nv_bfloat16" in kernel
        mmas = set(re.findall(r"wmma\.mma\.sync\.aligned\.\S+", ck.ptx))
        assert mmas == {"wmma.mma.sync.aligned.row.row.m16n16k16." + ("f32.bf16.bf16.f32" if bf16 else "f32.f32")}, \
            (kernel, arch, mmas)
        loads = set(re.findall(r"wmma\.load\.[ab]\.sync\.aligned\.\S+", ck.ptx))
        assert loads and all(m.endswith(".bf16" if bf16 else ".f16") for m in loads), (kernel, arch, loads)


# ===================================================================================================== GPU tests
def _gpu_name() -> str:
    from tcreduce._device import current_device, named_device

    try:
        return named_device(current_device()[1].name).name
    except ValueError:
        return "V100"  # unknown GPU: the most pessimistic tensor-core model (no extra alignment bits)


def _np_dtype(fmt: str):
    from tcreduce.formats import numpy_dtype

    return numpy_dtype(fmt)


def _device_f32(xd, fmt: str):
    """The device data as float32 values (exact): fp16 as is (CuPy widens it), bf16 raw bits shifted into place."""
    import cupy

    if fmt == "float16":
        return xd
    return (xd.astype(cupy.uint32) << 16).view(cupy.float32)


def _reference(xv_host: np.ndarray | None, xd, axis, fmt: str = "float16"):
    """(float64 reference, its own error bound, sum|x|) per output. Up to 2^25 elements: the exact sum, correctly
    rounded to float64 (error <= 2^-53 |sum|). Larger: CuPy's float64 sum on the GPU (error <= n 2^-52 sum|x|)."""
    import cupy

    if xv_host is not None and xv_host.size <= 1 << 25:
        from tcreduce.reference import exact_sum

        x32 = xv_host.astype(np.float32)  # exact for fp16 and bf16; the fast exact path
        ref = np.asarray(exact_sum(x32, axis=axis), dtype=np.float64)
        abs_sum = np.sum(np.abs(x32.astype(np.float64)), axis=axis)
        return ref, 2.0 ** -53 * np.abs(ref), abs_sum
    xf = _device_f32(xd, fmt)
    ref = cupy.sum(xf, axis=axis, dtype=cupy.float64).get()
    abs_sum = cupy.sum(cupy.abs(xf), axis=axis, dtype=cupy.float64).get()
    n = xd.size // max(ref.size, 1)
    return ref, n * 2.0 ** -52 * abs_sum, abs_sum


def _bound(plan, abs_sum: np.ndarray, out_dtype: str) -> np.ndarray:
    from tcreduce.bounds import OUT_ROUNDING, error_bound_factor

    c = error_bound_factor(plan, _gpu_name())
    b = c * abs_sum
    return b + OUT_ROUNDING[out_dtype] * (abs_sum + b) + (2.0 ** -24 if out_dtype == "float16" else 0.0)


def _run(xd, axis, variant: str = "auto", out_dtype: str = "float32", fmt: str = "float16"):
    """Run the wmma plan (a forced variant) for ``fmt`` data (bf16: a uint16 CuPy array of raw bits) as
    tcreduce.sum would, into a NaN-poisoned output. Returns (result as NumPy, plan)."""
    import cupy

    from tcreduce._device import current_device
    from tcreduce._launch import run_plan
    from tcreduce._layout import normalize_axes, plan_layout
    from tcreduce.testing import poisoned

    assert xd.dtype.itemsize == 2 and (fmt == "float16") == (xd.dtype == cupy.float16)
    axes = normalize_axes(axis, xd.ndim)
    out_shape = tuple(s for i, s in enumerate(xd.shape) if i not in axes)
    strides = tuple(s // 2 for s in xd.strides)
    layout = plan_layout(xd.shape, strides, axes, 2, xd.data.ptr % 16)
    if layout.copy_order is not None:
        src = cupy.ascontiguousarray(xd.transpose(layout.copy_order))
        ptr = src.data.ptr
    else:
        src = xd
        ptr = xd.data.ptr + layout.base_offset * 2
    dev_id, dev = current_device()
    plan = W.plan_wmma(layout.problem, fmt, out_dtype, dev, variant=variant)
    res = poisoned(out_shape, out_dtype)
    run_plan(plan, ptr, res.data.ptr, dev_id)
    cupy.cuda.get_current_stream().synchronize()
    del src
    return res.get(), plan


def _check(got: np.ndarray, xv_host, xd, axis, plan, out_dtype="float32", fmt="float16") -> None:
    ref, ref_err, abs_sum = _reference(xv_host, xd, axis, fmt)
    got = np.asarray(got)
    assert got.shape == ref.shape and got.dtype == np.dtype(out_dtype)
    assert not np.any(np.isnan(got)), "an output was not written (still NaN from the poisoned buffer)"
    bound = _bound(plan, abs_sum, out_dtype) + ref_err
    err = np.abs(got.astype(np.float64) - ref)
    bad = ~(err <= bound)
    if np.any(bad):
        i = np.flatnonzero(bad)[0]
        raise AssertionError(f"{int(bad.sum())}/{bad.size} outputs beyond the bound; first {i}: got "
                             f"{got.flat[i]!r} ref {ref.flat[i]!r} err {err.flat[i]:.3e} bound {bound.flat[i]:.3e}\n"
                             + plan.describe())


def _to_gpu(xh: np.ndarray):
    """The device copy: fp16 as is, bf16 as its raw uint16 bits (views of it address the same elements)."""
    import cupy

    return cupy.asarray(xh if xh.dtype == np.float16 else xh.view(np.uint16))


def _data(rng, shape, fmt: str = "float16"):
    """Fresh uniform data in [-0.25, 0.75) (never zeros) of format ``fmt``, host (NumPy / ml_dtypes) and device."""
    xh = rng.uniform(-0.25, 0.75, size=shape).astype(_np_dtype(fmt))
    if not np.any(xh):
        xh.flat[0] = 1
    return xh, _to_gpu(xh)


AWKWARD_N = [1, 15, 16, 17, 255, 256, 257, 4095, 4096, 4097, 32767, 32768, 32769, 65535, 65537,
             (1 << 20) - 1, (1 << 20) + 1, (1 << 24) + 3]
OFFSETS = [0, 1, 3, 8]  # x[o:]: 16-byte aligned for 0 and 8, misaligned (scalar loads) for 1 and 3


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("n", AWKWARD_N)
def test_full_sum_awkward_sizes(n, fmt, rng):
    xh, xd = _data(rng, n + 8, fmt)
    for off in OFFSETS:
        xv, dv = xh[off:off + n], xd[off:off + n]
        if xv.size == 0:
            continue
        variants = ["auto"] + (["r256n", "r16n"] if n <= 65537 else [])
        for variant in variants:
            got, plan = _run(dv, None, variant, fmt=fmt)
            assert param_dict(plan)["vec"] == (off % 8 == 0)
            _check(got, xv, dv, None, plan, fmt=fmt)


ROW_KS = [1, 15, 16, 17, 255, 256, 257, 4095, 4096, 4097, 65537]
ROW_MS = [1, 15, 17, 33]


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("k", ROW_KS)
@pytest.mark.parametrize("variant", ("auto",) + W.VARIANTS)
def test_rows_every_variant(k, variant, fmt, rng):
    for m in ROW_MS:
        xh, xd = _data(rng, (m, k + 9), fmt)
        views = [(xh[:, :k], xd[:, :k]),            # ld = k + 9: not a multiple of 8 -> scalar loads
                 (xh[:, 1:k + 1], xd[:, 1:k + 1]),  # misaligned base
                 (xh[:, 8:k + 8], xd[:, 8:k + 8])]  # aligned base, odd ld
        xc_h, xc_d = _data(rng, (m, k), fmt)      # contiguous (vector loads when k % 8 == 0)
        views.append((xc_h, xc_d))
        for xv, dv in views:
            got, plan = _run(dv, -1, variant, fmt=fmt)
            _check(got, xv, dv, -1, plan, fmt=fmt)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("shape,variant", [((1 << 20, 16), "auto"), ((1 << 20, 16), "r256n"),
                                           ((1 << 16, 4096), "auto"), ((1 << 16, 4096), "block"),
                                           ((16, 1 << 20), "auto"), ((3, (1 << 22) + 1), "auto")])
def test_rows_large(shape, variant, fmt, rng):
    xh, xd = _data(rng, shape, fmt)
    got, plan = _run(xd, -1, variant, fmt=fmt)
    _check(got, xh if xh.size <= 1 << 25 else None, xd, -1, plan, fmt=fmt)


COL_CASES = [
    ((16, 1 << 20), 0, None), ((1 << 16, 4096), 0, None), ((65537, 5), 0, None), ((257, 33), 0, None),
    ((5, 17, 40), 1, None), ((3, 1000, 7), 1, None), ((1000, 16), 0, None),
    ((64, 257), 0, lambda x: x[1:, 1:]),  # misaligned
    ((96, 80), 0, lambda x: x[:, ::2]),  # strided kept axis
    ((96, 80), 1, lambda x: x.T),  # transposed: reduces the non-contiguous axis
    ((96, 80), 0, lambda x: x[::-1]),  # reversed
]


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("shape,axis,view", COL_CASES, ids=[f"{s}-{a}-{i}" for i, (s, a, _) in enumerate(COL_CASES)])
@pytest.mark.parametrize("variant", ("auto",) + W.VARIANTS)
def test_other_axes(shape, axis, view, variant, fmt, rng):
    if variant != "auto" and math.prod(shape) > 1 << 22:
        pytest.skip("forced variants on the small cases only")
    xh, xd = _data(rng, shape, fmt)
    xv, dv = (view(xh), view(xd)) if view else (xh, xd)
    got, plan = _run(dv, axis, variant, fmt=fmt)
    _check(got, xv if xv.size <= 1 << 25 else None, dv, axis, plan, fmt=fmt)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("shape,axis", [((1 << 16,), None), ((300, 200), 1), ((300, 200), 0), ((7, 50, 9), (0, 2))])
def test_api_keepdims_and_out(shape, axis, fmt, rng):
    """Through tcreduce.sum (bf16: raw bits with format="bfloat16")."""
    import tcreduce
    from tcreduce.testing import check_sum, poisoned, to_device

    xh, _ = _data(rng, shape, fmt)
    xd, kw = to_device(xh)
    assert kw == ({} if fmt == "float16" else {"format": "bfloat16"})
    expect_shape = np.sum(xh.astype(np.float32), axis=axis, keepdims=True).shape
    out = poisoned(expect_shape, "float32")
    res = tcreduce.sum(xd, axis=axis, keepdims=True, method="wmma", out=out, **kw)
    assert res is out and out.shape == expect_shape
    got = out.get()
    assert not np.any(np.isnan(got))
    plain = tcreduce.sum(xd, axis=axis, method="wmma", **kw).get()
    np.testing.assert_array_equal(got.reshape(plain.shape), plain)
    check_sum(res, xh, axis, method="wmma", keepdims=True)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("out_dtype", ["float16", "float64"])
@pytest.mark.parametrize("variant", ("auto",) + W.VARIANTS)
def test_output_dtypes(out_dtype, variant, fmt, rng):
    xh, xd = _data(rng, (300, 1000), fmt)
    got, plan = _run(xd, 1, variant, out_dtype, fmt)
    _check(got, xh, xd, 1, plan, out_dtype, fmt)
    got32, _ = _run(xd, 1, variant, "float32", fmt)
    np.testing.assert_array_equal(got, got32.astype(out_dtype))  # one rounding of the fp32 result


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("shape,axis,variant", [((1 << 22) + 5, None, "auto"), ((16, 1 << 20), -1, "block"),
                                                ((1 << 16, 64), -1, "r16n"), ((1 << 14, 1000), -1, "r256n"),
                                                ((64, 1 << 16), 0, "auto"), ((3, 5000, 33), 1, "block")])
def test_repeated_calls_bitwise_equal(shape, axis, variant, fmt, rng):
    xh, xd = _data(rng, shape, fmt)
    first, plan = _run(xd, axis, variant, fmt=fmt)
    for _ in range(9):
        again, _ = _run(xd, axis, variant, fmt=fmt)
        assert np.array_equal(first.view(np.uint32), again.view(np.uint32)), "not bitwise reproducible"
    assert np.array_equal(xd.get(), xh.view(np.uint16 if fmt == "bfloat16" else np.float16)), \
        "the input was modified"


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("variant", ("auto",) + W.VARIANTS)
@pytest.mark.parametrize("k", [16, 300, 5000])
def test_nan_inf_propagate(variant, k, fmt, rng):
    import cupy

    xh, _ = _data(rng, (8, k), fmt)
    xh[1, 5] = np.nan
    xh[2, k - 1] = np.inf
    xh[3, k // 2] = -np.inf
    xh[4, 1], xh[4, k - 2] = np.inf, -np.inf
    # large but finite: must not overflow through the hand-off (fp16: near its largest; bf16: near FLT_MAX, where
    # the unscaled hand-off's parts and the tensor core's sums must stay finite)
    xh[5, 0] = 60000.0 if fmt == "float16" else 3.0e38
    xd = _to_gpu(xh)
    ref = xh.astype(np.float64).sum(axis=1)
    for axis, data, r in ((1, xd, ref), (0, cupy.ascontiguousarray(xd.T), ref)):
        got, plan = _run(data, axis, variant, fmt=fmt)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(r), err_msg=plan.describe())
        np.testing.assert_array_equal(got[[2, 3]], r[[2, 3]])
        assert np.all(np.isfinite(got[[0, 5, 6, 7]]))
        finite = [0, 5, 6, 7]
        _check(got[finite], xh[finite], None, 1, plan, fmt=fmt)  # the finite rows within the bound, row 5 included
    for rows, expect in (((2,), np.inf), ((3,), -np.inf), ((2, 3), None), ((1,), None)):
        got, _ = _run(xd[list(rows)], None, variant, fmt=fmt)
        if expect is None:
            assert np.isnan(got)
        else:
            assert got == expect


def _stress(rng, shape, kind: str, fmt: str) -> np.ndarray:
    """Data that exercises the hand-off: ``wide`` (signs and exponents mixed over much of the format's range; bf16:
    2^-135 .. 2^100, subnormals included), ``tiny`` (bf16: around and below 2^-126, the 2^-133 floor of its split;
    fp16: subnormals), ``big`` (fp16: near 65504; bf16: about 2^100, far beyond fp16)."""
    dt = _np_dtype(fmt)
    sign = rng.choice([-1.0, 1.0], shape, p=[0.3, 0.7])
    if kind == "wide":
        e = rng.integers(-135, 100, shape) if fmt == "bfloat16" else rng.integers(-20, 12, shape)
        return np.clip(rng.standard_normal(shape) * 2.0 ** e, -6e4, 6e4).astype(dt) if fmt == "float16" else \
            (rng.standard_normal(shape) * 2.0 ** e).astype(dt)
    if kind == "tiny":
        e = rng.integers(-134, -118, shape) if fmt == "bfloat16" else rng.integers(-24, -12, shape)
        return (sign * rng.uniform(0.5, 1, shape) * 2.0 ** e).astype(dt)
    if kind == "big":
        scale = 2.0 ** rng.integers(95, 104, shape) if fmt == "bfloat16" else rng.uniform(3e4, 6e4, shape)
        return (sign * scale).astype(dt)
    raise ValueError(kind)


EMU_CASES = [((4097,), None), (((1 << 16) + 3,), None), ((33, 255), -1), ((17, 1000), -1), ((3, 4097), -1),
             ((2, 70_001), -1), ((40, 33), 0), ((5, 17, 40), 1)]


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("variant", W.VARIANTS)
def test_every_variant_equals_the_emulator(variant, fmt, rng):
    """Every forced variant, bit for bit against the emulator twin (tcreduce/emulate/wmma.py) on the same plan, for
    data that drives the hand-off over the format's range (and, for bf16, into the subnormals where its split's
    exactness rests on partial sums being multiples of 2^-133), aligned and misaligned."""
    from tcreduce._device import current_device, named_device
    from tcreduce._layout import host_layout, host_problem_data
    from tcreduce.emulate import wmma as EW

    try:
        model = named_device(current_device()[1].name).name
    except ValueError:
        pytest.skip("no tensor-core model for this GPU")
    mismatches = []
    for shape, axis in EMU_CASES:
        for kind in ("wide", "tiny", "big"):
            xh = _stress(rng, shape, kind, fmt)
            xd = _to_gpu(xh)
            for name, xv, dv in (("whole", xh, xd), ("misaligned", xh[..., 1:], xd[..., 1:])):
                got, plan = _run(dv, axis, variant, fmt=fmt)
                layout, _ = host_layout(xv, axis)
                assert layout.problem.length == plan.problem.length
                want = EW.emulate(plan, host_problem_data(xv, layout), model).reshape(got.shape)
                if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                    mismatches.append((shape, axis, kind, name, got.reshape(-1)[:2], want.reshape(-1)[:2]))
                _check(got, xv, dv, axis, plan, fmt=fmt)
    assert not mismatches, f"{len(mismatches)} GPU != emulator, first: {mismatches[:3]}"


@pytest.mark.gpu
@pytest.mark.large
@pytest.mark.slow
@pytest.mark.parametrize("fmt", FMTS)
def test_full_sum_beyond_2_31(fmt, rng):
    """64-bit indexing: 2^31 + 3 elements (4 GiB), aligned and misaligned."""
    import cupy

    n = (1 << 31) + 3
    gen = cupy.random.default_rng(7)
    xf = gen.random(n + 1, dtype=cupy.float32) - 0.25
    if fmt == "float16":
        xd = xf.astype(cupy.float16)
    else:  # bf16 bits: the top half of each fp32 (truncation: still a value in [-0.25, 0.75))
        xd = (xf.view(cupy.uint32) >> 16).astype(cupy.uint16)
    del xf
    for dv in (xd[:n], xd[1:]):
        got, plan = _run(dv, None, "auto", fmt=fmt)
        assert param_dict(plan)["splits"] == math.ceil(math.ceil(n / 256) / (8 * W.BLOCK_CHAIN))
        _check(got, None, dv, None, plan, fmt=fmt)
