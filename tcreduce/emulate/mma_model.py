"""Bit-accurate CPU model of ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` (fp16 inputs, fp32 accumulator).

The model follows Khattak and Mikaitis, "Accurate Models of NVIDIA Tensor Cores" (arXiv 2512.07004) and their
MATLAB code (north-numerical-computing/MATLAB-tensor-core: ``models/H100TC.m``, ``A100TC.m``, ``V100TC.m``,
``models/tools/GEMM.m`` and ``Generic_BFMA_TC.m`` with ``global_alignment = 1``, ``denorm_prd = 1``,
``stkbitenabled = 0``, ``frmode = 'rz'``); the Lean transcription of the same paper (pauljiang03/TC-EFT,
``TensorCore/TC/Block.lean``, ``Profiles.lean``) states the identical rule and was used to settle details.

One *block* (normalisation group) of ``K`` products and the incoming fp32 accumulator ``c`` is evaluated as follows:

1. Decode. An fp16 input is ``s * 2^(e - 10)`` with an integer significand ``s`` (hidden bit included; no hidden bit
   for subnormals) and an *unnormalised exponent* ``e``: the unbiased exponent, ``-14`` for subnormals. ``c`` likewise
   with 23 fraction bits and ``e = -126`` for fp32 subnormals.
2. Multiply exactly and do **not** normalise: the product ``a*b`` keeps the exponent ``e_a + e_b`` even when its
   significand ``s_a * s_b / 2^20`` lies in [2, 4) (or below 1 for subnormal factors).
3. The alignment exponent ``eta`` is the largest unnormalised exponent among the *nonzero* terms (products and ``c``);
   zero terms never choose it. ``eta`` is then raised to the model's floor (-133 on Hopper, -132 on Ampere; with fp16
   products (exponent >= -28) and an fp32 ``c`` (exponent >= -126) the floor never binds).
4. Every term is truncated (toward zero, on its magnitude; no guard, round or sticky bit) to the grid
   ``2^(eta - F)`` with ``F = 23 + extra_bits`` (H100/H200: 25, A100: 24, V100: 23). Because products are not
   normalised, a block whose largest product has significand >= 2 keeps one more bit of that product: this is the
   MATLAB code's "one more alignment bit when the largest product is >= 2" (``fpbits_IEEE2``'s ``spcFlag``, which
   also required the largest product's exponent to be >= c's), expressed without a special case.
5. The truncated terms are summed exactly (a fixed-point adder), the sum is normalised once and rounded toward zero
   into fp32, with subnormal outputs. An exactly zero sum gives +0.0 (MATLAB returns ``d = 0``; TC-EFT: "exact zero is
   canonicalized to +0").
6. For ``k`` larger than the block (A100: 2 blocks of 8, V100: 4 blocks of 4 per m16n8k16), blocks run in increasing
   ``k`` and each block's fp32 result is the ``c`` of the next (``GEMM.m``'s recursive accumulation).

Special values (``GEMM.m``): if any product or ``c`` is NaN (``inf * 0`` included) the result is NaN; if both +inf and
-inf occur, NaN; otherwise a single-signed infinity propagates. Applied per block, which gives the same answer.
Overflow: a truncated sum of magnitude >= 2^128 becomes +-inf (MATLAB's rule), but it cannot happen with fp16
products and a finite fp32 ``c``: when ``|c| >= 2^127`` the grid is at least 2^102, far above any fp16 product sum
(< 2^37), so all products truncate to zero and the result is ``c``.

Implementation: every term is exact in float64 (a product of two 11-bit significands has 22 bits); scaling by the
power of two ``2^(F - eta)`` and ``np.trunc`` give each aligned term as an integer below 2^28, and their sum (below
2^33) is exact in float64, so the float64 arithmetic *is* the integer fixed-point arithmetic of the model. Rounding
toward zero to fp32 clears the low 29 bits of the float64 encoding (or truncates to a multiple of 2^-149 in the fp32
subnormal range). Everything is vectorised over leading batch dimensions and processed in chunks of bounded memory.

Cost: :func:`fused_rowsum` does a fixed number of passes over its input, so time grows linearly with the number of
elements, about 25-35 ns per fp16 element on one core (2^24 elements: well under a second on a recent x86 core).
:func:`mma_m16n8k16` forms all 16*8*16 products of each MMA: about 2048 float64 products per MMA.

Validation against hardware (``tests/test_mma_model_gpu.py``, ``kernels/mma_probe.cu``): on an NVIDIA H200 and,
in a second run, an NVIDIA H100 80GB HBM3 (driver 580.159.04, 2026-11-22), 15,728,640 of 15,728,640 D elements of
122,880 single ``mma.sync`` m16n8k16 were bit-identical to this model (12 operand distributions of 10,240 MMAs
each: whole fp16 range, subnormals, mixed-sign cancellation, cancellation against c, c near FLT_MAX, c anywhere in
the fp32 range, products straddling the alignment grid, B = ones, A = ones, B = +-2^s, signed zeros, inf/NaN).
Nothing beyond the published model was needed; the GPU also confirmed the two points the paper leaves to the code:
an exact-zero result is +0.0, also in the 5,120 MMAs whose 16 products are all -0.0 with c = -0.0 (IEEE addition
would give -0.0), and inf/NaN follow the rule above. The A100 and V100 parameters are the published ones and have
not been checked here against those GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

__all__ = ["TensorCoreModel", "MODELS", "get_model", "mma_m16n8k16", "fused_rowsum", "fused_colsum",
           "round_toward_zero_f32"]


@dataclass(frozen=True)
class TensorCoreModel:
    """Parameters of the fp16 x fp16 + fp32 -> fp32 block FMA of one GPU generation.

    name: GPU name. block: products fused per block (normalisation group). extra_bits: alignment bits kept below the
    fp32 fraction (``F = 23 + extra_bits`` fraction bits below the alignment exponent). align_floor: lower bound on the
    alignment exponent (None: none). source: where the parameters come from.
    """

    name: str
    block: int
    extra_bits: int
    align_floor: Optional[int]
    source: str

    @property
    def frac_bits(self) -> int:
        """F: bits kept below the alignment exponent ``eta``; the alignment grid is ``2^(eta - F)``."""
        return 23 + self.extra_bits


_SRC = "Khattak & Mikaitis 2025 (arXiv 2512.07004), MATLAB-tensor-core models/{}TC.m; TC-EFT Profiles.lean"

MODELS: dict[str, TensorCoreModel] = {
    "H100": TensorCoreModel("H100", 16, 2, -133, _SRC.format("H100")),
    "H200": TensorCoreModel("H200", 16, 2, -133, _SRC.format("H200")),
    "A100": TensorCoreModel("A100", 8, 1, -132, _SRC.format("A100")),
    "V100": TensorCoreModel("V100", 4, 0, None, _SRC.format("V100")),
}

_K = 16  # k of one m16n8k16 MMA
_NEG = -(1 << 20)  # "no nonzero term" sentinel for exponents
_CHUNK_ELEMS = 1 << 20  # float64 temporaries per chunk (8 MiB each)


def get_model(model: str | TensorCoreModel) -> TensorCoreModel:
    """The :class:`TensorCoreModel` named ``model`` ("H100", "H200", "A100", "V100"; case-insensitive,
    "NVIDIA H100 80GB HBM3" works too) or ``model`` itself."""
    if isinstance(model, TensorCoreModel):
        return model
    key = str(model).upper().replace("NVIDIA", "").strip()
    for name, params in MODELS.items():
        if key.startswith(name):
            return params
    raise ValueError(f"unknown tensor-core model {model!r}; known: {', '.join(MODELS)}")


# ----------------------------------------------------------------------------------------------- bit helpers
def _f16_exponent(x: np.ndarray) -> np.ndarray:
    """Unnormalised exponent of fp16 values: unbiased exponent, -14 for subnormals (and zeros), int32."""
    field = (x.view(np.uint16) >> np.uint16(10)) & np.uint16(0x1F)
    return np.maximum(field.astype(np.int32), 1) - 15


def _f32_exponent_nonzero(c: np.ndarray) -> np.ndarray:
    """Unnormalised exponent of fp32 values (-126 for subnormals), ``_NEG`` for +-0, int32."""
    bits = c.view(np.uint32)
    field = ((bits >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int32)
    e = np.maximum(field, 1) - 127
    return np.where((bits & np.uint32(0x7FFFFFFF)) == 0, _NEG, e)


_RZ_MASK = np.uint64(0xFFFFFFFFE0000000)  # keeps sign, exponent and the top 23 of 52 fraction bits


def round_toward_zero_f32(x: np.ndarray) -> np.ndarray:
    """Round float64 values toward zero into float32, with fp32 subnormals; magnitudes >= 2^128 become +-inf (the
    MATLAB model's overflow rule; IEEE round-toward-zero would give FLT_MAX). NaN stays NaN. +-0 keep their sign."""
    x = np.asarray(x, dtype=np.float64)
    y = (x.view(np.uint64) & _RZ_MASK).view(np.float64)
    with np.errstate(all="ignore"):
        sub = np.abs(x) < 2.0 ** -126
        if np.any(sub):
            y = np.where(sub, np.ldexp(np.trunc(np.ldexp(x, 149)), -149), y)
        return y.astype(np.float32)


# ---------------------------------------------------------------------------------------------- block core
def _block(p: np.ndarray, eta_p: np.ndarray, c: np.ndarray, model: TensorCoreModel) -> np.ndarray:
    """One block FMA. p: float64 [..., K] exact products (may hold inf/NaN); eta_p: int32 [...] largest unnormalised
    exponent of the nonzero finite products (``_NEG`` if none); c: float32 [...]. Returns float32 [...]."""
    with np.errstate(all="ignore"):
        eta = np.maximum(eta_p, _f32_exponent_nonzero(c))
        if model.align_floor is not None:
            eta = np.where(eta == _NEG, _NEG, np.maximum(eta, model.align_floor))
        eta = np.where(eta == _NEG, 0, eta)  # all terms zero: any grid gives 0
        shift = model.frac_bits - eta  # aligned term = trunc(value * 2^shift), an integer < 2^28
        scale = np.ldexp(1.0, shift)
        c64 = c.astype(np.float64)
        total = np.trunc(p * scale[..., None]).sum(axis=-1) + np.trunc(c64 * scale)
        total += 0.0  # an exact zero sum is +0.0 (trunc(-0.3) = -0.0 would otherwise leak a sign)
        d = round_toward_zero_f32(np.ldexp(total, -shift))
        finite = np.isfinite(p).all(axis=-1) & np.isfinite(c64)
        if not finite.all():
            special = np.where(np.isfinite(p), 0.0, p).sum(axis=-1) + np.where(np.isfinite(c64), 0.0, c64)
            d = np.where(finite, d, special.astype(np.float32))
    return d


def _as_f16(x, what: str) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype != np.float16:
        raise TypeError(f"{what} must be float16, got {x.dtype}")
    return x


def _as_f32(c, what: str) -> np.ndarray:
    c = np.asarray(c)
    if c.dtype == np.float32:
        return c
    c32 = c.astype(np.float32)
    if not np.array_equal(c32.astype(c.dtype), c, equal_nan=True):
        raise ValueError(f"{what} must be float32 (or exactly representable in it), got inexact {c.dtype} values")
    return c32


# --------------------------------------------------------------------------------------------- public API
def mma_m16n8k16(a, b, c, *, model: str | TensorCoreModel = "H100") -> np.ndarray:
    """D = A @ B + C as ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` computes it on ``model``.

    a: float16 [..., 16, 16] (A[m][k]); b: float16 [..., 16, 8] (B[k][n]); c: float32 [..., 16, 8]. Leading batch
    dimensions broadcast. Returns float32 [..., 16, 8]. Each D[m][n] is the chained block FMA of the 16 products
    A[m][k] * B[k][n] (k increasing, ``model.block`` per block) and C[m][n] (module docstring)."""
    params = get_model(model)
    a = _as_f16(a, "a")
    b = _as_f16(b, "b")
    c = _as_f32(c, "c")
    if a.shape[-2:] != (16, 16) or b.shape[-2:] != (16, 8) or c.shape[-2:] != (16, 8):
        raise ValueError(f"expected a [...,16,16], b [...,16,8], c [...,16,8]; got {a.shape}, {b.shape}, {c.shape}")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
    a = np.broadcast_to(a, batch + (16, 16)).reshape(-1, 16, 16)
    b = np.broadcast_to(b, batch + (16, 8)).reshape(-1, 16, 8)
    c = np.broadcast_to(c, batch + (16, 8)).reshape(-1, 16, 8)
    n = a.shape[0]
    out = np.empty((n, 16, 8), dtype=np.float32)
    step = max(1, _CHUNK_ELEMS // (16 * 8 * 16))
    nb = params.block
    for s in range(0, n, step):
        a64 = a[s:s + step].astype(np.float64)  # [t, m, k]
        bt = np.swapaxes(b[s:s + step], -1, -2)  # [t, n, k]
        bt64 = bt.astype(np.float64)
        with np.errstate(invalid="ignore"):  # inf * 0 = NaN is the intended special value
            p = a64[:, :, None, :] * bt64[:, None, :, :]  # [t, m, n, k], exact
        pe = _f16_exponent(a[s:s + step])[:, :, None, :] + _f16_exponent(bt)[:, None, :, :]
        pe = np.where(p == 0, _NEG, pe)  # zero products never choose the alignment exponent
        d = c[s:s + step]
        for k0 in range(0, _K, nb):
            d = _block(p[..., k0:k0 + nb], pe[..., k0:k0 + nb].max(axis=-1), d, params)
        out[s:s + step] = d
    return out.reshape(batch + (16, 8))


def fused_rowsum(values, c, *, model: str | TensorCoreModel = "H100") -> np.ndarray:
    """The fp32 D of one MMA row when B is all ones (the sum emulators' hot path): ``c + values[0] + ... ``.

    values: float16 [..., K] with K a multiple of 16: the 16 elements of one A row (products with 1.0 are the values
    themselves, exact); K = 16*m means m chained MMAs (each MMA's D is the next one's C). c: float32, broadcastable
    to ``values.shape[:-1]``. Returns float32 ``values.shape[:-1]``.

    The same function serves the ones-as-A case (``mma_colsum``): there the 16 k-values of one B column play this role
    (:func:`fused_colsum` takes them in B's layout). Time is linear in ``values.size`` (module docstring)."""
    params = get_model(model)
    values = _as_f16(values, "values")
    k = values.shape[-1] if values.ndim else 0
    if k == 0 or k % _K:
        raise ValueError(f"values must have a last axis that is a positive multiple of 16, got shape {values.shape}")
    lead = values.shape[:-1]
    c = np.broadcast_to(_as_f32(c, "c"), lead)
    rows = int(np.prod(lead, dtype=np.int64))
    v = values.reshape(rows, k)
    cf = c.reshape(rows)
    out = np.empty(rows, dtype=np.float32)
    nb = params.block
    step = max(1, _CHUNK_ELEMS // k)
    for s in range(0, rows, step):
        vs = v[s:s + step]
        d = cf[s:s + step]
        mag = vs.view(np.uint16) & np.uint16(0x7FFF)
        for k0 in range(0, k, nb):
            # for fp16 magnitudes the bit pattern is monotone in the value, so the largest |value| of the block
            # carries the block's largest unnormalised exponent (subnormals: -14); inf/NaN rows are special anyway
            m = mag[:, k0:k0 + nb].max(axis=-1)
            field = (m >> np.uint16(10)).astype(np.int32)
            eta_p = np.where(m == 0, _NEG, np.maximum(field, 1) - 15)
            d = _block(vs[:, k0:k0 + nb].astype(np.float64), eta_p, d, params)
        out[s:s + step] = d
    return out.reshape(lead)


def fused_colsum(b, c, *, model: str | TensorCoreModel = "H100") -> np.ndarray:
    """D of ``mma_colsum`` (A all ones, the data as B): ``D[n] = c[n] + sum_k b[k][n]`` per column.

    b: float16 [..., K, N] with K a multiple of 16 (k along axis -2, as B[k][n]; K = 16*m: m chained MMAs);
    c: float32 broadcastable to ``[..., N]``. Returns float32 [..., N]. Same arithmetic as :func:`fused_rowsum`."""
    b = _as_f16(b, "b")
    if b.ndim < 2:
        raise ValueError(f"b must be [..., K, N], got shape {b.shape}")
    return fused_rowsum(np.ascontiguousarray(np.swapaxes(b, -1, -2)), c, model=model)
