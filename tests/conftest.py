"""Shared fixtures. Tests marked ``gpu`` skip cleanly when CuPy sees no CUDA device; everything else runs on a CPU."""

from __future__ import annotations

import zlib

import pytest


def _gpu() -> bool:
    from tcreduce._device import gpu_available

    return gpu_available()


def _torch_gpus() -> int:
    """torch.cuda.device_count(), 0 without torch (imported only when a multigpu test is collected)."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()


def pytest_addoption(parser):
    parser.addoption("--shard", default=None, metavar="K/N",
                     help="run only the K-th of N disjoint parts of the collected tests (1 <= K <= N), split by a "
                          "hash of each test's id: the same on every xdist worker and every run, so N calls with "
                          "K = 1..N run every test once (scripts/gpu_check.sh SHARD=K/N: a GPU suite longer than one "
                          "device call)")


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` -> (K, N), with a ValueError that says what is accepted."""
    parts = text.split("/")
    if len(parts) != 2 or not all(part.isdigit() for part in parts) or not 1 <= int(parts[0]) <= int(parts[1]):
        raise ValueError(f"--shard takes K/N with integers 1 <= K <= N, not {text!r}")
    return int(parts[0]), int(parts[1])


def in_shard(nodeid: str, k: int, n: int) -> bool:
    """Whether the test ``nodeid`` belongs to part ``k`` of ``n`` (CRC-32 of the id, not Python's salted hash)."""
    return zlib.crc32(nodeid.encode()) % n == k - 1


def pytest_collection_modifyitems(config, items):
    shard = config.getoption("--shard")
    if shard:
        k, n = parse_shard(shard)
        keep, drop = [], []
        for item in items:
            (keep if in_shard(item.nodeid, k, n) else drop).append(item)
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    gpu = _gpu()
    skip = pytest.mark.skip(reason="no CUDA GPU visible to CuPy")
    torch_gpus = None
    for item in items:
        if "gpu" in item.keywords and not gpu:
            item.add_marker(skip)
        elif "multigpu" in item.keywords:
            if torch_gpus is None:
                torch_gpus = _torch_gpus()
            if torch_gpus < 2:
                item.add_marker(pytest.mark.skip(reason=f"needs 2 GPUs (torch.cuda.device_count() = {torch_gpus})"))


@pytest.fixture
def rng():
    """A fresh, seeded generator per test (fixed seeds: reproducible failures)."""
    import numpy as np

    return np.random.default_rng(20261122)
