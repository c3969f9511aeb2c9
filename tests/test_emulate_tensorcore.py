"""CPU tests of the tensorcore emulator twin (tcreduce/emulate/tensorcore.py), no GPU needed.

- tc_flat on fp8 (a lane's 16-byte load is 16 values, two A fragments) and tc_rows_stream (its packed short rows
  too): the vectorised twin equals a literal replay of the kernel's order comment (kernels/tensorcore.cu):
  per lane 16-byte loads placed into A by the PTX fragment layout, every mma through the full
  ``mma_m16n8k16`` model with an all-ones B (not the ``fused_rowsum`` shortcut the twin uses), the flush rule, the
  warp_fold_rows butterfly over 32 lanes, the warps of a group and the splits added in order.
- Every form (full, last axis, other axes) of tensorcore and tensorcore_chained over awkward sizes, views and output
  dtypes: the emulated result is within the a-priori bound of the exact sum, with the right shape and dtype; empty
  reductions give zeros.
- Speed: 2^22 elements in each form within a generous limit.
"""

from __future__ import annotations

import numpy as np
import pytest

import tcreduce
from tcreduce._device import KNOWN_GPUS
from tcreduce._layout import Flat, Rows
from tcreduce._plan import DeviceSpec, param_dict
from tcreduce.emulate.folds import block_combine, block_fold
from tcreduce.emulate.mma_model import mma_m16n8k16
from tcreduce.emulate.tensorcore import emulate_tensorcore
from tcreduce.plans import tensorcore as tensorcore_plans
from tcreduce.plans._common import flagged_counters
from tcreduce.plans.tensorcore import plan_tensorcore
from tcreduce.reference import exact_sum
from tcreduce.testing import bound_for

F32 = np.float32
ONES_B = np.ones((16, 8), np.float16)


def _a_from_lane_loads(lanes: np.ndarray) -> np.ndarray:
    """[32 lanes, 8 halves] -> A [16, 16] by the m16n8k16 A fragment layout: lane (g, t) holds a0 = A[g][2t, 2t+1],
    a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9], a3 = A[g+8][2t+8, 2t+9], and its load is (a0, a1, a2, a3)."""
    a = np.zeros((16, 16), np.float16)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        h = lanes[lane]
        a[g, 2 * t:2 * t + 2] = h[0:2]
        a[g + 8, 2 * t:2 * t + 2] = h[2:4]
        a[g, 2 * t + 8:2 * t + 10] = h[4:6]
        a[g + 8, 2 * t + 8:2 * t + 10] = h[6:8]
    return a


def _warp_fold_rows(v: np.ndarray) -> F32:
    """The xor butterfly over offsets 16, 8, 4 of 32 lane values; returns lane 0's value."""
    v = v.astype(F32)
    for off in (16, 8, 4):
        v = np.array([v[lane] + v[lane ^ off] for lane in range(32)], F32)
    return v[0]


def _replay_rows_stream(plan, rows: np.ndarray) -> np.ndarray:
    p = param_dict(plan)
    assert p["stream"]
    m, k = rows.shape
    wpt, splits, chain, chunk = p["wpt"], p["splits"], p["chain"], p["chunk"]
    vec = chunk // 32  # a lane's 16-byte load: 8 halves, or 16 fp8 values (two A fragments)
    rows = rows.astype(np.float16)  # fp8 is converted exactly, as in the kernel
    per_split = -(-(-(-k // chunk)) // splits)
    out = np.zeros(m, F32)
    for r in range(m):
        split_values = []
        for s in range(splits):
            begin, end = s * per_split * chunk, min(k, (s + 1) * per_split * chunk)
            nchunks = -(-(end - begin) // chunk) if end > begin else 0
            warp_values = []
            for q in range(wpt):
                c = np.zeros((16, 8), F32)
                lo, hi = np.zeros(32, F32), np.zeros(32, F32)  # per lane
                pending = 0
                for ch in range(q, nchunks, wpt):
                    lanes = np.zeros((32, vec), np.float16)
                    for lane in range(32):
                        for e in range(vec):
                            col = begin + ch * chunk + vec * lane + e
                            if col < end:
                                lanes[lane, e] = rows[r, col]
                    for f in range(0, vec, 8):
                        c = mma_m16n8k16(_a_from_lane_loads(lanes[:, f:f + 8]), ONES_B, c, model="H100")
                        pending += 1
                        if pending == chain:
                            for lane in range(32):
                                g, t = lane >> 2, lane & 3
                                lo[lane] += c[g, 2 * t]  # c[0] of the lane
                                hi[lane] += c[g + 8, 2 * t]  # c[2]
                            c = np.zeros((16, 8), F32)
                            pending = 0
                if pending:
                    for lane in range(32):
                        g, t = lane >> 2, lane & 3
                        lo[lane] += c[g, 2 * t]
                        hi[lane] += c[g + 8, 2 * t]
                warp_values.append(_warp_fold_rows(lo + hi))
            total = warp_values[0]
            if wpt > 1:
                total = F32(0)
                for w in warp_values:
                    total = F32(total + w)
            split_values.append(total)
        value = split_values[0]
        if splits > 1:
            value = F32(0)
            for v in split_values:
                value = F32(value + v)
        out[r] = value
    return out


# A 1-SM GPU (32 resident warps) puts a few dozen rows in the one-warp-per-row paths, which an H100 reserves for
# thousands of rows: the literal replay stays fast. The order of additions per row does not depend on the GPU.
ONE_SM = DeviceSpec("one-SM test GPU", 1, (9, 0))
STREAM_CASES = {
    "one chunk, 8 rows per warp": ((40, 256), 1, ONE_SM),
    "3 chunks, the last partial, 2 rows per warp": ((40, 712), 1, ONE_SM),
    # plans spread rows of more than STREAM_MAX_STEPS steps over a group of warps (_common.spread_rows); with the
    # spread off (as tune_plans' STREAM_MAX_STEPS=0 setting launches it) one warp streams the whole row
    "one warp per row, 5 chunks, spread off": ((40, 1032), 1, ONE_SM),
    "the same rows spread over a group of warps": ((40, 1032), 1, ONE_SM),
    "a group of warps per row, a chunk with only lane 0 loaded": ((3, 1032), 1, KNOWN_GPUS["H100"]),
    "few long rows: a group per row and splits": ((2, 40000), 1, KNOWN_GPUS["H100"]),
    "chains of 2 (the flush rule with leftovers)": ((2, 5000), 2, KNOWN_GPUS["H100"]),
    "tensorcore_chained: no flush until the end": ((1, 9000), 1 << 30, KNOWN_GPUS["H100"]),
    "fp8: one 512-value chunk, 8 rows per warp": ((40, 304), 1, ONE_SM, "float8_e4m3fn"),
    "fp8: 3 chunks, chains of 3": ((40, 1104), 3, ONE_SM, "float8_e5m2"),
    "fp8: a group per row and splits": ((2, 40000), 1, KNOWN_GPUS["H100"], "float8_e4m3fn"),
}


def _stream_plan(case: str):
    shape, chain, device, *dtype = STREAM_CASES[case]
    with pytest.MonkeyPatch.context() as mp:
        if "spread off" in case:
            mp.setattr(tensorcore_plans, "STREAM_MAX_STEPS", 0)
        plan = plan_tensorcore(Rows(shape[0], shape[1], shape[1], 0), *(dtype or ["float16"]), "float32", device,
                               chain=chain)
    assert param_dict(plan)["stream"]
    return plan


@pytest.mark.parametrize("case", STREAM_CASES)
def test_rows_stream_twin_equals_literal_replay(case, rng):
    import ml_dtypes

    plan = _stream_plan(case)
    shape, dtype = STREAM_CASES[case][0], plan.in_dtype
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 3, shape)).astype(np.float16)
    if dtype != "float16":  # every binade of the fp8 format, so that fp32 sums round and the order shows
        top = 8 if dtype == "float8_e4m3fn" else 15
        x = (rng.choice([-1.0, 1.0], shape) * 2.0 ** rng.uniform(-14, top, shape)).astype(getattr(ml_dtypes, dtype))
    want = _replay_rows_stream(plan, x)
    got = emulate_tensorcore(plan, x, "H100")
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (got, want)


def test_the_replay_cases_cover_every_stream_work_split():
    seen = set()
    for case in STREAM_CASES:
        p = param_dict(_stream_plan(case))
        seen.add(("rows per warp > 1" if p["rows_in_flight"] > 1 else "one row per warp" if p["wpt"] == 1
                  else "group") + (", splits" if p["splits"] > 1 else ""))
        if p["chunks_per_row"]:
            seen.add(f"{p['chunks_per_row']} chunks per row")
    assert {"rows per warp > 1", "one row per warp", "group", "group, splits", "1 chunks per row",
            "3 chunks per row"} <= seen, seen


def _lane_loads(v: np.ndarray, first: int, end: int, vec: int) -> np.ndarray:
    """[32, vec] values of a warp's 16-byte loads: lane l loads vector first + l of v (vec values each), zeros from
    vector `end` on."""
    lanes = np.zeros((32, vec), v.dtype)
    for lane in range(32):
        i = first + lane
        if i < end:
            lanes[lane] = v[vec * i:vec * i + vec]
    return lanes


def _replay_warp_chain(fragments: list[np.ndarray], chain: int) -> F32:
    """One warp of tc_flat, literally: :func:`_replay_lane_values`, then warp_fold_rows."""
    return _warp_fold_rows(_replay_lane_values(fragments, chain))


def _replay_lane_values(fragments: list[np.ndarray], chain: int) -> np.ndarray:
    """One warp's lanes, literally: an mma per [32, 8] fragment of lane loads into c, c added to every lane's lo (row
    g) and hi (row g + 8) after each `chain` mmas and after the last; returns lo + hi of the 32 lanes."""
    c = np.zeros((16, 8), F32)
    lo, hi = np.zeros(32, F32), np.zeros(32, F32)
    pending = 0
    for k, frag in enumerate(fragments):
        c = mma_m16n8k16(_a_from_lane_loads(frag), ONES_B, c, model="H100")
        pending += 1
        if pending == chain or k == len(fragments) - 1:
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                lo[lane] += c[g, 2 * t]
                hi[lane] += c[g + 8, 2 * t]
            c, pending = np.zeros((16, 8), F32), 0
    return (lo + hi).astype(F32)


def _replay_rows_packed(plan, rows: np.ndarray) -> np.ndarray:
    """tc_rows_stream's packed path (kernels/tensorcore.cu, RPC > 1), literally: chunk u is the elements u*chunk ..
    of the rows back to back (zeros past the last row), lane l's vec of them its load, two fp8 fragments or one 16-bit
    fragment through the flush rule, lo + hi per lane, the xor butterfly over a row's lanes (offsets 16 / rpc down to
    4), and row u*rpc + r is lane r*32/rpc's value."""
    p = param_dict(plan)
    rpc, chunk, chain = p["rows_per_chunk"], p["chunk"], p["chain"]
    vec, row_lanes = chunk // 32, 32 // rpc
    m, k = rows.shape
    assert k * rpc == chunk
    flat = np.concatenate([rows.astype(np.float16).reshape(-1), np.zeros(chunk, np.float16)])
    out = np.full(m, np.nan, F32)
    for u in range(-(-m // rpc)):
        lanes = flat[u * chunk:(u + 1) * chunk].reshape(32, vec)
        v = _replay_lane_values([lanes[:, f:f + 8] for f in range(0, vec, 8)], chain)
        off = row_lanes // 2
        while off >= 4:
            v = np.array([v[lane] + v[lane ^ off] for lane in range(32)], F32)
            off //= 2
        for r in range(rpc):
            if u * rpc + r < m:
                out[u * rpc + r] = v[r * row_lanes]
    return out


# packed rows (module ROWS_PACKED patched on from any length, on a GPU without a family tuning): dtype, k, chain
PACKED_CASES = [("float16", 32, 1), ("float16", 64, 1), ("float16", 128, 3), ("float16", 128, 1 << 30),
                ("float8_e4m3fn", 64, 1), ("float8_e5m2", 256, 3)]


@pytest.mark.parametrize("dtype,k,chain", PACKED_CASES)
def test_rows_packed_twin_equals_literal_replay(dtype, k, chain, rng, monkeypatch):
    import ml_dtypes

    monkeypatch.setattr(tensorcore_plans, "ROWS_PACKED", {2: (0, 2, 4), 1: (0, 4, 4)})
    m = 37  # not a multiple of any rows-per-chunk: the last chunk is part-filled
    plan = plan_tensorcore(Rows(m, k, k, 0), dtype, "float32", ONE_SM, chain=chain)
    p = param_dict(plan)
    assert p["rows_per_chunk"] == p["chunk"] // k > 1, plan.describe()
    x = (rng.standard_normal((m, k)) * 10.0 ** rng.integers(-3, 3, (m, k))).astype(np.float16)
    if dtype != "float16":
        top = 8 if dtype == "float8_e4m3fn" else 15
        x = (rng.choice([-1.0, 1.0], (m, k)) * 2.0 ** rng.uniform(-14, top, (m, k))).astype(getattr(ml_dtypes, dtype))
    want = _replay_rows_packed(plan, x)
    got = emulate_tensorcore(plan, x, "H100")
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (got, want)


@pytest.mark.parametrize("rows", [Rows(40, 128, 130, 0), Rows(40, 128, 128, 2), Rows(40, 96, 96, 0),
                                  Rows(40, 16, 16, 0), Rows(40, 256, 256, 0)])
def test_rows_packed_takes_only_whole_rows_back_to_back(rows, monkeypatch):
    """Strided rows (ld != k), misaligned starts, rows of part quads or of a whole chunk keep their other paths."""
    monkeypatch.setattr(tensorcore_plans, "ROWS_PACKED", {2: (0, 2, 4), 1: (0, 4, 4)})
    p = param_dict(plan_tensorcore(rows, "float16", "float32", ONE_SM))
    assert p.get("rows_per_chunk", 1) == 1, p


def _replay_flat_fp8(plan, x: np.ndarray, align: int) -> F32:
    """kernels/tensorcore.cu tc_flat's order comment, literally, for fp8 on a one-block grid: the head/tail mma of
    warp 0, then per warp its 16-byte vectors in (iteration, slot) order, values 0..7 then 8..15 of every lane as
    two mmas, the flush rule, lo + hi, warp_fold_rows, and block_combine of the warp totals."""
    p = param_dict(plan)
    assert p["grid"] == 1 and p["vec"] == 16
    n, block, unroll, chain = x.shape[0], p["block"], p["unroll"], p["chain"]
    head = min((16 - align) % 16, n)
    nvec = (n - head) // 16
    tail = n - head - 16 * nvec
    assert (head, nvec) == (p["head"], p["nvec"])
    h = x.astype(np.float16)
    extras = np.concatenate([h[:head], h[n - tail:], np.zeros(256, np.float16)])[:256]
    totals = []
    for warp in range(block // 32):
        fragments = [extras.reshape(32, 8)] if warp == 0 and head + tail else []
        for base in range(32 * warp, nvec, block * unroll):
            for u in range(unroll):
                lanes = _lane_loads(h[head:], base + u * block, nvec, 16)
                fragments += [lanes[:, :8], lanes[:, 8:]]
        totals.append(_replay_warp_chain(fragments, chain))
    return F32(block_combine(np.array(totals, F32)))


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("chain", [1, 3])
def test_flat_fp8_twin_equals_literal_replay(fmt, chain, rng):
    import ml_dtypes

    n, align = 8187, 3  # head 13, 510 whole vectors (a partly filled last warp), tail 14: one block on ONE_SM
    top = 8 if fmt == "float8_e4m3fn" else 15  # every binade of the format: fp32 sums round, so the order shows
    x = (rng.choice([-1.0, 1.0], n) * 2.0 ** rng.uniform(-14, top, n)).astype(getattr(ml_dtypes, fmt))
    plan = plan_tensorcore(Flat(n, align), fmt, "float32", ONE_SM, chain=chain)
    want = _replay_flat_fp8(plan, x, align)
    got = emulate_tensorcore(plan, x, "H100")
    assert got.view(np.uint32)[0] == np.array(want, F32).view(np.uint32), (got, want)


def _replay_flat_one_pass(plan, x: np.ndarray, align: int) -> F32:
    """kernels/tensorcore.cu tc_flat's order comment for ROUNDS > 0, literally, for fp16: block b owns vectors
    [b P, (b + 1) P); warp q of it loads b P + it BLOCK UNROLL + u BLOCK + 32 q + lane in (it, u) order (warp 0 of
    block 0 first does the head/tail mma), the flush rule, lo + hi, warp_fold_rows and block_combine per block; then
    each group of BLOCK consecutive block partials (thread t: 0.0 + p[t], block_fold), then the groups' totals
    (thread i: 0.0 + g[i] + g[i + BLOCK] + ..., block_fold)."""
    p = param_dict(plan)
    n, block, unroll, chain, rounds, grid = x.shape[0], p["block"], p["unroll"], p["chain"], p["rounds"], p["grid"]
    head = min(((16 - align) % 16) // 2, n)
    nvec = (n - head) // 8
    tail = n - head - 8 * nvec
    span = block * unroll * rounds
    assert (head, nvec, grid) == (p["head"], p["nvec"], max(1, -(-nvec // span)))
    h = x.astype(np.float16)
    extras = np.concatenate([h[:head], h[n - tail:], np.zeros(256, np.float16)])[:256]
    partials = []
    for b in range(grid):
        end = min((b + 1) * span, nvec)
        totals = []
        for warp in range(block // 32):
            fragments = [extras.reshape(32, 8)] if b == 0 and warp == 0 and head + tail else []
            for base in range(b * span + 32 * warp, end, block * unroll):
                fragments += [_lane_loads(h[head:], base + u * block, end, 8) for u in range(unroll)]
            totals.append(_replay_warp_chain(fragments, chain))
        partials.append(F32(block_combine(np.array(totals, F32))))
    if grid == 1:
        return partials[0]
    group_totals = []
    for g0 in range(0, grid, block):
        threads = np.zeros(block, F32)
        for t, v in enumerate(partials[g0:g0 + block]):
            threads[t] = F32(0.0) + v
        group_totals.append(F32(block_fold(threads)))
    threads = np.zeros(block, F32)
    for i, v in enumerate(group_totals):
        threads[i % block] = threads[i % block] + v
    return F32(block_fold(threads))


@pytest.mark.parametrize("block,n,align", [(64, 70001, 6), (64, 8191, 0), (256, 40000, 2), (256, 100, 0)])
@pytest.mark.parametrize("chain", [1, 3])
def test_flat_one_pass_twin_equals_literal_replay(block, n, align, chain, rng, monkeypatch):
    """tc_flat with FLAT_ROUNDS = 1: blocks of BLOCK x 2 vectors, their partials in two levels (block 64: 69 blocks in
    2 groups, a head and a tail; block 256: one group; 100 values: one block)."""
    monkeypatch.setattr(tensorcore_plans, "FLAT_ROUNDS", {2: 1})
    monkeypatch.setattr(tensorcore_plans, "FLAT_ONE_PASS_MIN_WAVES", 0)
    monkeypatch.setattr(tensorcore_plans, "BLOCK", block)
    x = (rng.choice([-1.0, 1.0], n) * 2.0 ** rng.uniform(-14, 15, n)).astype(np.float16)  # fp32 sums round
    plan = plan_tensorcore(Flat(n, align), "float16", "float32", ONE_SM, chain=chain)
    p = param_dict(plan)
    assert p["rounds"] == 1 and plan.launches[0].kernel.endswith(", 1>")
    groups = -(-p["grid"] // block) if p["grid"] > 1 else 0
    # no workspace: the counters, then a 64-bit flagged slot per partial and group total (combine_grid_slots)
    assert (plan.workspace_floats, plan.counters) == ((0, flagged_counters(p["grid"], groups)) if groups
                                                      else (0, 0))
    got = emulate_tensorcore(plan, x, "H100")
    want = _replay_flat_one_pass(plan, x, align)
    assert got.view(np.uint32)[0] == np.array(want, F32).view(np.uint32), (got, want)


@pytest.mark.parametrize("dtype", ["float16", "float8_e4m3fn"])
@pytest.mark.parametrize("rounds", [1, 4, 32])
def test_flat_one_pass_sums_are_within_the_bound(dtype, rounds, rng):
    """The twin of the one-pass walk (a GPU test checks GPU == twin) on one block, one group and several groups of
    block partials, misaligned too: within the plan's a-priori bound of the exact sum (tcreduce.bounds)."""
    from tcreduce._api import get_plan
    from tcreduce.testing import check_sum, patched_plans, random_input

    with patched_plans(tensorcore_plans, dict(FLAT_ROUNDS={1: rounds, 2: rounds}, FLAT_ONE_PASS_MIN_WAVES=0)):
        for n in (77, 40_000, (1 << 20) + 4099):
            plan = get_plan("tensorcore", Flat(n, 0), dtype, "float32", KNOWN_GPUS["H100"])
            assert param_dict(plan)["rounds"] == rounds
            x = random_input(rng, (n,), dtype)
            for view in (x, x[3:]):
                check_sum(tcreduce.emulate.sum(view, method="tensorcore"), view, None, method="tensorcore")


def test_the_module_walk_is_the_resident_grid_for_full_sums():
    """The module's walk (GPUs without a FLAT_ROUNDS of their own, the A100): the resident grid-stride plan, named as
    before."""
    assert tensorcore_plans.FLAT_ROUNDS == {}
    plan = plan_tensorcore(Flat(1 << 28, 0), "float16", "float32", KNOWN_GPUS["A100"])
    assert "rounds" not in param_dict(plan) and plan.launches[0].kernel == "tc_flat<__half, 256, 2, 1, float, 2, 6>"
    assert plan.workspace_floats == 0 and plan.counters == 2 + 2 * param_dict(plan)["grid"]  # a counter, a pad, slots


FULL_SIZES = [0, 1, 15, 16, 17, 255, 256, 257, 1023, 1025, 65537]
ROW_LENGTHS = [1, 15, 16, 17, 33, 255, 256, 257, 1024, 1025, 1032]


@pytest.mark.parametrize("method", ["tensorcore", "tensorcore_chained"])
def test_every_form_on_awkward_sizes_is_within_the_bound(method, rng):
    cases = [((n,), None, None) for n in FULL_SIZES]
    cases += [((33, k), -1, None) for k in ROW_LENGTHS]
    cases += [((k, 40), 0, None) for k in ROW_LENGTHS]
    cases += [((33, 1040), -1, lambda x: x[:, 1:]), ((1000,), None, lambda x: x[3:]), ((40, 300), 0, lambda x: x.T),
              ((5, 17, 40), 1, None), ((7, 3, 5), (0, 2), None), ((0, 16), -1, None), ((16, 0), -1, None)]
    for shape, axis, view in cases:
        x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 3, shape)).astype(np.float16)
        x = view(x) if view else x
        for out_dtype in ("float32", "float16", "float64"):
            got = tcreduce.emulate.sum(x, axis=axis, dtype=out_dtype, method=method)
            exact = np.asarray(exact_sum(x, axis=axis), np.float64)
            assert got.shape == exact.shape and got.dtype == np.dtype(out_dtype), (shape, axis, out_dtype)
            err = np.abs(got.astype(np.float64) - exact)
            assert np.all(err <= bound_for(x, axis, method, out_dtype)), (method, shape, axis, out_dtype)
            if x.size == 0:  # sums over empty axes are +0 (and an empty output stays empty)
                assert np.all(got == 0) and not np.any(np.signbit(got)), (shape, axis)


def test_speed_on_2_pow_22_elements(rng):
    """Emulating 2^22 elements in each form takes well under a second each here; the limit is generous."""
    import time

    x = rng.uniform(-0.25, 0.75, 1 << 22).astype(np.float16)
    for method in ("tensorcore", "tensorcore_chained"):
        t = time.perf_counter()
        tcreduce.emulate.sum(x, method=method)
        tcreduce.emulate.sum(x.reshape(1 << 16, 64), axis=-1, method=method)  # tc_rows
        tcreduce.emulate.sum(x.reshape(1 << 10, 1 << 12), axis=-1, method=method)  # tc_rows_stream
        tcreduce.emulate.sum(x.reshape(64, 1 << 16), axis=0, method=method)  # tc_cols
        elapsed = time.perf_counter() - t
        print(f"{method}: four 2^22-element emulations in {elapsed:.2f} s")
        assert elapsed < 30
