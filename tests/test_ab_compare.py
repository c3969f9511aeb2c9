"""CPU tests of benchmarks/ab_compare.py (no GPU): every case reads 512 MiB in the form its group names, and the
parent run needs the other tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import ab_compare  # noqa: E402

from tcreduce.formats import get_format  # noqa: E402


@pytest.mark.parametrize("case", ab_compare.CASES, ids=[f"{g}-{d}-{n}" for g, d, n in ab_compare.CASES])
def test_every_case_reads_512_mib_in_its_form(case):
    group, dtype, n = case
    (rows, cols), axis = ab_compare._shape(group, dtype, n)
    assert rows * cols * get_format(dtype).itemsize == ab_compare.TOTAL == 1 << 29
    reduced = rows if axis == 0 else cols
    assert reduced == n and axis == (0 if group == "cols" else -1)


def test_the_parent_run_needs_the_other_tree():
    r = subprocess.run([sys.executable, str(BENCH / "ab_compare.py")], capture_output=True, text=True, check=False)
    assert r.returncode == 2 and "--before is required" in r.stderr
