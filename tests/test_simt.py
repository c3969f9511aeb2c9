"""The real kernels of methods "exact" and "kahan" (kernels/exact.cu, kernels/kahan.cu, common.cuh inlined) compiled
for the CPU with g++ against the SIMT shim of tests/simt.py (a std::thread per CUDA thread, barriers for
__syncthreads and the warp shuffles, blocks one after another over the 2-D grid), on a 2-SM stand-in device so that
grids stay small while splits, tiles, group sizes and the last-block combinations all run. Every output must be
written, every counter left at zero, and the bits must equal the CPU twin's (exact: the correctly rounded exact sum,
and the int64 state itself; kahan: the replayed order). Skipped where g++ lacks C++20 barriers or _Float16."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import simt
from simt import simt_main
from tcreduce._layout import host_layout, host_problem_data
from tcreduce._plan import DeviceSpec

pytestmark = pytest.mark.slow

TINY = DeviceSpec("tiny", 2, (9, 0))
CTYPE = {"float16": "__half", "float32": "float", "float64": "double", "int64": "long long"}
WORD = {"float16": "unsigned short", "float32": "unsigned", "bfloat16": "unsigned short"}  # exact's IN::Word


def _cases(rng):
    """(name, method, array view, axis, out dtype)."""
    import ml_dtypes

    bf16 = ml_dtypes.bfloat16

    def f16(shape, lo=-100, hi=100):
        return rng.uniform(lo, hi, shape).astype(np.float16)

    def f32_wide(shape):
        x = (rng.standard_normal(shape) * np.exp2(rng.integers(-140, 120, shape))).astype(np.float32)
        x.reshape(-1)[::5] = 0
        return x

    spec16 = f16(40011)
    spec16[[7, 20000, 40010]] = [np.inf, np.nan, -np.inf]
    inf16 = f16(20000)
    inf16[123] = np.inf
    spec32 = f32_wide(30000)
    spec32[[3, 29999]] = [np.inf, -np.inf]
    rising = (np.exp2(np.linspace(-149, 127, 20001)) * rng.choice([-1, 1], 20001)).astype(np.float32)
    return [
        ("e16 flat", "exact", f16(40000), None, "float32"),
        ("e16 flat view", "exact", f16(40011)[3:], None, "float16"),
        ("e16 flat specials", "exact", spec16[1:], None, "float64"),
        ("e16 flat inf", "exact", inf16, None, "float32"),
        ("e16 flat state", "exact", f16(40011)[1:], None, "int64"),
        ("e32 flat", "exact", f32_wide(30001), None, "float32"),
        ("e32 flat view", "exact", f32_wide(30001)[1:], None, "float16"),
        ("e32 flat rising", "exact", rising, None, "float32"),
        ("e32 flat specials", "exact", spec32, None, "float32"),
        ("e32 flat state", "exact", f32_wide(30001)[2:], None, "int64"),
        ("e16 rows short", "exact", f16((300, 17)), -1, "float32"),
        ("e16 rows long", "exact", f16((3, 40000)), -1, "float32"),
        ("e16 cols", "exact", f16((16, 2000)), 0, "float32"),
        ("e32 cols few", "exact", f32_wide((3, 20000, 3)), 1, "float64"),
        ("e32 rows state", "exact", f32_wide((40, 333))[:, 1:], -1, "int64"),
        ("b16 flat view", "exact", f32_wide(30001).astype(bf16)[1:], None, "float32"),
        ("b16 rows", "exact", f32_wide((20, 700)).astype(bf16), -1, "float64"),
        ("b16 state", "exact", f32_wide(5000).astype(bf16), None, "int64"),
        ("k16 flat", "kahan", f16(40011)[3:], None, "float32"),
        ("k32 flat", "kahan", f32_wide(30001), None, "float32"),
        ("k16 rows long", "kahan", f16((3, 40000)), -1, "float32"),
        ("k16 rows short", "kahan", f16((300, 17)), -1, "float16"),
        ("k32 cols", "kahan", (rng.standard_normal((3, 20000, 3)) * 100).astype(np.float32), 1, "float64"),
        ("k16 cols many", "kahan", f16((40, 3000)), 0, "float32"),
    ]


def test_exact_and_kahan_kernels_on_the_simt_shim(tmp_path, rng):
    from tcreduce.emulate.exact import exact_states, finalize_states, problem_rows
    from tcreduce.emulate.kahan import emulate as kahan_twin
    from tcreduce.plans.exact import plan_exact, state_limbs
    from tcreduce.plans.kahan import plan_kahan

    pytest.importorskip("ml_dtypes")
    gxx = simt.prepare(tmp_path, {"exact.cu": "exact.cu", "kahan.cu": "kahan.cu"})
    jobs = []
    for idx, (name, method, xv, axis, out) in enumerate(_cases(rng)):
        owner = xv
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        layout, _ = host_layout(xv, axis)
        raw, off = simt.input_bytes(owner, xv, layout)
        dt = str(xv.dtype)
        if method == "exact":
            plan = plan_exact(layout.problem, dt, out, TINY)
            in_ctype, per_output = WORD[dt], (state_limbs(dt) if out == "int64" else 1)
        else:
            plan = plan_kahan(layout.problem, dt, out, TINY)
            in_ctype, per_output = CTYPE[dt], 1
        src = tmp_path / f"case{idx}.cpp"
        src.write_text(simt_main(plan, str(tmp_path / ("exact.cu" if method == "exact" else "kahan.cu")), in_ctype,
                             layout.problem.outputs, per_output))
        (tmp_path / f"case{idx}.bin").write_bytes(raw)
        jobs.append((idx, name, xv, layout, plan, off, src))

    exes = simt.build(gxx, tmp_path, [job[6] for job in jobs])
    bad = []
    for (idx, name, xv, layout, plan, off, _), exe in zip(jobs, exes):
        outf = tmp_path / f"case{idx}.out"
        r = subprocess.run([str(exe), str(tmp_path / f"case{idx}.bin"), str(off), str(outf)], capture_output=True,
                           text=True, timeout=900, check=False)
        assert r.returncode == 0, f"{name}: {plan.describe()}\n{r.stderr}"
        data = host_problem_data(xv, layout)
        if plan.method == "exact":
            states = exact_states(problem_rows(plan, data), plan.in_dtype)
            if plan.out_dtype == "int64":
                got, want = np.fromfile(outf, np.int64), states.reshape(-1)
            else:
                got = np.fromfile(outf, plan.out_dtype)
                want = finalize_states(states, plan.in_dtype, plan.out_dtype).reshape(-1)
        else:
            got = np.fromfile(outf, plan.out_dtype)
            want = np.asarray(kahan_twin(plan, data, "H100"), np.float32).astype(plan.out_dtype).reshape(-1)
            nan = np.isnan(want)
            want = np.where(nan, np.array(np.nan, plan.out_dtype), want)
        if got.tobytes() != want.tobytes():
            bad.append((name, plan.describe(), got[:4], want[:4]))
    assert not bad, bad
