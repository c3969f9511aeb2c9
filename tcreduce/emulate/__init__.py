"""CPU emulation of tcreduce on a named GPU, bit for bit.

- :func:`sum`: what ``tcreduce.sum`` returns on that GPU for the same input, method and axes (same launch plan, same
  order of additions; :mod:`tcreduce.emulate.api`; one twin per method: ``tcreduce/emulate/<method>.py``).
- :func:`mma`: the tensor-core arithmetic of one ``mma.sync`` with an fp32 accumulator, the instruction chosen by
  the operands' dtype (float16, ml_dtypes.bfloat16: m16n8k16; float32: m16n8k8 tf32; ml_dtypes.float8_e4m3fn /
  float8_e5m2: m16n8k32), vectorised over batch dimensions (:mod:`tcreduce.emulate.mma_model`, after Khattak and
  Mikaitis 2025, with the bf16, tf32 and fp8 rules settled on an H100); :func:`mma_m16n8k16` is its fp16 case.
- :func:`fused_rowsum` / :func:`fused_colsum`: the same arithmetic for one MMA row (column) against a ones operand,
  the hot path of the sum emulators.
- :data:`MODELS`: the per-GPU parameters (products per block, extra alignment bits, alignment floor).

Validation against hardware (``tests/test_emulate_gpu.py``: 25 shapes and axes x 3 value distributions x aligned
and misaligned views, every emulated method; driver 580.159.04, 2026-11-22): every result bit-identical. On an
NVIDIA H100 80GB HBM3: 147 of 147 calls for each of tensorcore, tensorcore_chained, wmma and shuffle (fp16) and for
shuffle (fp32); 33 of 33 full sums for each of the 12 deterministic ladder rungs, fp16 and fp32 (the rungs refuse
``axis``). On an NVIDIA H200, with the first 20 shapes: 117 of 117 for each of the first five. The tensor-core model
alone: see :mod:`tcreduce.emulate.mma_model`.

The twins of issue 11 (``exact``: the exact sum, which does not depend on the GPU; ``kahan`` and
``tensorcore_kahan``: their kernels' order replayed) are validated on the CPU only so far (tests/test_exact_host.py
compiles exact's arithmetic as C++; tests/test_kahan.py replays both Kahan kernels literally); their GPU check is
tests/test_emulate_gpu.py, tests/test_exact.py and tests/test_kahan.py. Every twin's NaN is the canonical quiet NaN
of the output dtype, as the GPU writes it.

Not emulated: ``cub`` (its order of additions is CUB's and CuPy's internal tuning, which changes with their versions;
its error bound is the order-free one) and the two atomic ladder rungs (the order of their atomics is the hardware's,
different run to run); ``sum`` raises ValueError for them.

Importing this package needs neither CuPy nor a GPU.
"""

from .api import emulated_methods, sum  # noqa: A004 (mirrors tcreduce.sum)
from .mma_model import MODELS, TensorCoreModel, fused_colsum, fused_rowsum, get_model, mma, mma_m16n8k16

__all__ = ["sum", "emulated_methods", "mma", "mma_m16n8k16", "fused_rowsum", "fused_colsum", "MODELS", "TensorCoreModel",
           "get_model"]
