"""``method="auto"``: the fastest eligible method measured for the dtype, form and size, looked up in the table that
``scripts/derive_auto.py`` derives from the committed sweeps (``paper_figures/throughput.csv`` and
``segments.csv``) and writes to :mod:`tcreduce._auto_table` (sources, measure, tie rule and exclusions are recorded
there). ``tests/test_auto.py`` checks, for every swept point, that auto's pick is within 2% of the fastest eligible
method measured there, and that the table is what the CSVs give.

Lookup:

- form: "full" when every axis of size > 1 is reduced (length: the element count); "rows" when the reduced axes are
  the trailing ones (length: the product of the reduced axes); "cols" otherwise (length: the same product).
- bucket: log2 of the length, rounded to the nearest integer.

Fallbacks (points outside the sweep, documented here and tested):

- a bucket below or above the swept range takes the nearest swept bucket (the smallest or largest);
- a bucket inside the range that was not swept takes the nearest swept bucket (the smaller one on a tie);
- a (dtype, form) the table lacks, a table method that is not registered or does not take the dtype, and every
  reduction other than sum ("max", "min"): ``shuffle`` (it takes fp16 and fp32 in every form).

The sweep holds the total input at 512 MiB for rows and columns; other totals use the same segment-length bucket.

Devices: ``TABLE`` was measured on one GPU (``DEVICE``, an H100); a GPU family with sweeps of its own
(``DEVICE_TABLES``, from ``paper_figures/<family>/``: the H200's segment sweep) uses its table for the (dtype, form)
pairs it measured, and ``TABLE`` for the rest (the H200's full sums); every other GPU uses ``TABLE``. The same
bytes take different methods on different GPUs: on an H200 the float32 tensor-core sums are bound by their
instructions, not by memory, and ``shuffle`` wins every float32 row and column sum there.
"""

from __future__ import annotations

import math
from typing import Any

from ._device import gpu_family
from ._plan import DeviceSpec

__all__ = ["choose_method", "lookup", "table_for", "form_of", "FALLBACK"]

FALLBACK = "shuffle"
# Forms the sweep has not measured for a format borrow a measured format's rows: bf16 (where a sweep lacks it) moves
# the same bytes with the same instructions as fp16 (notes/formats.md: within 1% of fp16's on an H100), e5m2 as e4m3
# (one conversion instruction per pair either way: cvt.rn.f16x2.e5m2x2 / .e4m3x2). fp8 rows and columns where no
# sweep measured e4m3's (the H100; an H200's committed segment study has them since session 35): FALLBACK (shuffle;
# on an H100 the tensor-core kernels tie it on fp8 rows of 32 and trail it by 4-10% on rows of 16 and on columns,
# notes/performance.md).
MEASURED_AS = {"bfloat16": "float16", "float8_e5m2": "float8_e4m3fn"}


def form_of(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[str, int]:
    """(form, reduced length) of reducing ``axes`` of an array of ``shape`` (see the module docstring)."""
    ndim = len(shape)
    reduced = math.prod(shape[i] for i in axes)
    if len(axes) == ndim or all(shape[i] == 1 for i in range(ndim) if i not in axes):
        return "full", math.prod(shape)
    if axes == tuple(range(ndim - len(axes), ndim)):
        return "rows", reduced
    return "cols", reduced


def table_for(device: DeviceSpec | None, in_dtype: str, form: str) -> dict:
    """The table auto uses for ``in_dtype`` and ``form`` on ``device``: its family's own where that measured them,
    else the primary ``TABLE``."""
    from ._auto_table import DEVICE_TABLES, TABLE

    own = DEVICE_TABLES.get(gpu_family(device.name)) if device is not None else None
    return own if own is not None and (in_dtype, form) in own else TABLE


def lookup(in_dtype: str, form: str, length: int, table: dict | None = None) -> str:
    """The method of ``table`` (default: the primary ``TABLE``) for a dtype, form and reduced length, with the
    fallbacks of the module docstring."""
    if table is None:
        from ._auto_table import TABLE as table

    buckets = table.get((in_dtype, form))
    if not buckets:
        return FALLBACK
    b = 0 if length < 2 else int(math.floor(math.log2(length) + 0.5))
    if b not in buckets:
        b = min(buckets, key=lambda k: (abs(k - b), k))
    name = buckets[b]
    from . import registry

    try:
        m = registry.get(name)
    except ValueError:
        return FALLBACK
    return name if in_dtype in m.dtypes else FALLBACK


def choose_method(kind: str, x: Any, axes: tuple[int, ...], in_dtype: str, device: DeviceSpec) -> str:
    """The method ``method="auto"`` runs for reduction ``kind`` of ``x`` (anything with a ``shape``) over ``axes``."""
    if kind != "sum":
        return FALLBACK
    form, length = form_of(tuple(x.shape), tuple(axes))
    table = table_for(device, in_dtype, form)
    measured = in_dtype if (in_dtype, form) in table else MEASURED_AS.get(in_dtype, in_dtype)
    if measured != in_dtype:
        table = table_for(device, measured, form)
    name = lookup(measured, form, length, table)
    from . import registry

    return name if in_dtype in registry.get(name).dtypes else FALLBACK
