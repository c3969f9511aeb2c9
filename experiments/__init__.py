"""tcreduce's experiments: the studies behind the paper's figures.

Run ``python -m experiments <study|all|list> [--quick] [--out DIR]`` from the repository root. Studies (one module
each, each runnable alone through the entry point):

- ``accuracy``: relative error vs N per method and input distribution, with a-priori bounds; GPU == emulator panel.
  Runs without a GPU too (through the emulator, smaller N).
- ``throughput``: GB/s and fraction of the measured ceiling vs N, full sums, beside torch.sum, cupy.sum, a tuned
  Triton kernel and torch.compile (where installed). GPU.
- ``segments``: GB/s for [M, n] / [n, M] segmented sums, n = 16..2^20, fixed total bytes (headline chart). GPU.
- ``tradeoff``: error against throughput, one point per method and setting (Pareto front). GPU.
- ``ladder``: GB/s and % of the ceiling per rung of the seeds' CUDA-core ladder, 10^8 and 2^28 floats. GPU.

Each writes ``<study>.csv`` (with a ``# key: value`` metadata header), ``<study>.json`` (metadata) and its figures as
PNG and PDF into ``paper_figures/`` (full GPU runs), ``paper_figures/quick/`` (--quick), ``paper_figures/cpu/`` (no
GPU), or ``--out``. Figures are drawn from the CSV alone: ``--replot`` redraws them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

STUDIES: tuple[str, ...] = ("accuracy", "throughput", "segments", "tradeoff", "ladder")

__all__ = ["STUDIES", "study"]


def study(name: str) -> ModuleType:
    """The module of one study (``NAME``, ``NEEDS_GPU``, ``SUMMARY``, ``config(ctx)``, ``run(ctx)``)."""
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; studies: {', '.join(STUDIES)}")
    return importlib.import_module(f".{name}", __name__)
