"""CPU emulation of tcreduce on a named GPU, bit for bit.

- :func:`sum`: what ``tcreduce.sum`` returns on that GPU for the same input, method and axes (same launch plan, same
  order of additions; :mod:`tcreduce.emulate.api`; one twin per method: ``tcreduce/emulate/<method>.py``).
- :func:`mma_m16n8k16`: the tensor-core arithmetic of one ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``
  (:mod:`tcreduce.emulate.mma_model`, after Khattak and Mikaitis 2025), vectorised over batch dimensions.
- :func:`fused_rowsum` / :func:`fused_colsum`: the same arithmetic for one MMA row (column) against a ones operand,
  the hot path of the sum emulators.
- :data:`MODELS`: the per-GPU parameters (products per block, extra alignment bits, alignment floor).

Importing this package needs neither CuPy nor a GPU.
"""

from .api import emulated_methods, sum  # noqa: A004 (mirrors tcreduce.sum)
from .mma_model import MODELS, TensorCoreModel, fused_colsum, fused_rowsum, get_model, mma_m16n8k16

__all__ = ["sum", "emulated_methods", "mma_m16n8k16", "fused_rowsum", "fused_colsum", "MODELS", "TensorCoreModel",
           "get_model"]
