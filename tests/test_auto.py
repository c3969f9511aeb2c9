"""method="auto" against the committed sweeps (CPU): at every swept point auto's pick is within 2% of the fastest
eligible method measured there; the committed table is what scripts/derive_auto.py derives from the CSVs; the
documented fallbacks hold outside the sweep."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tcreduce._auto import FALLBACK, choose_method, form_of, lookup
from tcreduce._device import KNOWN_GPUS

ROOT = Path(__file__).resolve().parent.parent
H100 = KNOWN_GPUS["H100"]


@pytest.fixture(scope="module")
def derive():
    spec = importlib.util.spec_from_file_location("derive_auto", ROOT / "scripts" / "derive_auto.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["derive_auto"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def points(derive):
    pts, _ = derive.load_points(ROOT / "paper_figures")
    return pts


def _pick(shape, axes, dtype="float16", kind="sum"):
    return choose_method(kind, SimpleNamespace(shape=shape), axes, dtype, H100)


def test_every_swept_point_within_2_percent_of_the_fastest(points, derive):
    assert {(p.dtype, p.form) for p in points} >= {(d, f) for d in ("float16", "float32")
                                                   for f in ("full", "rows", "cols")} | {
        (d, "full") for d in ("bfloat16", "float8_e4m3fn", "float8_e5m2")}
    assert len(points) >= 2 * (21 + 17 + 17) + 3 * 21
    off = []
    for p in points:
        m = _pick(p.shape, p.axes, p.dtype)
        assert m in derive.eligible(p.dtype), (p, m)
        eligible = {k: t for k, t in p.times.items() if k in derive.eligible(p.dtype) and math.isfinite(t)}
        assert m in eligible, f"auto picks {m} at {p.dtype} {p.form} n={p.length}, which was not measured there"
        best = min(eligible.values())
        if eligible[m] > best * (1 + derive.TOLERANCE):
            off.append(f"{p.dtype} {p.form} n={p.length}: {m} {eligible[m]:.1f} us, fastest {best:.1f} us")
    assert not off, "auto's pick is more than 2% slower than the fastest eligible method:\n" + "\n".join(off)


def test_committed_table_is_derived_from_the_csvs(derive):
    text = derive.generate(ROOT / "paper_figures")
    committed = (ROOT / "tcreduce" / "_auto_table.py").read_text()
    assert committed == text, "tcreduce/_auto_table.py is out of date: run python3 scripts/derive_auto.py"


def test_exclusions_and_ties(derive):
    assert "tensorcore_chained" in derive.EXCLUDED and "cub" in derive.EXCLUDED
    assert derive.eligible("float16")[:2] == ["tensorcore", "shuffle"]
    assert "shuffle" in derive.eligible("float32") and "tensorcore_tf32" not in derive.eligible("float32")
    p = derive.Point("float16", "full", 1024, (1024,), (0,), {"shuffle": 10.05, "tensorcore": 10.1, "cub": 1.0})
    assert derive.pick(p) == ("tensorcore", 10.1)  # within 1%: the tie goes to the tensor cores
    p = derive.Point("float16", "full", 1024, (1024,), (0,), {"shuffle": 10.0, "tensorcore": 10.2})
    assert derive.pick(p)[0] == "shuffle"
    _, notes = derive.derive([derive.Point("float32", "rows", 16, (4, 16), (1,), {"shuffle": 2.0, "cub": 1.0})])
    assert notes and "cub" in notes[0]


def test_forms():
    assert form_of((1 << 20,), (0,)) == ("full", 1 << 20)
    assert form_of((4, 1, 8), (0, 2)) == ("full", 32)  # kept axes of size 1: a full sum
    assert form_of((100, 16), (1,)) == ("rows", 16)
    assert form_of((2, 3, 4), (1, 2)) == ("rows", 12)
    assert form_of((16, 100), (0,)) == ("cols", 16)
    assert form_of((5, 17, 40), (1,)) == ("cols", 17)
    assert form_of((6, 5, 4, 3), (1, 3)) == ("cols", 15)


def test_fallbacks(monkeypatch):
    from tcreduce import _auto_table

    table = _auto_table.TABLE[("float16", "rows")]
    lo, hi = min(table), max(table)
    assert lookup("float16", "rows", 1) == table[lo] and lookup("float16", "rows", 3) == table[lo]
    assert lookup("float16", "rows", 1 << 40) == table[hi]
    assert lookup("float16", "rows", 24) == table[5]  # log2(24) = 4.58: bucket 5
    assert lookup("float16", "rows", 22) == table[4]
    assert _pick((1 << 20,), (0,), kind="max") == FALLBACK and _pick((1 << 20,), (0,), kind="min") == FALLBACK
    assert choose_method("max", None, (0,), "float32", H100) == FALLBACK
    assert lookup("float8_e4m3fn", "rows", 1 << 20) == FALLBACK  # not swept
    # a bf16 form the sweep lacks: choose_method borrows fp16's rows
    monkeypatch.delitem(_auto_table.TABLE, ("bfloat16", "rows"))
    assert lookup("bfloat16", "rows", 1 << 20) == FALLBACK
    monkeypatch.setitem(_auto_table.TABLE, ("float16", "rows"), {10: "wmma"})
    assert _pick((1 << 18, 1024), (1,), "bfloat16") == "wmma" == lookup("float16", "rows", 1024)
    assert _pick((1 << 20,), (0,), "bfloat16") == _auto_table.TABLE[("bfloat16", "full")][20]  # its own sweep
    assert _pick((1 << 18, 32), (1,), "float8_e4m3fn") == FALLBACK
    monkeypatch.setitem(_auto_table.TABLE, ("float16", "full"), {10: "tensorcore", 20: "no_such_method", 30: "wmma"})
    assert lookup("float16", "full", 1 << 15) == "tensorcore"  # between 10 and 20: the nearer, the smaller on a tie
    assert lookup("float16", "full", 1 << 16) == FALLBACK  # an unregistered method
    assert lookup("float16", "full", 1 << 29) == "wmma"
    monkeypatch.setitem(_auto_table.TABLE, ("float32", "full"), {10: "wmma"})
    assert lookup("float32", "full", 1 << 10) == FALLBACK  # wmma takes no float32
