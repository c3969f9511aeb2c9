"""Compile every kernel instantiation the planners produce over a wide grid of problems, and report the ones that spill
registers or warn: a wider net than ``tests/test_compile.py``, whose fixed problem list is what CI can afford.

    python3 scripts/scan_plan_spills.py [--out-dtypes float16,float32,float64] [--jobs 2]

No GPU needed (NVRTC and ptxas, with the run-time options and the compile cache of ``tcreduce._compile``). The grid:
full sums of 1 .. 2^32 elements, last-axis sums of rows of 1 .. 2^24 elements and first-axis sums (one and three
leading items) of 1 .. 2^24 rows, at element offsets 0 and 2, for every registered method with a launch plan, every
input format it takes and the A100, H100 and H200 plans (test_compile's ``_instantiations`` over this grid).
Instantiations that test_compile already compiles are skipped. Session 28 found three this way: the split's register
loop of one warp per strip at 3 blocks per SM (4 bytes on sm_90), an H100's fp8 rows of 4 chunks streamed 2 rows in
flight (16 bytes) and fp8 row tiles of 2 chunks 3 in flight into fp16 outputs (24 bytes). Exit status 1 if any
instantiation spills or warns.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

LENGTHS = (1, 5, 16, 17, 32, 48, 64, 65, 80, 100, 128, 129, 256, 300, 512, 1000, 1024, 2048, 4096, 10000, 1 << 15,
           1 << 17, 1 << 20, 1 << 24)  # the reduced axis
OTHERS = (1, 3, 8, 33, 100, 1000, 4096, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24)  # the kept axis
FLAT_SIZES = (1, 1000, 1 << 14, 1 << 16, 1 << 20, 1 << 24, 1 << 27, 1 << 30, 1 << 32)
MAX_ELEMENTS = 1 << 32


def problems() -> list:
    from tcreduce._layout import Cols, Flat, Rows

    probs = [Flat(n, a) for n in FLAT_SIZES for a in (0, 2, 4)]
    for r, b in itertools.product(LENGTHS, OTHERS):
        if r * b <= MAX_ELEMENTS:
            for al in (0, 2):
                probs += [Cols(1, r, b, 0, b, al), Cols(3, r, b, r * b, b, al), Rows(b, r, r, al)]
    return probs


def check(item: tuple[str, str, str]) -> tuple[str, str, str, bool, bool]:
    source, kernel, arch = item
    from tcreduce._compile import compile_kernel

    ck = compile_kernel(source, kernel, arch)
    return source, kernel, arch, bool(ck.spills), "warning" in ck.log.lower()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dtypes", default="float16,float32,float64")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    from test_compile import _instantiations

    tested = set(_instantiations())
    todo = {(source, kernel, arch)
            for (source, kernel), archs in _instantiations(problems(), tuple(args.out_dtypes.split(","))).items()
            if (source, kernel) not in tested for arch in archs}
    print(f"{len(todo)} instantiations beyond test_compile's", flush=True)
    bad = 0
    with ProcessPoolExecutor(args.jobs) as pool:
        for source, kernel, arch, spills, warns in pool.map(check, sorted(todo)):
            if spills or warns:
                bad += 1
                print(f"{arch} {source} {kernel}: {'spills' if spills else ''} {'warns' if warns else ''}", flush=True)
    print(f"{bad} of {len(todo)} spill or warn")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
