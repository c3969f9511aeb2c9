"""A-priori error bounds: ``|computed - exact| <= c * sum|x_i|`` per output, derived from the launch plan.

The analysis (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., ch. 3-4): if every value reaches
the output through at most ``d_rn`` round-to-nearest fp32 additions (unit roundoff u = 2^-24) and ``d_mma``
tensor-core fused blocks, then ``|error| <= ((1 + u_mma)^d_mma (1 + u)^d_rn - 1) * sum|x_i|``.

A fused block (facts.md, Khattak and Mikaitis 2025) adds up to 16 exact products and the accumulator c: each of the
<= 17 terms is truncated to 23 + e fraction bits relative to the largest exponent (e extra bits: 2 on H100/H200, 1
on A100, 0 on V100), an absolute error below 2^-(23+e) * max|term|, and the exact sum of the truncated terms is
rounded toward zero (relative error < 2^-23). So one block is an operation with relative error, measured against
the sum of the magnitudes of its terms, below ``u_mma = 17 * 2^-(23+e) + 2^-23 (1 + 17 * 2^-(23+e))``.

Each method's plan gives ``(d_mma, d_rn)`` through a structure function registered in :data:`STRUCTURES`; the final
conversion to a float16 output adds its own rounding (2^-11 relative). Methods without a registered structure fall back
to the order-free bound (every value through at most n - 1 operations, each counted as a fused block), which is valid
for any summation order but loose.

Methods with other bounds:

- ``exact``: the result is the exact sum rounded once to the output dtype, so ``|error| <= ulp(result) / 2``
  (:func:`exact_bound`; not of the ``c * sum|x|`` form).
- ``kahan`` and ``tensorcore_kahan`` (:func:`kahan_factor`): per thread, Kahan's compensated sum (s, c) of n values.
  Writing each step's roundings as y = (x - c)(1 + d1), t = (s + y)(1 + d2), w = (t - s)(1 + d3),
  c' = (w - y)(1 + d4) gives exactly (s' - c') - (s - c) = x + d1 (x - c) - d3 (t - s) - d4 (w - y), where
  |t - s| <= (1 + u)|y| + u|s|, |w - y| <= u (|s + y| + |t - s|)(1 + u) and |c| <= 2u(1 + u)(|s| + |y|). Summed over
  the chain (n u <= 2^-8, so every (1 + O(n u)) factor is below 1.01, and the constants are doubled for margin):
  ``|(s - c) - sum x| <= (2u + 16 (n + 1) u^2) sum|x|``: the literature's 2u + O(n u^2) (Knuth; Goldberg 1991,
  Theorem 8; Higham 2002, eq. 4.9; 2u because t - s is not exact when |y| > 2|s|, u otherwise). The pairs
  (s, -c) are combined by double-word additions (TwoSum is exact; the only rounding is of e + (a.lo + b.lo)), each
  with error at most 3 u^2 (|a| + |b|) once pairs are TwoSum-normalised (|lo| <= u |hi|) and 9.3 u^2 at the first
  level (a Kahan |c| reaches about 4.1 u of its chain's sum|x|), at most L levels: (6 L + 10) u^2 sum|x| in all. The
  output hi + lo is one more rounding: u |result|. So c = u + (1 + u)(2u + 16 (n + 1) u^2 + (6 L + 10) u^2); for
  tensorcore_kahan the Kahan chains add mma outputs, each carrying its fused block's error (at most u_mma of its
  terms' magnitudes): c = u + (1 + u)(u_mma + (1 + u_mma)(2u + ...)). n and L come from the plan
  (plans/kahan.py chain_lengths). Beyond n u > 2^-8 the order-free bound is used.

Tightness (tests/test_bounds.py through the emulator, tests/test_bounds_gpu.py on the GPU; the two agree bit for
bit): over the same-sign inputs of :func:`tcreduce.testing.adversarial_inputs` (1024 followed by values that every
addition to it rounds or truncates away, placed at the start of every thread's chain or subtree; near-all-ones
mantissas; uniform positives), the bound at the input with the largest error is 3.3 to 33 times that error for every
emulated method at n = 2^16, 2^20, 2^22 and 2^24 (at 2^24: tensorcore 6.1, tensorcore_chained 22.4, wmma 23.1,
shuffle 12.2, ladder rungs 5.4 to 27.2; the trees of the early rungs lose at one level of their log2(n) and sit at
about log2(n)). The GPU check at 2^24 (NVIDIA H100 80GB HBM3) gave the same ratios, no bound exceeded for any method,
and 15.5 / 4.4 for the two atomic rungs; cub's order-free bound was 2.8e14 times its error, i.e. vacuous in practice.
Issue 11's methods at 2^24 (emulator, scripts/bound_tightness.py): exact 1.0, kahan 3.0, tensorcore_kahan 1.5 (its
fused blocks' truncation, u_mma, is nearly reached by big_every_32); notes/accuracy.md says which term keeps the
others loose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ._layout import Flat, Rows, host_layout
from ._plan import DeviceSpec, Plan, param_dict
from .plans._common import cdiv as _cdiv
from .plans._common import ceil_log2 as _log2

__all__ = ["error_bound", "error_bound_factor", "library_bound_factor", "Depth", "STRUCTURES", "FACTORS", "U_RN",
           "mma_unit_roundoff", "exact_bound", "kahan_factor"]

U_RN = 2.0 ** -24
OUT_ROUNDING = {"float16": 2.0 ** -11, "float32": 0.0, "float64": 0.0}


@dataclass(frozen=True)
class Depth:
    """The longest path of any input value to its output: fused tensor-core blocks and fp32 round-to-nearest
    additions (counting fp32 round-toward-zero additions as two: their unit roundoff is 2^-23)."""

    mma: int
    rn: int


def _model_or_none(gpu: str | DeviceSpec):
    """The tensor-core model of ``gpu`` (a name such as "H100" or "NVIDIA H200", or a DeviceSpec), None if unknown."""
    from ._device import named_device
    from .emulate.mma_model import get_model

    try:
        return get_model(named_device(gpu).name)
    except ValueError:
        return None


def mma_unit_roundoff(gpu: str | DeviceSpec) -> float:
    """Relative error of one fused block of the tensor-core model of ``gpu`` (F = 23 + extra fraction bits of
    truncated alignment, then one round toward zero); a GPU without a model gets the most pessimistic (0 extra)."""
    model = _model_or_none(gpu)
    e = model.extra_bits if model is not None else 0
    t = 17 * 2.0 ** -(23 + e)
    return t + 2.0 ** -23 * (1 + t)


def _tensorcore_depth(plan: Plan) -> Depth:
    """tensorcore / tensorcore_chained (kernels/tensorcore.cu). Per warp: each mma's output enters an RN register
    chain; with chain C an element also rides through up to C - 1 later mmas as part of c."""
    p = param_dict(plan)
    prob = plan.problem
    chain = p["chain"]
    if isinstance(prob, Flat):
        threads = p["grid"] * p["block"]
        mmas = _cdiv(p["nvec"], threads * p["unroll"]) * p["unroll"] + 1  # + the head/tail mma
        flushes = _cdiv(mmas, min(chain, mmas))
        d_mma = min(chain, mmas)
        # acc chain, lo + hi, warp_fold_rows (3), block_combine (log2(warps): the levels that add the 0.0f padding
        # are exact), then the partials: serial + warp_fold (5) + block_combine
        combine = _log2(p["block"] // 32)
        d_rn = flushes + 1 + 3 + combine + (_cdiv(p["grid"], p["block"]) + 5 + combine if p["grid"] > 1 else 0)
        return Depth(d_mma * _mma_blocks(plan.device.name), d_rn)
    fold = 0
    if isinstance(prob, Rows) and p.get("stream"):  # tc_rows_stream: chunks of 256 columns, one mma each
        warps = p["wpt"]
        per_warp = _cdiv(_cdiv(_cdiv(prob.k, 256), p["splits"]), warps)
        fold = 1 + 3  # lo + hi, warp_fold_rows
    elif isinstance(prob, Rows):  # chunks of 4*vec columns, 2 mmas each when vec == 8
        warps = p["wpt"]
        per_warp = _cdiv(_cdiv(_cdiv(prob.k, 4 * p["vec"]), p["splits"]), warps) * (2 if p["vec"] == 8 else 1)
    else:  # Cols: chunks of 16 rows, one mma per column group
        warps = p["wps"]
        per_warp = _cdiv(_cdiv(_cdiv(prob.r, 16), p["splits"]), warps)
    per_warp = max(per_warp, 1)
    d_mma = min(chain, per_warp)
    # the warp's flush chain, (stream: its fold), the group's warps added in order, the splits added in order
    return Depth(d_mma * _mma_blocks(plan.device.name), _cdiv(per_warp, d_mma) + fold + warps + p["splits"])


def _mma_blocks(device: str | DeviceSpec) -> int:
    """Fused blocks per m16n8k16 MMA on a GPU: 16 / products per block (H100/H200 1, A100 2, V100 4); 4 (the most)
    for a GPU without a model."""
    model = _model_or_none(device)
    return 16 // model.block if model is not None else 4


def _wmma_depth(plan: Plan) -> Depth:
    """wmma (kernels/wmma.cu). A wmma::mma_sync is one m16n8k16 block FMA per output element (two HMMA.16816 per
    16x16x16 product, each with the full k = 16), i.e. ``_mma_blocks`` fused blocks on the plan's GPU.

    - r16n: every value rides through its row group's chain of ceil(k/16) products.
    - r256n: the column chain of ceil(k/256) products, then one HANDOFF.
    - block: the longest warp chain, ceil(min(tpb, tiles) / warps) products, then two HANDOFFs; with splits > 1 the
      grid combination (tcr::combine_partials): a partial enters a serial chain from +0 (the first addition is exact)
      and rides through at most ceil(splits / threads) - 1 rounding additions, then the warp fold (5 levels) and
      block_combine, whose warp fold over ``warps`` totals padded with +0 rounds in log2(warps) levels only.

    HANDOFF: three chained products (lo, mid, hi parts with P^T: a value's parts ride through at most 3), plus, for
    fp16 input, one RN step for the split: it is exact to 2^-39 of the row's largest value (16 values: < 2^-35 of
    their sum of magnitudes), and the parts' magnitudes exceed the value's by at most 2^-9 relative, which scales the
    products' error by (1 + 2^-9): < 2^-27 more in all; together below one 2^-24 step. The power-of-two scalings
    (ldexpf) are exact for every partial sum of fp16 data (nonzero scaled and unscaled values stay above 2^-100,
    far from fp32's subnormals, and far below its overflow). For bf16 input the hand-off adds no step of its own:
    its split is exact for every multiple of 2^-133, and every partial sum of bf16 data is one (bf16 values are, and
    a tensor-core result or fp32 addition of such multiples rounds onto a power-of-two grid: a coarser grid keeps
    them multiples, a finer one leaves them unchanged), and the parts are truncations sharing the value's sign, so
    |hi| + |mid| + |lo| = |v| and the three products' error is measured against exactly the values' magnitudes
    (kernels/wmma.cu, HANDOFF)."""
    p = param_dict(plan)
    blocks = _mma_blocks(plan.device.name)
    k = p["rows"].k
    variant = p["variant"]
    rn = 0
    if variant == "r16n":
        chain, handoffs = _cdiv(k, 16), 0
    elif variant == "r256n":
        chain, handoffs = _cdiv(k, 256), 1
    elif variant == "block":
        warps, threads, splits = p["warps"], p["block"], p["splits"]
        chain, handoffs = _cdiv(min(p["tpb"], _cdiv(k, 256)), warps), 2
        if splits > 1:
            rn += _cdiv(splits, threads) - 1 + 5 + _log2(warps)
    else:
        raise ValueError(f"wmma: unknown variant {variant!r}")
    split_rn = handoffs if plan.in_dtype == "float16" else 0  # the bf16 split is exact (docstring)
    return Depth((max(chain, 1) + 3 * handoffs) * blocks, rn + split_rn)


STRUCTURES: dict[str, Callable[[Plan], Depth]] = {
    "tensorcore": _tensorcore_depth,
    "tensorcore_chained": _tensorcore_depth,
    "wmma": _wmma_depth,
}


def _register_cuda_core_methods() -> None:
    """The ladder rungs and shuffle record their longest chain of fp32 additions in their plans."""
    from .plans import ladder, shuffle

    for name in ladder.LADDER:
        STRUCTURES.setdefault(name, lambda plan: Depth(0, ladder.chain_length(plan)))
    STRUCTURES.setdefault("shuffle", lambda plan: Depth(0, shuffle.chain_length(plan)))


_register_cuda_core_methods()


def kahan_factor(plan: Plan, gpu: str | DeviceSpec | None = None) -> float:
    """c in ``|error| <= c * sum|x|`` for a kahan or tensorcore_kahan plan (module docstring), the output's own
    rounding to fp32 included."""
    from .plans.kahan import chain_lengths

    ch = chain_lengths(plan)
    n, levels = ch["n"], ch["levels"]
    u = U_RN
    if n * u > 2.0 ** -8:  # outside the analysis' range: the order-free bound
        return math.expm1(max(plan.problem.length - 1, 1) * math.log1p(mma_unit_roundoff(plan.device if gpu is None
                                                                                             else gpu)))
    inner = 2 * u + 16 * (n + 1) * u * u + (6 * levels + 10) * u * u
    if ch["mma"]:
        u_mma = mma_unit_roundoff(plan.device if gpu is None else gpu)
        inner = u_mma + (1 + u_mma) * inner
    return u + (1 + u) * inner


# methods whose bound factor is not of the Depth form: name -> fn(plan, gpu) -> c
FACTORS: dict[str, Callable[[Plan, str | DeviceSpec | None], float]] = {
    "kahan": kahan_factor,
    "tensorcore_kahan": kahan_factor,
}


def exact_bound(x: np.ndarray, axis=None, *, dtype: str | None = None, keepdims: bool = False) -> np.ndarray:
    """Half an ulp (of the output dtype, float32 by default) of the result of method "exact": its only error is the
    one rounding of the exact sum. float64, shaped like the result (NaN where the result is NaN or infinite)."""
    from .emulate import sum as emulated_sum

    out_dtype = dtype or "float32"
    r = np.asarray(emulated_sum(x, axis, out_dtype, keepdims, method="exact"))
    with np.errstate(invalid="ignore"):
        return 0.5 * np.spacing(np.abs(r)).astype(np.float64)  # the ulp above |r|: the larger at a power of two


def library_bound_factor(n: int) -> float:
    """gamma_{n-1} for fp32 round-to-nearest additions in an unknown order (library methods such as cub): valid for
    any summation tree, vacuous (>= 1, or inf) once n u approaches 1."""
    k = max(n - 1, 1) * U_RN
    return k / (1 - k) if k < 1 else math.inf


def error_bound_factor(plan: Plan, gpu: str | DeviceSpec | None = None) -> float:
    """c in ``|error| <= c * sum|x|`` for every output of ``plan`` (before the final output rounding), with the
    tensor-core model of ``gpu`` (default: the GPU the plan was made for)."""
    if plan.method in FACTORS:
        return FACTORS[plan.method](plan, gpu)
    u_mma = mma_unit_roundoff(plan.device if gpu is None else gpu)
    fn = STRUCTURES.get(plan.method)
    if fn is None:
        n = plan.problem.length
        return math.expm1(max(n - 1, 1) * math.log1p(u_mma))
    d = fn(plan)
    return math.expm1(d.mma * math.log1p(u_mma) + d.rn * math.log1p(U_RN))


def error_bound(x: np.ndarray, axis=None, *, method: str, gpu: str = "H100", dtype: str | None = None,
                keepdims: bool = False) -> np.ndarray:
    """Absolute a-priori bound on |computed - exact| per output of ``tcreduce.sum(x, axis, dtype, method=method)``
    on ``gpu``, including the final rounding to ``dtype`` (float32 by default). Returns float64, shaped like the
    result. ``x`` is a NumPy array (float16 or float32)."""
    from ._api import get_plan
    from ._device import named_device
    from .registry import get

    x = np.asarray(x)
    out_dtype = dtype or "float32"
    if method == "exact":
        return exact_bound(x, axis, dtype=out_dtype, keepdims=keepdims)
    layout, axes = host_layout(x, axis)
    abs_sum = np.sum(np.abs(x, dtype=np.float64), axis=axes, keepdims=keepdims)
    if x.size == 0 or layout is None:
        return np.zeros_like(abs_sum)
    m = get(method)
    if m.runner is not None:  # library methods (cub): fp32 round-to-nearest in an unknown order
        c = library_bound_factor(layout.problem.length)
    else:
        in_dtype = str(x.dtype)
        plan = get_plan(method, layout.problem, in_dtype, out_dtype, named_device(gpu))
        c = error_bound_factor(plan, gpu)
    b = c * abs_sum
    u_out = OUT_ROUNDING[out_dtype]
    return b + u_out * (abs_sum + b) if u_out else b  # (0 * inf would make a vacuous bound NaN)
