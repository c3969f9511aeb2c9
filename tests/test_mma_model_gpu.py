"""GPU validation of the tensor-core model: single mma.sync m16n8k16 (f32.f16.f16.f32) on the GPU, through
kernels/mma_probe.cu, against tcreduce.emulate.mma_m16n8k16, bit for bit.

Over 10^5 MMAs, drawn from distributions that stress the model (whole fp16 exponent range, subnormals, mixed signs,
massive cancellation, accumulators near fp32 overflow or of a very different magnitude, ones operands, signed zeros,
inf/NaN). Float32 results are compared as bit patterns; any NaN equals any NaN. Match counts per distribution are
printed (``pytest -s``); a mismatch prints the first mismatching elements' operands in hex, so the model can be fixed.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from tcreduce.emulate import get_model, mma_m16n8k16

pytestmark = pytest.mark.gpu

N_PER_DIST = 10240  # MMAs per distribution; 12 distributions: 122,880 MMAs, 15.7 million D elements
F32_MAX = float(np.finfo(np.float32).max)


# ----------------------------------------------------------------------------------------------- operands
def f16_bits(rng, shape, field_lo: int = 0, field_hi: int = 30) -> np.ndarray:
    """Random finite fp16 values: uniform sign, exponent field in [field_lo, field_hi] (0: subnormal or zero),
    uniform 10-bit fraction."""
    sign = rng.integers(0, 2, shape, dtype=np.uint16) << np.uint16(15)
    field = rng.integers(field_lo, field_hi + 1, shape, dtype=np.uint16) << np.uint16(10)
    frac = rng.integers(0, 1024, shape, dtype=np.uint16)
    return (sign | field | frac).view(np.float16)


def f32_exp(rng, shape, e_lo: int, e_hi: int, p_zero: float = 0.0) -> np.ndarray:
    """Random fp32 values +-(1 + f) * 2^e, e uniform in [e_lo, e_hi] (clipped to normal exponents), plus
    fp32 subnormals where e < -126 was drawn, and zeros with probability p_zero."""
    e = rng.integers(e_lo, e_hi + 1, shape)
    sign = rng.integers(0, 2, shape).astype(np.uint32) << np.uint32(31)
    frac = rng.integers(0, 1 << 23, shape).astype(np.uint32)
    field = np.clip(e + 127, 0, 254).astype(np.uint32)  # e < -126 gives field 0: a subnormal
    x = (sign | (field << np.uint32(23)) | frac).view(np.float32)
    if p_zero:
        x = np.where(rng.random(shape) < p_zero, np.float32(0), x)
    return x


def dist_full_range(rng, n):
    return f16_bits(rng, (n, 16, 16)), f16_bits(rng, (n, 16, 8)), f32_exp(rng, (n, 16, 8), -50, 40, 0.1)


def dist_subnormal(rng, n):
    a = np.where(rng.random((n, 16, 16)) < 0.5, f16_bits(rng, (n, 16, 16), 0, 0), f16_bits(rng, (n, 16, 16), 1, 4))
    b = np.where(rng.random((n, 16, 8)) < 0.5, f16_bits(rng, (n, 16, 8), 0, 0), f16_bits(rng, (n, 16, 8), 1, 20))
    c = f32_exp(rng, (n, 16, 8), -149, -20, 0.25)  # zeros, fp32 subnormals, tiny normals near the products
    return a.astype(np.float16), b.astype(np.float16), c


def dist_mixed_sign_cancel(rng, n):
    # B[k + 8] = B[k] (powers of two: exact scaling) and A[m][k + 8] = -A[m][k]: the products cancel in pairs;
    # then a few A elements are perturbed, leaving a small residue of any size.
    half = f16_bits(rng, (n, 16, 8), 5, 25)
    a = np.concatenate([half, -half], axis=-1)
    pert = rng.random((n, 16, 16)) < 0.1
    a = np.where(pert, f16_bits(rng, (n, 16, 16), 0, 20), a).astype(np.float16)
    s = rng.integers(-8, 8, (n, 8, 8))
    b8 = (rng.choice([-1.0, 1.0], (n, 8, 8)) * 2.0 ** s).astype(np.float16)
    b = np.concatenate([b8, b8], axis=1)
    c = f32_exp(rng, (n, 16, 8), -40, 10, 0.5)
    return a, b, c


def dist_cancel_against_c(rng, n):
    # c = -(round-to-nearest fp32 of the exact product sum): D is the leftover after massive cancellation with c.
    a = f16_bits(rng, (n, 16, 16), 8, 22)
    b = f16_bits(rng, (n, 16, 8), 8, 22)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    c = (-exact).astype(np.float32)
    c = np.where(rng.random(c.shape) < 0.3, np.nextafter(c, np.float32(np.inf)), c).astype(np.float32)
    return a, b, c


def dist_near_overflow(rng, n):
    a = f16_bits(rng, (n, 16, 16), 24, 30)  # up to 65504
    b = f16_bits(rng, (n, 16, 8), 24, 30)
    c = f32_exp(rng, (n, 16, 8), 120, 127)
    special = rng.random(c.shape)
    c = np.where(special < 0.1, np.float32(F32_MAX), c)
    c = np.where((special >= 0.1) & (special < 0.2), np.float32(-F32_MAX), c).astype(np.float32)
    return a, b, c


def dist_far_accumulator(rng, n):
    # moderate products (about 2^-10 .. 2^10) and an accumulator anywhere in the fp32 range
    return f16_bits(rng, (n, 16, 16), 10, 20), f16_bits(rng, (n, 16, 8), 10, 20), f32_exp(rng, (n, 16, 8), -149, 127)


def dist_rounding_boundary(rng, n):
    # c in [1, 4), small products whose low bits straddle the alignment grid 2^-25 .. 2^-23
    a = f16_bits(rng, (n, 16, 16), 1, 14)
    b = f16_bits(rng, (n, 16, 8), 3, 16)
    big = rng.random((n, 16, 16)) < 0.1  # sometimes a product >= 2 in the block
    a = np.where(big, f16_bits(rng, (n, 16, 16), 15, 16), a).astype(np.float16)
    c = f32_exp(rng, (n, 16, 8), 0, 1)
    return a, b, c


def dist_ones_b(rng, n):
    return f16_bits(rng, (n, 16, 16)), np.ones((n, 16, 8), np.float16), f32_exp(rng, (n, 16, 8), -30, 30, 0.2)


def dist_ones_a(rng, n):
    return np.ones((n, 16, 16), np.float16), f16_bits(rng, (n, 16, 8)), f32_exp(rng, (n, 16, 8), -30, 30, 0.2)


def dist_powers_of_two_b(rng, n):
    # B = +-2^s (significand 1): the products are the A values rescaled, with the full unnormalised-exponent spread
    s = rng.integers(-24, 16, (n, 16, 8))
    b = (rng.choice([-1.0, 1.0], (n, 16, 8)) * 2.0 ** s).astype(np.float16)
    return f16_bits(rng, (n, 16, 16)), b, f32_exp(rng, (n, 16, 8), -60, 40, 0.2)


def dist_signed_zeros(rng, n):
    # zero products of both signs (+-0 times anything finite), some nonzero products that cancel, c = +-0 or tiny.
    # The first quarter of the MMAs has every product -0 (A = -0, B > 0) and c = -0, the second quarter every
    # product -0 (A = +0, B < 0) with c = -0: IEEE addition would give -0 there, the model gives +0.
    a = f16_bits(rng, (n, 16, 16), 10, 20)
    zero = rng.random((n, 16, 16)) < 0.9
    a = np.where(zero, np.where(rng.random((n, 16, 16)) < 0.5, np.float16(0.0), np.float16(-0.0)), a)
    a = a.astype(np.float16)
    b = f16_bits(rng, (n, 16, 8), 10, 20)
    c = np.where(rng.random((n, 16, 8)) < 0.5, np.float32(0.0), np.float32(-0.0))
    c = np.where(rng.random((n, 16, 8)) < 0.1, f32_exp(rng, (n, 16, 8), -149, -100), c).astype(np.float32)
    q = n // 4
    a[:q], b[:q] = np.float16(-0.0), np.abs(b[:q])
    a[q:2 * q], b[q:2 * q] = np.float16(0.0), -np.abs(b[q:2 * q])
    c[:2 * q] = np.float32(-0.0)
    return a, b, c


def dist_specials(rng, n):
    a = f16_bits(rng, (n, 16, 16), 5, 25)
    b = f16_bits(rng, (n, 16, 8), 5, 25)
    c = f32_exp(rng, (n, 16, 8), -20, 40, 0.1)
    specials16 = np.array([np.inf, -np.inf, np.nan, 0.0], np.float16)
    specials32 = np.array([np.inf, -np.inf, np.nan], np.float32)
    ma, mb, mc = rng.random(a.shape) < 0.02, rng.random(b.shape) < 0.02, rng.random(c.shape) < 0.05
    a = np.where(ma, specials16[rng.integers(0, 4, a.shape)], a).astype(np.float16)
    b = np.where(mb, specials16[rng.integers(0, 4, b.shape)], b).astype(np.float16)
    c = np.where(mc, specials32[rng.integers(0, 3, c.shape)], c).astype(np.float32)
    return a, b, c


DISTRIBUTIONS: dict[str, Callable] = {
    "full_range": dist_full_range,
    "subnormal": dist_subnormal,
    "mixed_sign_cancel": dist_mixed_sign_cancel,
    "cancel_against_c": dist_cancel_against_c,
    "near_overflow": dist_near_overflow,
    "far_accumulator": dist_far_accumulator,
    "rounding_boundary": dist_rounding_boundary,
    "ones_B": dist_ones_b,
    "ones_A": dist_ones_a,
    "powers_of_two_B": dist_powers_of_two_b,
    "signed_zeros": dist_signed_zeros,
    "specials": dist_specials,
}


# ------------------------------------------------------------------------------------------------- device
def _device_model() -> str:
    from tcreduce._device import current_device

    _, spec = current_device()
    try:
        return get_model(spec.name).name
    except ValueError:
        pass
    by_cc = {(9, 0): "H100", (8, 0): "A100"}
    if spec.cc not in by_cc:
        pytest.skip(f"no tensor-core model for {spec.name} (compute capability {spec.cc})")
    return by_cc[spec.cc]


def run_probe(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """D of one mma.sync per [16x16]x[16x8]+[16x8] triple, computed on the current GPU."""
    import cupy

    from tcreduce._compile import get_function
    from tcreduce._device import current_device

    device_id, spec = current_device()
    fn = get_function("mma_probe.cu", "mma_probe", device_id, spec.arch)
    n = a.shape[0]
    da = cupy.asarray(np.ascontiguousarray(a, dtype=np.float16))
    db = cupy.asarray(np.ascontiguousarray(b, dtype=np.float16))
    dc = cupy.asarray(np.ascontiguousarray(c, dtype=np.float32))
    dd = cupy.full((n, 16, 8), np.nan, dtype=np.float32)  # poisoned: an unwritten element cannot pass
    block = 256
    grid = (n * 32 + block - 1) // block
    args = (np.uint64(da.data.ptr), np.uint64(db.data.ptr), np.uint64(dc.data.ptr), np.uint64(dd.data.ptr),
            np.int64(n))
    fn((grid, 1, 1), (block, 1, 1), args, 0, cupy.cuda.get_current_stream(), False)
    return cupy.asnumpy(dd)


def _hex16(v: np.ndarray) -> str:
    return " ".join(f"{int(x):04x}" for x in np.asarray(v, np.float16).view(np.uint16))


def _hex32(v) -> str:
    return f"{int(np.asarray(v, np.float32).view(np.uint32)):08x}"


def compare(name: str, a, b, c, gpu: np.ndarray, emu: np.ndarray, show: int = 5) -> tuple[int, int, list[str]]:
    """(matches, total, report lines) with NaN == NaN."""
    gb, eb = gpu.view(np.uint32), emu.view(np.uint32)
    same = (gb == eb) | (np.isnan(gpu) & np.isnan(emu))
    total = same.size
    lines = []
    if not same.all():
        bad = np.argwhere(~same)
        lines.append(f"{name}: {total - int(same.sum())} of {total} D elements differ; first ones:")
        for t, i, j in bad[:show]:
            exact = float(np.dot(a[t, i].astype(np.float64), b[t, :, j].astype(np.float64))) + float(c[t, i, j])
            lines.append(f"  mma {t} D[{i}][{j}]: gpu {_hex32(gpu[t, i, j])} ({float(gpu[t, i, j])!r}) "
                         f"model {_hex32(emu[t, i, j])} ({float(emu[t, i, j])!r}) float64 A@B+C {exact!r}\n"
                         f"    A row  {_hex16(a[t, i])}\n    B col  {_hex16(b[t, :, j])}\n"
                         f"    C      {_hex32(c[t, i, j])}")
    return int(same.sum()), total, lines


def test_probe_layout_exact_integers():
    """Fragment layout check with small integers (every model computes them exactly): D = A @ B + C."""
    rng = np.random.default_rng(1)
    a = rng.integers(-8, 8, (64, 16, 16)).astype(np.float16)
    b = rng.integers(-8, 8, (64, 16, 8)).astype(np.float16)
    c = rng.integers(-100, 100, (64, 16, 8)).astype(np.float32)
    d = run_probe(a, b, c)
    want = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float32)
    bad = np.argwhere(d != want)
    assert bad.size == 0, f"{len(bad)} wrong elements (layout bug?), first at {bad[0].tolist()}: " \
                          f"gpu {d[tuple(bad[0])]} want {want[tuple(bad[0])]}"


def test_mma_model_bit_exact_on_gpu():
    from tcreduce._device import current_device

    model = _device_model()
    print(f"\nGPU: {current_device()[1].name}; model: {model}")
    rng = np.random.default_rng(20261122)
    report, failures, grand, grand_ok = [], [], 0, 0
    for name, make in DISTRIBUTIONS.items():
        a, b, c = make(rng, N_PER_DIST)
        gpu = run_probe(a, b, c)
        emu = mma_m16n8k16(a, b, c, model=model)
        ok, total, lines = compare(name, a, b, c, gpu, emu)
        grand, grand_ok = grand + total, grand_ok + ok
        report.append(f"  {name:18s} {ok:>9d} / {total:<9d} D elements match ({N_PER_DIST} MMAs)")
        failures.extend(lines)
    summary = "\n".join([f"mma.sync m16n8k16 vs model {model}: {grand_ok} / {grand} match over "
                         f"{N_PER_DIST * len(DISTRIBUTIONS)} MMAs"] + report)
    print(summary)
    for line in failures:
        print(line)
    assert grand_ok == grand, summary + "\n" + "\n".join(failures)
