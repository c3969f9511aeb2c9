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
