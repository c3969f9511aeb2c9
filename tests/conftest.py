"""Shared fixtures. Tests marked ``gpu`` skip cleanly when CuPy sees no CUDA device; everything else runs on a CPU."""

from __future__ import annotations

import pytest


def _gpu() -> bool:
    from tcreduce._device import gpu_available

    return gpu_available()


def pytest_collection_modifyitems(config, items):
    if _gpu():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible to CuPy")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng():
    """A fresh, seeded generator per test (fixed seeds: reproducible failures)."""
    import numpy as np

    return np.random.default_rng(20261122)
