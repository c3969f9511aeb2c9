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

float32 input on tensor cores (kernels/tensorcore_fp32.cu, kernels/tensorcore_tf32.cu) has bounds of its own,
:func:`split_bound_factor` and :func:`tf32_bound_factor` (registered in :data:`FACTORS`), derived in their
docstrings: "tensorcore" splits every value exactly and sums its pieces in exact blocks and compensated (TwoSum) pairs,
so its bound is about 2u sum|x| at every length (the split's wide path, taken only next to values >= 2^112 or
infinities, adds the blocks' truncation); "tensorcore_tf32" rounds every value to tf32 first (2^-11 relative).

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
from .plans._common import combine_grid_additions
from .plans._common import ceil_log2 as _log2

__all__ = ["error_bound", "error_bound_factor", "library_bound_factor", "Depth", "STRUCTURES", "FACTORS", "U_RN",
           "mma_unit_roundoff", "exact_bound", "kahan_factor", "split_bound_factor", "tf32_bound_factor"]

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
        per_vector = p.get("vec", 8) // 8  # A fragments per 16-byte vector (fp8: 2)
        rounds = p.get("rounds", 0)
        iters = (min(rounds, _cdiv(p["nvec"], p["block"] * p["unroll"])) if rounds  # a warp's trips in its block
                 else _cdiv(p["nvec"], threads * p["unroll"]))
        mmas = iters * p["unroll"] * per_vector + 1  # + the head/tail mma
        flushes = _cdiv(mmas, min(chain, mmas))
        d_mma = min(chain, mmas)
        # acc chain, lo + hi, warp_fold_rows (3), block_combine (log2(warps): the levels that add the 0.0f padding
        # are exact), then the partials: serial + warp_fold (5) + block_combine; a one-pass grid (rounds) combines
        # them in two levels: a group's (one partial per thread), then the groups' totals
        combine = _log2(p["block"] // 32)
        partials = combine_grid_additions(p["grid"], p["block"], bool(rounds), 5 + combine)
        d_rn = flushes + 1 + 3 + combine + partials
        return Depth(d_mma * _mma_blocks(plan.device.name), d_rn)
    fold = 0
    if isinstance(prob, Rows) and p.get("stream"):  # tc_rows_stream: a chunk per 16-byte lane load, 1 mma (fp8: 2)
        warps = p["wpt"]
        per_warp = _cdiv(_cdiv(_cdiv(prob.k, p["chunk"]), p["splits"]), warps) * (p["chunk"] // 256)
        fold = 1 + 3  # lo + hi, warp_fold_rows (packed short rows: one chunk and at most 2 of its 3 levels)
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




def exact_bound(x: np.ndarray, axis=None, *, dtype: str | None = None, keepdims: bool = False) -> np.ndarray:
    """Half an ulp (of the output dtype, float32 by default) of the result of method "exact": its only error is the
    one rounding of the exact sum. float64, shaped like the result (NaN where the result is NaN or infinite)."""
    from .emulate import sum as emulated_sum

    out_dtype = dtype or "float32"
    r = np.asarray(emulated_sum(x, axis, out_dtype, keepdims, method="exact"))
    with np.errstate(invalid="ignore"):
        return 0.5 * np.spacing(np.abs(r)).astype(np.float64)  # the ulp above |r|: the larger at a power of two



# ------------------------------------------------------------------------------------ float32 on tensor cores
SPLIT_WIDE_MIN = 2.0 ** 112  # a quad maximum at or above this (or non-finite) sends the warp to the split's wide path
SPLIT_TINY = (2.0 ** -110, 2.0 ** -133)  # wide path: values below 2^-110 lose bits below 2^-133 (each < 2^-133)
TF32_TINY = (2.0 ** -126, 2.0 ** -137)  # tf32 rounding of fp32 subnormals: at most 2^-137 each


def _gamma(k: int) -> float:
    """(1 + u)^k - 1 for k round-to-nearest fp32 operations (>= Higham's gamma_k for the relative error)."""
    return math.expm1(max(k, 0) * math.log1p(U_RN))


def _block_params(gpu: str | DeviceSpec, tf32: bool) -> tuple[int, int]:
    """(products per fused block, blocks per mma) of the bf16 m16n8k16 or tf32 m16n8k8 mma on ``gpu``; a GPU
    without a model gets the most pessimistic (blocks of 4)."""
    model = _model_or_none(gpu)
    k = 8 if tf32 else 16
    block = (model.tf32_block if tf32 else model.block) if model is not None else 4
    return block, k // block


def _block_roundoff(gpu: str | DeviceSpec, tf32: bool) -> float:
    """Relative error of one fused block against the sum of its terms' magnitudes: ``K + 1`` terms (K products and
    c) each truncated below 2^(eta - F), then one round toward zero (as mma_unit_roundoff, for the block size of the
    format)."""
    model = _model_or_none(gpu)
    f = 23 + (model.extra_bits if model is not None else 0)
    terms = _block_params(gpu, tf32)[0] + 1
    t = terms * 2.0 ** -f
    return t + 2.0 ** -23 * (1 + t)


def _f32_combination(plan: Plan) -> tuple[int, int]:
    """(K, L) of a float32 tensor-core plan (tcreduce/plans/tensorcore_fp32.py): K the most steps of any warp (each
    adds one row sum into every row accumulator), L the pair additions (add2) after them on the way to an output
    (kernels/tensorcore_f32.cuh): flat: row_lo + row_hi, warp_fold_rows2 (3), block_combine2 (5), and with several
    blocks the serial partials, warp_fold2 (5) and block_combine2 (5) (a one-pass grid: a group's, then the groups'
    totals); stream: row_lo + row_hi, warp_fold_rows2, the group's warps and the splits; rows/cols: the group's warps
    and the splits (one warp or one split: none)."""
    p = param_dict(plan)
    k = p["steps"]
    group = p.get("wpt", 1) if p.get("wpt", 1) > 1 else 0
    splits = p.get("splits", 1) if p.get("splits", 1) > 1 else 0
    if p["form"] == "flat":  # the block pairs: combine_grid2 ends in warp_fold2 (5) and block_combine2 (5)
        ell = 1 + 3 + 5 + combine_grid_additions(p["grid"], p["block"], bool(p.get("rounds", 0)), 5 + 5)
    elif p["form"] == "stream":
        ell = 1 + 3 + group + splits
    else:
        ell = group + splits
    return k, ell


def split_bound_factor(plan: Plan, gpu: str | DeviceSpec | None = None, wide: bool = True) -> float:
    """c in ``|error| <= c * sum|x| (+ the wide path's tiny-value term)`` for "tensorcore" on float32
    (kernels/tensorcore_fp32.cu), before the output rounding; ``wide``: whether the split's wide path may run (False
    when every |x| < 2^112 and finite, so that no quad maximum reaches it).

    Derivation, with A = sum|x|, u = 2^-24, K, L from the plan (:func:`_f32_combination`):

    - Normal path: hi + mid + r2 = x exactly; a row's hi and mid sums c1 are exact (the kernel file), so the only
      roundings are fp32 round-to-nearest additions of small quantities. In each mma row (16 values of one output)
      |r2| <= 2^(E-16) <= 2^-16 M and M <= the row's sum|x|: sum|r2| <= 2^-12 A; each r2 goes through at most
      4K + 2 additions (rho, then the quad sum): error <= gamma_{4K+2} 2^-11 A (with room).
    - |hi| + |mid| <= |x| + 2^(E-8) + 2^(E-16), so sum|c1| <= (1 + 2^-4 (1 + 2^-8)) A < 1.13 A. The s parts are
      exact TwoSums: s + (the TwoSum errors t) = sum c1 exactly, |t| <= u |s| <= 1.13 u A, one per accumulation step
      (K) and per pair addition (L + 1 with the row/lane one). The e parts collect the t's, the wide path's c3 and
      rho: at most E_sum = (K + L + 1) 1.13 u A + 2^-11 (1 + gamma_{4K+2}) A (+ 2^-7 (1 + 2^-6) A from c3), through
      at most D_e = 2K + 1 + 2L additions: error <= gamma_{D_e} E_sum.
    - Wide path (quads with a value >= 2^112): c1 = hi block (error <= u_b sum|hi| <= u_b A), c3 = mid block then lo
      block (<= ((1 + u_b)^2 - 1) (sum|mid| + |lo|) <= 2 u_b (1 + u_b) 2^-7 A): u_b (1 + 2^-6 (1 + u_b)) A, u_b the
      block roundoff (:func:`_block_roundoff`; A100: two blocks of 8 per mma, so 2 u_b).
    - Output: value2 = RN(s + e): u (A + the above).
    """
    gpu = plan.device if gpu is None else gpu
    k, ell = _f32_combination(plan)
    u = U_RN
    blocks = _block_params(gpu, tf32=False)[1]
    u_b = math.expm1(blocks * math.log1p(_block_roundoff(gpu, tf32=False)))
    g_rho = _gamma(4 * k + 2)
    e_sum = (k + ell + 1) * 1.13 * u + 2.0 ** -11 * (1 + g_rho) + (2.0 ** -7 * (1 + 2.0 ** -6) if wide else 0.0)
    c = _gamma(2 * k + 1 + 2 * ell) * e_sum + g_rho * 2.0 ** -11
    if wide:
        c += u_b * (1 + 2.0 ** -6 * (1 + u_b))
    return c + u * (1 + c)


def tf32_bound_factor(plan: Plan, gpu: str | DeviceSpec | None = None) -> float:
    """c in ``|error| <= c * sum|x| (+ 2^-137 per fp32 subnormal)`` for "tensorcore_tf32" (kernels/tensorcore_tf32.cu),
    before the output rounding. Each value is rounded to tf32 first: |y - x| <= 2^-11 |x| (round to nearest with 10
    fraction bits; the largest finite values, truncated instead, lose less than 2^-11 of themselves too; subnormals
    at most 2^-137). Each rounded value then goes through one m16n8k8 (H100/H200: one block of 8 products from c = 0;
    A100: two blocks of 4), its row sum through the 2K round-to-nearest additions of its row accumulator (two mmas per
    step), and the pair additions (at most 2L more additions of e parts; the s parts are exact TwoSums) and the final
    RN(s + e): error <= 2^-11 A + (1 + 2^-11) ((1 + u_b)^b (1 + u)^(2K + 2L + 1) - 1) A."""
    gpu = plan.device if gpu is None else gpu
    k, ell = _f32_combination(plan)
    u_b = _block_roundoff(gpu, tf32=True)
    blocks = _block_params(gpu, tf32=True)[1]
    inner = math.expm1(blocks * math.log1p(u_b) + (2 * k + 2 * ell + 1) * math.log1p(U_RN))
    return 2.0 ** -11 + (1 + 2.0 ** -11) * inner


def _split_may_widen(x: np.ndarray | None) -> bool:
    """Whether the split's wide path may run on ``x`` (None: unknown data): some |x| >= 2^112, or inf/NaN."""
    return x is None or x.size == 0 or not bool(np.all(np.abs(x) < SPLIT_WIDE_MIN))


# (method, in_dtype or None for every dtype) -> factor(plan, gpu, x) for bounds that are not a plain Depth; x (NumPy,
# or None when no data is given) may tighten the factor. Consulted before STRUCTURES.
FACTORS: dict[tuple[str, str | None], Callable[..., float]] = {
    ("kahan", None): lambda plan, gpu, x=None: kahan_factor(plan, gpu),
    ("tensorcore_kahan", None): lambda plan, gpu, x=None: kahan_factor(plan, gpu),
    ("tensorcore", "float32"): lambda plan, gpu, x=None: split_bound_factor(plan, gpu, wide=_split_may_widen(x)),
    ("tensorcore_tf32", "float32"): lambda plan, gpu, x=None: tf32_bound_factor(plan, gpu),
}
# (method, in_dtype) -> ((threshold, unit), applies(x)): an absolute term of ``unit`` per nonzero value below
# ``threshold`` in magnitude, where ``applies`` (the split: only when its wide path may run)
_TINY_TERMS: dict[tuple[str, str], tuple[tuple[float, float], Callable[[np.ndarray], bool]]] = {
    ("tensorcore", "float32"): (SPLIT_TINY, _split_may_widen),
    ("tensorcore_tf32", "float32"): (TF32_TINY, lambda x: True),
}


def library_bound_factor(n: int) -> float:
    """gamma_{n-1} for fp32 round-to-nearest additions in an unknown order (library methods such as cub): valid for
    any summation tree, vacuous (>= 1, or inf) once n u approaches 1."""
    k = max(n - 1, 1) * U_RN
    return k / (1 - k) if k < 1 else math.inf


def _factor_fn(plan: Plan) -> Callable[..., float] | None:
    """The :data:`FACTORS` entry of a plan's method and input dtype, if any."""
    return FACTORS.get((plan.method, plan.in_dtype)) or FACTORS.get((plan.method, None))


def error_bound_factor(plan: Plan, gpu: str | DeviceSpec | None = None) -> float:
    """c in ``|error| <= c * sum|x|`` for every output of ``plan`` (before the final output rounding), with the
    tensor-core model of ``gpu`` (default: the GPU the plan was made for)."""
    factor = _factor_fn(plan)
    if factor is not None:
        return factor(plan, plan.device if gpu is None else gpu)
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
    result. ``x`` is a NumPy array of an input format (float16, float32, or ml_dtypes' bfloat16 and fp8)."""
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
        factor = _factor_fn(plan)
        c = error_bound_factor(plan, gpu) if factor is None else factor(plan, gpu, x)
    b = c * abs_sum
    tiny = _TINY_TERMS.get((method, str(x.dtype)))
    if tiny is not None and tiny[1](x):
        (threshold, unit), ax = tiny[0], np.abs(x)
        b = b + np.sum((ax < threshold) & (ax > 0), axis=axes, keepdims=keepdims) * unit * (1 + c)
    u_out = OUT_ROUNDING[out_dtype]
    return b + u_out * (abs_sum + b) if u_out else b  # (0 * inf would make a vacuous bound NaN)
