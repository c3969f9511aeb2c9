"""CPU tests of the wmma emulator twin (tcreduce/emulate/wmma.py, kernels/wmma.cu), float16 and bfloat16 input.

- Hand-checked cases: an independent, deliberately literal replay of the kernel comments (16x16 matrices P, P^T and
  the tiles, every ``wmma::mma_sync`` as two m16n8k16 halves through :func:`tcreduce.emulate.mma`, the hand-off
  element by element with Python scalars (fp16: scaled round-to-nearest split; bf16: truncations from the fp32
  bits), the grid combination thread by thread and the xor butterfly lane by lane) equals the emulator bit for bit,
  for every variant and both formats, on single tiles and on small problems with tails, idle warps, several splits
  and more than 256 splits.
- The bf16 hand-off's exactness claim: the three truncated parts sum to the value exactly for every multiple of
  2^-133 (and every partial sum the kernels hand off is one), against an independent integer model of the split.
- Error bounds: for many awkward sizes, all three problem forms, misaligned and strided views, every forced variant,
  H100 and A100 models and several distributions, the emulated sum is within tcreduce.bounds.error_bound (the plan's
  a-priori bound, from ``bounds._wmma_depth``) of the exact sum.
- Determinism, special values, output dtypes, the Cols path equal to its explicit transposition, speed.
"""

from __future__ import annotations

import math
import struct
import time

import numpy as np
import pytest

import tcreduce.emulate as em
from tcreduce import bounds
from tcreduce._device import KNOWN_GPUS
from tcreduce._layout import Cols, Flat, Rows, host_layout, host_problem_data
from tcreduce._plan import DeviceSpec, param_dict
from tcreduce.emulate import wmma as EW
from tcreduce.formats import numpy_dtype
from tcreduce.plans import wmma as W
from tcreduce.reference import exact_sum

H100, A100 = KNOWN_GPUS["H100"], KNOWN_GPUS["A100"]
F16, F32 = np.float16, np.float32
BF16 = numpy_dtype("bfloat16").type
FMTS = ("float16", "bfloat16")
DT = {"float16": F16, "bfloat16": BF16}


# ======================================================================================= independent reference
def _pmats(dt):
    p_row = np.zeros((16, 16), dt)
    p_row[0, :] = 1  # P: first row ones (operand A of seg_wmma_256*)
    p_col = np.zeros((16, 16), dt)
    p_col[:, 0] = 1  # P^T: first column ones (operand B)
    return p_row, p_col


PMATS = {fmt: _pmats(dt) for fmt, dt in DT.items()}


def _fmt_of(x) -> str:
    return "bfloat16" if np.asarray(x).dtype == BF16 else "float16"


def wmma_mma(a, b, c, model):
    """wmma::mma_sync m16n16k16 as compiled for sm_80/sm_90: two HMMA.16816 (m16n8k16; .BF16 for bf16), one per
    8-column half of N, each with the full k = 16. a, b float16 or bfloat16 [..., 16, 16] (one dtype); c float32
    [..., 16, 16]."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.dtype in (F16, BF16)
    c = np.broadcast_to(np.asarray(c, F32), np.broadcast_shapes(a.shape, b.shape))
    left = em.mma(a, b[..., :, :8], c[..., :, :8], model=model)
    right = em.mma(a, b[..., :, 8:], c[..., :, 8:], model=model)
    return np.concatenate([left, right], axis=-1)


def _f32_bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


def _rz16(v: float) -> float:
    """The float32 v truncated to its top 16 bits (a bf16 toward zero), via the IEEE encoding."""
    return struct.unpack("<f", struct.pack("<I", _f32_bits(v) & 0xFFFF0000))[0]


def ref_handoff_rows(S, model, fmt="float16"):
    """handoff_rows of kernels/wmma.cu on one 16x16 fp32 matrix S, element by element with Python scalars.
    float16: per row the largest finite magnitude, sh = 14 - floor(log2(amax)), w = ldexpf(v, sh) (one rounding to
    fp32), the three half parts (round to nearest even), then three wmma products with P^T (lo, mid, hi) from +0;
    column 0 scaled back. bfloat16: hi = RZ16(v), mid = RZ16(v - hi), lo = RZ16(v - hi - mid) from the IEEE bits
    (non-finite: hi = bf16(v), mid = lo = 0), three products, no scaling. Returns the 16 row results."""
    S = np.asarray(S, F32)
    p_col = PMATS[fmt][1]
    if fmt == "bfloat16":
        H = np.zeros((3, 16, 16), BF16)
        for i in range(16):
            for j in range(16):
                v = float(S[i, j])
                if math.isfinite(v):
                    h = _rz16(v)
                    r1 = float(F32(F32(v) - F32(h)))
                    m = _rz16(r1)
                    lo = _rz16(float(F32(F32(r1) - F32(m))))
                    H[:, i, j] = BF16(h), BF16(m), BF16(lo)  # each exactly a bf16: the conversion is exact
                else:
                    H[:, i, j] = BF16(v), BF16(0), BF16(0)
        d = wmma_mma(H[2], p_col, F32(0), model)
        d = wmma_mma(H[1], p_col, d, model)
        d = wmma_mma(H[0], p_col, d, model)
        return np.array([d[i, 0] for i in range(16)], F32)
    H = np.zeros((3, 16, 16), F16)  # hi, mid, lo
    shifts = []
    for i in range(16):
        fin = [abs(float(v)) for v in S[i] if math.isfinite(float(v))]
        amax = max(fin) if fin else 0.0
        sh = 14 - (math.frexp(amax)[1] - 1) if amax > 0 else 0
        shifts.append(sh)
        for j in range(16):
            v = float(S[i, j])
            w = F32(math.ldexp(v, sh)) if math.isfinite(v) else F32(v)
            hi = F16(w)
            if math.isfinite(float(w)):
                r1 = F32(w - F32(hi))
                mid = F16(r1)
                lo = F16(F32(r1 - F32(mid)))
            else:
                mid = lo = F16(0)
            H[:, i, j] = hi, mid, lo
    d = wmma_mma(H[2], p_col, F32(0), model)
    d = wmma_mma(H[1], p_col, d, model)
    d = wmma_mma(H[0], p_col, d, model)
    return np.array([F32(math.ldexp(float(d[i, 0]), -shifts[i])) for i in range(16)], F32)


def ref_r16n(x, model):
    """wmma_rows16: groups of 16 rows, chunks of 16 columns as A_c, acc = A_c * P^T + acc from +0; column 0."""
    m, k = x.shape
    groups, chunks = -(-m // 16), -(-k // 16)
    padded = np.zeros((groups * 16, chunks * 16), x.dtype)
    padded[:m, :k] = x
    p_col = PMATS[_fmt_of(x)][1]
    acc = np.zeros((groups, 16, 16), F32)
    for c in range(chunks):
        a = padded[:, 16 * c:16 * c + 16].reshape(groups, 16, 16)  # A_c[i][j] = x[16g + i][16c + j]
        acc = wmma_mma(a, p_col, acc, model)
    return acc[:, :, 0].reshape(-1)[:m]


def _tiles_of_row(row, tiles):
    buf = np.zeros(tiles * 256, row.dtype)
    buf[:row.size] = row
    return buf.reshape(tiles, 16, 16)  # A_t[i][j] = x[256t + 16i + j]


def ref_r256n(x, model):
    """wmma_rows256n: per row acc = P * A_t + acc from +0 over its tiles; S = acc; out = handoff(S) row 0."""
    m, k = x.shape
    tiles = -(-k // 256)
    fmt = _fmt_of(x)
    out = np.zeros(m, F32)
    for r in range(m):
        a = _tiles_of_row(x[r], tiles)
        acc = np.zeros((16, 16), F32)
        for t in range(tiles):
            acc = wmma_mma(PMATS[fmt][0], a[t], acc, model)
        out[r] = ref_handoff_rows(acc, model, fmt)[0]
    return out


def ref_warp_fold(lanes):
    """The xor butterfly of tcr::warp_fold on 32 fp32 lane values, lane by lane; returns lane 0."""
    v = [F32(x) for x in lanes]
    for off in (16, 8, 4, 2, 1):
        v = [F32(v[l] + v[l ^ off]) for l in range(32)]
    return v[0]


def ref_combine_partials(p, block):
    """tcr::combine_partials<block>: thread i adds p[i], p[i + block], ... from 0.0f; block_fold."""
    acc = [F32(0)] * block
    for i in range(block):
        for j in range(i, len(p), block):
            acc[i] = F32(acc[i] + F32(p[j]))
    warps = block // 32
    totals = [ref_warp_fold(acc[32 * w:32 * w + 32]) for w in range(warps)]
    if warps == 1:
        return totals[0]
    return ref_warp_fold(totals + [F32(0)] * (32 - warps))


def ref_block(x, splits, tpb, warps, model):
    """wmma_rows_block: block (row, split) has tiles [s*tpb, min((s+1)*tpb, T)); warp w chains t = s*tpb + w + 8j;
    row w of S = row 0 of warp w's acc (rows >= warps zero); y = handoff(S); S' = (row 0 = y, zeros); partial =
    handoff(S') row 0; splits > 1: combine_partials."""
    m, k = x.shape
    T = -(-k // 256)
    fmt = _fmt_of(x)
    out = np.zeros(m, F32)
    for r in range(m):
        a = _tiles_of_row(x[r], T)
        partials = []
        for s in range(splits):
            t_end = min((s + 1) * tpb, T)
            S = np.zeros((16, 16), F32)
            for w in range(warps):
                acc = np.zeros((16, 16), F32)
                t = s * tpb + w
                while t < t_end:
                    acc = wmma_mma(PMATS[fmt][0], a[t], acc, model)
                    t += warps
                S[w] = acc[0]
            y = ref_handoff_rows(S, model, fmt)
            S2 = np.zeros((16, 16), F32)
            S2[0] = y
            partials.append(ref_handoff_rows(S2, model, fmt)[0])
        out[r] = partials[0] if splits == 1 else ref_combine_partials(partials, 32 * warps)
    return out


def ref_plan(plan, data, model):
    p = param_dict(plan)
    rows = p["rows"]
    x = np.asarray(data)
    if isinstance(plan.problem, Cols):
        x = np.transpose(x, (0, 2, 1)).reshape(rows.m, rows.k)  # the transposing copy: row i*b + l = x[i, :, l]
    x = x.reshape(rows.m, rows.k)
    if p["variant"] == "r16n":
        return ref_r16n(x, model)
    if p["variant"] == "r256n":
        return ref_r256n(x, model)
    return ref_block(x, p["splits"], p["tpb"], p["warps"], model)


def same_bits(a, b) -> bool:
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def _data_for(x, axis):
    """(layout, the memory the kernel reads) as tcreduce.emulate.sum computes them."""
    layout, _ = host_layout(x, axis)
    return layout, host_problem_data(x, layout)


def _wide(rng, shape, fmt="float16"):
    """Mixed signs and magnitudes over much of the format's range (fp16: hand-offs with large shifts; bf16: 2^-135 to
    2^100, subnormals and zeros included, partial sums whose bits span far more than 24 places), cancellation."""
    if fmt == "bfloat16":
        return (rng.standard_normal(shape) * 2.0 ** rng.integers(-135, 100, shape)).astype(BF16)
    return (rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 12, shape)).clip(-6e4, 6e4).astype(F16)


# ======================================================================================= hand-checked cases
def test_registered():
    assert "wmma" in em.emulated_methods()
    from tcreduce.emulate.api import EMULATORS

    assert EMULATORS["wmma"] is EW.emulate
    assert bounds.STRUCTURES["wmma"] is bounds._wmma_depth


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("model", ["H100", "A100"])
def test_single_tile_every_variant(rng, model, fmt):
    """One 256-element tile (a full sum of 256 values) through each variant against the literal replay, plus the
    arithmetic spelled out: r256n's result is HANDOFF of the 16 column sums TC(+0; x[j], x[16+j], ..., x[240+j])."""
    x = rng.uniform(-1, 1, 256).astype(DT[fmt])
    p_row, p_col = PMATS[fmt]
    for variant in W.VARIANTS:
        plan = W.plan_wmma(Flat(256), fmt, "float32", H100, variant=variant)
        got = EW.emulate(plan, x, model)
        assert same_bits(got, ref_plan(plan, x, model)), variant
    # r16n on Rows(1, 256): one row, 16 chained products of 16 consecutive values
    acc = np.zeros((16, 16), F32)
    for c in range(16):
        a = np.zeros((16, 16), DT[fmt])
        a[0] = x[16 * c:16 * c + 16]
        acc = wmma_mma(a, p_col, acc, model)
    plan = W.plan_wmma(Flat(256), fmt, "float32", H100, variant="r16n")
    assert same_bits(EW.emulate(plan, x, model), acc[0:1, 0])
    # r256n: column sums in the tensor core, then the hand-off
    cols = wmma_mma(p_row, x.reshape(16, 16), F32(0), model)[0]
    plan = W.plan_wmma(Flat(256), fmt, "float32", H100, variant="r256n")
    S = np.zeros((16, 16), F32)
    S[0] = cols
    assert same_bits(EW.emulate(plan, x, model), ref_handoff_rows(S, model, fmt)[:1])
    # the result is close to the exact sum (two tensor-core sums of 16)
    assert abs(float(EW.emulate(plan, x, model)[0]) - float(np.sum(x.astype(np.float64)))) < 1e-5


def _handoff_rows_for_test(rng, fmt):
    """Rows of 16 fp32 values for the hand-off: wildly different scales, zeros, fp32 subnormals (for bf16 also values
    that are no multiple of 2^-133, where its split drops bits), values too small for the fp16 split, inf, NaN."""
    rows = []
    for _ in range(40):
        e = int(rng.integers(-140, 126))
        v = np.ldexp(rng.uniform(-2, 2, 16), e + rng.integers(-45, 1, 16)).astype(F32)
        rows.append(v)
    if fmt == "bfloat16":  # random fp32 bit patterns (every exponent, the low mantissa bits full)
        bits = rng.integers(0, 0x7F800000, (8, 16), dtype=np.uint32) | (rng.integers(0, 2, (8, 16), dtype=np.uint32)
                                                                         << np.uint32(31))
        rows += list(bits.view(F32))
    rows.append(np.zeros(16, F32))
    rows.append(np.full(16, 2.0 ** -149, F32))
    rows.append(np.full(16, -(2.0 ** -133) * 3, F32))
    rows.append(np.array([3e38, -3e38] + [1.0] * 14, F32))
    rows.append(np.array([np.inf, 1.0, -2.5] + [0.0] * 13, F32))
    rows.append(np.array([np.nan, 7.0] + [0.0] * 14, F32))
    rows.append(np.array([np.inf, -np.inf] + [1.0] * 14, F32))
    rows.append(np.array([-0.0] * 16, F32))
    rows.append(np.array([2.0 ** 40, 2.0 ** -20, -(2.0 ** -30)] + [3.0] * 13, F32))
    M = np.stack(rows)
    return np.concatenate([M, np.zeros((-len(M) % 16, 16), F32)])


@pytest.mark.parametrize("fmt", FMTS)
def test_handoff_matches_literal_replay(rng, fmt):
    """The vectorised hand-off against the element-by-element one (fp16: shifts from -113 to +163 and values too
    small for the split; bf16: every exponent, fp32 subnormals, values with bits below 2^-133), zeros, inf and NaN."""
    M = _handoff_rows_for_test(rng, fmt)
    for model in ("H100", "A100"):
        got = EW.handoff(M, model, fmt)
        want = np.concatenate([ref_handoff_rows(M[i:i + 16], model, fmt) for i in range(0, len(M), 16)])
        assert same_bits(got, want)
    # a zero row hands off +0 (the stacked rows past the warps), a row of -0 too
    assert same_bits(EW.handoff(np.zeros((1, 16), F32), "H100", fmt), np.zeros(1, F32))
    assert same_bits(EW.handoff(np.full((1, 16), -0.0, F32), "H100", fmt), np.zeros(1, F32))
    with pytest.raises(ValueError, match="fmt"):
        EW.handoff(M[:1], "H100", "float8_e4m3fn")


def _bf16_split_by_integers(v: float) -> tuple[float, float, float]:
    """An independent model of the bf16 split on one finite fp32 value: with 2^e its leading bit (e >= -126 for the
    bf16 subnormal step), hi keeps the multiples of 2^(e-7), rounding toward zero; the rest r likewise with its own
    leading bit; lo = what remains, dropped below 2^-133 (toward zero). Exact rational arithmetic."""
    from fractions import Fraction

    def trunc8(x: Fraction) -> Fraction:
        if x == 0:
            return Fraction(0)
        e = max(math.floor(math.log2(abs(x))), -126)
        while Fraction(2) ** e > abs(x):  # floating log2 may be off by one
            e -= 1
        while Fraction(2) ** (e + 1) <= abs(x):
            e += 1
        e = max(e, -126)
        step = Fraction(2) ** (e - 7)
        q = abs(x) // step
        return math.copysign(1, x) * q * step

    x = Fraction(v)
    hi = trunc8(x)
    mid = trunc8(x - hi)
    rest = x - hi - mid
    lo = trunc8(rest)
    return hi, mid, lo


def test_bf16_split_is_exact_for_multiples_of_2_pow_m133(rng):
    """kernels/wmma.cu's claim: hi + mid + lo == v exactly whenever v is a multiple of 2^-133 (every fp32 from
    2^-110 up, and every partial sum of bf16 data), the parts share v's sign and are bf16 values; otherwise only bits
    below 2^-133 are lost. The emulator's split (bit masks) agrees with an integer model part for part."""
    # multiples of 2^-133 at every scale: random 24-bit significands at exponents -133 .. 127 (and small integers)
    sig = rng.integers(1, 1 << 24, 6000)
    e = rng.integers(-133, 105, 6000)
    v = np.ldexp(sig.astype(np.float64), e).astype(F32)  # exact: 24 bits, lowest bit >= 2^-133
    v = np.concatenate([v, -v[:3000], np.ldexp(np.arange(1, 200), -133).astype(F32),
                        np.array([3.3895314e38, -3.3895314e38, 2.0 ** -126, 2.0 ** -133], F32)])
    v = v[np.isfinite(v)]
    assert np.all(np.ldexp(v.astype(np.float64), 133) % 1 == 0)
    hi, mid, lo = EW.split_bf16(v)
    recon = hi.astype(np.float64) + mid.astype(np.float64) + lo.astype(np.float64)
    assert np.array_equal(recon, v.astype(np.float64))
    for part in (hi, mid, lo):
        p64 = part.astype(np.float64)
        assert np.all((p64 == 0) | (np.sign(p64) == np.sign(v)))
    assert np.array_equal(np.abs(hi.astype(np.float64)) + np.abs(mid.astype(np.float64))
                          + np.abs(lo.astype(np.float64)), np.abs(v.astype(np.float64)))
    # not multiples of 2^-133 (fp32 subnormals, random fp32 bit patterns): the loss is below 2^-133, toward zero
    bits = rng.integers(0, 0x00800000, 3000, dtype=np.uint32)
    w = np.concatenate([bits.view(F32), v])
    hi, mid, lo = EW.split_bf16(w)
    recon = hi.astype(np.float64) + mid.astype(np.float64) + lo.astype(np.float64)
    loss = w.astype(np.float64) - recon
    assert np.all(np.abs(loss) < 2.0 ** -133) and np.all(loss * w >= 0)
    # part for part against the integer model (a sample)
    for i in rng.choice(w.size, 400, replace=False):
        want = _bf16_split_by_integers(float(w[i]))
        got = (float(hi[i]), float(mid[i]), float(lo[i]))
        assert all(float(a) == b for a, b in zip(want, got)), (float(w[i]), want, got)
    # non-finite: hi keeps inf / NaN, mid = lo = 0
    hi, mid, lo = EW.split_bf16(np.array([np.inf, -np.inf, np.nan], F32))
    assert hi[0] == np.inf and hi[1] == -np.inf and np.isnan(hi[2])
    assert not np.any(mid.astype(F32)) and not np.any(lo.astype(F32))


def test_bf16_partial_sums_are_multiples_of_2_pow_m133(rng):
    """Why the bf16 hand-off is exact: the values handed off (column chains of bf16 tiles, tensor-core sums of
    parts, fp32 additions) stay multiples of 2^-133, at every scale from bf16 subnormals up."""
    for scale in (-133, -128, -120, -60, 0, 60, 100):
        x = (rng.standard_normal((64, 1024)) * 2.0 ** (scale + rng.integers(0, 12, (64, 1024)))).astype(BF16)
        tiles = x.reshape(64, 4, 256)
        c = EW._column_chains(tiles, "H100")  # [64, 16] what r256n hands off
        c64 = c.astype(np.float64)
        assert np.all(np.isfinite(c64)) and np.all(np.ldexp(c64, 133) % 1 == 0), scale
        d = EW.handoff(c.reshape(4, 16, 16), "H100", "bfloat16")  # then what the block variant hands off again
        assert np.all(np.ldexp(d.astype(np.float64), 133) % 1 == 0)
        hi, mid, lo = EW.split_bf16(c)
        assert np.array_equal(hi.astype(np.float64) + mid.astype(np.float64) + lo.astype(np.float64), c64)


@pytest.mark.parametrize("fmt", FMTS)
def test_zero_products_leave_the_accumulator_alone(fmt):
    """The emulator appends zero tiles to chains of warps with fewer tiles: TC(c; 0..0) == c bit for bit for every
    c an accumulator can hold (all but -0, which becomes +0; accumulators start at +0 and never hold -0)."""
    bits = np.random.default_rng(5).integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
    c = np.concatenate([bits.view(F32), np.array([0.0, 2.0 ** -149, -(2.0 ** -126), 3.4e38, np.inf, -np.inf, np.nan],
                                                  F32)])
    for model in ("H100", "H200", "A100"):
        d = em.fused_rowsum(np.zeros((c.size, 32), DT[fmt]), c, model=model)
        nan = np.isnan(c)
        assert np.all(np.isnan(d[nan]))
        assert same_bits(d[~nan], np.where(c[~nan] == 0, F32(0), c[~nan]))


SMALL_PROBLEMS = [
    (Flat(1), None), (Flat(17), None), (Flat(255), None), (Flat(257), None), (Flat(1000), None), (Flat(4097), None),
    (Rows(3, 15, 15), None), (Rows(20, 40, 40), None), (Rows(17, 16, 16), None), (Rows(3, 600, 600), None),
    (Rows(2, 2500, 2500), None), (Rows(33, 255, 255), None),
]


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("variant", W.VARIANTS)
@pytest.mark.parametrize("prob", [p for p, _ in SMALL_PROBLEMS], ids=str)
def test_small_problems_match_literal_replay(prob, variant, fmt, rng):
    """Every variant forced on small problems with tails (k not a multiple of 16 / 256, m not a multiple of 16)."""
    if isinstance(prob, Flat):
        data = _wide(rng, prob.n, fmt)
    else:
        data = _wide(rng, (prob.m, prob.k), fmt)
    plan = W.plan_wmma(prob, fmt, "float32", H100, variant=variant)
    for model in ("H100", "A100"):
        assert same_bits(EW.emulate(plan, data, model), ref_plan(plan, data, model)), plan.describe()


@pytest.mark.parametrize("fmt", FMTS)
def test_block_variant_idle_warps_and_several_splits(rng, fmt):
    """On a 1-SM device the block variant splits a 98-tile row into 8 blocks of 13 tiles: warps chain 2 products,
    the last block has 7 tiles (warp 7 idle), and the last block to arrive combines 8 partials."""
    tiny = DeviceSpec("H100", 1, (9, 0))
    prob = Rows(2, 98 * 256 - 100, 98 * 256)
    plan = W.plan_wmma(prob, fmt, "float32", tiny, variant="block")
    p = param_dict(plan)
    assert (p["splits"], p["tpb"], p["chain"]) == (4, 25, 4)
    x = _wide(rng, (2, 98 * 256), fmt)[:, :prob.k]
    for model in ("H100", "A100"):
        assert same_bits(EW.emulate(plan, x, model), ref_plan(plan, x, model))
    plan = W.plan_wmma(Flat(98 * 256 - 3), fmt, "float32", tiny, variant="block")
    p = param_dict(plan)
    assert (p["splits"], p["tpb"], p["chain"]) == (8, 13, 2)
    x = _wide(rng, 98 * 256 - 3, fmt)
    assert same_bits(EW.emulate(plan, x, "H100"), ref_plan(plan, x, "H100"))


def test_block_variant_more_than_256_splits(rng):
    """A full sum of 2^20 + 123 values on an H100: 513 blocks of 8 tiles; the combination's threads add up to
    three partials each before the block fold. Two rows of 2^19 + 5: 257 blocks each (bf16)."""
    n = (1 << 20) + 123
    plan = W.plan_wmma(Flat(n), "float16", "float32", H100)
    p = param_dict(plan)
    assert p["variant"] == "block" and p["splits"] == 513 and p["tpb"] == 8
    x = _wide(rng, n)
    assert same_bits(EW.emulate(plan, x, "H100"), ref_plan(plan, x, "H100"))
    k = (1 << 19) + 5
    plan = W.plan_wmma(Rows(2, k, k), "bfloat16", "float32", H100)
    p = param_dict(plan)
    assert p["variant"] == "block" and p["splits"] == 257 and p["tpb"] == 8
    x = _wide(rng, (2, k), "bfloat16")
    assert same_bits(EW.emulate(plan, x, "A100"), ref_plan(plan, x, "A100"))


@pytest.mark.parametrize("fmt", FMTS)
def test_r256n_long_chain_and_cols_match_literal_replay(rng, fmt):
    plan = W.plan_wmma(Rows(2, 4096 + 255, 4096 + 256), fmt, "float32", H100, variant="r256n")
    x = _wide(rng, (2, 4096 + 255), fmt)
    assert same_bits(EW.emulate(plan, x, "H100"), ref_plan(plan, x, "H100"))
    x = _wide(rng, (3, 37, 5), fmt)
    layout, data = _data_for(x, 1)
    assert isinstance(layout.problem, Cols)
    for variant in W.VARIANTS:
        plan = W.plan_wmma(layout.problem, fmt, "float32", H100, variant=variant)
        assert same_bits(EW.emulate(plan, data, "H100"), ref_plan(plan, data, "H100")), variant


def test_wrong_data_dtype_for_the_plan():
    plan = W.plan_wmma(Flat(100), "bfloat16", "float32", H100)
    with pytest.raises(TypeError, match="bfloat16"):
        EW.emulate(plan, np.ones(100, F16), "H100")
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        EW.emulate(plan, np.ones(100, F32), "H100")


# ======================================================================================= error bounds
FLAT_SIZES = [1, 2, 15, 16, 17, 255, 256, 257, 1000, 2047, 2049, 4097, 65537, (1 << 20) + 3]
ROW_SHAPES = [(1, 1), (3, 15), (17, 16), (100, 17), (33, 255), (7, 256), (16, 257), (5, 4097), (3, 100_001),
              (300, 64), (64, 300), (2048, 40), (40, 5000)]
COL_CASES = [((16, 1000), 0), ((1000, 40), 0), ((40, 33), 0), ((5, 17, 40), 1), ((3, 300, 8), 1), ((2, 5000, 3), 1),
             ((7, 3, 5), (0, 2)), ((9, 1, 4), 1)]
KINDS = {"float16": ["uniform", "positive", "large", "wide", "cancel"],
         "bfloat16": ["uniform", "positive", "large", "wide", "cancel", "tiny", "huge"]}
KIND_CASES = [(fmt, kind) for fmt in FMTS for kind in KINDS[fmt]]


def _dist(rng, shape, kind, fmt="float16"):
    dt = DT[fmt]
    if kind == "uniform":
        return rng.uniform(-0.25, 0.75, shape).astype(dt)
    if kind == "positive":  # one sign: truncation errors never cancel
        return rng.uniform(0, 1, shape).astype(dt)
    if kind == "large":  # big values: hand-offs with negative shifts, fp32 partials far above fp16's range
        return (rng.uniform(3e4, 6e4, shape) * rng.choice([-1, 1], shape, p=[0.2, 0.8])).astype(dt)
    if kind == "wide":
        return _wide(rng, shape, fmt)
    if kind == "cancel":  # pairs x, -x plus a little
        x = rng.uniform(-1000, 1000, shape).astype(dt)
        flat = x.reshape(-1)
        half = flat.size // 2
        flat[half:2 * half] = -flat[:half][rng.permutation(half)] if half else flat[half:2 * half]
        return x
    if kind == "tiny":  # bf16 only: around and below 2^-126 (subnormals: the hand-off's 2^-133 floor matters)
        return (rng.uniform(0.5, 1, shape) * 2.0 ** rng.integers(-134, -118, shape)).astype(dt)
    if kind == "huge":  # bf16 only: far beyond fp16's range, sums stay below fp32's overflow
        return (rng.uniform(-0.5, 1, shape) * 2.0 ** rng.integers(95, 104, shape)).astype(dt)
    raise ValueError(kind)


def _check_bound(got, x, axis, plan, gpu):
    ex = np.asarray(exact_sum(x, axis=axis), np.float64).reshape(-1)
    abs_sum = np.sum(np.abs(x, dtype=np.float64), axis=axis).reshape(-1)
    bound = bounds.error_bound_factor(plan, gpu) * abs_sum + 2.0 ** -52 * np.abs(ex)
    err = np.abs(np.asarray(got, np.float64).reshape(-1) - ex)
    bad = ~(err <= bound)
    assert not bad.any(), (f"{int(bad.sum())}/{bad.size} beyond the bound; first err {err[bad][0]:.3e} bound "
                           f"{bound[bad][0]:.3e}\n{plan.describe()}")


def _views(x, axis):
    """The array, a misaligned view (starts one element later), for 2-D+ a view with a row stride, and a view with a
    negative stride along the last axis."""
    yield "whole", x
    if axis is None:
        if x.size > 1:
            yield "misaligned", x.reshape(-1)[1:]
    elif x.shape[-1] > 1:
        yield "misaligned", x[..., 1:]
    if x.ndim >= 2 and x.shape[-1] > 2:
        yield "strided", x[..., 1:-1]
    yield "reversed", x[..., ::-1]


@pytest.mark.parametrize("gpu", ["H100", "A100"])
@pytest.mark.parametrize("fmt,kind", KIND_CASES)
def test_full_sums_within_bound(gpu, fmt, kind, rng):
    for n in FLAT_SIZES:
        x = _dist(rng, n + 1, kind, fmt)
        for name, xv in _views(x, None):
            got = em.sum(xv, method="wmma", gpu=gpu)
            ex = exact_sum(xv)
            assert got.dtype == F32 and got.shape == ()
            b = bounds.error_bound(xv, method="wmma", gpu=gpu) + 2.0 ** -52 * abs(float(ex))
            assert abs(float(got) - float(ex)) <= b, (n, name, float(got), float(ex), b)


@pytest.mark.parametrize("gpu", ["H100", "A100"])
@pytest.mark.parametrize("fmt,kind", KIND_CASES)
def test_row_and_column_sums_within_bound(gpu, fmt, kind, rng):
    cases = [(s, -1) for s in ROW_SHAPES] + COL_CASES
    for shape, axis in cases:
        x = _dist(rng, shape, kind, fmt)
        for name, xv in _views(x, axis):
            if xv.size == 0:
                continue
            got = em.sum(xv, axis=axis, method="wmma", gpu=gpu)
            ex = np.asarray(exact_sum(xv, axis=axis), np.float64)
            assert got.shape == ex.shape and got.dtype == F32
            b = bounds.error_bound(xv, axis, method="wmma", gpu=gpu) + 2.0 ** -52 * np.abs(ex)
            err = np.abs(got.astype(np.float64) - ex)
            assert np.all(err <= b), (shape, axis, name, float(np.max(err - b)))


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("variant", W.VARIANTS)
def test_every_forced_variant_within_bound(variant, fmt, rng):
    """Forced variants (long chains for r16n / r256n on long rows, the block variant on short rows)."""
    cases = [(s, -1) for s in ROW_SHAPES if s[0] * s[1] <= 1 << 18]
    cases += [(((1 << 16) + 5,), None), ((257,), None)] + COL_CASES
    for shape, axis in cases:
        for gpu in ("H100", "A100"):
            x = _dist(rng, shape, "positive" if gpu == "A100" else "wide", fmt)
            for name, xv in _views(x, axis):
                if xv.size == 0:
                    continue
                layout, data = _data_for(xv, axis)
                plan = W.plan_wmma(layout.problem, fmt, "float32", KNOWN_GPUS[gpu], variant=variant)
                got = EW.emulate(plan, data, gpu)
                _check_bound(got, xv, axis, plan, gpu)


@pytest.mark.parametrize("fmt", FMTS)
def test_bound_is_reasonably_tight(fmt):
    """An adversarial input gets close to the a-priori bound: 1024 followed by values just below 2^-13, which every
    product truncates (to the grid 2^-15 below the accumulator's exponent) and rounds toward zero (fp32 ulp 2^-13),
    so each chained product loses nearly all it may (bf16: 2^-13 (1 - 2^-8), the largest bf16 below 2^-13)."""
    v = np.ldexp(2 - 2.0 ** -10, -14) if fmt == "float16" else np.ldexp(2 - 2.0 ** -7, -14)
    for k, variant, gpu, least in [(256, "r16n", "H100", 0.5), (256, "r16n", "A100", 0.3),
                                   (4096, "block", "H100", 0.15), (1 << 16, "block", "H100", 0.15)]:
        x = np.full((16, k), v, DT[fmt])
        x[:, 0] = 1024
        got = em.sum(x, axis=-1, method="wmma", gpu=gpu)
        assert param_dict(W.plan_wmma(Rows(16, k, k), fmt, "float32", KNOWN_GPUS[gpu]))["variant"] == variant
        ratio = np.abs(got - exact_sum(x, axis=-1)) / bounds.error_bound(x, -1, method="wmma", gpu=gpu)
        assert np.all(ratio <= 1) and np.all(ratio > least), (k, gpu, ratio.max())


def test_depth_structure():
    d = bounds.STRUCTURES["wmma"]
    pl = W.plan_wmma(Rows(1 << 20, 100, 100), "float16", "float32", H100)
    assert d(pl) == bounds.Depth(7, 0)
    assert d(W.plan_wmma(Rows(1 << 20, 100, 100), "float16", "float32", A100)) == bounds.Depth(14, 0)  # 2 blocks
    assert d(W.plan_wmma(Rows(1 << 16, 4000, 4000), "float16", "float32", H100)) == bounds.Depth(16 + 3, 1)
    pl = W.plan_wmma(Flat(1 << 28), "float16", "float32", H100)
    p = param_dict(pl)
    assert p["splits"] == 4096 and p["chain"] == 32
    assert d(pl) == bounds.Depth(32 + 6, 2 + (4096 // 256 - 1) + 5 + 3)
    assert d(W.plan_wmma(Flat(1000), "float16", "float32", H100)) == bounds.Depth(1 + 6, 2)
    # the longest warp chain counts min(tpb, tiles): one row of 3 tiles in a block of 8 warps chains 1 product
    assert d(W.plan_wmma(Rows(1, 700, 700), "float16", "float32", H100, variant="block")) == bounds.Depth(7, 2)
    # unknown GPU: 4 blocks per mma (the most any model has)
    other = DeviceSpec("RTX 9999", 100, (9, 0))
    assert d(W.plan_wmma(Rows(1 << 20, 100, 100), "float16", "float32", other)) == bounds.Depth(28, 0)
    # bf16: the same products; the hand-off's exact split adds no rounding step
    assert d(W.plan_wmma(Rows(1 << 20, 100, 100), "bfloat16", "float32", H100)) == bounds.Depth(7, 0)
    assert d(W.plan_wmma(Rows(1 << 16, 4000, 4000), "bfloat16", "float32", H100)) == bounds.Depth(16 + 3, 0)
    assert d(W.plan_wmma(Flat(1 << 28), "bfloat16", "float32", H100)) == bounds.Depth(32 + 6, (4096 // 256 - 1) + 5 + 3)
    assert d(W.plan_wmma(Flat(1000), "bfloat16", "float32", A100)) == bounds.Depth(2 * (1 + 6), 0)


# ======================================================================================= the rest
@pytest.mark.parametrize("fmt", FMTS)
def test_emulating_twice_gives_the_same_bits(rng, fmt):
    for shape, axis in [((100_003,), None), ((33, 1000), -1), ((16, 1000), 0), ((5, 17, 40), 1)]:
        x = _wide(rng, shape, fmt)
        a = em.sum(x, axis=axis, method="wmma", gpu="H200")
        b = em.sum(x.copy(), axis=axis, method="wmma", gpu="H200")
        assert same_bits(a, b)


@pytest.mark.parametrize("fmt", FMTS)
def test_alignment_does_not_change_the_bits(rng, fmt):
    """Masked scalar loads (misaligned) and 16-byte loads stage the same values: same bits as a fresh copy."""
    x = _wide(rng, (40, 301), fmt)
    for view, axis in [(x.reshape(-1)[1:], None), (x[:, 1:], -1), (x[1:, 3:], 0), (x[:, 1:-3], -1)]:
        a = em.sum(view, axis=axis, method="wmma", gpu="H100")
        b = em.sum(np.ascontiguousarray(view), axis=axis, method="wmma", gpu="H100")
        assert same_bits(a, b)


@pytest.mark.parametrize("fmt", FMTS)
def test_cols_equal_their_transposition(rng, fmt):
    """Cols go through a bit-exact transposing copy, so an other-axis sum equals the last-axis sum of the
    transposed copy when both plan the same rows variant."""
    x = _wide(rng, (3, 300, 8), fmt)
    a = em.sum(x, axis=1, method="wmma", gpu="H100")
    b = em.sum(np.ascontiguousarray(np.transpose(x, (0, 2, 1))), axis=-1, method="wmma", gpu="H100")
    assert same_bits(a, b)


@pytest.mark.parametrize("fmt", FMTS)
def test_output_dtypes(rng, fmt):
    x = _wide(rng, (20, 700), fmt)
    f32 = em.sum(x, axis=-1, method="wmma", gpu="H100")
    with np.errstate(over="ignore"):  # wide bf16 sums overflow float16 outputs, as a float16 result must
        assert same_bits(em.sum(x, axis=-1, method="wmma", gpu="H100", dtype="float16").astype(F32),
                         f32.astype(F16).astype(F32))
    f64 = em.sum(x, axis=-1, method="wmma", gpu="H100", dtype="float64")
    assert f64.dtype == np.float64 and np.array_equal(f64, f32.astype(np.float64))
    k = em.sum(x, axis=-1, method="wmma", gpu="H100", keepdims=True)
    assert k.shape == (20, 1) and same_bits(k.reshape(-1), f32)


@pytest.mark.parametrize("fmt", FMTS)
def test_special_values(rng, fmt):
    for variant in W.VARIANTS:
        x = rng.uniform(-1, 1, (4, 600)).astype(DT[fmt])
        x[0, 5] = np.inf
        x[1, 300] = -np.inf
        x[2, 7] = np.nan
        x[3, 1] = np.inf
        x[3, 599] = -np.inf
        layout, data = _data_for(x, -1)
        plan = W.plan_wmma(layout.problem, fmt, "float32", H100, variant=variant)
        got = EW.emulate(plan, data, "H100")
        assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2]) and np.isnan(got[3]), variant
    # overflow of the input format is no problem for fp32 partials: fp16 64 x 60000 fits easily; bf16 values near
    # FLT_MAX / 2^15 summed 2^14 times stay finite and exact through the unscaled hand-off
    big = 6e4 if fmt == "float16" else 2.0 ** 112
    x = np.full(64 * 256, big, DT[fmt])
    got = float(em.sum(x, method="wmma", gpu="H100"))
    assert got == float(exact_sum(x))


@pytest.mark.parametrize("fmt", FMTS)
def test_speed(rng, fmt):
    """2^22 elements, full and last-axis sums, within a generous limit (measured here: ~0.1 s each)."""
    x = rng.uniform(-0.25, 0.75, 1 << 22).astype(DT[fmt])
    t = time.perf_counter()
    em.sum(x, method="wmma", gpu="H100")
    em.sum(x.reshape(1 << 16, 64), axis=-1, method="wmma", gpu="H100")
    em.sum(x.reshape(1 << 10, 1 << 12), axis=-1, method="wmma", gpu="H100")
    em.sum(x.reshape(64, 1 << 16), axis=0, method="wmma", gpu="H100")
    assert time.perf_counter() - t < 30
