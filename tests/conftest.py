"""Shared fixtures. Tests marked ``gpu`` skip cleanly when CuPy sees no CUDA device; everything else runs on a CPU."""

from __future__ import annotations

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


def pytest_collection_modifyitems(config, items):
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
