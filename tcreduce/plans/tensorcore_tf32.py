"""Method "tensorcore_tf32": float32 sums on tensor cores through tf32, mma.sync m16n8k8.tf32 against ones; each
value rounded to nearest tf32 first (10 fraction bits: 2^-11 relative per value), then fp32 accumulation as the
other tensor-core methods: the fast, lossy end of the accuracy/speed trade-off.

Kernels: ``kernels/tensorcore_tf32.cu`` (the rounding and the order of one step) on the forms of
``kernels/tensorcore_f32.cuh``, planned exactly as the float32 input of "tensorcore"
(:func:`tcreduce.plans.tensorcore_fp32.plan_forms`, whose docstring says what each form launches); emulator twin:
``tcreduce/emulate/tensorcore_tf32.py``; bound: ``tcreduce/bounds.py``.
"""

from __future__ import annotations

from .._layout import Problem
from .._plan import DeviceSpec, Plan
from ..registry import Method, register
from .tensorcore_fp32 import F32Format, plan_forms

__all__ = ["plan_tensorcore_tf32", "SOURCE", "FORMAT"]

SOURCE = "tensorcore_tf32.cu"
FORMAT = F32Format("tensorcore_tf32", SOURCE, "tcr32::Tf32")


def plan_tensorcore_tf32(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
    """The launch plan of "tensorcore_tf32" (see :func:`tcreduce.plans.tensorcore_fp32.plan_forms`)."""
    return plan_forms(problem, in_dtype, out_dtype, device, FORMAT)


register(Method(
    name="tensorcore_tf32",
    description="mma.sync m16n8k8.tf32 against all-ones on float32 values rounded to nearest tf32 (10 fraction "
                "bits), fp32 accumulators flushed after every mma; full, last-axis and other-axis kernels",
    dtypes=("float32",),
    reference="tf32 tensor-core accumulation (NVIDIA A100 whitepaper, TF32); sum = product with ones (Dakkak et al., "
              "ICS 2019)",
    planner=plan_tensorcore_tf32,
))
