"""Bit-accurate CPU model of ``mma.sync`` with an fp32 accumulator, for every input format tcreduce sums.

Instructions: ``m16n8k16`` with float16 or bfloat16 operands, ``m16n8k8`` with tf32 operands (fp32 registers) and
``m16n8k32`` with fp8 operands (e4m3 or e5m2), each ``.row.col.f32.<in>.<in>.f32``; :func:`mma` picks the one for the
operands' dtype.

The model follows Khattak and Mikaitis, "Accurate Models of NVIDIA Tensor Cores" (arXiv 2512.07004) and their
MATLAB code (north-numerical-computing/MATLAB-tensor-core: ``models/H100TC.m``, ``A100TC.m``, ``V100TC.m``,
``models/tools/GEMM.m`` and ``Generic_BFMA_TC.m`` with ``global_alignment = 1``, ``denorm_prd = 1``,
``stkbitenabled = 0``, ``frmode = 'rz'``); the Lean transcription of the same paper (pauljiang03/TC-EFT,
``TensorCore/TC/Block.lean``, ``Profiles.lean``) states the identical rule and was used to settle details.

One *block* (normalisation group) of ``K`` products and the incoming fp32 accumulator ``c`` is evaluated as follows:

1. Decode. An input is ``s * 2^(e - p)`` with an integer significand ``s`` of ``p`` fraction bits (hidden bit
   included; none for subnormals) and an *unnormalised exponent* ``e``: the unbiased exponent, the format's minimum
   normal exponent for subnormals (fp16 -14, bf16 and tf32 -126). ``c`` likewise with 23 fraction bits, -126.
2. Multiply exactly and do **not** normalise: the product ``a*b`` keeps the exponent ``e_a + e_b`` even when its
   significand lies in [2, 4) (or below 1 for subnormal factors).
3. The alignment exponent ``eta`` is the largest unnormalised exponent among the *nonzero* terms (products and ``c``);
   zero terms never choose it. ``eta`` is then raised to the model's floor (-133 on Hopper, -132 on Ampere; it binds
   only for bf16 and tf32 products far below fp32's range, which then truncate to zero).
4. Every term is truncated (toward zero, on its magnitude; no guard, round or sticky bit) to the grid
   ``2^(eta - F)`` with ``F = 23 + extra_bits`` (H100/H200: 25, A100: 24, V100: 23). Because products are not
   normalised, a block whose largest product has significand >= 2 keeps one more bit of that product: this is the
   MATLAB code's "one more alignment bit when the largest product is >= 2" (``fpbits_IEEE2``'s ``spcFlag``, which
   also required the largest product's exponent to be >= c's), expressed without a special case.
5. The truncated terms are summed exactly (a fixed-point adder), the sum is normalised once and rounded toward zero
   into fp32, with subnormal outputs; a magnitude >= 2^128 becomes +-inf (bf16 and tf32 products can get there). An
   exactly zero sum gives +0.0 (MATLAB returns ``d = 0``; TC-EFT: "exact zero is canonicalized to +0").
6. For ``k`` larger than the block, blocks run in increasing ``k`` and each block's fp32 result is the ``c`` of the
   next (``GEMM.m``'s recursive accumulation). Blocks: fp16 and bf16 16 on Hopper (A100 8, V100 4); tf32 8 on Hopper
   (A100 4).

Special values (``GEMM.m``): if any product or ``c`` is NaN (``inf * 0`` included) the result is NaN; if both +inf and
-inf occur, NaN; otherwise a single-signed infinity propagates. Applied per block, which gives the same answer.

**What the hardware settled** (H100 80GB HBM3, driver 580.159.04, 2026-11-23; ``scripts/probe_mma.py``, 14 operand
families of ``tcreduce.mma_operands``; the records in ``tests/data/mma_h100_records.npz`` replay in CI):

- bf16 (``m16n8k16.bf16``): exactly the fp16 rule above (16 products per block, F = 25) with bf16's exponent range;
  5,376 MMAs, all 638,976 D elements bit-identical; 8 products per block or F = 24 / 26 miss 12-21% of them.
- tf32 (``m16n8k8.tf32``): 8 products per block, F = 25, and the tensor core *truncates* each fp32 register to its
  top 19 bits (sign, exponent, 10 fraction bits): the low 13 bits are ignored, not rounded (using them misses 68%
  of the elements, blocks of 4 miss 20%). A consequence: an fp32 NaN whose payload sits only in the low 13 bits
  reads as an infinity. tcreduce's tf32 kernels therefore round with ``cvt.rna.tf32.f32`` first.
- fp8 (``m16n8k32.e4m3`` / ``.e5m2``): on Hopper ``mma.sync`` is not a native fp8 tensor-core operation. The SASS
  (sm_90) converts the operands to fp16 (``F2FP.F16.E4M3.UNPACK_B``, exact) and issues two fp16
  ``HMMA.16816.F32``: the first over the k with ``k mod 4 in {0, 1}`` (the low half of each 4-byte fragment register)
  starting from +0, the second over ``k mod 4 in {2, 3}`` chained on the first (round toward zero as above); then ``c``
  is added with an ordinary round-to-nearest fp32 addition. This model reproduced 5,376 MMAs of each fp8 format bit
  for bit; the published H100 fp8 parameters (32 products per block, 13 fraction bits: ``H100TC.m``, which describe
  ``wgmma``) miss most of them. So chaining fp8 mmas through ``c`` accumulates in round-to-nearest, not toward zero.

Overflow with fp16 inputs cannot happen with a finite fp32 ``c``: when ``|c| >= 2^127`` the grid is at least 2^102,
far above any fp16 product sum (< 2^37), so all products truncate to zero and the result is ``c``.

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
    """Parameters of one GPU generation's block FMA (fp32 accumulator) for each input format.

    name: GPU name. block: products fused per block (normalisation group) for fp16 and bf16 inputs. extra_bits:
    alignment bits kept below the fp32 fraction (``F = 23 + extra_bits`` fraction bits below the alignment exponent
    ``eta``), for every format. align_floor: lower bound on the alignment exponent (None: none). tf32_block: products
    per block of ``m16n8k8.tf32`` (0: no tf32). fp8: how ``m16n8k32`` with e4m3/e5m2 inputs runs (None: not
    available; "fp16_pairs": module docstring, "fp8 on Hopper"). source: where the parameters come from.
    """

    name: str
    block: int
    extra_bits: int
    align_floor: Optional[int]
    source: str
    tf32_block: int = 0
    bf16: bool = False
    fp8: Optional[str] = None

    @property
    def frac_bits(self) -> int:
        """F: bits kept below the alignment exponent ``eta``; the alignment grid is ``2^(eta - F)``."""
        return 23 + self.extra_bits


_SRC = "Khattak & Mikaitis 2025 (arXiv 2512.07004), MATLAB-tensor-core models/{}TC.m; TC-EFT Profiles.lean"
_HOPPER = ("; bf16, tf32 and fp8 (mma.sync) settled on an H100 80GB HBM3 (tests/data/mma_h100_records.npz, "
           "module docstring)")

MODELS: dict[str, TensorCoreModel] = {
    "H100": TensorCoreModel("H100", 16, 2, -133, _SRC.format("H100") + _HOPPER, 8, True, "fp16_pairs"),
    "H200": TensorCoreModel("H200", 16, 2, -133, _SRC.format("H200") + _HOPPER, 8, True, "fp16_pairs"),
    "A100": TensorCoreModel("A100", 8, 1, -132, _SRC.format("A100"), 4, True, None),
    "V100": TensorCoreModel("V100", 4, 0, None, _SRC.format("V100"), 0, False, None),
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


# ------------------------------------------------------------------------------------------------- formats
_K_OF = {"float16": 16, "bfloat16": 16, "float32": 8, "float8_e4m3fn": 32, "float8_e5m2": 32}
_EMIN = {"float16": -14, "bfloat16": -126, "float32": -126}  # unnormalised exponent of subnormals
_TF32_MASK = np.uint32(0xFFFFE000)  # the tensor core reads the top 19 bits of an fp32 register as tf32


def _format_name(dtype: np.dtype, what: str) -> str:
    from ..formats import format_of_dtype

    f = format_of_dtype(dtype)
    if f is None:
        raise TypeError(f"{what} must be float16, bfloat16, float8_e4m3fn, float8_e5m2 (ml_dtypes) or float32 "
                        f"(tf32), got {dtype}")
    return f.name


def _check_available(fmt: str, params: TensorCoreModel) -> None:
    ok = {"float16": True, "bfloat16": params.bf16, "float32": params.tf32_block > 0,
          "float8_e4m3fn": params.fp8 is not None, "float8_e5m2": params.fp8 is not None}[fmt]
    if not ok:
        raise ValueError(f"the {params.name} tensor cores have no mma.sync for {fmt} inputs")


def _values64(x: np.ndarray, fmt: str) -> np.ndarray:
    """float64 operand values as the tensor core reads them (tf32: the low 13 bits of the fp32 register dropped)."""
    if fmt == "float32":
        return (np.ascontiguousarray(x, np.float32).view(np.uint32) & _TF32_MASK).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def _unnormalised_exponent(mag: np.ndarray, emin: int) -> np.ndarray:
    """floor(log2(mag)) clipped below at ``emin`` (subnormals), ``_NEG`` where mag is 0 or not finite; int64."""
    _, e = np.frexp(mag)
    return np.where((mag == 0) | ~np.isfinite(mag), _NEG, np.maximum(e.astype(np.int64) - 1, emin))


def _fused_blocks(p: np.ndarray, pe: np.ndarray, c: np.ndarray, block: int, params: TensorCoreModel) -> np.ndarray:
    """Chained block FMAs over the last axis of exact products p (float64) with unnormalised exponents pe (``_NEG``
    for zero or non-finite products), starting from c (float32)."""
    d = c
    for k0 in range(0, p.shape[-1], block):
        d = _block(p[..., k0:k0 + block], pe[..., k0:k0 + block].max(axis=-1), d, params)
    return d


def _fp8_halves(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of an m16n8k32 k-range that the first (k mod 4 in {0, 1}) and second (k mod 4 in {2, 3}) fp16
    m16n8k16 of Hopper's fp8 mma.sync take: the low and high halves of each 4-byte fragment register."""
    idx = np.arange(k)
    return idx[(idx % 4) < 2], idx[(idx % 4) >= 2]


def _as_f32(c, what: str) -> np.ndarray:
    c = np.asarray(c)
    if c.dtype == np.float32:
        return c
    c32 = c.astype(np.float32)
    if not np.array_equal(c32.astype(c.dtype), c, equal_nan=True):
        raise ValueError(f"{what} must be float32 (or exactly representable in it), got inexact {c.dtype} values")
    return c32


# --------------------------------------------------------------------------------------------- public API
def _mma_one_format(a: np.ndarray, b: np.ndarray, c: np.ndarray, fmt: str, block: int,
                    params: TensorCoreModel) -> np.ndarray:
    """D = A @ B + C for [t, 16, K] x [t, K, 8] + [t, 16, 8] with one block rule (fp16, bf16, tf32)."""
    n, _, k = a.shape
    out = np.empty((n, 16, 8), dtype=np.float32)
    step = max(1, _CHUNK_ELEMS // (16 * 8 * k))
    emin = _EMIN[fmt]
    for s in range(0, n, step):
        a64 = _values64(a[s:s + step], fmt)  # [t, m, k]
        bt64 = np.swapaxes(_values64(b[s:s + step], fmt), -1, -2)  # [t, n, k]
        with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 = NaN is the intended special value
            p = a64[:, :, None, :] * bt64[:, None, :, :]  # [t, m, n, k], exact
        pe = (_unnormalised_exponent(np.abs(a64), emin)[:, :, None, :]
              + _unnormalised_exponent(np.abs(bt64), emin)[:, None, :, :])
        pe = np.where((p == 0) | (pe < _NEG // 2), _NEG, pe)  # zero products never choose the alignment exponent
        out[s:s + step] = _fused_blocks(p, pe, c[s:s + step], block, params)
    return out


def mma(a, b, c, *, model: str | TensorCoreModel = "H100") -> np.ndarray:
    """D = A @ B + C as one ``mma.sync`` with an fp32 accumulator computes it on ``model``, the instruction chosen by
    ``a.dtype``: float16 / bfloat16 -> ``m16n8k16`` (K = 16); float32 -> ``m16n8k8.tf32`` (K = 8; the fp32 values
    as register contents, of which the tensor core reads the top 19 bits); ``ml_dtypes.float8_e4m3fn`` /
    ``float8_e5m2`` -> ``m16n8k32`` (K = 32).

    a: [..., 16, K]; b: [..., K, 8] of the same dtype; c: float32 [..., 16, 8]. Leading batch dimensions broadcast.
    Returns float32 [..., 16, 8] (module docstring for the arithmetic of each format). ValueError when the GPU has no
    such instruction (fp8 before sm_89, bf16 and tf32 before sm_80)."""
    params = get_model(model)
    a, b = np.asarray(a), np.asarray(b)
    fmt = _format_name(a.dtype, "a")
    if b.dtype != a.dtype:
        raise TypeError(f"a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    _check_available(fmt, params)
    c = _as_f32(c, "c")
    k = _K_OF[fmt]
    if a.shape[-2:] != (16, k) or b.shape[-2:] != (k, 8) or c.shape[-2:] != (16, 8):
        raise ValueError(f"{fmt}: expected a [...,16,{k}], b [...,{k},8], c [...,16,8]; got {a.shape}, {b.shape}, "
                         f"{c.shape}")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
    a = np.broadcast_to(a, batch + (16, k)).reshape(-1, 16, k)
    b = np.broadcast_to(b, batch + (k, 8)).reshape(-1, k, 8)
    c = np.broadcast_to(c, batch + (16, 8)).reshape(-1, 16, 8)
    if fmt in ("float16", "bfloat16"):
        d = _mma_one_format(a, b, c, fmt, params.block, params)
    elif fmt == "float32":
        d = _mma_one_format(a, b, c, fmt, params.tf32_block, params)
    else:  # Hopper: two fp16 mmas (exact conversion), the first from +0, then one round-to-nearest fp32 add of c
        lo, hi = _fp8_halves(k)
        a16, b16 = a.astype(np.float16), b.astype(np.float16)
        zero = np.zeros_like(c)
        d1 = _mma_one_format(a16[..., lo], b16[:, lo, :], zero, "float16", params.block, params)
        d2 = _mma_one_format(a16[..., hi], b16[:, hi, :], d1, "float16", params.block, params)
        with np.errstate(invalid="ignore", over="ignore"):
            d = d2 + c
    return d.reshape(batch + (16, 8))


def mma_m16n8k16(a, b, c, *, model: str | TensorCoreModel = "H100") -> np.ndarray:
    """D = A @ B + C as ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` computes it on ``model``.

    a: float16 [..., 16, 16] (A[m][k]); b: float16 [..., 16, 8] (B[k][n]); c: float32 [..., 16, 8]. Leading batch
    dimensions broadcast. Returns float32 [..., 16, 8]. Each D[m][n] is the chained block FMA of the 16 products
    A[m][k] * B[k][n] (k increasing, ``model.block`` per block) and C[m][n] (module docstring). :func:`mma` with
    float16 operands."""
    for x, what in ((a, "a"), (b, "b")):
        if np.asarray(x).dtype != np.float16:
            raise TypeError(f"{what} must be float16, got {np.asarray(x).dtype}")
    return mma(a, b, c, model=model)


def _rowsum_blocks(v64: np.ndarray, c: np.ndarray, block: int, emin: int, params: TensorCoreModel) -> np.ndarray:
    """Block FMAs of rows of values against ones: v64 float64 [rows, K] (K a multiple of block), c float32 [rows]."""
    rows, k = v64.shape
    mag = np.abs(v64)
    mag = np.where(np.isfinite(mag), mag, 0.0)
    eta = _unnormalised_exponent(mag.reshape(rows, k // block, block).max(axis=-1), emin)  # [rows, blocks]
    d = c
    for i, k0 in enumerate(range(0, k, block)):
        d = _block(v64[:, k0:k0 + block], eta[:, i], d, params)
    return d


def fused_rowsum(values, c, *, model: str | TensorCoreModel = "H100") -> np.ndarray:
    """The fp32 D of one MMA row when B is all ones (the sum emulators' hot path): ``c + values[0] + ... ``.

    values: [..., K] of float16 or bfloat16 (K a multiple of 16: the 16 elements of one A row; K = 16*m means m
    chained m16n8k16, each D the next one's C), float32 (tf32 m16n8k8 rows, K a multiple of 8) or fp8 (m16n8k32
    rows in k order, K a multiple of 32). Products with 1.0 are the values themselves, exact. c: float32,
    broadcastable to ``values.shape[:-1]``. Returns float32 ``values.shape[:-1]``.

    The same function serves the ones-as-A case (``mma_colsum``): there the K values of one B column play this role
    (:func:`fused_colsum` takes them in B's layout). Time is linear in ``values.size`` (module docstring)."""
    params = get_model(model)
    values = np.asarray(values)
    fmt = _format_name(values.dtype, "values")
    _check_available(fmt, params)
    kk = _K_OF[fmt]
    k = values.shape[-1] if values.ndim else 0
    if k == 0 or k % kk:
        raise ValueError(f"{fmt} values must have a last axis that is a positive multiple of {kk}, got shape "
                         f"{values.shape}")
    lead = values.shape[:-1]
    c = np.broadcast_to(_as_f32(c, "c"), lead)
    rows = int(np.prod(lead, dtype=np.int64))
    v = values.reshape(rows, k)
    cf = c.reshape(rows)
    out = np.empty(rows, dtype=np.float32)
    step = max(1, _CHUNK_ELEMS // k)
    for s in range(0, rows, step):
        vs, d = v[s:s + step], cf[s:s + step]
        if fmt in ("float16", "bfloat16", "float32"):
            block = params.tf32_block if fmt == "float32" else params.block
            out[s:s + step] = _rowsum_blocks(_values64(vs, fmt), d, block, _EMIN[fmt], params)
            continue
        lo, hi = _fp8_halves(32)
        v16 = vs.astype(np.float64)  # fp8 -> fp16 is exact; float64 holds the same values
        for m0 in range(0, k, 32):  # one m16n8k32 per 32 values: two fp16 blocks, then d = RN(d2 + d)
            part = v16[:, m0:m0 + 32]
            d1 = _rowsum_blocks(part[:, lo], np.zeros_like(d), 16, _EMIN["float16"], params)
            d2 = _rowsum_blocks(part[:, hi], d1, 16, _EMIN["float16"], params)
            with np.errstate(invalid="ignore", over="ignore"):
                d = d2 + d
        out[s:s + step] = d
    return out.reshape(lead)


def fused_colsum(b, c, *, model: str | TensorCoreModel = "H100") -> np.ndarray:
    """D of ``mma_colsum`` (A all ones, the data as B): ``D[n] = c[n] + sum_k b[k][n]`` per column.

    b: [..., K, N] of a format :func:`fused_rowsum` takes (k along axis -2, as B[k][n]); c: float32 broadcastable
    to ``[..., N]``. Returns float32 [..., N]. Same arithmetic as :func:`fused_rowsum`."""
    b = np.asarray(b)
    if b.ndim < 2:
        raise ValueError(f"b must be [..., K, N], got shape {b.shape}")
    return fused_rowsum(np.ascontiguousarray(np.swapaxes(b, -1, -2)), c, model=model)
