"""The arithmetic of method "exact" without a GPU: kernels/exact_core.cuh (the engines and the rounding the kernels
use) compiled as plain C++ by tests/exact_host_harness.cpp, driven like exact_flat, and compared bit for bit with the
CPU twin (tcreduce.emulate.exact): the state of every input and its rounding to fp16, fp32 and fp64. Inputs aim at
every path: the fp16 fast and careful paths, the fp32 window moving up, values below it, subnormals, zeros,
specials, long runs that flush. Skipped where no C++ compiler is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tcreduce.emulate.exact import exact_states, finalize_states

HERE = Path(__file__).resolve().parent
CXX = shutil.which("g++") or shutil.which("clang++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++ or clang++)")


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    exe = tmp_path_factory.mktemp("exact_host") / "harness"
    flags = ["-std=c++17", "-O2", "-ffp-contract=off", "-Wall", "-Werror", "-Wno-unused-function",
             "-Wno-unknown-pragmas"]
    subprocess.run([CXX, *flags, "-o", str(exe), str(HERE / "exact_host_harness.cpp")], check=True,
                   capture_output=True)
    return exe


def _run(exe, x: np.ndarray, kind: int, threads: int):
    raw = np.ascontiguousarray(x).view(np.uint16 if x.itemsize == 2 else np.uint32).tobytes()
    out = subprocess.run([str(exe)], input=f"{kind} {threads} {x.size}\n".encode() + raw, capture_output=True,
                         check=True).stdout.decode().split("\n")
    state = np.array([int(v) for v in out[0].split()], np.int64)
    bits = [int(v, 16) for v in out[1].split()]
    return state, bits


def _check(exe, x, dtype, threads):
    import ml_dtypes

    kind = {"float16": 0, "float32": 1, "bfloat16": 2}[dtype]
    arr = x.astype(ml_dtypes.bfloat16) if dtype == "bfloat16" else x.astype(dtype)
    state, bits = _run(exe, arr, kind, threads)
    want = exact_states(arr.reshape(1, -1), dtype)[0]
    np.testing.assert_array_equal(state, want)
    for out, b in zip(("float16", "float32", "float64"), bits):
        w = finalize_states(want[None], dtype, out)[0]
        assert b == int(np.asarray(w).view({"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}[out])), \
            (dtype, out, hex(b), w)


def _inputs(rng, n):
    yield "uniform", rng.uniform(-0.25, 0.75, n)
    yield "normal", rng.standard_normal(n) * 1000
    yield "wide16", rng.standard_normal(n) * np.exp2(rng.integers(-26, 16, n))
    yield "full32", rng.standard_normal(n) * np.exp2(rng.integers(-150, 128, n))
    yield "rising", np.exp2(np.linspace(-149, 127, n)) * rng.choice([-1, 1], n)
    yield "falling", np.exp2(np.linspace(127, -149, n))
    tb = np.where(np.arange(n) % 3 == 0, 1e30, 1e-40) * rng.choice([-1, 1], n)
    yield "tiny_big", tb
    z = rng.standard_normal(n)
    z[rng.random(n) < 0.7] = 0
    yield "sparse", z
    yield "subnormal16", rng.integers(-1023, 1024, n) * 2.0 ** -24
    yield "max", np.full(n, 65504.0)


@pytest.mark.parametrize("dtype", ["float16", "float32", "bfloat16"])
@pytest.mark.parametrize("n,threads", [(1, 1), (13, 2), (1000, 3), (40_003, 7), (300_001, 2)])
def test_engines_match_twin(harness, dtype, n, threads, rng):
    pytest.importorskip("ml_dtypes")
    with np.errstate(over="ignore"):
        for name, x in _inputs(rng, n):
            _check(harness, x, dtype, threads)


@pytest.mark.parametrize("dtype", ["float16", "float32", "bfloat16"])
def test_specials_match_twin(harness, dtype, rng):
    pytest.importorskip("ml_dtypes")
    n = 10_007
    for vals in ([np.nan], [np.inf], [-np.inf], [np.inf, -np.inf], [np.nan, -np.inf], [np.inf] * 5):
        x = rng.uniform(-1, 1, n)
        x[rng.choice(n, len(vals), replace=False)] = vals
        for threads in (1, 4):
            _check(harness, x, dtype, threads)
    x = np.full(n, np.inf)
    _check(harness, x, dtype, 3)


def test_long_runs_flush(harness, rng):
    """One thread adds 2^20 halves (128 fp16 flushes per accumulator) and 2^20 floats (2048 window runs)."""
    pytest.importorskip("ml_dtypes")
    x = rng.uniform(60000, 65504, 1 << 20) * rng.choice([-1, 1, 1], 1 << 20)
    fine = rng.random(1 << 20) < 0.5  # fine bits in every accumulator: without the flushes the doubles would round
    x[fine] = rng.integers(1, 1024, int(fine.sum())) * 2.0 ** -24
    _check(harness, x, "float16", 1)
    _check(harness, rng.standard_normal(1 << 20) * 1e30, "float32", 1)
