"""tcreduce.distributed on a GPU: real process groups, every rank's result checked against one process.

- 3 processes sharing GPU 0 through gloo (partials travel through the host), and 1 process with NCCL: every case of
  ``dist_workers.gloo_cases`` (uneven shards, an empty shard, shard axis reduced or not, keepdims, result dtypes,
  non-contiguous views, CuPy shards, side streams, NaN/Inf, a subgroup, DTensors, and the error paths: every rank
  must raise the same error, none may hang, and the group must work afterwards). Non-exact methods must equal,
  bit for bit, the documented rank-order fp32 fold of ``tcreduce.sum`` of each shard computed here (itself checked
  against the exact sum within the shards' a-priori bounds); ``method="exact"`` must equal the single-GPU exact
  result bit for bit (skipped until tcreduce.exact exists).
- 2 GPUs (marker ``multigpu``): tests/distributed/run_two_gpus.py under torchrun with NCCL.

Run: ``python3 -m pytest -m gpu -q tests/test_distributed_gpu.py`` (the multigpu tests skip on one GPU).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

HERE = Path(__file__).parent / "distributed"
sys.path.insert(0, str(HERE))

import dist_workers  # noqa: E402

DEADLINE_S = 540  # for a whole spawned group; collectives themselves time out after 60 s


def _has_exact() -> bool:
    return importlib.util.find_spec("tcreduce.exact") is not None


def _run(tmp_path: Path, world: int, backend: str, cases: list) -> None:
    import torch.distributed as dist

    if backend == "nccl" and not dist.is_nccl_available():
        pytest.skip("this torch has no NCCL")
    if backend == "gloo" and not dist.is_gloo_available():
        pytest.skip("this torch has no gloo")
    dist_workers.set_safe_env()
    store = tmp_path / "store"
    dist_workers.spawn_ranks(dist_workers.worker_main, world, (world, backend, str(store), str(tmp_path), cases, 60.0),
                             deadline_s=DEADLINE_S)
    recs = dist_workers.load_outcomes(str(tmp_path), world)
    for r, rec in enumerate(recs):
        cls, msg = rec["no_group"]
        assert cls == "RuntimeError" and "init_process_group" in msg, f"rank {r} without a group: {cls}: {msg}"
    fails = dist_workers.check_outcomes(cases, recs, world)
    assert not fails, f"{len(fails)} of {len(cases)} cases failed:\n" + "\n".join(fails)


FOLD_SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0, 65520.0, 1.0 + 2.0 ** -11, 3.0 * 2.0 ** -25, 3.4e38,
                          np.float32(np.uint32(0x7F800001).view(np.float32))], np.float32)


@pytest.mark.parametrize("out_dtype", ["float32", "float16", "float64"])
def test_device_fold_equals_fold_ranks(out_dtype):
    """The fold kernel (tcreduce.distributed._fold_cupy) against its host reference, tcreduce._dist.fold_ranks, bit
    for bit: random partials over 12 orders of magnitude, NaN (one with a payload), inf - inf, -0.0, fp16 overflow
    and ties, fp32 overflow, subsets of ranks, and a 0-d result."""
    import cupy

    from tcreduce._dist import fold_ranks
    from tcreduce.distributed import _fold_cupy

    rng = np.random.default_rng(11)
    world, width = 5, 4099
    parts = (rng.standard_normal((world, width)) * 10.0 ** rng.integers(-6, 6, (world, width))).astype(np.float32)
    for r in range(world):  # each rank's specials at other positions, so that they meet finite values and each other
        parts[r, r:r + len(FOLD_SPECIALS)] = FOLD_SPECIALS
    parts[1, 100:104] = [-0.0, -0.0, 1.0, -np.inf]
    parts[0, 100:104] = [-0.0, 0.0, -1.0, np.inf]
    checked = 0
    for active in [(0, 1, 2, 3, 4), (1, 3), (2,), (0, 2, 4), (3, 4)]:
        for g in (parts, parts[:, 7]):  # out-sized partials and full sums (0-d result)
            got = _fold_cupy(cupy.asarray(g), active, out_dtype).get()
            want = np.asarray(fold_ranks([g[r] for r in active], out_dtype))
            assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype)
            ubits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
            bad = np.flatnonzero(got.reshape(-1).view(ubits) != want.reshape(-1).view(ubits))
            assert bad.size == 0, (active, out_dtype, bad[:5], got.reshape(-1)[bad[:5]], want.reshape(-1)[bad[:5]])
            checked += 1
    assert checked == 10


def test_gloo_three_ranks_share_one_gpu(tmp_path):
    _run(tmp_path, 3, "gloo", dist_workers.gloo_cases(3))


def test_nccl_world_size_one(tmp_path):
    _run(tmp_path, 1, "nccl", dist_workers.gloo_cases(1))


@pytest.mark.skipif(not _has_exact(), reason="tcreduce.exact is not in this tree yet (another branch builds it)")
def test_exact_gloo_three_ranks_bitwise_single_gpu(tmp_path):
    _run(tmp_path, 3, "gloo", dist_workers.exact_cases(3))


@pytest.mark.skipif(not _has_exact(), reason="tcreduce.exact is not in this tree yet (another branch builds it)")
def test_exact_nccl_world_size_one(tmp_path):
    _run(tmp_path, 1, "nccl", dist_workers.exact_cases(1))


def _torchrun(args: list[str], timeout: int) -> None:
    env = dict(os.environ, **dist_workers.SAFE_ENV, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(HERE / "run_two_gpus.py"), *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                         cwd=Path(__file__).parent.parent)
    assert out.returncode == 0 and "ALL OK" in out.stdout, (out.stdout[-6000:] + "\n" + out.stderr[-6000:])


@pytest.mark.multigpu
def test_two_gpus_nccl():
    _torchrun(["--no-large"], timeout=600)


@pytest.mark.multigpu
@pytest.mark.large
def test_two_gpus_nccl_2_pow_31_plus_3_fp16():
    _torchrun(["--large-only"], timeout=600)
