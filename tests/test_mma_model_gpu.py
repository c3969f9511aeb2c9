"""GPU validation of the tensor-core model: single mma.sync of every input format on the GPU, through
kernels/mma_probe.cu, against tcreduce.emulate.mma, bit for bit.

Per format (float16, bfloat16 and tf32 everywhere from sm_80; fp8 e4m3 and e5m2 from sm_89), at least 10^5 MMAs drawn
from the operand families of :mod:`tcreduce.mma_operands`, which stress the model: the whole exponent range,
subnormals, mixed signs, massive cancellation, accumulators near fp32 overflow or of a very different magnitude,
products straddling the alignment grid, ones operands (the reductions' own case), powers of two, signed zeros,
inf/NaN, products beyond fp32's range (bf16, tf32). Float32 results are compared as bit patterns; any NaN equals any
NaN. Match counts per family are printed (``pytest -s``); a mismatch prints the first mismatching elements' operands
in hex, so the model can be fixed.
"""

from __future__ import annotations

import numpy as np
import pytest

from tcreduce.emulate import get_model, mma
from tcreduce.formats import get_format, numpy_dtype
from tcreduce.mma_operands import DISTRIBUTIONS, decode, make_operands
from tcreduce.testing import run_mma_probe

pytestmark = pytest.mark.gpu

MMAS_PER_FORMAT = 100_000
FORMATS = ("float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2")


def _device_model():
    from tcreduce._device import current_device

    _, spec = current_device()
    try:
        return get_model(spec.name), spec
    except ValueError:
        pass
    by_cc = {(9, 0): "H100", (8, 0): "A100"}
    if spec.cc not in by_cc:
        pytest.skip(f"no tensor-core model for {spec.name} (compute capability {spec.cc})")
    return get_model(by_cc[spec.cc]), spec


def _hex(bits: np.ndarray) -> str:
    return " ".join(f"{int(x):0{2 * bits.itemsize}x}" for x in np.ravel(bits))


def compare(fmt: str, name: str, a, b, c, gpu: np.ndarray, emu: np.ndarray, show: int = 5):
    """(matches, total, report lines) with NaN == NaN."""
    same = (gpu.view(np.uint32) == emu.view(np.uint32)) | (np.isnan(gpu) & np.isnan(emu))
    lines = []
    if not same.all():
        lines.append(f"{fmt} {name}: {int((~same).sum())} of {same.size} D elements differ; first ones:")
        for t, i, j in np.argwhere(~same)[:show]:
            exact = float(np.dot(decode(a[t, i], fmt), decode(b[t, :, j], fmt))) + float(c[t, i, j])
            lines.append(f"  mma {t} D[{i}][{j}]: gpu {_hex(gpu[t, i, j:j + 1].view(np.uint32))} "
                         f"model {_hex(emu[t, i, j:j + 1].view(np.uint32))} float64 A@B+C {exact!r}\n"
                         f"    A row  {_hex(a[t, i])}\n    B col  {_hex(b[t, :, j])}\n"
                         f"    C      {_hex(c[t, i, j:j + 1].view(np.uint32))}")
    return int(same.sum()), same.size, lines


@pytest.mark.parametrize("fmt", FORMATS)
def test_probe_layout_exact_integers(fmt):
    """Fragment layout check with small integers (every model computes them exactly): D = A @ B + C."""
    model, spec = _device_model()
    if fmt.startswith("float8") and spec.cc < (8, 9):
        pytest.skip("fp8 mma.sync needs sm_89")
    from tcreduce.mma_operands import encode, mma_k

    rng = np.random.default_rng(1)
    k = mma_k(fmt)
    a = encode(rng.integers(-8, 8, (64, 16, k)).astype(np.float64), fmt)
    b = encode(rng.integers(-4, 4, (64, k, 8)).astype(np.float64), fmt)
    c = rng.integers(-100, 100, (64, 16, 8)).astype(np.float32)
    d = run_mma_probe(fmt, a, b, c)
    want = (decode(a, fmt) @ decode(b, fmt) + c).astype(np.float32)
    bad = np.argwhere(d != want)
    assert bad.size == 0, f"{len(bad)} wrong elements (layout bug?), first at {bad[0].tolist()}: " \
                          f"gpu {d[tuple(bad[0])]} want {want[tuple(bad[0])]}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_mma_model_bit_exact_on_gpu(fmt):
    model, spec = _device_model()
    if fmt.startswith("float8") and spec.cc < (8, 9):
        pytest.skip("fp8 mma.sync needs sm_89")
    f = get_format(fmt)
    dists = [d for d in DISTRIBUTIONS if not (d == "product_overflow" and f.bias < 60)]
    per_dist = -(-MMAS_PER_FORMAT // len(dists))
    rng = np.random.default_rng(20261123)
    report, failures, grand, grand_ok = [], [], 0, 0
    dt = numpy_dtype(fmt)
    for name in dists:
        a, b, c = make_operands(fmt, name, rng, per_dist)
        gpu = run_mma_probe(fmt, a, b, c)
        emu = mma(a.view(dt), b.view(dt), c, model=model)
        ok, total, lines = compare(fmt, name, a, b, c, gpu, emu)
        grand, grand_ok = grand + total, grand_ok + ok
        report.append(f"  {name:18s} {ok:>9d} / {total:<9d} D elements match ({per_dist} MMAs)")
        failures.extend(lines)
    summary = "\n".join([f"{spec.name}: mma.sync {fmt} vs model {model.name}: {grand_ok} / {grand} match over "
                         f"{per_dist * len(dists)} MMAs"] + report)
    print("\n" + summary)
    for line in failures:
        print(line)
    assert grand_ok == grand, summary + "\n" + "\n".join(failures)
