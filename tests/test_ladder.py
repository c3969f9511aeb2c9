"""The seeds' CUDA-core reduction ladder (tcreduce/plans/ladder.py, kernels/ladder.cu).

CPU: every rung is registered with its seed reference and flags; plans chain their launches correctly; every
instantiation the planners produce compiles for sm_80 and sm_90 (the cluster rung: sm_90 only) without warnings or
spills; Rows/Cols problems and pre-Hopper cluster plans raise clear errors.

GPU (``@pytest.mark.gpu``): every rung is correct on awkward sizes, aligned and misaligned (``x[1:]``), for float32 and
float16 input, within its a-priori rounding-error bound; deterministic rungs are bitwise reproducible.

The tolerance. A rung adds every input element into the result through at most L fp32 additions rounded to nearest
(L = ``chain_length(plan)``: the depth of its summation tree, counting the per-thread chain, the block tree, and every
relaunch or combine on the partials; for the atomic rungs the worst order of the atomics). For any summation tree of
depth L, |computed - exact| <= gamma_L * sum|x_i| with gamma_L = L u / (1 - L u) and u = 2^-24 (Higham, Accuracy and
Stability of Numerical Algorithms, 2nd ed., section 4.2; recursive summation is the case L = n - 1, pairwise the case
L = ceil(log2 n)). float16 input converts to fp32 exactly, so the same bound holds. The exact sum is computed on the
CPU (tcreduce.reference.exact_sum, correctly rounded to float64); its own rounding (2^-53 relative) is added.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from tcreduce import registry
from tcreduce._compile import compile_kernel
from tcreduce._device import KNOWN_GPUS
from tcreduce._layout import Cols, Flat, Rows
from tcreduce._plan import Buf, DeviceSpec
from tcreduce.plans.ladder import CLUSTER, LADDER, chain_length, fill_grid

U = 2.0 ** -24
ATOMIC = {"ladder_atomic", "ladder_atomic_per_block"}
MULTI_KERNEL = {"ladder_interleaved_divergent", "ladder_interleaved", "ladder_sequential", "ladder_first_add",
                "ladder_unroll_last_warp", "ladder_unroll_complete", "ladder_multi_element", "ladder_warp_shuffle",
                "ladder_float4"}
SEED_STEP = {  # the seed step each rung names in its reference
    "ladder_atomic": "seed 003 v0",
    "ladder_interleaved_divergent": "seed 004 reduce0",
    "ladder_interleaved": "seed 004 reduce1",
    "ladder_sequential": "seed 004 reduce2",
    "ladder_first_add": "seed 004 reduce3",
    "ladder_unroll_last_warp": "seed 004 reduce4",
    "ladder_unroll_complete": "seed 004 reduce5",
    "ladder_multi_element": "seed 004 reduce6",
    "ladder_warp_shuffle": "seed 004 reduce7",
    "ladder_float4": "seed 003 v4",
    "ladder_atomic_per_block": "seed 003 v6",
    "ladder_last_block": "threadFenceReduction",
    "ladder_grid_sync": "grid.sync",
    "ladder_cluster": "seed 003 v7",
}
H100, A100 = KNOWN_GPUS["H100"], KNOWN_GPUS["A100"]
RTX3090 = DeviceSpec("RTX 3090", 82, (8, 6))  # 1536 threads per SM: seed 001's 6 blocks per SM


def gamma(k: int) -> float:
    """gamma_k = k u / (1 - k u) for fp32 round to nearest (inf once k u >= 1: no bound)."""
    return k * U / (1 - k * U) if k * U < 1 else float("inf")


# ================================================================================================== CPU tests

def test_every_rung_is_registered_with_its_seed_reference():
    assert LADDER == tuple(SEED_STEP)
    for name in LADDER:
        m = registry.get(name, "sum")
        assert m.kind == "sum" and m.runner is None
        assert SEED_STEP[name] in m.reference, (name, m.reference)
        assert set(m.dtypes) == {"float32", "float16"}
        assert m.deterministic == (name not in ATOMIC), name
        assert m.emulated == (name not in ATOMIC), name  # tcreduce/emulate/ladder.py: the deterministic rungs
        assert m.requires_cc == ((9, 0) if name == "ladder_cluster" else (8, 0))
        assert m.description.startswith("Rung "), name


@pytest.mark.parametrize("name", LADDER)
@pytest.mark.parametrize("problem", [Rows(4, 100, 100), Cols(1, 100, 4, 0, 4)], ids=["rows", "cols"])
def test_non_flat_problems_are_refused(name, problem):
    with pytest.raises(ValueError, match="axis=None"):
        registry.get(name).plan(problem, "float32", "float32", H100)


def test_cluster_needs_hopper():
    with pytest.raises(ValueError, match="9.0"):
        registry.get("ladder_cluster").plan(Flat(1000), "float32", "float32", A100)


SIZES = [1, 2, 15, 16, 17, 255, 256, 257, 511, 513, 1023, 1025, 65535, 65537, 10 ** 6 + 3, 10 ** 8, 1 << 28,
         (1 << 31) + 5]


@pytest.mark.parametrize("name", LADDER)
@pytest.mark.parametrize("in_dtype", ["float32", "float16"])
def test_plans_chain_their_launches(name, in_dtype):
    for n, align, out_dtype, device in itertools.product(SIZES, (0, 4), ("float32", "float16", "float64"),
                                                         (H100, A100, RTX3090)):
        if in_dtype == "float16":
            align = align // 2
        m = registry.get(name)
        if device.cc < m.requires_cc:
            continue
        plan = m.plan(Flat(n, align), in_dtype, out_dtype, device)
        assert plan.method == name and plan.out_dtype == out_dtype
        L = chain_length(plan)
        assert L >= max(1, int(np.ceil(np.log2(n)))) or n == 1
        for ln in plan.launches:
            assert 1 <= ln.grid[0] <= 2 ** 31 - 1 and ln.grid[1:] == (1, 1)
            assert ln.block[0] in (1, 64, 128, 256) and ln.block[1:] == (1, 1)
        if name in MULTI_KERNEL:
            # stage k reads stage k-1's partials and writes its own; the last stage is one block writing out
            regions = []
            for k, ln in enumerate(plan.launches):
                src, n_in, dst = ln.args[0], ln.args[1], ln.args[2]
                assert src == (Buf("x") if k == 0 else regions[-1][0])
                assert n_in == (n if k == 0 else regions[-1][1])
                if k == len(plan.launches) - 1:
                    assert dst == Buf("out") and ln.grid[0] == 1
                    assert re.split(r"[<>,]", ln.kernel)[2].strip() == {"float32": "float", "float16": "__half",
                                                                               "float64": "double"}[out_dtype]
                else:
                    assert dst.name == "ws" and dst.offset % 4 == 0 and dst != src
                    assert dst.offset + ln.grid[0] <= plan.workspace_floats
                    if src.name == "ws":  # a launch never reads the floats it writes
                        a0, a1 = src.offset, src.offset + n_in
                        b0, b1 = dst.offset, dst.offset + ln.grid[0]
                        assert a1 <= b0 or b1 <= a0
                    regions.append((dst, ln.grid[0]))
            if name in ("ladder_multi_element", "ladder_warp_shuffle", "ladder_float4"):
                assert len(plan.launches) <= 2 and plan.launches[0].grid[0] <= fill_grid(device)
        elif name in ATOMIC:
            assert plan.launches[0].kernel == "ladder_zero"
            assert (plan.launches[-1].kernel.startswith("ladder_convert")) == (out_dtype != "float32")
        else:  # single pass
            (ln,) = plan.launches
            assert ln.args[2] == Buf("out") and plan.workspace_floats >= ln.grid[0] // (
                CLUSTER if name == "ladder_cluster" else 1)
            assert ln.grid[0] <= fill_grid(device)
            assert ln.cooperative == (name == "ladder_grid_sync")
            if name == "ladder_cluster":
                assert ln.grid[0] % CLUSTER == 0 and ln.grid[0] <= device.sm_count * 6
            if name == "ladder_grid_sync":
                assert ln.grid[0] <= device.sm_count * 8


def test_chain_lengths_are_sensible():
    # pairwise-like rungs stay logarithmic; the naive atomic one is recursive summation
    n = 10 ** 8
    chains = {name: chain_length(registry.get(name).plan(Flat(n), "float32", "float32", H100)) for name in LADDER}
    assert chains["ladder_atomic"] == n
    assert chains["ladder_sequential"] == 8 * 4  # 4 launches of 256-element trees
    assert chains["ladder_first_add"] == 9 * 3
    assert all(c < 2000 for name, c in chains.items() if name != "ladder_atomic"), chains


# -------------------------------------------------------------------------------------------- compilation

COMPILE_SIZES = [1, 17, 1000, 10 ** 6 + 3, 1 << 28, (1 << 31) + 5]


def _instantiations() -> dict[tuple[str, str], set[str]]:
    seen: dict[tuple[str, str], set[str]] = {}
    for name in LADDER:
        m = registry.get(name)
        for device in (A100, H100):
            if device.cc < m.requires_cc:
                continue
            for in_dt, out_dt, n, align in itertools.product(m.dtypes, ("float16", "float32", "float64"),
                                                             COMPILE_SIZES, (0, 2, 4)):
                if in_dt == "float32" and align % 4:
                    continue
                for ln in m.plan(Flat(n, align), in_dt, out_dt, device).launches:
                    seen.setdefault((ln.source, ln.kernel), set()).add(device.arch)
    return seen


INSTANTIATIONS = _instantiations()


def test_cluster_kernel_only_for_sm90():
    for (src, kernel), archs in INSTANTIATIONS.items():
        if kernel.startswith("ladder_cluster"):
            assert archs == {"sm_90"}


# every instantiation compiling clean: tests/test_compile.py


@pytest.mark.slow
def test_grid_sync_fits_its_launch_bounds():
    """The cooperative grid (SMs x 8 blocks of 256) must be co-resident: 8 blocks x 256 threads x registers <= 64K."""
    for arch in ("sm_80", "sm_90"):
        for t in ("float", "__half"):
            ck = compile_kernel("ladder.cu", f"ladder_grid_sync<{t}, float, 256, 8>", arch)
            log = ck.log[ck.log.index(f"Function properties for {ck.lowered_name}"):]
            used = int(re.search(r"Used (\d+) registers", log).group(1))  # this kernel's line of the ptxas report
            assert used * 256 * 8 <= 65536, (arch, t, used)


# ================================================================================================== GPU tests

GPU_SIZES = [1, 2, 15, 16, 17, 31, 255, 256, 257, 1023, 1025, 4095, 4097, 65535, 65537, (1 << 20) - 1,
             (1 << 20) + 1, 10 ** 6 + 3]


def _gpu_device():
    from tcreduce._device import current_device

    return current_device()[1]


def _skip_unsupported(name: str) -> None:
    m = registry.get(name)
    if _gpu_device().cc < m.requires_cc:
        pytest.skip(f"{name} needs compute capability {m.requires_cc}")


def _plan_for(name: str, xv: np.ndarray, out_dtype: str = "float32"):
    from tcreduce._layout import host_layout

    layout, _ = host_layout(xv, None)
    assert layout.copy_order is None and isinstance(layout.problem, Flat)
    return registry.get(name).plan(layout.problem, str(xv.dtype), out_dtype, _gpu_device())


def _check(name: str, got: float, xv: np.ndarray, plan) -> None:
    from tcreduce.reference import exact_sum

    exact = float(exact_sum(xv))
    abs_sum = float(np.sum(np.abs(xv.astype(np.float64))))
    tol = gamma(chain_length(plan)) * abs_sum + 2.0 ** -53 * abs_sum
    assert np.isfinite(got), f"{name}: got {got}"
    assert abs(got - exact) <= tol, (f"{name} n={xv.size}: got {got!r}, exact {exact!r}, |err| "
                                     f"{abs(got - exact):.3e} > bound {tol:.3e} (chain {chain_length(plan)})")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", LADDER)
def test_rung_correct_on_awkward_sizes(name, dtype, rng):
    import cupy

    import tcreduce
    from tcreduce.testing import poisoned

    _skip_unsupported(name)
    for n in GPU_SIZES:
        xh = rng.uniform(-0.25, 0.75, size=n + 1).astype(dtype)
        xd = cupy.asarray(xh)
        for sl in (slice(0, n), slice(1, n + 1)):  # aligned start, and misaligned by one element (x[1:])
            xv, xdv = xh[sl], xd[sl]
            out = poisoned((), "float32")
            res = tcreduce.sum(xdv, method=name, out=out)
            assert res is out
            _check(name, float(out.get()), xv, _plan_for(name, xv))


@pytest.mark.gpu
@pytest.mark.parametrize("name", LADDER)
def test_rung_signed_data_and_output_dtypes(name, rng):
    """Mixed-sign data (cancellation), and float16/float64 outputs: the fp32 result rounded once."""
    import cupy

    import tcreduce

    _skip_unsupported(name)
    n = 300_007
    xh = rng.standard_normal(n).astype(np.float32)
    xd = cupy.asarray(xh)
    res = tcreduce.sum(xd, method=name)
    assert res.dtype == np.float32 and res.shape == ()
    _check(name, float(res.get()), xh, _plan_for(name, xh))
    for out_dtype in ("float16", "float64"):
        r = tcreduce.sum(xd, method=name, dtype=out_dtype)
        assert r.dtype == np.dtype(out_dtype)
        if registry.get(name).deterministic:
            assert r.get() == res.get().astype(out_dtype)  # one rounding of the same fp32 value
        elif out_dtype == "float64":  # atomic rungs: another run, another order; still within the bound
            _check(name, float(r.get()), xh, _plan_for(name, xh))


@pytest.mark.gpu
@pytest.mark.parametrize("name", [n for n in LADDER if n not in ATOMIC])
def test_deterministic_rungs_are_bitwise_reproducible(name, rng):
    import cupy

    import tcreduce

    _skip_unsupported(name)
    for dtype, n in (("float32", 10 ** 6 + 3), ("float16", (1 << 22) + 7)):
        xd = cupy.asarray(rng.standard_normal(n + 1).astype(dtype))[1:]
        first = tcreduce.sum(xd, method=name).get()
        for _ in range(5):
            again = tcreduce.sum(xd, method=name).get()
            assert again.view(np.uint32) == first.view(np.uint32), (name, dtype, first, again)


@pytest.mark.gpu
def test_last_block_and_grid_sync_add_in_the_same_order(rng):
    """Both finish with the same serial-partials combine; with equal grids they give the same bits."""
    import cupy

    import tcreduce

    xh = rng.standard_normal(10 ** 6 + 3).astype(np.float32)
    p1, p2 = _plan_for("ladder_last_block", xh), _plan_for("ladder_grid_sync", xh)
    if p1.launches[0].grid != p2.launches[0].grid:
        pytest.skip("different grids on this GPU")
    xd = cupy.asarray(xh)
    a = tcreduce.sum(xd, method="ladder_last_block").get()
    b = tcreduce.sum(xd, method="ladder_grid_sync").get()
    assert a.view(np.uint32) == b.view(np.uint32)


@pytest.mark.gpu
@pytest.mark.parametrize("name", LADDER)
def test_rung_special_values(name):
    """inf and NaN propagate through every rung as through fp32 addition."""
    import cupy

    import tcreduce

    _skip_unsupported(name)
    x = cupy.ones(100_003, dtype=cupy.float32)
    x[12345] = cupy.inf
    assert float(tcreduce.sum(x, method=name).get()) == np.inf
    x[777] = cupy.nan
    assert np.isnan(float(tcreduce.sum(x, method=name).get()))


@pytest.mark.gpu
def test_non_flat_axis_raises_on_gpu():
    import cupy

    import tcreduce

    x = cupy.ones((4, 5), dtype=cupy.float32)
    with pytest.raises(ValueError, match="axis=None"):
        tcreduce.sum(x, axis=1, method="ladder_sequential")
    # a non-contiguous full sum is copied into a Flat problem by the API
    assert float(tcreduce.sum(x.T, method="ladder_sequential").get()) == 20.0
    assert float(tcreduce.sum(x[:, ::2], method="ladder_float4").get()) == 12.0
