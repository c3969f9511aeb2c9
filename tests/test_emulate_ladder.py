"""CPU tests of the ladder emulator twin (tcreduce/emulate/ladder.py, kernels/ladder.cu).

- An independent, deliberately literal replay of the kernels (written here, following the kernel code line by line:
  every thread of every block simulated in plain Python with np.float32 scalars, shared memory as a list, barriers
  as phase boundaries, shuffles as read-all-then-write steps over 32 lanes) equals the emulator bit for bit, for every
  deterministic rung, fp32 and fp16 input, aligned and misaligned starts, on small problems and on multi-block,
  multi-launch problems (a DeviceSpec with few SMs forces several blocks and clusters at small n).
- Error bounds: for awkward n, both dtypes and misaligned views, the emulated sum is within
  tcreduce.bounds.error_bound (the plan's chain length) of the exact sum.
- Determinism; ValueError for the atomic rungs; registration (Method.emulated).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import tcreduce.emulate as em
from tcreduce import registry
from tcreduce._device import KNOWN_GPUS
from tcreduce._layout import host_layout, host_problem_data
from tcreduce._plan import Buf, DeviceSpec
from tcreduce.bounds import error_bound
from tcreduce.emulate import ladder as EL
from tcreduce.plans.ladder import LADDER
from tcreduce.reference import exact_sum

f32 = np.float32
ATOMIC = ("ladder_atomic", "ladder_atomic_per_block")
RUNGS = tuple(n for n in LADDER if n not in ATOMIC)
H100 = KNOWN_GPUS["H100"]
TINY = DeviceSpec("tiny", 4, (9, 0))  # 4 SMs: grid-stride grids of 32 blocks, 3 clusters of 8
ITEM = {"float": 4, "__half": 2}
VEC = {"float": 4, "__half": 8}


# ======================================================================================= the literal replay
def warp_fold(v):
    """tcr::warp_fold on a list of 32 lanes: for off = 16..1 every lane reads v[l ^ off], then all add."""
    v = list(v)
    off = 16
    while off > 0:
        other = [v[lane ^ off] for lane in range(32)]  # __shfl_xor_sync: everyone reads before anyone writes
        v = [f32(v[lane] + other[lane]) for lane in range(32)]
        off //= 2
    return v


def block_fold(v, B):
    """tcr::block_fold<B>: warp_fold per warp; lane 0 of warp w stores smem[w]; warp 0 reloads (0.0f past the warps)
    and warp_folds again; the value of thread 0."""
    warps = B // 32
    folded = []
    for w in range(warps):
        folded += warp_fold(v[w * 32:(w + 1) * 32])
    if warps == 1:
        return folded[0]
    smem = [f32(0)] * 32
    for w in range(warps):
        smem[w] = folded[w * 32]
    lanes = [smem[lane] if lane < warps else f32(0) for lane in range(32)]
    return warp_fold(lanes)[0]


def sequential_tree(sdata, down_to=0):
    """Sequential addressing in shared memory (reduce2 onwards): for s = B/2, B/4, ... while s > down_to:
    sdata[t] += sdata[t + s] for t < s (in place, fp32)."""
    s = len(sdata) // 2
    while s > down_to:
        for tid in range(s):
            sdata[tid] = f32(sdata[tid] + sdata[tid + s])
        s //= 2


def warp_tree_smem(s, BLOCK):
    """lad::warp_tree_smem<BLOCK> by threads 0..31: v = s[tid]; per offset: all read s[tid + off], __syncwarp, all
    write s[tid] = v, __syncwarp."""
    v = [s[t] for t in range(32)]
    off = 32
    while off > 0:
        if BLOCK >= 2 * off:
            v = [f32(v[t] + s[t + off]) for t in range(32)]
            for t in range(32):
                s[t] = v[t]
        off //= 2
    return v[0]


def tree_unrolled(v, BLOCK):
    """lad::tree_unrolled<BLOCK>: sdata[tid] = v; for s = 512..64 (if BLOCK >= 2s): tid < s: sdata[tid] = v = v +
    sdata[tid + s]; then warp_tree_smem<BLOCK>. Returns thread 0's value."""
    v = list(v)
    sdata = list(v)
    for s in (512, 256, 128, 64):
        if BLOCK >= 2 * s:
            for tid in range(s):  # tid + s >= s: nobody writes what is read in this step
                v[tid] = f32(v[tid] + sdata[tid + s])
                sdata[tid] = v[tid]
    return warp_tree_smem(sdata, BLOCK)


def vec_sum(e):
    if len(e) == 4:
        return f32(f32(e[0] + e[1]) + f32(e[2] + e[3]))
    return f32(f32(f32(e[0] + e[1]) + f32(e[2] + e[3])) + f32(f32(e[4] + e[5]) + f32(e[6] + e[7])))


def thread_sum_vec(x, n, align, T, g, W):
    mis = align % 16
    h = (16 - mis) // ITEM[T] if mis else 0
    h = min(h, n)
    V = VEC[T]
    nv = (n - h) // V
    t0 = h + nv * V
    acc = f32(0)
    if g < h:
        acc = f32(acc + x[g])
    v = g
    while v < nv:
        acc = f32(acc + vec_sum(x[h + v * V:h + v * V + V]))
        v += W
    if g < n - t0:
        acc = f32(acc + x[t0 + g])
    return acc


def combine_partials(p, count, B):
    acc = []
    for t in range(B):
        a = f32(0)
        i = t
        while i < count:
            a = f32(a + p[i])
            i += B
        acc.append(a)
    return block_fold(acc, B)


def literal_launch(kernel, x, n, align, G, B):
    """The outputs of one launch: G partials, or [result] for the single-pass kernels."""
    name, targs = kernel.split("<")[0], [a.strip() for a in kernel.split("<")[1].rstrip(">").split(",")]
    T = targs[0]
    out = []
    if name in ("ladder_reduce0", "ladder_reduce1", "ladder_reduce2"):
        for b in range(G):
            sdata = [x[b * B + t] if b * B + t < n else f32(0) for t in range(B)]
            if name == "ladder_reduce0":
                s = 1
                while s < B:
                    for tid in range(B):
                        if tid % (2 * s) == 0:
                            sdata[tid] = f32(sdata[tid] + sdata[tid + s])
                    s *= 2
            elif name == "ladder_reduce1":
                s = 1
                while s < B:
                    for tid in range(B):
                        index = 2 * s * tid
                        if index < B:
                            sdata[index] = f32(sdata[index] + sdata[index + s])
                    s *= 2
            else:
                sequential_tree(sdata, down_to=0)
            out.append(sdata[0])
        return out
    if name in ("ladder_reduce3", "ladder_reduce4"):
        for b in range(G):
            sdata = []
            for tid in range(B):
                i = b * 2 * B + tid
                v = x[i] if i < n else f32(0)
                if i + B < n:
                    v = f32(v + x[i + B])
                sdata.append(v)
            if name == "ladder_reduce3":
                sequential_tree(sdata, down_to=0)
                out.append(sdata[0])
            else:
                sequential_tree(sdata, down_to=32)
                out.append(warp_tree_smem(sdata, 64))
        return out
    if name == "ladder_reduce5":
        BLOCK, FOLD = int(targs[2]), int(targs[3])
        assert BLOCK == B
        for b in range(G):
            vals = []
            for tid in range(B):
                i0 = b * BLOCK * FOLD + tid
                v = x[i0] if i0 < n else f32(0)
                for f in range(1, FOLD):
                    i = i0 + f * BLOCK
                    if i < n:
                        v = f32(v + x[i])
                vals.append(v)
            out.append(tree_unrolled(vals, BLOCK))
        return out
    if name in ("ladder_reduce6", "ladder_reduce7"):
        step = 2 * B * G
        for b in range(G):
            vals = []
            for tid in range(B):
                v = f32(0)
                i = b * 2 * B + tid
                while i < n:
                    v = f32(v + x[i])
                    if i + B < n:
                        v = f32(v + x[i + B])
                    i += step
                vals.append(v)
            out.append(tree_unrolled(vals, B) if name == "ladder_reduce6" else block_fold(vals, B))
        return out
    # the thread_sum_vec kernels
    sums = [block_fold([thread_sum_vec(x, n, align, T, b * B + t, G * B) for t in range(B)], B) for b in range(G)]
    if name == "ladder_float4":
        return sums
    if name in ("ladder_last_block", "ladder_grid_sync"):
        return [combine_partials(sums, G, B)]
    assert name == "ladder_cluster"
    C = int(targs[3])
    ws = []
    for c in range(G // C):
        lanes = [sums[c * C + lane] if lane < C else f32(0) for lane in range(32)]
        ws.append(warp_fold(lanes)[0])
    return [combine_partials(ws, G // C, B)]


def literal_plan(plan, data):
    """Every launch of the plan, in order, on the buffers its arguments name."""
    bufs = {}
    result = None
    for k, ln in enumerate(plan.launches):
        src, n, dst = ln.args[0], ln.args[1], ln.args[2]
        if src == Buf("x"):
            x, align = [f32(v) for v in np.asarray(data).tolist()], plan.problem.align
        else:
            x, align = bufs[src.offset], (src.offset * 4) % 16
        outs = literal_launch(ln.kernel, x, n, align, ln.grid[0], ln.block[0])
        if dst == Buf("out"):
            result = outs[0]
        else:
            bufs[dst.offset] = outs
    return result


def _bits(v) -> int:
    return int(np.asarray(v, f32).reshape(-1)[0].view(np.uint32))


def _plan_and_data(name, x, device):
    layout, _ = host_layout(x, None)
    plan = registry.get(name).plan(layout.problem, str(x.dtype), "float32", device)
    return plan, host_problem_data(x, layout)


# ======================================================================================= literal replay == twin
SMALL = [1, 2, 15, 16, 17, 100, 255, 257, 1000]


@pytest.mark.parametrize("name", RUNGS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_twin_equals_literal_replay_small(name, dtype, rng):
    for n in SMALL:
        base = (rng.standard_normal(n + 3) * 10.0 ** rng.integers(-3, 3, n + 3)).astype(dtype)
        for view in (base[:n], base[1:n + 1], base[3:n + 3]):
            plan, data = _plan_and_data(name, view, H100)
            want = literal_plan(plan, data)
            got = EL.emulate(plan, data, "H100")
            assert got.shape == (1,) and got.dtype == np.float32
            assert _bits(got) == _bits(want), (name, dtype, n, plan.problem, got, want)


# (n, views) forcing several blocks / launches / clusters on TINY (4 SMs); the sizes differ per rung to keep the plain
# Python replay short while still producing three launches for the relaunching rungs
MULTI = {
    "ladder_interleaved_divergent": [70001],  # 274 blocks -> 2 -> 1
    "ladder_interleaved": [70001],
    "ladder_sequential": [70001],
    "ladder_first_add": [262657],  # 514 blocks -> 2 -> 1
    "ladder_unroll_last_warp": [262657],
    "ladder_unroll_complete": [262657, 3000],  # blocks 256, 256, 64; and 256 -> 64 (6 partials)
    "ladder_multi_element": [70001],  # 32 blocks, 5 grid-stride positions, then 1 block
    "ladder_warp_shuffle": [70001],
    "ladder_float4": [70001],
    "ladder_last_block": [70001, 3001],  # 32 blocks; 3 blocks
    "ladder_grid_sync": [70001, 3001],
    "ladder_cluster": [70001, 9001],  # 3 clusters; 2 clusters
}


@pytest.mark.parametrize("name", RUNGS)
def test_twin_equals_literal_replay_multi_block(name, rng):
    for n in MULTI[name]:
        for dtype, off in (("float32", 1), ("float16", 3)):
            base = rng.uniform(-1, 1, n + off).astype(dtype)
            view = base[off:]
            plan, data = _plan_and_data(name, view, TINY)
            blocks = [ln.grid[0] for ln in plan.launches]
            assert blocks[0] > 1, (name, n, blocks)
            want = literal_plan(plan, data)
            got = EL.emulate(plan, data, "H100")
            assert _bits(got) == _bits(want), (name, dtype, n, blocks, got, want)


def test_multi_block_cases_cover_three_launches_and_several_clusters():
    plan, _ = _plan_and_data("ladder_first_add", np.zeros(262657, np.float32)[1:], TINY)
    assert len(plan.launches) == 3
    plan, _ = _plan_and_data("ladder_unroll_complete", np.zeros(262657, np.float32)[1:], TINY)
    assert [ln.block[0] for ln in plan.launches] == [256, 256, 64]
    plan, _ = _plan_and_data("ladder_cluster", np.zeros(70002, np.float32)[1:], TINY)
    assert plan.launches[0].grid[0] == 24
    plan, _ = _plan_and_data("ladder_float4", np.zeros(70002, np.float32)[1:], TINY)
    assert [ln.grid[0] for ln in plan.launches] == [32, 1]


@pytest.mark.parametrize("name", RUNGS)
def test_signed_zeros_follow_the_kernel(name):
    # -0.0 + +0.0 = +0.0: where a kernel pads with 0.0f or starts from 0.0f a sum of -0.0s becomes +0.0; where it
    # skips absent terms instead (reduce3-5 when every thread has data) it stays -0.0. The twin must do the same.
    signs = {}
    for n in (1, 2, 300, 512):
        x = np.full(n, -0.0, np.float32)
        plan, data = _plan_and_data(name, x, H100)
        signs[n] = _bits(EL.emulate(plan, data, "H100"))
        assert signs[n] == _bits(literal_plan(plan, data)), n
    assert signs[1] == 0  # 255 padded (or 0.0f-started) threads
    if name in ("ladder_first_add", "ladder_unroll_last_warp", "ladder_unroll_complete"):
        assert signs[512] == 0x80000000  # every thread loads two -0.0s, no padding anywhere


# ======================================================================================= error bounds
AWKWARD = [1, 15, 16, 17, 255, 257, 1000, 4097, 65537, 10 ** 6 + 3]


@pytest.mark.parametrize("name", RUNGS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_within_error_bound_of_exact_sum(name, dtype, rng):
    for n in AWKWARD:
        base = rng.uniform(-1, 1, n + 3).astype(dtype)
        if n > 1000:
            base[::7] = rng.uniform(0, 100, base[::7].shape).astype(dtype)  # same-sign bulk as well
        for view in (base[:n], base[1:n + 1], base[3:n + 3]):
            got = em.sum(view, method=name)
            assert got.dtype == np.float32 and got.shape == ()
            err = abs(float(got) - float(exact_sum(view)))
            assert err <= float(error_bound(view, method=name)), (name, dtype, n)


def test_bound_on_same_sign_data_is_not_vacuous():
    x = np.full(1 << 20, np.float32(1 + 2 ** -20))
    for name in RUNGS:
        bound = float(error_bound(x, method=name))
        assert bound < 1e-3 * float(np.sum(x, dtype=np.float64)), name
        assert abs(float(em.sum(x, method=name)) - float(exact_sum(x))) <= bound


# ======================================================================================= determinism, errors, registry
@pytest.mark.parametrize("name", RUNGS)
def test_emulating_twice_gives_the_same_bits(name, rng):
    for dtype in ("float32", "float16"):
        x = rng.standard_normal(123457).astype(dtype)[1:]
        a, b = em.sum(x, method=name), em.sum(x, method=name)
        assert _bits(a) == _bits(b)
        plan, data = _plan_and_data(name, x, TINY)
        assert _bits(EL.emulate(plan, data, "H100")) == _bits(EL.emulate(plan, data.copy(), "H100"))


@pytest.mark.parametrize("name", ATOMIC)
def test_atomic_rungs_raise(name):
    x = np.ones(1000, np.float32)
    plan, data = _plan_and_data(name, x, H100)
    with pytest.raises(ValueError, match="not reproducible"):
        EL.emulate(plan, data, "H100")
    with pytest.raises(ValueError, match="no emulator"):
        em.sum(x, method=name)


def test_registration():
    assert set(EL.DETERMINISTIC) == set(RUNGS)
    for name in LADDER:
        assert registry.get(name).emulated == (name not in ATOMIC), name
        assert (name in em.emulated_methods()) == (name not in ATOMIC)


@pytest.mark.parametrize("out", ["float16", "float64"])
def test_output_dtypes_round_the_fp32_result(out, rng):
    x = rng.standard_normal(5000).astype(np.float32)
    for name in RUNGS:
        r32 = em.sum(x, method=name)
        r = em.sum(x, method=name, dtype=out)
        assert r.dtype == np.dtype(out) and r == r32.astype(out)


def test_fp16_input_converts_exactly():
    # values whose fp32 sum is exact: every rung gets the exact answer
    x = (np.arange(4097) % 64 - 32).astype(np.float16) * np.float16(0.25)
    for name in RUNGS:
        assert float(em.sum(x, method=name)) == float(np.sum(x, dtype=np.float64)), name
        assert float(em.sum(x[1:], method=name)) == float(np.sum(x[1:], dtype=np.float64)), name


def test_literal_replay_parses_every_kernel_of_the_plans():
    seen = set()
    for name in RUNGS:
        for n in (1, 70001, 262657):
            plan, _ = _plan_and_data(name, np.zeros(n, np.float32), TINY)
            seen |= {re.split(r"<", ln.kernel)[0] for ln in plan.launches}
    assert seen == {"ladder_reduce0", "ladder_reduce1", "ladder_reduce2", "ladder_reduce3", "ladder_reduce4",
                    "ladder_reduce5", "ladder_reduce6", "ladder_reduce7", "ladder_float4", "ladder_last_block",
                    "ladder_grid_sync", "ladder_cluster"}
