"""GPU validation of the emulator: tcreduce.sum on this GPU and tcreduce.emulate.sum for the same device give the same
bits, for every emulated method, over random inputs of many sizes, axes and views."""

from __future__ import annotations

import numpy as np
import pytest

import tcreduce
from tcreduce.formats import numpy_dtype
from tcreduce.testing import random_input, to_device, to_numpy

pytestmark = pytest.mark.gpu

CASES = [
    ((1,), None), ((17,), None), ((1000,), None), ((4097,), None), (((1 << 20) + 3,), None), (((1 << 22) + 1,), None),
    ((64, 16), -1), ((100, 17), -1), ((33, 255), -1), ((1000, 64), -1), ((16, 4097), -1), ((3, 100_001), -1),
    ((256, 1 << 14), -1), ((1 << 16, 16), -1), ((16, 1000), 0), ((1000, 40), 0), ((5, 17, 40), 1), ((3, 1 << 16, 8), 1),
    ((1 << 15, 64), 0), ((7, 3, 5), (0, 2)),
    # tc_rows' whole-tile path on an H200 (rows of 2-4 chunks: 33-128 elements), partial last chunks and tiles
    ((3001, 40), -1), ((500, 96), -1), ((777, 93), -1), ((333, 125), -1), ((2000, 128), -1),
    # tensorcore's tc_rows_stream (aligned rows of >= 256): a group per row, splits, one warp per row, short rows
    ((64, 1032), -1), ((5, 1 << 16), -1), ((2000, 1025), -1), ((5000, 256), -1), ((300, 520), -1),
    # ... and on an H200 its packed short rows (16-bit rows of 64-128, fp8 of 64-256, back to back), a part-filled
    # last chunk; their misaligned views keep the tiles
    ((1001, 64), -1), ((333, 128), -1), ((77, 256), -1),
]


def _emulated(dtype: str) -> list[str]:
    avail = {m.name: m for m in tcreduce.methods()}
    return [n for n in tcreduce.emulate.emulated_methods() if n in avail and dtype in avail[n].dtypes]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float32"])
def test_gpu_equals_emulator_bit_for_bit(dtype, rng):
    from tcreduce._device import current_device

    device = current_device()[1]
    counts: dict[str, list[int]] = {}
    mismatches = []
    for method in _emulated(dtype):
        for shape, axis in CASES:
            for dist in ("uniform", "lognormal", "mixed"):
                if dist == "uniform":
                    xh = random_input(rng, shape, dtype)
                elif dist == "lognormal":
                    xh = (rng.lognormal(0, 3, shape) * rng.choice([-1, 1], shape)).clip(-6e4, 6e4)
                    xh = xh.clip(-400, 400).astype(numpy_dtype(dtype)) if "e4m3" in dtype else \
                        xh.astype(numpy_dtype(dtype))
                else:
                    xh = rng.standard_normal(shape) * 10.0 ** rng.integers(-4, 4, shape)
                    xh = xh.clip(-400, 400) if "e4m3" in dtype else xh  # e4m3fn has no inf: beyond 448 is NaN
                    xh = xh.astype(numpy_dtype(dtype))
                for view in (None, "misaligned"):
                    xv = xh if view is None else xh.reshape(-1)[1:] if axis is None else xh[..., 1:]
                    if xv.size == 0:
                        continue
                    xd, kw = to_device(xh)
                    xdv = xd if view is None else xd.reshape(-1)[1:] if axis is None else xd[..., 1:]
                    try:
                        want = tcreduce.emulate.sum(xv, axis=axis, method=method, gpu=device)
                    except ValueError as e:  # full-sum-only methods (the ladder rungs) refuse axis != None ...
                        if "axis=None" not in str(e):
                            raise
                        with pytest.raises(ValueError, match="axis=None"):  # ... and so must the GPU path
                            tcreduce.sum(xdv, axis=axis, method=method, **kw)
                        continue
                    got = to_numpy(tcreduce.sum(xdv, axis=axis, method=method, **kw))
                    same = np.array_equal(got.view(np.uint32), np.asarray(want).view(np.uint32))
                    c = counts.setdefault(method, [0, 0])
                    c[0] += int(same)
                    c[1] += 1
                    if not same:
                        mismatches.append((method, shape, axis, dist, view, got.reshape(-1)[:3], want.reshape(-1)[:3]))
    print("\nGPU == emulator (matching calls / calls):", {m: f"{a}/{b}" for m, (a, b) in counts.items()})
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:5]}"


# long rows that _common.spread_rows gives more warps (STREAM_MAX_STEPS) on a one-pass grid: dtype -> (shape, wpt with
# the planner's module values, an H100's); a GPU family with its own tuning (FAMILY_TUNING) may spread them otherwise
SPREAD = {"float16": ((2200, 2104), 4), "bfloat16": ((4500, 2104), 4), "float8_e4m3fn": ((4500, 4112), 4),
          "float32": ((4300, 2052), 2)}


@pytest.mark.parametrize("dtype", sorted(SPREAD))
@pytest.mark.parametrize("tuning", ["module values", "the device's own"])
def test_gpu_spread_long_rows_equal_emulator(dtype, tuning, rng, monkeypatch):
    """The tensor-core stream kernels with a long row spread over several warps: GPU == twin, bit for bit, and
    within the bound of the float64 sum; planned with the module values (the H100's: the row spread as SPREAD says)
    and with the device family's own tuning (spread over at least 2 warps)."""
    from tcreduce._api import get_plan
    from tcreduce._device import current_device
    from tcreduce._layout import plan_layout
    from tcreduce._plan import param_dict
    from tcreduce.plans import tensorcore, tensorcore_fp32
    from tcreduce.testing import check_sum

    shape, wpt = SPREAD[dtype]
    if tuning == "module values":
        for module in (tensorcore, tensorcore_fp32):
            monkeypatch.setattr(module, "FAMILY_TUNING", {})
    monkeypatch.setattr(tcreduce._api, "_PREPARED", {})  # plans prepared here stay here
    get_plan.cache_clear()
    try:
        device = current_device()[1]
        isz = np.dtype(numpy_dtype(dtype)).itemsize
        problem = plan_layout(shape, (shape[1], 1), (1,), isz, 0).problem
        plan = get_plan("tensorcore", problem, dtype, "float32", device)
        p = param_dict(plan)
        spread = p["wpt"] == wpt if tuning == "module values" else p["wpt"] >= 2
        assert "rows_stream" in plan.launches[0].kernel and spread and p["splits"] == 1, plan.describe()
        for xh in (random_input(rng, shape, dtype),
                   (rng.lognormal(0, 3, shape) * rng.choice([-1, 1], shape)).clip(-400, 400).astype(
                       numpy_dtype(dtype))):
            xd, kw = to_device(xh)
            got = to_numpy(tcreduce.sum(xd, axis=-1, method="tensorcore", **kw))
            want = tcreduce.emulate.sum(xh, axis=-1, method="tensorcore", gpu=device)
            assert np.array_equal(got.view(np.uint32), np.asarray(want).view(np.uint32))
            check_sum(got, xh, -1, method="tensorcore")
    finally:
        get_plan.cache_clear()  # later tests plan with the committed tuning


def _one_pass_flat_tuning(method: str, dtype: str, rounds: int) -> tuple:
    """(planner module, the setting that makes every full sum of ``method`` on ``dtype`` walk a one-pass grid of
    ``rounds`` rounds, 16-byte vectors a block owns per round as a function of the dtype, the most rounds at which the
    test also sums an array of two groups of block partials) for tc_flat, shuffle_flat and tc32_flat. shuffle_flat,
    tc32_flat and fp8's tc_flat sum two groups at 1 and 4 rounds only: at 8-32 rounds that takes 2^25-2^27 float32
    values (fp8: 2^27-2^29), slow to emulate."""
    from tcreduce.plans import shuffle, tensorcore, tensorcore_fp32

    if method == "tensorcore" and dtype != "float32":  # fp8 at the H200's 16 vectors per thread on 2 blocks per SM
        return (tensorcore, dict(FLAT_ROUNDS={1: rounds, 2: rounds}, FLAT_ONE_PASS={1: (16, 2)},
                                 FLAT_ONE_PASS_MIN_WAVES=0, FLAT_ONE_PASS_SIZE_MIN_WAVES={}),
                lambda dtype: tensorcore.BLOCK * (16 if dtype.startswith("float8") else tensorcore.FLAT_UNROLL),
                4 if dtype.startswith("float8") else 32)
    if method == "shuffle":
        return (shuffle, dict(FLAT_ROUNDS={1: rounds, 2: rounds, 4: rounds}, FLAT_ONE_PASS_MIN_WAVES=0),
                lambda dtype: shuffle.BLOCK * shuffle.FLAT_TUNING[dtype][0], 4)
    return (tensorcore_fp32, dict(FLAT_ROUNDS={m: rounds for m in tensorcore_fp32.FLAT_UNROLL},
                                  FLAT_ONE_PASS_MIN_WAVES=0),
            lambda dtype: tensorcore_fp32.BLOCK * tensorcore_fp32.FLAT_UNROLL[method], 4)


@pytest.mark.parametrize("method,dtype", [("tensorcore", "float16"), ("tensorcore", "bfloat16"),
                                          ("tensorcore", "float8_e4m3fn"), ("shuffle", "float32"),
                                          ("shuffle", "float16"), ("tensorcore", "float32"),
                                          ("tensorcore_tf32", "float32")])
@pytest.mark.parametrize("rounds", [1, 4, 8, 16, 32])
def test_gpu_one_pass_flat_walk_equals_emulator(method, dtype, rounds, rng):
    """tc_flat, shuffle_flat and tc32_flat over a one-pass grid (FLAT_ROUNDS patched for every family, with no
    minimum of waves; an H200 plans 32 rounds for 16-bit data from 3 waves on, 4 of 16 vectors per thread for fp8 from
    6, an H100 8 from 4 for 16-bit data, and for fp32 4-32):
    GPU == twin bit for bit, within the bound of the float64 sum, on sizes with one block, one group and two groups of
    block partials (a head and a tail on misaligned views), called twice (the group and final counters reset
    themselves, and the flagged slots of tc_flat's, shuffle_flat's and tc32_flat's combinations are zero again: the stream's
    counters pool is all zero afterwards)."""
    import cupy

    from tcreduce._api import get_plan
    from tcreduce._device import current_device
    from tcreduce._launch import counters_for
    from tcreduce._layout import Flat
    from tcreduce._plan import param_dict
    from tcreduce.testing import check_sum, patched_plans

    module, setting, per_round, two_groups_max_rounds = _one_pass_flat_tuning(method, dtype, rounds)
    vec = 16 // np.dtype(numpy_dtype(dtype)).itemsize
    block = module.BLOCK
    two_groups = (block + 1) * per_round(dtype) * rounds * vec + 5
    sizes = [77, 40_000, (1 << 20) + 4099] + ([two_groups] if rounds <= two_groups_max_rounds else [])
    with patched_plans(module, setting):
        device = current_device()[1]
        groups_seen = set()
        for n in sizes:
            p = param_dict(get_plan(method, Flat(n, 0), dtype, "float32", device))
            assert p["rounds"] == rounds
            groups_seen.add(-(-p["grid"] // block) if p["grid"] > 1 else 0)
            xh = random_input(rng, (n,), dtype)
            for view in (slice(None), slice(3, None)):
                xd, kw = to_device(xh)
                got = [to_numpy(tcreduce.sum(xd[view], method=method, **kw)) for _ in range(2)]
                want = tcreduce.emulate.sum(xh[view], method=method, gpu=device)
                for g in got:
                    assert np.array_equal(g.view(np.uint32), np.asarray(want).view(np.uint32)), (n, view, g, want)
                check_sum(got[0], xh[view], None, method=method)
        assert groups_seen >= ({0, 1, 2} if rounds <= two_groups_max_rounds else {0, 1}), groups_seen
        pool = counters_for(cupy.cuda.Device().id, cupy.cuda.get_current_stream().ptr, 1)
        assert not pool.any(), "a counter or a flagged slot was left nonzero"


@pytest.mark.parametrize("method,dtype", [("tensorcore", "float16"), ("tensorcore", "bfloat16"),
                                          ("tensorcore", "float8_e4m3fn"), ("tensorcore_chained", "float16"),
                                          ("shuffle", "float16"), ("shuffle", "float32"), ("shuffle", "float8_e5m2")])
def test_gpu_cluster_flat_combination_equals_emulator(method, dtype, rng):
    """Full sums whose resident grid runs as one thread-block cluster (FLAT_CLUSTER_MAX_BLOCKS, 16 as committed):
    GPU == twin bit for bit and == the last-block combination's result (the knob patched to 0) on the same grid,
    within the bound, every output written (a poisoned out), for grids of 2, 5, 9 and 16 blocks (a cluster of more
    than 8 needs the non-portable size the launcher allows), aligned and misaligned, called twice."""
    import cupy

    from tcreduce._api import get_plan
    from tcreduce._device import current_device
    from tcreduce._layout import Flat
    from tcreduce._plan import param_dict
    from tcreduce.formats import get_format
    from tcreduce.plans import shuffle, tensorcore
    from tcreduce.testing import check_sum, patched_plans, poisoned

    device = current_device()[1]
    if device.cc < (9, 0):
        pytest.skip("thread-block clusters need compute capability 9.0")
    module = shuffle if method == "shuffle" else tensorcore
    isz = get_format(dtype).itemsize
    unroll = shuffle.FLAT_TUNING[dtype][0] if method == "shuffle" else tensorcore.flat_resident(isz, device)[0]
    per_block = module.BLOCK * unroll * 16 // isz
    with patched_plans(tensorcore, dict(FLAT_ONE_BLOCK={})):  # where set, a few blocks' worth would run as one block
        for blocks in (2, 5, 9, 16):
            n = blocks * per_block - 37
            xh = random_input(rng, (n,), dtype)
            xd, kw = to_device(xh)
            for view in (slice(None), slice(3, None)):
                align = (3 * isz) % 16 if view.start else 0  # the view's byte offset mod 16
                with patched_plans(module, dict(FLAT_CLUSTER_MAX_BLOCKS=0)):
                    assert "cluster" not in param_dict(get_plan(method, Flat(xh[view].size, align), dtype, "float32",
                                                                device))
                    last_block = to_numpy(tcreduce.sum(xd[view], method=method, **kw))
                p = param_dict(get_plan(method, Flat(xh[view].size, align), dtype, "float32", device))
                assert p.get("cluster") == p["grid"] == blocks, p
                want = np.asarray(tcreduce.emulate.sum(xh[view], method=method, gpu=device))
                for _ in range(2):
                    out = poisoned((), "float32")
                    tcreduce.sum(xd[view], method=method, out=out, **kw)
                    cupy.cuda.Device().synchronize()
                    got = to_numpy(out)
                    assert got.tobytes() == want.tobytes() == last_block.tobytes(), (blocks, view, got, want)
                check_sum(got, xh[view], None, method=method)


@pytest.mark.parametrize("method,dtype", [("tensorcore", "float16"), ("tensorcore", "bfloat16"),
                                          ("tensorcore", "float8_e4m3fn"), ("tensorcore", "float8_e5m2"),
                                          ("tensorcore_chained", "float16")])
def test_gpu_packed_rows_equal_emulator(method, dtype, rng):
    """tc_rows_stream's packed short rows (ROWS_PACKED patched on for every family from any length, an H200's
    chunks in flight and blocks per SM): 2, 4 and 8 rows per chunk, one row, a part-filled last chunk and many
    chunks; GPU == twin bit for bit, called twice, every output written (a poisoned out), within the bound."""
    import cupy

    from tcreduce._api import get_plan
    from tcreduce._device import current_device
    from tcreduce._layout import Rows
    from tcreduce._plan import param_dict
    from tcreduce.formats import get_format
    from tcreduce.plans import tensorcore
    from tcreduce.testing import check_sum, patched_plans, poisoned

    device = current_device()[1]
    vec = 16 // get_format(dtype).itemsize
    with patched_plans(tensorcore, dict(ROWS_PACKED={2: (0, 2, 4), 1: (0, 4, 4)})):
        for k in (4 * vec, 8 * vec, 16 * vec):
            for m in (1, 3, 1001, 40_003):
                p = param_dict(get_plan(method, Rows(m, k, k, 0), dtype, "float32", device))
                assert p.get("rows_per_chunk") == 32 * vec // k, p
                xh = random_input(rng, (m, k), dtype)
                xd, kw = to_device(xh)
                want = np.asarray(tcreduce.emulate.sum(xh, axis=-1, method=method, gpu=device))
                for _ in range(2):
                    out = poisoned((m,), "float32")
                    tcreduce.sum(xd, axis=-1, method=method, out=out, **kw)
                    cupy.cuda.Device().synchronize()
                    got = to_numpy(out)
                    assert got.tobytes() == want.tobytes(), (k, m, got[:4], want[:4])
                check_sum(got, xh, -1, method=method)


def _wide_strip_params(shape: tuple[int, ...], dtype: str, device) -> dict:
    """The tensor-core plan's parameters for the sum of a C-contiguous ``shape`` (2-D or 3-D) over its second-to-last
    axis, as planned under the caller's patched constants."""
    from tcreduce._api import get_plan
    from tcreduce._layout import Cols
    from tcreduce._plan import param_dict

    a, r, b = (1, *shape) if len(shape) == 2 else shape
    return param_dict(get_plan("tensorcore", Cols(a, r, b, r * b, b), dtype, "float32", device))


def _first_axis_sums_equal_twin(xh: np.ndarray, device, where) -> None:
    """Tensor-core sums of ``xh`` (host, 2-D or 3-D) over its second-to-last axis: GPU == twin bit for bit into a
    NaN-poisoned float32 output (every element written), called twice; within the bound of the float64 sum.
    ``where`` names the case in failures."""
    import cupy

    from tcreduce.testing import check_sum, poisoned

    axis = xh.ndim - 2
    xd, kw = to_device(xh)
    want = np.asarray(tcreduce.emulate.sum(xh, axis=axis, method="tensorcore", gpu=device))
    for _ in range(2):
        out = poisoned(want.shape, "float32")
        tcreduce.sum(xd, axis=axis, method="tensorcore", out=out, **kw)
        cupy.cuda.Device().synchronize()
        got = to_numpy(out)
        assert got.tobytes() == want.tobytes(), (where, got.ravel()[:4], want.ravel()[:4])
    check_sum(got, xh, axis, method="tensorcore")


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_gpu_wide_fp8_column_strips_equal_emulator(dtype, rng):
    """tc_cols' 128-column strips for fp8 (COLS_WIDE_STRIPS patched on, at (1, 3) and at (2, 2); the general kernel's
    chunks in flight at 2 blocks per SM where 3 would not fill the GPU): one, four and eight warps per strip,
    part-filled last strips and chunks, two leading items; GPU == twin bit for bit, called twice, every output written
    (a poisoned out), within the bound. (132-SM GPUs plan every listed width; the assertion below says so.)"""
    from tcreduce._device import current_device
    from tcreduce.plans import tensorcore
    from tcreduce.testing import patched_plans

    device = current_device()[1]
    wide = set()
    for candidates in (((1, 3),), ((2, 2),)):
        with patched_plans(tensorcore, dict(COLS_WIDE_STRIPS={1: candidates}, COLS_WIDE_LONG_STRIPS={},
                                            COLS_WIDE_GENERAL={})):
            for shape in ((300, 2000), (64, 8208), (33, 30000), (40, 1 << 20), (2, 50, 4096), (17, 1 << 20),
                          (40, 405504)):  # 396 blocks: 3 per SM fill 132 SMs
                p = _wide_strip_params(shape, dtype, device)
                if p.get("strip") == 128:
                    wide.add((p["wps"], p["unroll"], p["blocks_per_sm"]))
                _first_axis_sums_equal_twin(random_input(rng, shape, dtype), device, (shape, p))
    assert {w for w, _, _ in wide} >= {1, 4, 8} and (1, 1, 3) in wide, wide


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("unroll", [1, 2])
def test_gpu_wide_fp8_column_strips_general_walk_equals_emulator(dtype, unroll, rng):
    """tc_cols' general walk in fp8's 128-column strips (COLS_WIDE_GENERAL patched on at 1 and 2 chunks in flight,
    COLS_WIDE_STRIPS at (4, 2) then (1, 3)): splits of the rows combined by the strip's last block, 8 warps per strip,
    part-filled last strips and chunks, a strip of 16 columns, two leading items; GPU == twin bit for bit, called
    twice, every output written (a poisoned out), within the bound."""
    from tcreduce._device import current_device
    from tcreduce.plans import tensorcore
    from tcreduce.testing import patched_plans

    device = current_device()[1]
    with patched_plans(tensorcore, dict(COLS_WIDE_STRIPS={1: ((4, 2), (1, 3))}, COLS_WIDE_GENERAL={1: unroll})):
        for shape in ((40001, 2000), (32771, 4112), (70001, 208), ((1 << 20) + 3, 16), (2049, 8208),
                      (2, 20001, 2000)):
            p = _wide_strip_params(shape, dtype, device)
            assert p.get("strip") == 128 and not p["one_item"] and p["splits"] > 1, (shape, p)
            _first_axis_sums_equal_twin(random_input(rng, shape, dtype), device, (shape, p))


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("short,minb,once", [(1, 4, False), (1, 4, True), (2, 3, True), (4, 2, True)])
def test_gpu_wide_fp8_column_strips_short_path_equals_emulator(dtype, short, minb, once, rng):
    """tc_cols' short path in fp8's 128-column strips (COLS_WIDE_SHORT patched on; at most 16 rows, one chunk per
    strip), in one pass and on a resident grid (whose warps stride over several groups of strips at [16, 2^20]): 16
    rows and fewer (masked rows), a part-filled last strip, strips not a multiple of the strips per warp, three
    leading items; GPU == twin bit for bit, called twice, every output written (a poisoned out), within the bound."""
    from tcreduce._device import current_device
    from tcreduce.plans import tensorcore
    from tcreduce.testing import patched_plans

    device = current_device()[1]
    knobs = dict(COLS_WIDE_STRIPS={1: ((4, 2), (1, 3))}, COLS_WIDE_SHORT={1: (short, minb, once)})
    with patched_plans(tensorcore, knobs):
        for shape in ((16, 1 << 20), (9, 100000), (1, 2000), (16, 128 * 4099 + 48), (3, 16, 5008)):
            p = _wide_strip_params(shape, dtype, device)
            assert (p.get("strip"), p["short_unroll"], p["blocks_per_sm"]) == (128, short, minb), (shape, p)
            _first_axis_sums_equal_twin(random_input(rng, shape, dtype), device, (shape, p))


ONE_BLOCK_CASES = [("tensorcore", dt) for dt in ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")] + [
    ("tensorcore", "float32"), ("tensorcore_tf32", "float32")]


@pytest.mark.parametrize("method,dtype", ONE_BLOCK_CASES)
@pytest.mark.parametrize("trips", [1, 2])
def test_gpu_one_block_flat_sum_equals_emulator(method, dtype, trips, rng):
    """FLAT_ONE_BLOCK (tc_flat's, per bytes per element, and tc32_flat's, per method) patched on, on any GPU, to 16
    vectors per thread on 2 blocks per SM and 1 or 2 trips: full sums of up to trips x 256 x 16 vectors as one block
    looping over its trips, one vector more as a grid of several: GPU == twin bit for bit, within the bound, every
    output written (a poisoned out), aligned and misaligned."""
    import cupy

    from tcreduce._api import get_plan
    from tcreduce._device import current_device
    from tcreduce._layout import Flat
    from tcreduce._plan import param_dict
    from tcreduce.formats import get_format
    from tcreduce.plans import tensorcore, tensorcore_fp32
    from tcreduce.testing import check_sum, patched_plans, poisoned

    device = current_device()[1]
    isz = get_format(dtype).itemsize
    vec = 16 // isz  # elements per 16-byte vector
    if dtype == "float32":
        module, key, block = tensorcore_fp32, method, tensorcore_fp32.BLOCK
        resident_unroll = tensorcore_fp32.FLAT_UNROLL[method]
    else:
        module, key, block = tensorcore, isz, tensorcore.BLOCK
        resident_unroll = tensorcore.flat_resident(isz, device)[0]
    limit = trips * block * 16 * vec  # elements of one block
    with patched_plans(module, dict(FLAT_ONE_BLOCK={key: (16, 2, trips)})):
        for n in (77, limit // 3 + 5, limit, limit + vec, limit + 19):
            xh = random_input(rng, (n,), dtype)
            xd, kw = to_device(xh)
            for view in (slice(None), slice(3, None)):
                align = (3 * isz) % 16 if view.start else 0
                p = param_dict(get_plan(method, Flat(xh[view].size, align), dtype, "float32", device))
                assert (p["grid"] == 1) == (p["nvec"] <= limit // vec), (n, view, p)
                # a sum the resident grid gives one block anyway keeps that plan
                one = resident_unroll if p["nvec"] <= block * resident_unroll else 16
                assert p["grid"] > 1 or p["unroll"] == one, (n, view, p)
                want = np.asarray(tcreduce.emulate.sum(xh[view], method=method, gpu=device))
                out = poisoned((), "float32")
                tcreduce.sum(xd[view], method=method, out=out, **kw)
                cupy.cuda.Device().synchronize()
                got = to_numpy(out)
                assert got.tobytes() == want.tobytes(), (n, view, got, want)
                check_sum(got, xh[view], None, method=method)


UINT = {"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_gpu_equals_emulator_with_inf_and_nan(dtype, rng):
    """With Inf and NaN among the inputs every emulated method returns the same bits on the GPU and in the emulator:
    the infinities where they do not cancel, and one canonical NaN (fp16 0x7E00, fp32 0x7FC00000, fp64
    0x7FF8000000000000) whatever NaN the arithmetic made (tcr::from_float, tcreduce.emulate.api.canonical_nan)."""
    import cupy

    specials = {"nan": [np.nan], "-nan": [-np.nan], "inf": [np.inf], "-inf": [-np.inf], "inf-inf": [np.inf, -np.inf],
                "nan+inf": [np.nan, np.inf], "many": [np.nan, np.inf, -np.inf, np.inf, np.nan]}
    cases = [((1000,), None), ((4097,), None), (((1 << 20) + 3,), None), ((64, 257), -1), ((300, 520), -1),
             ((16, 1000), 0), ((5, 17, 40), 1)]
    mismatches, count = [], 0
    for method in _emulated(dtype):
        for shape, axis in cases:
            for name, vals in specials.items():
                xh = random_input(rng, shape, dtype)
                flat = xh.reshape(-1)
                flat[rng.choice(flat.size, len(vals), replace=False)] = vals
                if axis is not None:  # a special in every output of a few rows/columns too
                    idx = [slice(None)] * len(shape)
                    idx[axis if isinstance(axis, int) else axis[0]] = 0
                    xh[tuple(idx)] = vals[0]
                xd = cupy.asarray(xh)
                outs = ("float32", "float16", "float64") if xh.size < 100_000 else ("float32",)  # emulator time
                for out in outs:
                    try:
                        want = tcreduce.emulate.sum(xh, axis=axis, method=method, dtype=out)
                    except ValueError as e:  # full-sum-only methods
                        if "axis=None" not in str(e):
                            raise
                        continue
                    got = to_numpy(tcreduce.sum(xd, axis=axis, method=method, dtype=out))
                    count += 1
                    if not np.array_equal(got.view(UINT[out]), np.asarray(want).view(UINT[out])):
                        mismatches.append((method, shape, axis, name, out, got.reshape(-1)[:3],
                                           np.asarray(want).reshape(-1)[:3]))
                    nan = np.isnan(np.asarray(want, np.float64))
                    assert np.all(np.asarray(want).view(UINT[out])[nan] == np.array(np.nan, out).view(UINT[out]))
    print(f"\nGPU == emulator with Inf/NaN: {count - len(mismatches)}/{count}")
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:5]}"


def _last_axis_sums_equal_twin(xv, xdv, kw, method: str, device, out_dtypes, where) -> None:
    """Sums over the last axis of ``xv`` (host) and ``xdv`` (its device copy) by ``method``, for each output type:
    GPU == twin bit for bit into a NaN-poisoned output, called twice; the float32 result within the bound of the
    float64 sum. ``where`` names the case in failures."""
    import cupy

    from tcreduce.testing import check_sum

    for out_dtype in out_dtypes:
        want = tcreduce.emulate.sum(xv, axis=1, method=method, gpu=device, dtype=out_dtype)
        for _ in range(2):
            out = cupy.full(want.shape, np.nan, dtype=out_dtype)
            got = to_numpy(tcreduce.sum(xdv, axis=1, method=method, dtype=out_dtype, out=out, **kw))
            assert np.array_equal(got.view(UINT[out_dtype]), np.asarray(want).view(UINT[out_dtype])), \
                (where, out_dtype)
        if out_dtype == "float32":
            check_sum(got, xv, 1, method=method)


@pytest.mark.parametrize("dtype,unroll,one_pass,whole", [
    *((dt, u, p, False) for dt in ("float16", "bfloat16") for u, p in ((4, True), (4, False), (8, False))),
    *((dt, u, p, w) for dt in ("float8_e4m3fn", "float8_e5m2") for u, p in ((4, True), (2, False))
      for w in (False, True))])
def test_gpu_rows16_paired_loads_equal_emulator(dtype, unroll, one_pass, whole, rng):
    """tc_rows16 (rows of at most 16 elements, one load of 8 elements per lane and a shuffle of half of it per tile;
    patched on for every format and family, a one-pass or a resident grid): GPU == twin bit for bit and within the
    bound of the float64 sum, into a NaN-poisoned output, called twice, on whole and partial row tiles, rows of 16, 12
    (a view with row stride 16: masked loads) and 8 (odd lanes load nothing), a view starting 2 rows in and a float16
    result; a misaligned view and rows of 17 keep tc_rows. fp8 keeps twice the tiles in flight. ``whole``: fp8's
    whole-row loads (ROWS16_WHOLE_ROWS: 32 rows per warp, a word transpose per quad, half the units in flight) where
    rows start 16-byte aligned, among them 70001 and 17 rows (partial units of 32), rows of 12 in a row stride of 16
    and views 1 and 2 rows in; rows of 8 and a view 8 elements in (8-byte aligned) keep the 8-element loads."""
    from tcreduce._api import get_plan
    from tcreduce._device import current_device
    from tcreduce._layout import plan_layout
    from tcreduce._plan import param_dict
    from tcreduce.plans import tensorcore
    from tcreduce.testing import patched_plans

    tuning = dict(ROWS16_PAIRED_LOADS={2: True, 1: True}, ROWS_UNROLL_SHORT={4: unroll, 8: 2}, ROWS16_ONE_PASS=one_pass,
                  ROWS16_WHOLE_ROWS={1: whole})
    with patched_plans(tensorcore, tuning):
        device = current_device()[1]
        isz = np.dtype(numpy_dtype(dtype)).itemsize
        cases = [((70001, 16), None, True, whole),  # a partial last tile, many rounds of a resident grid
                 ((3, 16), None, True, whole), ((17, 16), None, True, whole),
                 ((4099, 16), (slice(None), slice(0, 12)), True, whole),
                 ((333, 8), None, True, False), ((5000, 16), (slice(2, None),), True, whole),
                 ((5000, 16), (slice(1, None),), True, whole),
                 ((4099, 16), (slice(None), slice(8, None)), True, False),  # rows start 8 elements in
                 ((4099, 16), (slice(None), slice(1, None)), False, False),  # rows start 1 element in: tc_rows
                 ((4099, 17), None, False, False)]
        for shape, view, paired, whole_rows in cases:
            xh = random_input(rng, shape, dtype)
            xv = xh[view] if view else xh
            offset = xv.__array_interface__["data"][0] - xh.__array_interface__["data"][0]
            problem = plan_layout(xv.shape, [s // isz for s in xv.strides], (1,), isz, offset % 16).problem
            p = param_dict(get_plan("tensorcore", problem, dtype, "float32", device))
            assert p.get("paired_loads", False) == paired, (shape, view, p)
            assert p.get("whole_rows", False) == whole_rows, (shape, view, p)
            if not paired:
                continue
            assert p["unroll"] == (unroll if whole_rows else unroll * (2 if isz == 1 else 1)), (shape, p)
            xd, kw = to_device(xh)
            _last_axis_sums_equal_twin(xv, xd[view] if view else xd, kw, "tensorcore", device,
                                       ("float32", "float16") if shape[0] == 4099 else ("float32",), (shape, view))


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("method,unroll", [("tensorcore", 4), ("tensorcore", 2), ("tensorcore_chained", 4)])
def test_gpu_rows32_half_row_loads_equal_emulator(dtype, method, unroll, rng):
    """tc_rows32 (fp8 rows of 17-32 elements starting 16-byte aligned: half a row per lane, a swap of two words
    between lanes t and t ^ 2, tc_rows' two blocks per row; ROWS32_HALF_ROW_LOADS patched on for every family, at
    ``unroll`` tiles in flight): GPU == twin bit for bit and within the bound of the float64 sum, into a NaN-poisoned
    output, called twice, on whole and partial row tiles (70001, 3 and 17 rows), rows of 32, of 20 in a row stride of
    32 (masked loads), a view 1 row in, a view 16 elements into rows of 48 and a float16 result; views 8 elements in,
    row strides of 24 and 17 (not 16-byte aligned) keep tc_rows."""
    from tcreduce._api import get_plan
    from tcreduce._device import current_device
    from tcreduce._layout import plan_layout
    from tcreduce._plan import param_dict
    from tcreduce.plans import tensorcore
    from tcreduce.testing import patched_plans

    tuning = dict(ROWS32_HALF_ROW_LOADS={1: True}, ROWS_UNROLL_SHORT={4: 4, 8: unroll // 2})  # fp8: twice 8's
    with patched_plans(tensorcore, tuning):
        device = current_device()[1]
        cases = [((70001, 32), None, True), ((3, 32), None, True), ((17, 32), None, True),
                 ((4099, 32), (slice(None), slice(0, 20)), True), ((5000, 32), (slice(1, None),), True),
                 ((4099, 48), (slice(None), slice(16, None)), True),
                 ((4099, 32), (slice(None), slice(8, None)), False),  # rows start 8 bytes in: tc_rows
                 ((333, 24), None, False), ((4099, 17), None, False)]
        for shape, view, half in cases:
            xh = random_input(rng, shape, dtype)
            xv = xh[view] if view else xh
            offset = xv.__array_interface__["data"][0] - xh.__array_interface__["data"][0]
            problem = plan_layout(xv.shape, list(xv.strides), (1,), 1, offset % 16).problem
            plan = get_plan(method, problem, dtype, "float32", device)
            p = param_dict(plan)
            assert p.get("half_rows", False) == half and p["vec"] == 8, (shape, view, p)
            if not half:
                assert plan.launches[0].kernel.startswith("tc_rows<"), (shape, view, plan.launches[0].kernel)
                continue
            assert p["unroll"] == unroll and plan.launches[0].kernel.startswith("tc_rows32<"), (shape, p)
            xd, kw = to_device(xh)
            _last_axis_sums_equal_twin(xv, xd[view] if view else xd, kw, method, device,
                                       ("float32", "float16") if shape[0] == 4099 else ("float32",), (shape, view))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float8_e4m3fn"])
@pytest.mark.parametrize("tuning", [(1, 4), (2, 3), (4, 2), (2, 2)])
def test_gpu_one_item_cols_walk_equals_emulator(dtype, tuning, rng):
    """tc_cols' one-item walk (COLS_ONE_ITEM_TUNING patched for every family, one pass from the first chunk): GPU ==
    twin bit for bit and within the bound of the float64 sum, into a NaN-poisoned output, on whole strips of whole
    chunks, a partial last chunk and strip, several outer indices, a misaligned view (the unaligned kernel), strips
    of 2 and 4 warps (their partial chunk in warp 1 and warp 0) and a float16 result; called twice (no state carried
    between launches)."""
    import cupy

    from tcreduce._api import get_plan
    from tcreduce._device import current_device
    from tcreduce._layout import plan_layout
    from tcreduce._plan import param_dict
    from tcreduce.plans import tensorcore
    from tcreduce.plans._common import SPLIT_TOLERANCE, wave_efficiency
    from tcreduce.testing import check_sum, patched_plans

    unroll, minb = tuning
    with patched_plans(tensorcore, dict(COLS_ONE_ITEM_TUNING={1: ((2 * unroll, minb),), 2: ((unroll, minb),)},
                                        COLS_ONE_ITEM_LONG={}, COLS_ONE_PASS_MIN_CHUNKS=0,
                                        COLS_WIDE_STRIPS={})):  # 64-column strips
        device = current_device()[1]
        isz = np.dtype(numpy_dtype(dtype)).itemsize
        strips = device.sm_count * 2 * 8 + 64  # 272 blocks of 8 strips: as full on 2, 3 or 4 blocks per SM
        cases = [((96, 64 * strips), 0, None),  # whole strips, whole chunks
                 ((35, 64 * strips + 40), 0, None),  # a partial last chunk and strip
                 ((3, 37, 64 * (strips // 3) + 8), 1, None),  # several outer indices, a partial strip in each
                 ((70, 64 * strips + 1), 0, (slice(None), slice(1, None))),  # misaligned: scalar loads
                 ((83, 102408), 0, None),  # 1601 strips: 2 warps each, the partial chunk warp 1's
                 ((200, 65576), 0, None)]  # 1025 strips: 4 warps each, the partial chunk warp 0's
        for shape, axis, view in cases:
            xh = random_input(rng, shape, dtype)
            xv = xh[view] if view else xh
            problem = plan_layout(xv.shape, [s // isz for s in xv.strides], (axis,), isz,
                                  0 if view is None else isz).problem
            p = param_dict(get_plan("tensorcore", problem, dtype, "float32", device))
            # strips of 2 and 4 warps: at most 2 blocks per SM's worth, so only a setting that fills as well takes the
            # one-item walk ((2, 3) here: the general kernel)
            if p["wps"] > 1 and wave_efficiency(p["grid"], device.sm_count * minb) < \
                    (1 - SPLIT_TOLERANCE) * wave_efficiency(p["grid"], device.sm_count * 2):
                assert not p["one_item"] and minb == 3, (shape, p)
                continue
            assert p["one_item"] and p["blocks_per_sm"] == minb and p["aligned"] == (view is None), (shape, p)
            xd, kw = to_device(xh)
            xdv = xd[view] if view else xd
            for out_dtype in ("float32", "float16") if shape[0] == 35 else ("float32",):
                want = tcreduce.emulate.sum(xv, axis=axis, method="tensorcore", gpu=device, dtype=out_dtype)
                for _ in range(2):
                    out = cupy.full(want.shape, np.nan, dtype=out_dtype)
                    got = to_numpy(tcreduce.sum(xdv, axis=axis, method="tensorcore", dtype=out_dtype, out=out, **kw))
                    assert np.array_equal(got.view(UINT[out_dtype]), np.asarray(want).view(UINT[out_dtype])), \
                        (shape, view, out_dtype)
                if out_dtype == "float32":
                    check_sum(got, xv, axis, method="tensorcore")


# Evict-first loads (the same values through another cache hint) in every kernel that takes them, each planned with its
# knob on from the first row or chunk for every GPU family: (method, planner module, knob settings, dtype, shape, axis,
# the kernel's last template argument). tc_cols' one-item walk needs a one-item tuning and one pass from the
# first chunk (an H100 has none of its own); its partial last strip and a misaligned view walk without the hint.
EVICT_FIRST = [
    ("tensorcore", "tensorcore", dict(COLS_EVICT_FIRST_MIN_ROWS={2: 0}, COLS_ONE_ITEM_TUNING={2: ((2, 3),)},
                                      COLS_ONE_ITEM_LONG={}, COLS_ONE_PASS_MIN_CHUNKS=0), dtype, shape, 0, ", 3>")
    for dtype in ("float16", "bfloat16") for shape in ((96, 64 * 2200), (35, 64 * 2200 + 40))
] + [  # fp8's 128-column strips (16-byte loads per lane and row): a partial chunk and strip, 8 warps per strip
    ("tensorcore", "tensorcore", dict(COLS_EVICT_FIRST_MIN_ROWS={2: 0, 1: 0}, COLS_WIDE_STRIPS={1: ((2, 2),)},
                                      COLS_ONE_PASS_MIN_CHUNKS=0), dtype, shape, 0, ", 3, 16>")
    for dtype in ("float8_e4m3fn", "float8_e5m2") for shape in ((96, 128 * 2200), (35, 128 * 2200 + 80), (300, 4000))
] + [
    ("shuffle", "shuffle", dict(ROWS_EVICT_FIRST_MIN_CHUNKS={1: 0, 2: 0, 4: 0}), dtype, shape, -1, ", 1>")
    for dtype in ("float16", "float32") for shape in ((4000, 72), (3000, 1024), (600, 8200), (5, 1 << 20), (40, 16))
] + [
    ("shuffle", "shuffle", dict(COLS_EVICT_FIRST_MIN_ROWS={1: 0, 2: 0, 4: 0}), dtype, shape, 0, ", 1>")
    for dtype in ("float8_e4m3fn", "float32") for shape in ((129, 1 << 17), (64, 100_016), (1000, 4112))
]


@pytest.mark.parametrize("method,module,knobs,dtype,shape,axis,suffix", EVICT_FIRST)
def test_gpu_evict_first_loads_equal_emulator(method, module, knobs, dtype, shape, axis, suffix, rng):
    """Each kernel with evict-first loads names the hinted instantiation and gives the bits of the twin (which does
    not see the hint) and a sum within the bound of the float64 one, into a NaN-poisoned output, twice."""
    import importlib

    import cupy

    from tcreduce._api import get_plan
    from tcreduce._device import current_device
    from tcreduce.testing import check_sum, contiguous_problem, patched_plans

    with patched_plans(importlib.import_module(f"tcreduce.plans.{module}"), knobs):
        device = current_device()[1]
        problem = contiguous_problem(shape, axis, dtype)
        assert get_plan(method, problem, dtype, "float32", device).launches[-1].kernel.endswith(suffix)
        xh = random_input(rng, shape, dtype)
        xd, kw = to_device(xh)
        want = tcreduce.emulate.sum(xh, axis=axis, method=method, gpu=device)
        for _ in range(2):
            out = cupy.full(want.shape, np.nan, dtype=np.float32)
            got = to_numpy(tcreduce.sum(xd, axis=axis, method=method, out=out, **kw))
            assert np.array_equal(got.view(np.uint32), np.asarray(want).view(np.uint32)), (shape, axis)
        check_sum(got, xh, axis, method=method)


def test_gpu_shuffle_plentiful_long_rows_equal_emulator(rng):
    """float32 rows of 1024 chunks, plentiful enough for groups of threads (an H200's plan: 128 threads per row, the
    hinted loads; an H100's: a block per row): GPU == twin bit for bit with the device's own plan, within the bound."""
    from tcreduce._device import current_device
    from tcreduce.testing import check_sum

    device = current_device()[1]
    xh = random_input(rng, (17000, 4096), "float32")
    xd, kw = to_device(xh)
    got = to_numpy(tcreduce.sum(xd, axis=-1, method="shuffle", **kw))
    want = tcreduce.emulate.sum(xh, axis=-1, method="shuffle", gpu=device)
    assert np.array_equal(got.view(np.uint32), np.asarray(want).view(np.uint32))
    check_sum(got, xh, -1, method="shuffle")
