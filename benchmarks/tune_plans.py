"""Tuning sweep over a planner's constants (tcreduce/plans/*.py): for each setting, re-plan, check GPU == emulator bit
for bit on small awkward inputs (the twin reads the same plan, so a setting that changes the order of additions is
still checked), then time the large case. Prints GB/s per setting beside shuffle and, where installed, torch.sum
and (--triton) the tuned Triton sum and torch.compile'd torch.sum, with the ratio to each.

    python benchmarks/tune_plans.py [--reps 20] [--triton] [--only fp32_flat,rows16,'*_few_loop']

A setting is a dict of module constants patched for its run only, on every GPU family alike (a family's own values in
the module's FAMILY_TUNING give way to it); the defaults, the module-level values, are the first of each sweep
(tests/test_tune_plans.py). Before them each sweep times its method as this GPU plans it, unpatched (a family's own
FAMILY_TUNING values included), so the plan in use is in every run. Used to pick the defaults (notes/performance.md).
Settings that change only launch geometry never change exactness; the bits check guards the plan/twin agreement, which
every setting must keep.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import fnmatch
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perf_floor import graph_timed, make_input  # noqa: E402
from perf_floor import timed as back_to_back  # noqa: E402

import tcreduce.plans._common as plan_common  # noqa: E402
import tcreduce.plans.shuffle as shuffle_plan  # noqa: E402
import tcreduce.plans.tensorcore as tc_plan  # noqa: E402
import tcreduce.plans.tensorcore_fp32 as tc32_plan  # noqa: E402
from tcreduce.testing import patched_plans as patched  # noqa: E402


def committed(module: Any, *names: str) -> dict:
    """The setting of the module-level values of ``names`` (dicts copied): a sweep's first, committed setting."""
    return {name: copy.copy(getattr(module, name)) for name in names}


# name -> (planner module, settings (the first: the committed defaults), dtype, large shape, axis, bits-check shapes)
SWEEPS: dict[str, tuple[Any, list[dict], str, tuple[int, ...], Any, list[tuple[int, ...]]]] = {
    "fp32_flat": (tc32_plan, [dict(FLAT_UNROLL={"tensorcore": u, "tensorcore_tf32": 8}, FLAT_BLOCKS_PER_SM=b,
                                   FLAT_LOAD=ld)
                              for u, b in ((4, 4), (8, 4), (4, 3), (2, 6), (6, 4), (4, 5))
                              for ld in (2,)],
                  "float32", (1 << 28,), None, [((1 << 18) + 7,), (4099,)]),
    "rows16": (tc_plan, [dict(ROWS_UNROLL_SHORT={4: u, 8: 2}, ONE_PASS_SHORT_TILES={4: p, 8: p})
                         for p in (True, False) for u in (4, 1, 2, 8)],
               "float16", (1 << 24, 16), -1, [(4099, 16), (70001, 16)]),
}
# short rows: one pass over every tile or row instead of a grid stride (each row's sum the same either way)
SWEEPS["rows32"] = (tc_plan, [dict(ONE_PASS_SHORT_TILES={4: p, 8: q}) for p, q in ((True, True), (False, False))],
                    "float16", (1 << 23, 32), -1, [(4099, 32), (70001, 32), (333, 20)])
SWEEPS["bf16_rows16"] = (tc_plan, SWEEPS["rows16"][1], "bfloat16", (1 << 24, 16), -1, [(4099, 16), (70001, 16)])
SWEEPS["shuffle_rows16"] = (shuffle_plan, [dict(ONE_PASS_ROWS=p) for p in (True, False)], "float16", (1 << 24, 16),
                            -1, [(4099, 16), (70001, 16)], "shuffle")
# shuffle_rows over rows that G <= 32 threads take (ROWS_SHORT_TUNING, keyed by bytes per element and chunks per row):
# rows in flight per thread and blocks per SM (neither changes the sums); fp8 converts 16 elements per chunk, so it may
# want more threads than 16-bit formats (session 35 swept fp8 rows of 16-32 and fp16 rows of 16 through the global
# UNROLL and BLOCKS_PER_SM under these names: tune_plans_fp8_shuffle_e937cb8.log)
for _dt, _k in (*(("float8_e4m3fn", _k) for _k in (16, 32, 64, 128, 256, 512)), ("float16", 16)):
    _isz = shuffle_plan.ITEMSIZE[_dt]
    _key = (_isz, -(-_k * _isz // 16))
    SWEEPS[f"shuffle_{_dt}_rows{_k}_unroll"] = (
        shuffle_plan, [committed(shuffle_plan, "ROWS_SHORT_TUNING")]
        + [dict(ROWS_SHORT_TUNING={_key: ub}) for ub in ((4, 4), (8, 4), (2, 8), (8, 3), (4, 6), (2, 6))],
        _dt, ((1 << 29) // _isz // _k, _k), -1, [(4099, _k), (70001, _k), (333, _k - 3)], "shuffle")
# shuffle_cols' general kernel (splits of the reduced axis: few columns) per bytes per element (COLS_TUNING): rows in
# flight per thread and blocks per SM (the same sums); fp8 first-axis sums of 32768 rows and more read 0.86-0.87 of the
# read ceiling at (8, 2) in the eaa22ef segment study, fp16 ones of 2^20 rows 0.92
for _dt, _rs in (("float8_e4m3fn", (32768, 65536, 1 << 20)), ("float16", (65536, 1 << 20))):
    _isz = shuffle_plan.ITEMSIZE[_dt]
    for _r in _rs:
        SWEEPS[f"shuffle_{_dt}_cols{_r}_general"] = (
            shuffle_plan, [committed(shuffle_plan, "COLS_TUNING")]
            + [dict(COLS_TUNING={_isz: ub}) for ub in ((8, 2), (8, 3), (16, 2), (16, 3), (12, 3), (4, 4))],
            _dt, (_r, (1 << 29) // _isz // _r), 0, [(_r + 3, 4000), (_r, 1003), (_r - 5, 64)], "shuffle")
ONE_PASS = [dict(ONE_PASS_TILES=p) for p in (True, False)]
# first-axis sums: tc_cols (64-column strips, data as A): chunks in flight per warp (bitwise the same sums) and
# one-pass grids; shuffle_cols: rows in flight, blocks per SM and strip width (these two change the splits: the bits
# check follows)
COLS_SHAPES = {"cols16": (16, 1 << 24), "cols32": (32, 1 << 23), "cols64": (64, 1 << 22), "cols128": (128, 1 << 21),
               "cols256": (256, 1 << 20), "cols1024": (1024, 1 << 18),
               "cols4096": (4096, 1 << 16), "cols16384": (16384, 1 << 14), "cols2p18": (1 << 18, 1 << 10),
               "cols2p20": (1 << 20, 1 << 8)}
COLS_CHECK = [(4099, 40), (37, 300), (16, 4099), (5, 300), (2000, 130)]
for _name, _shape in COLS_SHAPES.items():
    _tc = ([dict(COLS_UNROLL_SHORT=u) for u in (1, 2)] if _shape[0] <= 16 else
           [dict(COLS_UNROLL_LONG=u, ONE_PASS_TILES=p, COLS_ONE_PASS_MIN_CHUNKS=0)
            for u, p in ((2, True), (4, True), (1, True), (2, False))])
    SWEEPS[_name] = (tc_plan, _tc, "float16", _shape, 0, COLS_CHECK)
    SWEEPS["shuffle_" + _name] = (shuffle_plan, [dict(COLS_UNROLL=u, BLOCKS_PER_SM={"rows": 4, "cols": b},
                                                      COLS_CT_MAX=c)
                                                 for u, b, c in ((8, 2, 32), (4, 3, 32), (8, 3, 32), (4, 4, 32),
                                                                 (8, 2, 64))],
                                  "float16", _shape, 0, COLS_CHECK, "shuffle")
# shuffle_cols with splits: narrower strips (COLS_CT_MIN, COLS_CT_UNSPLIT_MIN) so that the strips alone fill the GPU
# with no split of the reduced axis and no last-block combination, else 256-byte strips with splits (run 11 picked
# them; segments at 818c900 read fp32 first-axis sums at 3,049-3,063 GB/s without splits, n <= 4096, and 2,926-2,965
# with 512-byte strips and splits, n >= 8192); the check shapes take the narrowed paths. shuffle_rows: a block per
# row (G == BLOCK, one pass) for rows of ROWS_BLOCK_MIN_CHUNKS chunks or more instead of a warp per row
_FORMATS = (("float32", 4), ("float16", 2), ("bfloat16", 2), ("float8_e4m3fn", 1))
for _dt, _isz in _FORMATS:
    for _n in (8192, 16384, 32768, 1 << 17, 1 << 20):
        SWEEPS[f"shuffle_{_dt}_strips{_n}"] = (
            shuffle_plan, [dict(COLS_CT_MIN=c, COLS_CT_UNSPLIT_MIN=u) for c, u in ((16, 8), (16, 16), (32, 32))],
            _dt, (_n, (1 << 29) // _isz // _n), 0, [(2048, 16384 // _isz), (4099, 40), (3000, 36), (1 << 16, 64)],
            "shuffle")
    _k = 4096 * 4 // _isz  # 1024 chunks per row
    SWEEPS[f"shuffle_{_dt}_block_rows{_k}"] = (  # keyed by bytes per element: the default, none, every format
        shuffle_plan, [dict(ROWS_BLOCK_MIN_CHUNKS=c) for c in ({2: 1024, 4: 1024}, {}, {1: 1024, 2: 1024, 4: 1024})],
        _dt, ((1 << 29) // _isz // _k, _k), -1, [(333, _k), (300, _k + 4), (3, _k + 40)], "shuffle")
# rows of 512 chunks (2 per thread of a block): a block per row loses to a warp per row at 4 resident blocks per SM
# (run 12); with more blocks per SM (fewer registers) more rows are in flight; and rows of 1024 chunks likewise
for _dt, _isz, _k in (("float32", 4, 2048), ("float16", 2, 4096), ("float32", 4, 4096), ("float16", 2, 8192)):
    SWEEPS[f"shuffle_{_dt}_rows{_k}_minb"] = (
        shuffle_plan, [dict(BLOCKS_PER_SM={"rows": b, "cols": 2}, ROWS_BLOCK_MIN_CHUNKS=c)
                       for b, c in ((4, {2: 1024, 4: 1024}), (4, {2: 512, 4: 512}), (6, {2: 512, 4: 512}),
                                    (8, {2: 512, 4: 512}), (6, {2: 1024, 4: 1024}), (8, {2: 1024, 4: 1024}))],
        _dt, ((1 << 29) // _isz // _k, _k), -1, [(333, _k), (300, _k + 4), (3, _k + 40)], "shuffle")
# rows of 256-1023 chunks that get a warp each: a group of 64 or 128 threads instead (several rows per block), the
# threads' chunks per row as keyed (by bytes per element) in ROWS_GROUP_CHUNKS_PER_THREAD (the default first, then
# a warp per row); the check shapes are rows of the same length, so they take whatever path the setting gives
for _dt, _isz in (("float32", 4), ("float16", 2), ("bfloat16", 2)):
    for _k in (1024 * 4 // _isz, 2048 * 4 // _isz):  # 256 and 512 chunks per row
        SWEEPS[f"shuffle_{_dt}_row_groups{_k}"] = (
            shuffle_plan, [dict(ROWS_GROUP_CHUNKS_PER_THREAD=c) for c in ({2: 4, 4: 4}, {}, {2: 2, 4: 2},
                                                                          {2: 8, 4: 8})],
            _dt, ((1 << 29) // _isz // _k, _k), -1, [(300, _k), (257, _k + 20), (3, _k)], "shuffle")
# splits of the reduced axis (choose_splits, every planner): the fewest splits within SPLIT_TOLERANCE of the best wave
# efficiency (5%: fp16 [2^20, 256] first-axis sums take 4 strips x 63 splits = 252 of an H200's 264 block slots) or
# a tighter fill (66 splits: all 264); the default first. Another order of additions: the bits check follows the plan.
# Session 19 (H100 and H200): at most +0.8% at [2^20, 256] for tensorcore, losses elsewhere (-16% at [32768, 8192])
for _dt, _isz, _n, _method in (("float16", 2, 1 << 20, "tensorcore"), ("float16", 2, 1 << 20, "shuffle"),
                               ("float16", 2, 1 << 18, "tensorcore"), ("float16", 2, 32768, "tensorcore"),
                               ("float32", 4, 1 << 20, "shuffle"), ("float32", 4, 1 << 18, "shuffle")):
    SWEEPS[f"{_method}_{_dt}_cols{_n}_split_tolerance"] = (
        plan_common, [dict(SPLIT_TOLERANCE=t) for t in (0.05, 0.02, 0.0)], _dt, (_n, (1 << 29) // _isz // _n), 0,
        [(1 << 16, 64), (4099, 40), (20000, 16)], _method)
# fp8 short rows and columns: raw fp8 in flight, twice fp16's tiles or chunks (FP8_IN_FLIGHT) or as many
for _name, _shape, _axis in (("e4m3_rows32", (1 << 24, 32), -1), ("e4m3_rows16", (1 << 25, 16), -1),
                             ("e4m3_cols1024", (1024, 1 << 19), 0), ("e4m3_cols32", (32, 1 << 24), 0)):
    SWEEPS[_name] = (tc_plan, [dict(FP8_IN_FLIGHT={1: f}) for f in (2, 1)], "float8_e4m3fn", _shape, _axis,
                     [(4099, _shape[1]), (37, 300)] if _axis == -1 else COLS_CHECK)
# float32 first-axis sums: tc32_cols (32-column strips, data as A): chunks in flight and blocks per SM (launch
# geometry: the same sums, bits checked); short columns: adjacent strips in flight
FP32_COLS_CHECK = [(4099, 40), (37, 300), (16, 4099), (5, 300), (2000, 130), (3000, 36)]
for _name, _shape in (("fp32_cols32", (32, 1 << 22)), ("fp32_cols64", (64, 1 << 21)),
                      ("fp32_cols4096", (4096, 1 << 15)), ("fp32_cols16384", (16384, 1 << 13)),
                      ("fp32_cols2p20", (1 << 20, 1 << 7))):
    SWEEPS[_name] = (tc32_plan, [dict(COLS_UNROLL=u, COLS_BLOCKS_PER_SM=b, COLS_BLOCKS_PER_SM_FEW=f)
                                 for u, b, f in ((1, 3, 4), (1, 3, 3), (1, 4, 4), (2, 2, 2), (1, 2, 2))],
                     "float32", _shape, 0, FP32_COLS_CHECK)
SWEEPS["fp32_cols16"] = (tc32_plan, [dict(COLS_UNROLL_SHORT=u, ONE_PASS=p) for u, p in ((2, True), (1, True),
                                                                                        (2, False))],
                         "float32", (16, 1 << 23), 0, [(16, 4099), (5, 300)])
SWEEPS["fp32_rows32"] = (tc32_plan, [dict(TILE_UNROLL=u, TILE_BLOCKS_PER_SM=b) for u, b in ((2, 4), (4, 3), (1, 4),
                                                                                            (2, 3))],
                         "float32", (1 << 22, 32), -1, [(4099, 32), (333, 40), (37, 300)])
SWEEPS["fp32_rows16"] = (tc32_plan, [dict(ONE_PASS=p) for p in (True, False)], "float32", (1 << 23, 16), -1,
                         [(4099, 16), (333, 40)])
STREAM_SETTINGS = [dict(STREAM_UNROLL=u, STREAM_BLOCKS_PER_SM=b, STREAM_LONG_CHUNKS={})
                   for u, b in ((4, 4), (8, 2), (4, 2), (16, 2), (8, 3), (16, 1), (4, 3))]
for _k in (256, 1024, 4096):  # tc_rows_stream: rows of at least STREAM_MIN_K aligned elements
    SWEEPS[f"rows{_k}"] = (tc_plan, STREAM_SETTINGS, "float16", ((1 << 28) // _k, _k),
                           -1, [(4099, _k), (333, _k), (3, _k)])
SWEEPS["rows1024"] = (tc_plan, [dict(ONE_PASS_SHORT_ROWS=p) for p in (True, False)], *SWEEPS["rows1024"][2:])
SWEEPS["bf16_rows256"] = (tc_plan, [dict(s, ONE_PASS_SHORT_ROWS=p) for p in (True, False)
                                    for s in STREAM_SETTINGS[:3]],
                          "bfloat16", (1 << 20, 256), -1, [(4099, 256), (333, 256), (3, 256)])

# fp16 rows of 2-8 chunks of 32 (64-255 halves) and first-axis sums of 128-512 rows, where tc_rows / tc_cols read 2-4%
# below shuffle_rows / shuffle_cols in the 7047afe sweep: chunks in flight per warp and one-pass grids (the same sums
# either way; bits checked). Run 15 swept ROWS_UNROLL_LONG at 64 and 128; 4 in flight at 128 was adopted for rows of
# 4-8 chunks as ROWS_UNROLL_WIDE (first setting), and run 16 checked it at 192 and 255.
for _k in (64, 128, 192, 255):
    SWEEPS[f"rows{_k}_tiles"] = (tc_plan, [dict(ROWS_UNROLL_WIDE=w, ROWS_UNROLL_LONG=u, ONE_PASS_TILES=p)
                                           for w, u, p in ((4, 2, True), (2, 2, True), (8, 2, True), (1, 1, True),
                                                           (4, 2, False))],
                                 "float16", ((1 << 28) // _k, _k), -1, [(4099, _k), (333, _k + 8), (37, _k - 8)])
# packed short rows (session 34): tc_rows_stream's packed path (a warp's 512-byte load holds 2-8 whole rows; another
# order of additions than tc_rows' tiles, so the bits check follows the plan) against the tiles (the module value,
# first), by (chunks in flight per warp, blocks per SM); its check shapes end in a part-filled chunk
ROWS_PACKED_SETTINGS = [(8, 3), (4, 4), (8, 4), (16, 2), (4, 3), (2, 4)]
for _dt, _isz, _ks in (("float16", 2, (32, 64, 128)), ("bfloat16", 2, (64, 128)),
                       ("float8_e4m3fn", 1, (64, 128, 256))):
    for _k in _ks:
        SWEEPS[f"{_dt}_rows{_k}_packed"] = (
            tc_plan, [dict(ROWS_PACKED={})] + [dict(ROWS_PACKED={_isz: (0, *s)}) for s in ROWS_PACKED_SETTINGS], _dt,
            ((1 << 29) // _isz // _k, _k), -1, [(4099, _k), (333, _k), (3, _k)])
# ... and fp8's on more blocks per SM (session 38: fp8 rows of one chunk read +10% at 4 rows in flight on 6 blocks per
# SM, `shuffle`'s fp8 short rows +4-7% at 4 on 6 in session 36), the module's (tiles) first, then the H200's (4, 4);
# NVRTC sm_90: 4 in flight on 5-6 38-40 registers, 2 on 5-6 26-28, no spills in either chain or format (8 on 5 spills)
for _k in (64, 128, 256):
    SWEEPS[f"float8_e4m3fn_rows{_k}_packed_more_blocks"] = (
        tc_plan, [committed(tc_plan, "ROWS_PACKED")] + [dict(ROWS_PACKED={1: (64, *s)})
                                                        for s in ((4, 4), (4, 5), (4, 6), (2, 6))], "float8_e4m3fn",
        ((1 << 29) // _k, _k), -1, [(4099, _k), (333, _k), (3, _k)])
for _r in (128, 256, 512):
    SWEEPS[f"cols{_r}"] = (tc_plan, [dict(COLS_UNROLL_LONG=u, ONE_PASS_TILES=p, COLS_ONE_PASS_MIN_CHUNKS=0)
                                     for u, p in ((2, True), (4, True), (1, True), (2, False), (4, False))],
                           "float16", (_r, (1 << 28) // _r), 0, COLS_CHECK)

# long rows: more warps per row beyond STREAM_MAX_STEPS steps per warp (benchmarks/read_probe.py: blocks that read a
# few adjacent rounds and exit read faster than warps looping over their own rows); the check shapes take that path
for _k in (4096, 16384, 65536):
    SWEEPS[f"rows_spread{_k}"] = (tc_plan, [dict(STREAM_MAX_STEPS=s) for s in (1, 0, 2, 4)], "float16",
                                  ((1 << 28) // _k, _k), -1, [(4500, 2104), (4400, 4104), (3, _k)])
for _k in (2048, 8192, 32768):
    SWEEPS[f"fp32_rows_spread{_k}"] = (tc32_plan, [dict(STREAM_MAX_STEPS=s) for s in (4, 0, 1, 2)], "float32",
                                       ((1 << 27) // _k, _k), -1, [(4500, 1100), (4500, 2052), (3, _k)])
# the float32 tensor-core methods (they share the forms and plans), by sweep-name prefix
F32_METHODS = {"fp32": "tensorcore", "tf32": "tensorcore_tf32"}


def rows4_k(lo: int, hi: int | None = None, *methods: str, holes: tuple[int, ...] = ()) -> dict:
    """A ROWS4_K setting: tc32_rows4 on rows of ``lo`` up to ``hi`` (not included; None: the module's top for each
    method) elements but the lengths in ``holes``, for ``methods`` (none named: every float32 tensor-core method); the
    module's ranges for the others."""
    ranges = {}
    for method in methods or F32_METHODS.values():
        edges = [lo, *sorted(h for hole in holes for h in (hole, hole + 1)), hi or tc32_plan.ROWS4_K[method][-1][1]]
        ranges[method] = tuple((a, b) for a, b in zip(edges[::2], edges[1::2]) if a < b)
    return dict(tc32_plan.ROWS4_K, **ranges)

# fp32 rows of 256-768: tc32_rows4 (4 rows per warp, 256 contiguous bytes of a row per load) against
# tc32_rows_stream (a warp or warp group per row, 512 contiguous bytes per load) and tc32_rows (16 rows per warp, 64
# bytes of each per load), by where rows4 stops (ROWS4_K) and streaming starts (STREAM_MIN_K); another order of
# additions: the bits check follows the plan; its first shape has rows enough for tc32_rows4 on an H100. Run 22 set
# where rows4 stops per method: the split reads rows of 512 and 768 faster in rows4, tf32 streamed
for _k in (256, 512, 768):
    for _prefix, _method in F32_METHODS.items():
        SWEEPS[f"{_prefix}_rows{_k}_stream"] = (
            tc32_plan, [dict(committed(tc32_plan, "ROWS4_K"), STREAM_MIN_K=512)]
            + [dict(ROWS4_K=rows4_k(128, cut), STREAM_MIN_K=s)
               for cut, s in ((512, 512), (1024, 512), (256, 256), (128, 128))],
            "float32", ((1 << 27) // _k, _k), -1, [(16899, _k), (4099, _k), (333, _k + 4), (37, _k - 4), (3, _k)],
            _method)
# fp32 first-axis sums without splits: warps per strip by wave efficiency where one warp per strip leaves a partial
# last wave (launch geometry only: the same sums)
for _n in (128, 256, 512, 1024):
    SWEEPS[f"fp32_cols{_n}_waves"] = (tc32_plan, [dict(COLS_GROUP_BY_WAVES=w) for w in (True, False)],
                                      "float32", (_n, (1 << 27) // _n), 0, FP32_COLS_CHECK + [(1000, 132)])
SWEEPS["tf32_cols1024_waves"] = (*SWEEPS["fp32_cols1024_waves"], F32_METHODS["tf32"])
# ... and few strips (fewer than the resident warps): a block per strip with splits where grouping leaves a partial
# wave (another order of additions: the bits check follows the plan)
for _n in (2048, 4096, 8192):
    SWEEPS[f"fp32_cols{_n}_splits"] = (tc32_plan, [dict(COLS_SPLIT_BELOW_EFFICIENCY=e) for e in (0.75, 0.0, 0.9)],
                                       "float32", (_n, (1 << 27) // _n), 0,
                                       FP32_COLS_CHECK + [(1000, 132), (2050, 256)])
SWEEPS["tf32_cols8192_splits"] = (*SWEEPS["fp32_cols8192_splits"], F32_METHODS["tf32"])
# fp32 rows of 64-384 through tc32_rows4 (4 rows per warp, 256 contiguous bytes of a row per load) instead of tc32_rows
# (16 rows per warp, 64 bytes per row per load); the check shapes have rows enough for it on an H100 (4224 tiles of 4)
ROWS4_CHECK = [(16899, 64), (17000, 100), (16900, 260)]
for _k in (64, 128, 256, 384):
    for _prefix, _method in F32_METHODS.items():
        if _prefix == "tf32" and _k in (64, 384):
            continue
        SWEEPS[f"{_prefix}_rows{_k}_rows4"] = (
            tc32_plan, [dict(ROWS4_K=rows4_k(a) if a else dict.fromkeys(F32_METHODS.values(), ()),
                             ROWS4_UNROLL=dict.fromkeys(F32_METHODS.values(), u), ROWS4_BLOCKS_PER_SM=b)
                        for a, u, b in ((128, 2, 4), (0, 2, 4), (64, 2, 4), (64, 4, 4), (64, 1, 4), (64, 4, 3))],
            "float32", ((1 << 27) // _k, _k), -1, ROWS4_CHECK, _method)
# ... and the split's rows of 129-511 between the two points measured (256, 384): 4 chunks in flight (an H200's) or 2,
# on 4 or 3 blocks per SM; every setting in tc32_rows4 from 128 elements (the module's ROWS4_K, without the holes an
# H200 sets)
_ROWS4_FROM_128 = committed(tc32_plan, "ROWS4_K")
for _k in (160, 192, 320, 448, 500):
    SWEEPS[f"fp32_rows{_k}_rows4_inflight"] = (
        tc32_plan, [dict(_ROWS4_FROM_128, **committed(tc32_plan, "ROWS4_UNROLL", "ROWS4_BLOCKS_PER_SM"))]
        + [dict(_ROWS4_FROM_128, ROWS4_UNROLL=dict(tc32_plan.ROWS4_UNROLL, tensorcore=u), ROWS4_BLOCKS_PER_SM=b)
           for u, b in ((4, 4), (4, 3))],
        "float32", ((1 << 27) // _k, _k), -1, [(16899, _k), (17000, _k - 4)], F32_METHODS["fp32"])
# ... and rows of 129-511 in tc32_rows4 or on the tile loop (a ROWS4_K hole of this length alone)
for _prefix, _ks in (("fp32", (144, 160, 192, 224, 240, 288, 320, 336, 352, 368, 384, 448, 500)),
                     ("tf32", (144, 160, 192, 224, 240, 288, 320, 384, 448))):
    for _k in _ks:
        SWEEPS[f"{_prefix}_rows{_k}_rows4_or_tiles"] = (
            tc32_plan, [_ROWS4_FROM_128, dict(ROWS4_K=rows4_k(128, None, F32_METHODS[_prefix], holes=(_k,)))],
            "float32", ((1 << 27) // _k, _k), -1, [(16899, _k), (17000, _k), (17001, _k)], F32_METHODS[_prefix])
# the split's fp32 rows of 512-1023 through tc32_rows4: chunks in flight and blocks per SM there (run 23: 4 on 3)
for _k in (512, 768, 1000):
    SWEEPS[f"fp32_rows{_k}_rows4_unroll"] = (
        tc32_plan, [dict(ROWS4_LONG=((512, u, b),)) for u, b in ((4, 3), (2, 4), (4, 4), (1, 4), (2, 3), (8, 2))],
        "float32", ((1 << 27) // _k, _k), -1, [(16899, _k), (4099, _k), (17000, _k - 4)], F32_METHODS["fp32"])
# ... and of 1024-4096 through tc32_rows4 (4 chunks in flight) instead of tc32_rows_stream (ROWS4_K), at 3 or 4
# blocks per SM; tf32's from 512 too (run 22, H100: streamed faster)
for _prefix, _ks in (("fp32", (1024, 2048, 4096)), ("tf32", (512, 768, 1024, 1536, 2048, 4096))):
    for _k in _ks:
        SWEEPS[f"{_prefix}_rows{_k}_rows4_long"] = (
            tc32_plan, [committed(tc32_plan, "ROWS4_K", "ROWS4_LONG")]
            + [dict(ROWS4_K=rows4_k(128, 1 << 20, F32_METHODS[_prefix]), ROWS4_LONG=((512, 4, b),)) for b in (4, 3)],
            "float32", ((1 << 27) // _k, _k), -1, [(16899, _k), (17000, _k - 4)], F32_METHODS[_prefix])
# ... and of 8192-32768 (512 MiB of them: 4096-1024 tiles of 4 rows, fewer than an H200's 4224 resident warps) through
# tc32_rows4 too (ROWS4_MIN_FILL 0.2) at 4 chunks in flight on 4 blocks per SM (an H200's) or 8 on 2, against
# tc32_rows_stream; the check shapes take tc32_rows4 under both
for _prefix, _method in F32_METHODS.items():
    for _k in (8192, 16384, 32768):
        _rows4_on = dict(ROWS4_K=rows4_k(128, 1 << 20, _method),
                         ROWS4_MIN_FILL=dict(tc32_plan.ROWS4_MIN_FILL, **{_method: 0.2}))
        SWEEPS[f"{_prefix}_rows{_k}_rows4_fill"] = (
            tc32_plan, [committed(tc32_plan, "ROWS4_K", "ROWS4_MIN_FILL")]
            + [dict(_rows4_on, ROWS4_LONG=((512, u, b),)) for u, b in ((4, 4), (8, 2))],
            "float32", ((1 << 27) // _k, _k), -1, [(4300, _k), (4300, _k - 4)], _method)
# ... and the split's rows of 2048-4096 at 8 chunks in flight on 2 blocks per SM (an H200's tier from 8192) against 4
# on 4 (7a82480: 8 on 2 loses 2.5% at 2048, level at 4096)
for _k in (2048, 4096):
    SWEEPS[f"fp32_rows{_k}_rows4_xlong"] = (
        tc32_plan, [committed(tc32_plan, "ROWS4_LONG")] + [dict(ROWS4_LONG=((512, 4, 4), (k_from, 8, 2)))
                                                           for k_from in (2048, 512)],
        "float32", ((1 << 27) // _k, _k), -1, [(16899, _k), (17000, _k - 4)], F32_METHODS["fp32"])
# tc32_cols with a one-chunk software pipeline (COLS_PREFETCH: the next chunk loaded before the current one steps; the
# same sums) at 2 or 3 blocks per SM, against the loop that loads, then steps (runs 24-25: adopted for tf32 only)
for _n in (128, 1024, 4096, 1 << 20):
    for _prefix, _method in F32_METHODS.items():
        SWEEPS[f"{_prefix}_cols{_n}_prefetch"] = (
            tc32_plan, [dict(COLS_PREFETCH=dict(tc32_plan.COLS_PREFETCH), COLS_BLOCKS_PER_SM_PREFETCH=2)]
            + [dict(COLS_PREFETCH=dict.fromkeys(F32_METHODS.values(), p), COLS_BLOCKS_PER_SM_PREFETCH=b)
               for p, b in ((False, 2), (True, 2), (True, 3))],
            "float32", (_n, (1 << 27) // _n), 0, FP32_COLS_CHECK + [(1000, 132), (2050, 256)], _method)
# tc_cols' one-item walk (a strip per warp in one pass: tc_cols<..., ONE_ITEM>, compiled without the grid-stride loop
# and the combinations, mmas from a zero C) at (chunks in flight, blocks per SM), against the general kernel at the
# module values first (run 50 had the H200's resident grid of then up to 256 rows there: COLS_ONE_PASS_MIN_CHUNKS);
# the same chunks in the same order, the bits checked. The check shapes have strips enough for the one-item path: a
# partial last chunk and a partial last strip
TC_ONE_ITEM = [committed(tc_plan, "COLS_ONE_ITEM_TUNING", "COLS_ONE_ITEM_LONG")]
TC_ONE_ITEM += [dict(COLS_ONE_ITEM_TUNING={1: ((2 * u, b),), 2: ((u, b),)}, COLS_ONE_ITEM_LONG={},
                     COLS_ONE_PASS_MIN_CHUNKS=0)
                for u, b in ((2, 2), (1, 3), (2, 3), (1, 4), (4, 2), (2, 4))]
# ... from 2048 rows (fp16) a strip per 2-8 warps, where only the first five settings are swept (run 52 left out
# (4, 2) and (2, 4) to keep the call short); the check shapes add strips of 2 and 4 warps
TC_ONE_ITEM_WIDE = TC_ONE_ITEM[:5]
for _dt, _isz, _rs in (("float16", 2, (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)),
                       ("bfloat16", 2, (64, 128, 256, 1024, 2048, 4096, 8192, 16384)),
                       ("float8_e4m3fn", 1, (64, 128, 1024))):
    for _r in _rs:
        SWEEPS[f"{_dt}_cols{_r}_one_item"] = (tc_plan, TC_ONE_ITEM_WIDE if _r >= 2048 else TC_ONE_ITEM, _dt,
                                              (_r, (1 << 29) // _isz // _r), 0,
                                              COLS_CHECK + [(37, 140040), (83, 102408), (200, 65576)])
# tc_cols' 128-column strips for fp8 (COLS_WIDE_STRIPS: 16-byte loads per lane and row where 64-column strips load 8;
# the same sums, the bits checked): (chunks in flight, blocks per SM) candidates against the committed 64-column
# plans (fp8 first-axis sums read 0.62-0.89x `shuffle` in the eaa22ef segment study); the check shapes have 1, 4 and 8
# warps per strip, part-filled last strips and chunks
TC_WIDE = [committed(tc_plan, "COLS_WIDE_STRIPS", "COLS_WIDE_LONG_STRIPS")] + [
    dict(COLS_WIDE_STRIPS={1: c}, COLS_WIDE_LONG_STRIPS={}) for c in (
    ((1, 3),), ((2, 2),), ((4, 2),), ((1, 3), (2, 2)), ((1, 2),))]
for _r in (32, 64, 128, 256, 1024, 4096, 8192, 16384):  # 16 rows or fewer: the short path, never wide; more rows
    # than a one-item grid takes fall back to 64-column strips (the committed plan: a ratio of 1.0)
    SWEEPS[f"float8_e4m3fn_cols{_r}_wide"] = (tc_plan, TC_WIDE, "float8_e4m3fn", (_r, (1 << 29) // _r), 0,
                                               [(300, 2000), (64, 8208), (33, 30000), (40, 405504), (17, 1 << 20)])
# ... and their general walk (COLS_WIDE_GENERAL: chunks in flight where the 128-column plan splits the rows; the
# twin follows the plan's splits, the bits checked) against the committed plans (64-column strips there: 0.81-0.90x
# `shuffle` in the db78f48 segment study); the H200's candidates patched in too, so any GPU plans the wide strips
H200_WIDE = {k: tc_plan.FAMILY_TUNING["H200"][k] for k in ("COLS_WIDE_STRIPS", "COLS_WIDE_LONG_STRIPS")}
TC_WIDE_GENERAL = [committed(tc_plan, *H200_WIDE, "COLS_WIDE_GENERAL")] + [
    dict(H200_WIDE, COLS_WIDE_GENERAL={1: u}) for u in (2, 1)]
for _r in (32768, 131072, 1 << 20):
    SWEEPS[f"float8_e4m3fn_cols{_r}_wide_general"] = (tc_plan, TC_WIDE_GENERAL, "float8_e4m3fn",
                                                       (_r, (1 << 29) // _r), 0,
                                                       [(40001, 2000), (32771, 4112), (70001, 208), (2049, 8208)])
# ... and their walk on a resident grid (COLS_ONE_PASS_MIN_CHUNKS past the strip's chunks: the general walk's
# grid-stride loop at COLS_WIDE_GENERAL's chunks in flight, no block turnover) where the H200 plans one pass of
# one-item strips (the short path of 16 rows read 4% above its one-pass plan on a resident grid in session 42); the
# same sums, the bits checked
for _r in (32, 64, 128, 256, 512):
    SWEEPS[f"float8_e4m3fn_cols{_r}_wide_resident"] = (
        tc_plan, [committed(tc_plan, *H200_WIDE, "COLS_WIDE_GENERAL", "COLS_ONE_PASS_MIN_CHUNKS")] + [
            dict(H200_WIDE, COLS_WIDE_GENERAL={1: u}, COLS_ONE_PASS_MIN_CHUNKS=1 << 30) for u in (2, 1)],
        "float8_e4m3fn", (_r, (1 << 29) // _r), 0, [(300, 2000), (64, 8208), (33, 30000), (40, 405504)])
# ... and their short path (COLS_WIDE_SHORT: at most 16 rows, one chunk per strip; (strips in flight per warp, blocks
# per SM), the spill-free settings) against the committed 64-column short path (0.822x `shuffle` at db78f48), in one
# pass (each warp loads its strips once, computes, stores and retires; at [16, 2^25] 16,384 blocks of 256 threads, 62
# waves at 2 blocks per SM) and on a resident grid (the kernel's grid-stride loop: no block turnover; 16-bit sums read
# 2-5% below one pass there in sessions 14-15, fp8 at (1, 4) 6% above it in session 42)
SWEEPS["float8_e4m3fn_cols16_wide_short"] = (
    tc_plan, [committed(tc_plan, *H200_WIDE, "COLS_WIDE_SHORT")] + [
        dict(H200_WIDE, COLS_WIDE_SHORT={1: (*s, o)}) for o in (False, True)
        for s in ((1, 4), (1, 3), (2, 3), (2, 2), (4, 2))],
    "float8_e4m3fn", (16, 1 << 25), 0, [(16, 1 << 20), (9, 100000), (16, 128 * 4099 + 48)])
# shuffle_cols over short columns with many column chunks: narrower strips (several threads per column, more and
# shorter blocks; another order of additions, the bits check follows the plan); the check shapes have column chunks
# enough for that path on an H100 (2 x 132 x 128)
for _dt, _isz in (("float16", 2), ("bfloat16", 2), ("float32", 4)):
    for _r in (32, 64, 128, 256):
        SWEEPS[f"shuffle_{_dt}_cols{_r}_many"] = (
            shuffle_plan, [dict(COLS_CT_MANY=c) for c in (shuffle_plan.COLS_CT_MANY, 128, 64, 32)],
            _dt, (_r, (1 << 29) // _isz // _r), 0, [(_r + 3, 36000 * 16 // _isz), (_r, 34000 * 16 // _isz + 3)],
            "shuffle")
# tc32_cols_tma: chunks brought by TMA into a ring of shared-memory buffers per warp (COLS_TMA_STAGES chunks in flight,
# at COLS_BLOCKS_PER_SM_TMA blocks per SM; the same chunks in the same order) against the register loop (stages 0);
# the check shapes (TMA for any size here) add a last chunk of 13 rows, a partial strip of 4 columns and few strips
# (their rows split: the register loop below COLS_TMA_LONG_ROWS rows, TMA from there). Run 31 also timed a refill
# before the step (after a proxy fence): no better (the committed setting first, then buffers and blocks per SM at
# every row count, the check shapes on TMA too). Runs 32-33 led to 2 blocks per SM from COLS_TMA_LONG_ROWS rows, 3
# below for both methods; the stages are swept below and from COLS_TMA_LONG_ROWS rows (COLS_TMA_STAGES_LONG) alike
_TMA_SETTINGS = {"fp32": ((2, 3), (0, 3), (3, 3), (3, 2), (4, 2), (2, 2)),
                 "tf32": ((2, 4), (0, 3), (2, 3), (3, 2), (2, 2))}
for _n in (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 1 << 20):
    for _prefix, _method in F32_METHODS.items():
        SWEEPS[f"{_prefix}_cols{_n}_tma"] = (
            tc32_plan, [committed(tc32_plan, "COLS_TMA_STAGES", "COLS_TMA_STAGES_LONG", "COLS_BLOCKS_PER_SM_TMA",
                                  "COLS_BLOCKS_PER_SM_TMA_LONG")]
            + [dict(COLS_TMA_STAGES=dict.fromkeys(F32_METHODS.values(), st),
                    COLS_TMA_STAGES_LONG=dict.fromkeys(F32_METHODS.values(), st),
                    COLS_BLOCKS_PER_SM_TMA=dict.fromkeys(F32_METHODS.values(), bl), COLS_BLOCKS_PER_SM_TMA_LONG=bl,
                    COLS_TMA_MIN_BYTES=0)
               for st, bl in _TMA_SETTINGS[_prefix]],
            "float32", (_n, (1 << 27) // _n), 0, FP32_COLS_CHECK + [(1000, 132), (2050, 256), (77, 4100), (20003, 64)],
            _method)
# ... and short columns (2-4 chunks per strip) through TMA too (COLS_TMA_MIN_CHUNKS) against the register loop at
# COLS_BLOCKS_PER_SM_FEW (min chunks 5); run 34 set the minimum per method
for _n in (32, 64):
    for _prefix, _method in F32_METHODS.items():
        SWEEPS[f"{_prefix}_cols{_n}_tma_few"] = (
            tc32_plan, [committed(tc32_plan, "COLS_TMA_MIN_CHUNKS"),
                        dict(COLS_TMA_MIN_CHUNKS=dict.fromkeys(F32_METHODS.values(), 5))]
            + [dict(COLS_TMA_MIN_CHUNKS=dict.fromkeys(F32_METHODS.values(), 2),
                    COLS_TMA_STAGES=dict.fromkeys(F32_METHODS.values(), st),
                    COLS_BLOCKS_PER_SM_TMA=dict.fromkeys(F32_METHODS.values(), bl), COLS_TMA_MIN_BYTES=0)
               for st, bl in ((2, 3), (4, 3), (2, 2), (4, 2))],
            "float32", (_n, (1 << 27) // _n), 0, FP32_COLS_CHECK + [(33, 4100), (64, 20000)], _method)
# ... and the few-chunk path (each warp loads all of its 2 chunks of a strip at once, then steps them:
# COLS_FEW_PATH_MAX_CHUNKS; 3-4 chunks: two warps per strip) against the register loop, and for tf32 against TMA
# (COLS_TMA_MIN_CHUNKS 5 hands its strips to the register loop or the few-chunk path). The checks: strips enough for
# the path's warps, aligned and not, whole and partial chunks
_FEW_CHECK = FP32_COLS_CHECK + [(32, 204800), (17, 204800), (32, 204803), (64, 102400), (50, 102403), (40, 102400)]
_FEW_TWO = dict.fromkeys(F32_METHODS.values(), 2)
_NO_TMA = dict(COLS_TMA_MIN_CHUNKS=dict.fromkeys(F32_METHODS.values(), 5))
for _n in (32, 48, 64):
    for _prefix, _method in F32_METHODS.items():
        SWEEPS[f"{_prefix}_cols{_n}_few_path"] = (
            tc32_plan, [committed(tc32_plan, "COLS_FEW_PATH_MAX_CHUNKS", "COLS_TMA_MIN_CHUNKS")]
            + ([dict(COLS_FEW_PATH_MAX_CHUNKS=_FEW_TWO, COLS_TMA_MIN_CHUNKS={"tensorcore": 4, "tensorcore_tf32": 3})]
               if _n <= 32 else
               [_NO_TMA, dict(_NO_TMA, COLS_FEW_PATH_MAX_CHUNKS=dict.fromkeys(F32_METHODS.values(), 4))]),
            "float32", (_n, (1 << 27) // _n), 0, _FEW_CHECK, _method)
# ... and rows 8-byte aligned but not 16 (b = 2 mod 4): two 8-byte loads per row of a lane's 4 columns instead of 4
# scalar ones (COLS_LOAD8), alone and with the few-chunk path's two warps per strip; strips of more than 4 chunks also
# without the few-chunk path in trips (COLS_FEW_LOOP: tf32's on an H200, where these rows keep tf32 off TMA)
_LOAD8 = dict(COLS_LOAD8=dict.fromkeys(F32_METHODS.values(), True))
_LOAD8_CHECK = FP32_COLS_CHECK + [(32, 204802), (17, 204802), (48, 102402), (16, 4098), (300, 1026), (37, 302)]
for _n in (16, 32, 48, 128, 1024, 8192):
    for _prefix, _method in F32_METHODS.items():
        SWEEPS[f"{_prefix}_cols{_n}_load8"] = (
            tc32_plan, [committed(tc32_plan, "COLS_LOAD8", "COLS_FEW_PATH_MAX_CHUNKS"), _LOAD8]
            + ([dict(_LOAD8, COLS_FEW_PATH_MAX_CHUNKS=dict.fromkeys(F32_METHODS.values(), 4))] if _n == 48 else [])
            + ([dict(COLS_FEW_LOOP=dict.fromkeys(F32_METHODS.values(), False))] if _n > 64 else []),
            "float32", (_n, (1 << 27) // _n // 4 * 4 - 2), 0, _LOAD8_CHECK, _method)
# ... and longer strips through the few-chunk path in trips of 2 chunks per warp (COLS_FEW_LOOP, 3 blocks per SM)
# against the register loop (the split) or tf32's TMA ring (below 1024 rows on an H200) and one-chunk pipeline
_FEW_LOOP = dict(COLS_FEW_LOOP=dict.fromkeys(F32_METHODS.values(), True))
_FEW_LOOP_CHECK = FP32_COLS_CHECK + [(128, 2000), (100, 2003), (77, 4002), (300, 2000), (128, 35000), (100, 70002)]
for _n in (64, 128, 256, 1024, 4096, 1 << 17):
    for _prefix, _method in F32_METHODS.items():
        SWEEPS[f"{_prefix}_cols{_n}_few_loop"] = (
            tc32_plan,
            [committed(tc32_plan, "COLS_FEW_LOOP", "COLS_TMA_MIN_CHUNKS"), _NO_TMA, dict(_NO_TMA, **_FEW_LOOP)],
            "float32", (_n, (1 << 27) // _n), 0, _FEW_LOOP_CHECK, _method)
# float32 rows of 17-32 (2 chunks) through tc32_rows' short path (TILE_SHORT_MAX_CHUNKS 2: every chunk of a warp's
# TILE_UNROLL_SHORT2 tiles loaded at once) against the tile loop
_SHORT2_CHECK = [(4099, 32), (70001, 32), (70001, 17), (70000, 30), (37, 300)]
for _n in (17, 24, 32):
    for _prefix, _method in F32_METHODS.items():
        SWEEPS[f"{_prefix}_rows{_n}_short2"] = (
            tc32_plan, [committed(tc32_plan, "TILE_SHORT_MAX_CHUNKS", "TILE_UNROLL_SHORT2")]
            + [dict(TILE_SHORT_MAX_CHUNKS=dict.fromkeys(F32_METHODS.values(), 2), TILE_UNROLL_SHORT2=u)
               for u in (2, 1)],
            "float32", ((1 << 27) // _n, _n), -1, _SHORT2_CHECK, _method)
# ... and rows of 33-64 (3-4 chunks) through it too (TILE_SHORT_MAX_CHUNKS 4: TILE_UNROLL_SHORT4 tiles of 3-4 chunks
# loaded at once) against the tile loop
_SHORT4_CHECK = [(4099, 64), (70001, 64), (70001, 33), (70000, 48), (70000, 60), (37, 300)]
for _n in (33, 48, 64):
    for _prefix, _method in F32_METHODS.items():
        SWEEPS[f"{_prefix}_rows{_n}_short4"] = (
            tc32_plan, [committed(tc32_plan, "TILE_SHORT_MAX_CHUNKS", "TILE_UNROLL_SHORT4"),
                        dict(TILE_SHORT_MAX_CHUNKS=dict.fromkeys(F32_METHODS.values(), 4), TILE_UNROLL_SHORT4=1)],
            "float32", ((1 << 27) // _n, _n), -1, _SHORT4_CHECK, _method)
# ... and rows of 65-128 (5-8 chunks; TILE_SHORT_MAX_CHUNKS 8) at 2 or 3 blocks per SM (TILE_SHORT8_BLOCKS_PER_SM)
# against the tile loop, rows of 128 also against tc32_rows4 (ROWS4_K from 129 hands them to the tile loop or the
# short path)
_SHORT8_CHECK = [(70001, 80), (70001, 127), (70003, 100), (70000, 128), (37, 300)]
_NO_ROWS4 = dict(ROWS4_K=rows4_k(129))
_SHORT8 = [dict(TILE_SHORT_MAX_CHUNKS=dict.fromkeys(F32_METHODS.values(), 8),
                TILE_SHORT_MAX_CHUNKS_SCALAR=dict.fromkeys(F32_METHODS.values(), 8), TILE_SHORT8_BLOCKS_PER_SM=b)
           for b in (2, 3)]
for _n in (80, 96, 112, 128):
    for _prefix, _method in F32_METHODS.items():
        SWEEPS[f"{_prefix}_rows{_n}_short8"] = (
            tc32_plan, [committed(tc32_plan, "TILE_SHORT_MAX_CHUNKS", "TILE_SHORT8_BLOCKS_PER_SM", "ROWS4_K")]
            + ([_NO_ROWS4] + [dict(_NO_ROWS4, **short8) for short8 in _SHORT8] if _n == 128 else _SHORT8),
            "float32", ((1 << 27) // _n, _n), -1, _SHORT8_CHECK, _method)
# ... and where the rows are split over blocks (few strips; COLS_TMA_SPLITS, run 36) at 2 or 3 blocks per SM (TMA's
# ring of 2 buffers from COLS_TMA_LONG_ROWS rows set for each, as an H100 plans: an H200 has none there)
_RING = dict(COLS_TMA_STAGES_LONG=dict.fromkeys(F32_METHODS.values(), 2))
for _n in (32768, 1 << 17, 1 << 20):
    for _prefix, _method in F32_METHODS.items():
        SWEEPS[f"{_prefix}_cols{_n}_tma_splits"] = (
            tc32_plan, [dict(_RING, COLS_TMA_SPLITS=True), dict(_RING, COLS_TMA_SPLITS=False),
                        dict(_RING, COLS_TMA_SPLITS=True, COLS_BLOCKS_PER_SM_TMA_LONG=3)],
            "float32", (_n, (1 << 27) // _n), 0, FP32_COLS_CHECK + [(20003, 64), (40000, 96)], _method)
# shuffle_cols over short fp16 / bf16 columns (32-256 rows, where tuned Triton and torch.compile read 1-2% faster in
# the segment runs): rows in flight per thread and blocks per SM (the same sums)
for _dt in ("float16", "bfloat16"):
    for _r in (32, 64, 128, 256):
        SWEEPS[f"shuffle_{_dt}_cols{_r}_unroll"] = (
            shuffle_plan, [dict(COLS_UNROLL=u, BLOCKS_PER_SM={"rows": 4, "cols": b})
                           for u, b in ((8, 2), (16, 2), (8, 3), (4, 4), (16, 1), (32, 1))],
            _dt, (_r, (1 << 28) // _r), 0, [(_r + 3, 40000), (_r, 34003)], "shuffle")
# shuffle_cols over 64-1024 rows (where torch.compile read 1-6% faster in the segment runs, its blocks loading a
# whole tile of rows at once): strip width (column chunks; BLOCK / width threads share a column), rows in flight per
# thread and blocks per SM together; 32 chunks with 16 rows in flight loads a 128-row strip in one round. The width
# changes the order of additions (step 3 of kernels/shuffle.cu): the bits check follows the plan
SHUFFLE_TILES = [committed(shuffle_plan, "COLS_CT_MANY", "COLS_CT_MAX", "COLS_UNROLL", "BLOCKS_PER_SM")]
SHUFFLE_TILES += [dict(COLS_CT_MANY=c, COLS_CT_MAX=min(c, 128), COLS_UNROLL=u, BLOCKS_PER_SM={"rows": 4, "cols": b})
                  for c, u, b in ((32, 8, 2), (32, 16, 2), (64, 8, 2), (64, 16, 2), (128, 8, 2), (32, 8, 3),
                                  (64, 8, 3), (16, 16, 2))]
for _dt, _isz in (("float16", 2), ("bfloat16", 2), ("float32", 4)):
    for _r in (64, 128, 256, 1024):
        SWEEPS[f"shuffle_{_dt}_cols{_r}_tile"] = (
            shuffle_plan, SHUFFLE_TILES, _dt, (_r, (1 << 29) // _isz // _r), 0,
            [(_r + 3, 36000 * 16 // _isz), (_r, 34000 * 16 // _isz + 3), (_r - 5, 1000)], "shuffle")
# ... and with every thread walking the whole column (the committed strips of BLOCK chunks over 64-512 rows): rows in
# flight and blocks per SM, one pass or a resident grid (tune_plans run 44: narrower strips lost 5-30% there on an
# H200; the blocks of few rows are short, so a block's first loads may leave its SM short of loads in flight)
SHUFFLE_OCCUPANCY = [dict(COLS_UNROLL=u, BLOCKS_PER_SM={"rows": 4, "cols": b}, ONE_PASS_COLS=p)
                     for u, b, p in ((shuffle_plan.COLS_UNROLL, shuffle_plan.BLOCKS_PER_SM["cols"], True), (8, 3, True),
                                     (4, 3, True), (4, 4, True), (16, 2, True), (8, 2, False), (8, 3, False),
                                     (4, 4, False))]
for _dt, _isz in (("float16", 2), ("bfloat16", 2), ("float32", 4)):
    for _r in (64, 128, 256, 512):
        SWEEPS[f"shuffle_{_dt}_cols{_r}_occupancy"] = (
            shuffle_plan, SHUFFLE_OCCUPANCY, _dt, (_r, (1 << 29) // _isz // _r), 0,
            [(_r + 3, 36000 * 16 // _isz), (_r, 34000 * 16 // _isz + 3)], "shuffle")
# ... and one work item per block (shuffle_cols<..., ONE_ITEM>: no work-item loop, no splits' combination, so far
# fewer registers) at more blocks per SM with fewer rows in flight, strips of BLOCK chunks or narrower (read_probe's
# col_walk, H200: narrow strips at 8 blocks per SM read 5-7% above a thread per column at 2). The strip width changes
# the order of additions (step 3): the bits check follows the plan
SHUFFLE_ONE_ITEM = [committed(shuffle_plan, "COLS_ONE_ITEM_TUNING", "COLS_CT_MANY")]
SHUFFLE_ONE_ITEM += [dict(COLS_ONE_ITEM_TUNING={1: (u, b), 2: (u, b), 4: (u, b)}, COLS_CT_MANY=c)
                     for c, u, b in ((256, 8, 2), (256, 2, 8), (256, 4, 8), (256, 2, 6), (256, 4, 6), (256, 4, 4),
                                     (128, 2, 8), (32, 2, 8), (32, 4, 6), (16, 2, 8), (8, 2, 8))]
for _dt, _isz, _rs in (("float16", 2, (32, 64, 128, 256, 512, 1024, 2048)), ("bfloat16", 2, (64, 128, 256, 1024)),
                       ("float32", 4, (64, 128, 256, 1024)), ("float8_e4m3fn", 1, (16, 32, 64, 128, 1024))):
    for _r in _rs:
        SWEEPS[f"shuffle_{_dt}_cols{_r}_one_item"] = (
            shuffle_plan, SHUFFLE_ONE_ITEM, _dt, (_r, (1 << 29) // _isz // _r), 0,
            [(_r + 3, 36000 * 16 // _isz), (_r, 34000 * 16 // _isz + 3), (_r - 5, 1000)], "shuffle")
# ... in torch.compile's tile (benchmarks/inductor_replica.py, session 43, scrubbed turns: inductor's [64 columns x 4
# rows] fp32 tile on 8 warps read [128, 2^20] at 4,515 GB/s against `shuffle`'s 4,440; its loop unrolled whole, each
# thread issues all 32 of its 4-byte loads at once, 32 KiB per block in flight): narrow strips whose j lanes load their
# whole share of the rows at once (rows in flight >= rows / lanes), at 4-8 blocks per SM. Timed with --turns
SHUFFLE_TILE_AT_ONCE = [committed(shuffle_plan, "COLS_ONE_ITEM_TUNING", "COLS_CT_MANY")]
SHUFFLE_TILE_AT_ONCE += [dict(COLS_ONE_ITEM_TUNING={1: (u, b), 2: (u, b), 4: (u, b)}, COLS_CT_MANY=c)
                         for c, u, b in ((16, 8, 4), (16, 8, 6), (32, 8, 4), (64, 8, 4), (128, 8, 4), (32, 16, 4))]
for _dt, _isz in (("float32", 4), ("float16", 2), ("float8_e4m3fn", 1)):
    for _r in (16, 32, 64, 128, 256, 512):
        SWEEPS[f"shuffle_{_dt}_cols{_r}_tile_at_once"] = (
            shuffle_plan, SHUFFLE_TILE_AT_ONCE, _dt, (_r, (1 << 29) // _isz // _r), 0,
            [(_r + 3, 36000 * 16 // _isz), (_r, 34000 * 16 // _isz + 3), (_r - 5, 1000)], "shuffle")
# rows of 2-4 chunks of 32 (33-128 elements) in tc_rows' SHORT path: whole row tiles in flight per warp at 4 blocks per
# SM, against chunks in flight at 2 blocks per SM (the committed path; the same mmas in the same order, bits checked)
# (bytes in flight per warp: 1, one tile). Run 46 (H200) swept tiles in flight by chunks per tile alone, run 47 the
# bytes in flight (2,560 and 4,096)
WHOLE_TILE_SETTINGS = [committed(tc_plan, "ROWS_SHORT_MAX_CHUNKS", "ROWS_SHORT_BYTES_IN_FLIGHT")]
WHOLE_TILE_SETTINGS += [dict(ROWS_SHORT_MAX_CHUNKS=c, ROWS_SHORT_BYTES_IN_FLIGHT=b)
                        for c, b in ((4, 3072), (4, 1), (4, 2048), (4, 4096), (3, 3072), (2, 3072))]
for _dt, _isz, _k in (*(("float16", 2, _k) for _k in (33, 40, 48, 64, 80, 96, 112, 128)),
                      *(("bfloat16", 2, _k) for _k in (40, 64, 128)),
                      *(("float8_e4m3fn", 1, _k) for _k in (40, 64, 96, 128))):
    SWEEPS[f"{_dt}_rows{_k}_whole_tiles"] = (tc_plan, WHOLE_TILE_SETTINGS, _dt, ((1 << 29) // _isz // _k, _k), -1,
                                             [(4099, _k), (333, _k - 3), (5, _k)])
# rows of 16 elements: tc_rows16 (one load of 8 elements per lane, a shuffle of half of it per tile) against tc_rows'
# SHORT path (two loads of 4 elements per lane), by row tiles in flight per warp (fp8: twice these, so not 8: 16
# spill) and grid (one pass or resident); the same 16 values per mma row either way, so the same sums (the bits
# check also takes rows of 8); the committed setting first, then each other (kernel, tiles, grid) for the format
ROWS16_SETTINGS = [dict(ROWS16_PAIRED_LOADS={2: p, 1: p}, ROWS_UNROLL_SHORT={4: u, 8: 2},
                        ONE_PASS_SHORT_TILES={4: o, 8: True}, ROWS16_ONE_PASS=o)
                   for p, u, o in ((False, 4, True), (False, 4, False), (True, 4, True), (True, 4, False),
                                   (True, 8, True), (True, 8, False), (True, 2, True))]
ROWS16_COMMITTED = committed(tc_plan, "ROWS16_PAIRED_LOADS", "ROWS_UNROLL_SHORT", "ONE_PASS_SHORT_TILES",
                             "ROWS16_ONE_PASS")


def _rows16_launch(setting: dict, isz: int) -> tuple:
    """(tc_rows16, tiles in flight, one pass) of a ROWS16 setting for elements of ``isz`` bytes."""
    paired = setting["ROWS16_PAIRED_LOADS"][isz]
    one_pass = setting["ROWS16_ONE_PASS"] if paired else setting["ONE_PASS_SHORT_TILES"][4]
    return paired, setting["ROWS_UNROLL_SHORT"][4], one_pass


for _dt, _isz in (("float16", 2), ("bfloat16", 2), ("float8_e4m3fn", 1)):
    SWEEPS[f"{_dt}_rows16_pairs"] = (
        tc_plan, [ROWS16_COMMITTED] + [s for s in ROWS16_SETTINGS
                                       if _rows16_launch(s, _isz) != _rows16_launch(ROWS16_COMMITTED, _isz)
                                       and (_isz == 2 or s["ROWS_UNROLL_SHORT"][4] < 8)],
        _dt, (1 << 24, 16), -1, [(4099, 16), (70001, 16), (333, 8)])
# fp8 rows of 16 through tc_rows16's whole-row loads (ROWS16_WHOLE_ROWS: a lane loads a whole row, a warp 32 rows,
# a word transpose per quad; the same sums): units in flight (half the tiles, so ROWS_UNROLL_SHORT 4 -> 4 units of 32
# rows, 2 -> 2) and grid, against the committed 8-element loads (0.76x `shuffle` in the 9dcc468 segment study)
SWEEPS["float8_e4m3fn_rows16_whole"] = (
    tc_plan, [committed(tc_plan, "ROWS16_WHOLE_ROWS", "ROWS_UNROLL_SHORT", "ROWS16_ONE_PASS")]
    + [dict(ROWS16_WHOLE_ROWS={1: True}, ROWS_UNROLL_SHORT={4: u, 8: 2}, ROWS16_ONE_PASS=o)
       for u, o in ((4, True), (2, True), (4, False), (2, False))],
    "float8_e4m3fn", (1 << 25, 16), -1, [(4099, 16), (70001, 16), (17, 16), (333, 8)])
# fp8 rows of 17-32 through tc_rows32 (ROWS32_HALF_ROW_LOADS: half a row per lane, one 16-byte load where tc_rows
# takes two 8-byte loads; the same sums) at tc_rows' tiles in flight (fp8: twice ROWS_UNROLL_SHORT[8], so 4) and 2,
# against the committed tc_rows (0.84x `shuffle` in the 9dcc468 segment study)
SWEEPS["float8_e4m3fn_rows32_half"] = (
    tc_plan, [committed(tc_plan, "ROWS32_HALF_ROW_LOADS", "ROWS_UNROLL_SHORT")]
    + [dict(ROWS32_HALF_ROW_LOADS={1: True}, ROWS_UNROLL_SHORT={4: 4, 8: u}) for u in (2, 1)],
    "float8_e4m3fn", (1 << 24, 32), -1, [(4099, 32), (70001, 32), (17, 32), (4099, 20), (333, 32)])
# first-axis sums of 16 rows (tc_cols' short path: one 16-row chunk per 64-column strip, 4 blocks per SM): strips in
# flight per warp and a grid of one pass against the resident grid (the same sums)
for _dt in ("float16", "bfloat16"):
    SWEEPS[f"{_dt}_cols16_short"] = (tc_plan, [dict(COLS_UNROLL_SHORT=u, COLS_SHORT_ONE_PASS=o)
                                               for u, o in ((1, True), (1, False), (2, True), (2, False))],
                                     _dt, (16, 1 << 24), 0, [(16, 4099), (5, 300), (16, 1 << 16)])
# Blocks shaped like torch.compile's (session 15; its kernels kept in the segment CSVs' notes): first-axis sums of
# 128-256 rows take XBLOCK 256 x R0_BLOCK 2 on 4 warps (128-thread programs, up to 16 per SM, one small load per thread
# in flight), long rows R0_BLOCK 2048 on 16 warps (a 512-thread program per row). shuffle_cols' one-item walk in blocks
# of 128 threads (strips of 32-128 chunks: 4-1 threads per column, each walking r / that many rows) at 8-16 blocks per
# SM, and tc_rows_stream in blocks of 512 (16 warps per row) or at 6 blocks of 256 per SM. The block size and the strip
# width change the order of additions (the warps' and j lanes' folds): the bits check follows the plan (the twins read
# block, jt, nj and wpt from it); the check shapes stay on those paths
SMALL_BLOCKS = [committed(shuffle_plan, "BLOCK", "COLS_CT_MANY", "COLS_ONE_ITEM_TUNING")]
SMALL_BLOCKS += [dict(BLOCK=b, COLS_CT_MANY=c, COLS_ONE_ITEM_TUNING={1: (u, m), 2: (u, m), 4: (u, m)})
                 for b, c, u, m in ((128, 32, 2, 16), (128, 32, 2, 12), (128, 64, 2, 16), (128, 128, 4, 8),
                                    (128, 128, 2, 12), (256, 256, 4, 4))]
for _dt, _isz, _r in (("float16", 2, 128), ("float16", 2, 256), ("bfloat16", 2, 128), ("float32", 4, 128)):
    SWEEPS[f"shuffle_{_dt}_cols{_r}_small_blocks"] = (
        shuffle_plan, SMALL_BLOCKS, _dt, (_r, (1 << 29) // _isz // _r), 0,
        [(_r + 3, 36000 * 16 // _isz), (_r, 34000 * 16 // _isz + 3)], "shuffle")
# ... and with its loads of whole chunks evict-first in L1 and L2 (COLS_EVICT_FIRST_MIN_ROWS: from that many rows;
# read_probe part 1c, session 16, H200: a whole fp16 first-axis sum in inductor's shape read 4,419 GB/s at [128, 2^21]
# with evict-first loads against 4,289-4,304 with plain or ld.global.nc ones; the pure walks showed no such
# difference), at the committed occupancy and others; the same values loaded, so the same sums (the bits checked; the
# check shapes stay small for long columns)
COLS_LOADS = [committed(shuffle_plan, "COLS_EVICT_FIRST_MIN_ROWS", "COLS_ONE_ITEM_TUNING")]
COLS_LOADS += [dict(COLS_EVICT_FIRST_MIN_ROWS={1: 0, 2: 0, 4: 0})]
COLS_LOADS += [dict(COLS_EVICT_FIRST_MIN_ROWS={1: m0, 2: m0, 4: m0}, COLS_ONE_ITEM_TUNING={1: (u, m), 2: (u, m),
                                                                                          4: (u, m)})
               for m0, u, m in ((0, 8, 2), (0, 4, 6), (0, 2, 8), (1 << 62, 8, 2))]
for _dt, _isz, _rs in (("float16", 2, (32, 64, 128, 256, 1024, 4096, 1 << 16, 1 << 20)), ("bfloat16", 2, (128, 1024)),
                       ("float32", 4, (32, 64, 128, 256, 1024, 1 << 16)), ("float8_e4m3fn", 1, (64, 128, 1024))):
    for _r in _rs:
        SWEEPS[f"shuffle_{_dt}_cols{_r}_load"] = (
            shuffle_plan, COLS_LOADS, _dt, (_r, (1 << 29) // _isz // _r), 0,
            [(_r + 3, 36000 * 16 // _isz), (_r, 34000 * 16 // _isz + 3), (_r - 5, 1000)] if _r <= 4096
            else [(_r + 3, 40), (_r, 67), (_r - 5, 8)], "shuffle")
# ... the same evict-first loads (session 17) in tc_cols' one-item walk (16-bit data) and shuffle_rows, from the first
# row or chunk, against the module values (none; shuffle_rows: none again last, A/B/A, for the run's noise); the same
# values loaded, so the same sums (the bits checked).
# (tc_rows_stream with them read level with its __ldcs loads, -0.5..+0.3%, and was not kept: run of session 17)
TC_COLS_LOADS = [committed(tc_plan, "COLS_EVICT_FIRST_MIN_ROWS"), dict(COLS_EVICT_FIRST_MIN_ROWS={2: 0})]
for _dt, _rs in (("float16", (64, 128, 256, 1024, 4096)), ("bfloat16", (128, 1024))):
    for _r in _rs:
        SWEEPS[f"{_dt}_cols{_r}_load"] = (tc_plan, TC_COLS_LOADS, _dt, (_r, (1 << 28) // _r), 0,
                                          [(_r + 3, 36000 * 8), (_r, 34000 * 8 + 3), (_r - 5, 1000)])
# ... and in fp8's 128-column strips (lanes load 16 bytes per row there too; session 39), from the first row, at
# candidates that take the hint (NVRTC sm_90 with it: (2, 2) 112 registers, (1, 3) 74; the planner keeps it off 4
# chunks in flight, which spill), with the same candidates without it (session 37 read (2, 2) 1-2% over (4, 2) at
# 4096-8192 rows), against the module values (64-column strips); the unpatched run first is the H200's plan. Session
# 40 (H200, tune_fp8_wide.log): the hint read -1.5..+0.9% against the same candidates without it, so no fp8 hint; (2, 2)
# without it read 2.2-3.6% over (4, 2) from 1024 rows and behind it at 64-256: COLS_WIDE_LONG_STRIPS
TC_COLS_LOADS_FP8 = [committed(tc_plan, "COLS_WIDE_STRIPS", "COLS_WIDE_LONG_STRIPS", "COLS_EVICT_FIRST_MIN_ROWS")] + [
    dict(COLS_WIDE_STRIPS={1: c}, COLS_WIDE_LONG_STRIPS={}, COLS_EVICT_FIRST_MIN_ROWS=h)
    for c, h in ((((2, 2), (1, 3)), {2: 64, 1: 0}), (((2, 2), (1, 3)), {2: 64}), (((1, 3),), {2: 64, 1: 0}))]
for _r in (64, 128, 256, 512, 1024, 2048, 4096, 8192):
    SWEEPS[f"float8_e4m3fn_cols{_r}_wide_load"] = (tc_plan, TC_COLS_LOADS_FP8, "float8_e4m3fn",
                                                   (_r, (1 << 29) // _r), 0, SWEEPS["float8_e4m3fn_cols64_wide"][5])
SHUFFLE_ROWS_LOADS = [committed(shuffle_plan, "ROWS_EVICT_FIRST_MIN_CHUNKS"),
                      dict(ROWS_EVICT_FIRST_MIN_CHUNKS={1: 0, 2: 0, 4: 0}), dict(ROWS_EVICT_FIRST_MIN_CHUNKS={})]
for _dt, _isz, _ks in (("float32", 4, (16, 32, 64, 256, 1024, 2048, 4096, 32768, 1 << 20)),
                       ("float16", 2, (16, 32, 64, 1024, 32768))):
    for _k in _ks:
        SWEEPS[f"shuffle_{_dt}_rows{_k}_load"] = (shuffle_plan, SHUFFLE_ROWS_LOADS, _dt, ((1 << 29) // _isz // _k, _k),
                                                  -1, [(3, _k), (37, _k), (5, _k + 4), (1000, 65)], "shuffle")
# (STREAM_LONG_TUNING emptied: each setting's chunks in flight and blocks per SM hold for the long rows too)
WIDE_BLOCKS = [committed(tc_plan, "BLOCK", "STREAM_UNROLL", "STREAM_BLOCKS_PER_SM", "STREAM_LONG_TUNING")]
WIDE_BLOCKS += [dict(BLOCK=b, STREAM_UNROLL=u, STREAM_BLOCKS_PER_SM=m, STREAM_LONG_TUNING=())
                for b, u, m in ((512, 2, 4), (512, 2, 3), (512, 4, 2), (256, 2, 6), (256, 8, 3))]
for _k in (8192, 32768, 65536):
    SWEEPS[f"rows{_k}_wide_blocks"] = (tc_plan, WIDE_BLOCKS, "float16", ((1 << 29) // 2 // _k, _k), -1,
                                       [(3, _k), (37, _k), (5, _k + 256)])
# fp8 short rows streamed a warp per row (tc_rows_stream, 1-4 chunks of 512 values per row): chunks in flight per warp
# (rows in flight = that // chunks per row): the committed setting, then 8, 4 and 2 uncapped (SHORT_ROWS_MAX_IN_FLIGHT:
# 8 with rows of 4 chunks spills on sm_90 at 4 blocks per SM, so the plan caps it); the same sums: each row's chunks in
# the same order
for _k in (512, 1024, 2048):
    SWEEPS[f"e4m3_rows{_k}_in_flight"] = (
        tc_plan, [committed(tc_plan, "SHORT_ROWS_CHUNKS_IN_FLIGHT", "SHORT_ROWS_MAX_IN_FLIGHT")]
        + [dict(SHORT_ROWS_CHUNKS_IN_FLIGHT={1: f, 2: 8}, SHORT_ROWS_MAX_IN_FLIGHT={}) for f in (8, 4, 2)],
        "float8_e4m3fn", ((1 << 29) // _k, _k), -1, [(4099, _k), (333, _k - 3), (5, _k)])
# fp8 rows of one 512-byte chunk (512 elements; 0.914x `shuffle` in the db78f48 segment study, where 16-bit rows of
# one chunk read level with it) through tc_rows_stream: SHORT_ROWS_STREAM_TUNING's (rows in flight per warp, blocks
# per SM), the module's (none: the H100's 8 on 4) first (an H200 plans 4 on 6 since session 38, timed unpatched before
# them); nvcc sm_90 (session 37): 8 on 3-4 64-67 registers, 4 on 3-6 40-42, none spills (8 on 5 and 16 on 3 do). The
# same sums: each row's chunk alone, the same fold
E4M3_ROWS512 = [committed(tc_plan, "SHORT_ROWS_STREAM_TUNING")] + [
    dict(SHORT_ROWS_STREAM_TUNING={(1, 1): (f, b)}) for f, b in ((8, 3), (8, 4), (4, 3), (4, 4), (4, 5), (4, 6))]
SWEEPS["float8_e4m3fn_rows512_stream"] = (tc_plan, E4M3_ROWS512, "float8_e4m3fn", (1 << 20, 512), -1,
                                          [(4099, 512), (333, 509), (5, 512)])
# tc_flat over a one-pass grid of short blocks (FLAT_ROUNDS rounds of BLOCK x FLAT_UNROLL vectors each, their partials
# in two levels) against the resident grid (the committed setting first); another order of additions: the bits check
# follows the plan (with no minimum of waves, its first shape has 257 blocks at one round: two groups). Run 45 (H200)
# swept 1, 2 and 4 rounds too: 0.56-0.93x the resident grid; 4 rounds is back for fp8 (session 20: fp32 on an H100
# read best at 4)
FLAT_ROUNDS_SETTINGS = [committed(tc_plan, "FLAT_ROUNDS", "FLAT_ONE_PASS", "FLAT_ONE_PASS_MIN_WAVES",
                                  "FLAT_ONE_PASS_SIZE_MIN_WAVES")]
FLAT_ROUNDS_SETTINGS += [dict(FLAT_ROUNDS={1: r, 2: r}, FLAT_ONE_PASS={}, FLAT_ONE_PASS_MIN_WAVES=0,
                              FLAT_ONE_PASS_SIZE_MIN_WAVES={}) for r in (0, 4, 8, 16, 32, 64)]
for _dt, _n in (*(("float16", 1 << _e) for _e in range(25, 31)), ("bfloat16", 1 << 28), ("bfloat16", 1 << 30),
                ("float8_e4m3fn", 1 << 29), ("float8_e4m3fn", 1 << 31)):
    SWEEPS[f"{_dt}_flat_rounds_2p{_n.bit_length() - 1}"] = (
        tc_plan, FLAT_ROUNDS_SETTINGS, _dt, (_n,), None, [((1 << 20) + 4099,), (4099,), (77,)])
# ... and that one-pass walk with more vectors in flight per thread (FLAT_ONE_PASS: (unroll, blocks per SM), rounds
# chosen for blocks of 256 KiB as the H200's 16-bit 2 x 32; fp8's 16 on 2 at 4 rounds too), the committed setting first
# (fp8 on an H200: 16 on 2 at 4 rounds from 6 waves, session 45), then the one-pass grid of the module's 2 on 5 at 32
# rounds. Another order of additions for another unroll (the bits check follows the plan). NVRTC sm_90: 48 registers
# for fp16 up to 8 on 5, fp8 8 on 3-4 60, 16 on 2 80-92, no spills
FLAT_ONE_PASS_SETTINGS = ((2, 5, 32), (4, 4, 16), (4, 5, 16), (8, 3, 8), (8, 4, 8), (8, 5, 8), (16, 2, 4))
for _dt, _e in (("float16", 28), ("float16", 29), ("float16", 30), ("float8_e4m3fn", 28), ("float8_e4m3fn", 29),
                ("float8_e4m3fn", 30), ("float8_e5m2", 30)):
    _isz = 1 if _dt.startswith("float8") else 2
    SWEEPS[f"{_dt}_flat_one_pass_2p{_e}"] = (
        tc_plan, [committed(tc_plan, "FLAT_ROUNDS", "FLAT_ONE_PASS", "FLAT_ONE_PASS_MIN_WAVES",
                            "FLAT_ONE_PASS_SIZE_MIN_WAVES")]
        + [dict(FLAT_ROUNDS={_isz: r}, FLAT_ONE_PASS={_isz: (u, b)}, FLAT_ONE_PASS_MIN_WAVES=0,
                FLAT_ONE_PASS_SIZE_MIN_WAVES={})
           for u, b, r in FLAT_ONE_PASS_SETTINGS if (u, b) != (8, 5) or _isz == 2],  # fp8 8 on 5 spills
        _dt, (1 << _e,), None, [((1 << 20) + 4099,), (4099,), (77,)])
# ... and in blocks of 32-128 threads (BLOCK patched: a block's epilogue waits on fewer warps, a block of one warp
# on none; more, shorter blocks; the warps' fold and the groups of the two-level combination follow BLOCK, so another
# order of additions: the bits check follows the plan), the committed setting first. NVRTC sm_90: 48 registers (fp8 8
# in flight 60), no spills
FLAT_SMALL_BLOCKS = ((256, 2, 5, 32), (128, 2, 10, 32), (128, 4, 8, 16), (128, 4, 10, 16), (64, 2, 20, 32),
                     (64, 4, 16, 32), (64, 4, 20, 16), (32, 4, 32, 32), (32, 8, 32, 16), (32, 8, 24, 16))
for _dt, _e in (("float16", 28), ("float16", 30), ("float8_e4m3fn", 30)):
    _isz = 1 if _dt.startswith("float8") else 2
    SWEEPS[f"{_dt}_flat_small_blocks_2p{_e}"] = (
        tc_plan, [committed(tc_plan, "BLOCK", "FLAT_ROUNDS", "FLAT_ONE_PASS", "FLAT_ONE_PASS_MIN_WAVES",
                            "FLAT_ONE_PASS_SIZE_MIN_WAVES")]
        + [dict(BLOCK=t, FLAT_ROUNDS={_isz: r}, FLAT_ONE_PASS={_isz: (u, b)}, FLAT_ONE_PASS_MIN_WAVES=0,
                FLAT_ONE_PASS_SIZE_MIN_WAVES={})
           for t, u, b, r in FLAT_SMALL_BLOCKS],
        _dt, (1 << _e,), None, [((1 << 20) + 4099,), (4099,), (77,)])
# ... and shuffle_flat and tc32_flat (fp32 full sums) over the same one-pass walk (session 20), the committed setting
# first, then the resident grid and 4-32 rounds with no minimum of waves
for _n in (1 << 26, 1 << 27, 1 << 28, 1 << 30):
    SWEEPS[f"shuffle_fp32_flat_rounds_2p{_n.bit_length() - 1}"] = (
        shuffle_plan, [committed(shuffle_plan, "FLAT_ROUNDS", "FLAT_ONE_PASS_MIN_WAVES")]
        + [dict(FLAT_ROUNDS={4: r}, FLAT_ONE_PASS_MIN_WAVES=0) for r in (0, 4, 8, 16, 32)],
        "float32", (_n,), None, [((1 << 20) + 4099,), (4099,), (77,)], "shuffle")
    for _prefix, _method in F32_METHODS.items():
        SWEEPS[f"{_prefix}_flat_rounds_2p{_n.bit_length() - 1}"] = (
            tc32_plan, [committed(tc32_plan, "FLAT_ROUNDS", "FLAT_ONE_PASS_MIN_WAVES")]
            + [dict(FLAT_ROUNDS={_method: r}, FLAT_ONE_PASS_MIN_WAVES=0) for r in (0, 4, 8, 16, 32)],
            "float32", (_n,), None, [((1 << 20) + 4099,), (4099,), (77,)], _method)
# fp8 full sums on the resident grid (FLAT_RESIDENT, session 22): 16-byte vectors in flight per thread and blocks per
# SM (the module's setting first: 2 on 6, FLAT_UNROLL on BLOCKS_PER_SM); another order of additions for another unroll
# (the bits check follows the plan)
FLAT_RESIDENT_SETTINGS = [committed(tc_plan, "FLAT_RESIDENT")]
FLAT_RESIDENT_SETTINGS += [dict(FLAT_RESIDENT={1: ub}) for ub in ((3, 5), (4, 4), (6, 4), (8, 3), (8, 4))]
for _dt, _e in (("float8_e4m3fn", 28), ("float8_e4m3fn", 29), ("float8_e4m3fn", 30), ("float8_e5m2", 30)):
    SWEEPS[f"{_dt}_flat_unroll_2p{_e}"] = (tc_plan, FLAT_RESIDENT_SETTINGS, _dt, (1 << _e,), None,
                                           [((1 << 20) + 4099,), (4099,), (77,)])
# ... and 16-bit full sums on the resident grid (2^27 and below on an H200, whose larger sums take the one-pass grid),
# from the small sums whose grid is one cluster to 2^27; run them with --graph, the GPU's time per call at every size.
# Session 23 (H200, tune_plans *_flat_pipelined_*): fp16 4 on 4 read 2^26 3,831 GB/s against 2 on 6's 3,754, 2^27
# 4,151 / 4,083; the walk that loaded each trip's vectors before the previous trip's mmas (since removed) gained
# nothing over it (fp16 resident and one-pass, fp8 resident 0.98-1.0x, fp8 one-pass 0.85-0.99x)
for _dt, _e in (*(("float16", e) for e in (14, 16, 17, 18, 20, 22, 24, 26, 27)), ("bfloat16", 16), ("bfloat16", 27)):
    SWEEPS[f"{_dt}_flat_unroll_2p{_e}"] = (
        tc_plan, [committed(tc_plan, "FLAT_RESIDENT")]
        + [dict(FLAT_RESIDENT={2: ub}) for ub in ((4, 4), (3, 5), (6, 4), (8, 4), (8, 3))],
        _dt, (1 << _e,), None, [((1 << 20) + 4099,), (65536 + 3,), (4099,), (77,)])
# ... and the small full sums whose resident grid is one cluster of 2-16 blocks, against one block of 8 or 16 vectors
# per thread looping over 1-8 trips (FLAT_ONE_BLOCK; run them with --graph). Session 23 (H200): one block of 16
# vectors per thread, one trip, 1.94 us at fp16 2^15 against 2.66-2.79 as clusters of 2-8. The sweep times one
# L2-resident buffer: two trips read faster here (2^16 2.56 us against 2.82) but slower in the throughput study, whose
# inputs come from DRAM (3.20 against 2.99)
for _dt, _e in (("float16", 15), ("float16", 16), ("float16", 17), ("bfloat16", 16), ("float8_e4m3fn", 16),
                ("float8_e4m3fn", 17)):
    _isz = 1 if _dt.startswith("float8") else 2
    SWEEPS[f"{_dt}_flat_small_grid_2p{_e}"] = (
        tc_plan, [committed(tc_plan, "FLAT_ONE_BLOCK")]
        + [dict(FLAT_RESIDENT={_isz: ub}) for ub in ((2, 6), (4, 4))]
        + [dict(FLAT_ONE_BLOCK={_isz: (u, 2, t)}) for u, t in ((16, 1), (16, 2), (16, 4), (8, 4), (8, 8))],
        _dt, (1 << _e,), None, [(5000,), (30011,), (65536,), (131075,)])
# ... and the fp32 tensor-core sums' (tc32's FLAT_ONE_BLOCK, per method; session 25 prepared it, no GPU plans it yet):
# the split's 2^13-2^15 take 3.0-3.2 us of GPU time in graphs as grids of 2-8 blocks (b69e600 study), tf32's 2^13 2.0
# as its resident grid's one block of 8 vectors per thread. Run with --graph
for _m, _e in (("tensorcore", 13), ("tensorcore", 14), ("tensorcore", 15), ("tensorcore_tf32", 14)):
    SWEEPS[f"fp32_{_m}_flat_small_grid_2p{_e}"] = (
        tc32_plan, [committed(tc32_plan, "FLAT_ONE_BLOCK")]
        + [dict(FLAT_ONE_BLOCK={_m: (u, 2, t)}) for u, t in ((16, 1), (16, 2), (8, 2), (8, 4))],
        "float32", (1 << _e,), None, [(5000,), (16387,), (32771,)], _m)
# small full sums whose resident grid runs as one thread-block cluster (FLAT_CLUSTER_MAX_BLOCKS; the same bits, the
# check shapes have 2-16 blocks) against the last-block combination (the committed setting first): GPU time, so run
# them with --graph (session 21: an H100's fp16 2^13-2^16 took 3.2-3.6 us in graphs against 1.5-1.6 at one block)
for _e in (13, 14, 15, 16, 17):
    for _dt, _module, _method in (("float16", tc_plan, "tensorcore"), ("float8_e4m3fn", tc_plan, "tensorcore"),
                                  ("float16", shuffle_plan, "shuffle"), ("float32", shuffle_plan, "shuffle")):
        SWEEPS[f"{_method}_{_dt}_flat_cluster_2p{_e}"] = (
            _module, [committed(_module, "FLAT_CLUSTER_MAX_BLOCKS"), dict(FLAT_CLUSTER_MAX_BLOCKS=16)],
            _dt, (1 << _e,), None, [(5000,), (30011,), (65536,), (131075,)], _method)
# tc32_flat's resident grid (the split below 2^29 on an H200) with more 16-byte vectors in flight per thread: at 2^22-2^25
# the split reads 0.87-0.93x shuffle in GPU time (throughput study at b69e600) where both walk a resident grid, shuffle
# with 8 vectors in flight per thread on 4 blocks per SM, the split with 4 (NVRTC sm_90: 8 on 4 64 registers, 8 on 3
# 80, 6 on 4 64, no spills). Run with --graph: the GPU's time per call
for _lg in (24, 25):
    SWEEPS[f"fp32_flat_resident_2p{_lg}"] = (
        tc32_plan, [committed(tc32_plan, "FLAT_UNROLL", "FLAT_BLOCKS_PER_SM")]
        + [dict(FLAT_UNROLL={"tensorcore": u, "tensorcore_tf32": 8}, FLAT_BLOCKS_PER_SM=b)
           for u, b in ((8, 4), (8, 3), (6, 4), (8, 2))],
        "float32", (1 << _lg,), None, [((1 << 18) + 7,), (4099,)])
# few long rows streamed with splits (tc_rows_stream, tc32_rows_stream): the fewest splits that fill the resident
# blocks (STREAM_SPLIT_FILL) against about 4 waves whatever their last one holds (128 rows: 17 splits, 82% of 5 waves
# on an H100); another order of additions: the bits check follows the plan (its shapes split). Run 32 swept a cap on
# the waves (1, 2, 4, 8, 16; a788841): one wave won, the splits that the fill rule gives on these shapes
STREAM_SPLIT_SETTINGS = [dict(STREAM_SPLIT_FILL=f) for f in (True, False)]
STREAM_SPLIT_CHECK = {4: [(5, 65540), (130, 20000), (33, 100004)], 2: [(5, 131080), (130, 40000), (33, 200008)]}
for _k in (1 << 18, 1 << 19, 1 << 20, 447392):  # 447,392: 300 rows (5 splits fill 95% of 3 waves)
    for _prefix, _method in F32_METHODS.items():
        SWEEPS[f"{_prefix}_rows{_k}_split_fill"] = (tc32_plan, STREAM_SPLIT_SETTINGS, "float32",
                                                    ((1 << 27) // _k, _k), -1, STREAM_SPLIT_CHECK[4], _method)
    if _k > 1 << 18:
        for _dt in ("float16", "bfloat16"):
            SWEEPS[f"{_dt}_rows{2 * _k}_split_fill"] = (tc_plan, STREAM_SPLIT_SETTINGS, _dt,
                                                        ((1 << 28) // (2 * _k), 2 * _k), -1, STREAM_SPLIT_CHECK[2])
# tc32_rows_stream: 256-element chunks in flight per warp and blocks per SM (the same sums: chunks fold in order)
for _k in (2048, 4096, 8192, 16384, 1 << 20):
    for _prefix, _method in F32_METHODS.items():
        SWEEPS[f"{_prefix}_rows{_k}_stream_unroll"] = (
            tc32_plan, [dict(STREAM_UNROLL=u, STREAM_BLOCKS_PER_SM=b) for u, b in ((2, 4), (4, 3), (4, 2), (1, 4),
                                                                                 (2, 3), (8, 2))],
            "float32", ((1 << 27) // _k, _k), -1, [(4500, 2052), (33, 100004), (3, _k)], _method)
# tc_rows_stream on an H200 (session 9): chunks in flight per warp, blocks per SM and the steps per warp before more
# warps share a row, together (the tuning of each alone on an H100 picked 4 on 4 blocks per SM and one step; an H200
# read rows of 4096 8% faster with 16 in flight on 2 blocks per SM); the same sums whatever the geometry
STREAM_GEOMETRY = [dict(STREAM_UNROLL=u, STREAM_BLOCKS_PER_SM=b, STREAM_MAX_STEPS=m, STREAM_LONG_CHUNKS={})
                   for u, b, m in ((4, 4, 1), (16, 2, 1), (8, 2, 1), (8, 3, 1), (16, 2, 2), (8, 3, 2), (16, 1, 1),
                                   (4, 4, 2))]
for _k in (256, 512, 1024, 2048, 4096, 8192, 16384, 65536, 1 << 20):
    SWEEPS[f"rows{_k}_stream_geometry"] = (tc_plan, STREAM_GEOMETRY, "float16", ((1 << 28) // _k, _k), -1,
                                           [(4099, 2104), (333, _k), (3, _k)])
# tc_rows_stream on long rows with 8 chunks in flight per warp at 4 blocks per SM (NVRTC sm_90: 61 registers, no
# spills), twice the bytes in flight of the committed 4 at the same occupancy, a combination the sweeps above never
# tried; 8 at 3 blocks per SM is the H200's setting for rows of up to 32 chunks (the first setting here is the module
# values for every row length, an H200's plan from 33 chunks on before session 18, which adopted 8 x 4 there)
STREAM_8X4 = [committed(tc_plan, "STREAM_UNROLL", "STREAM_BLOCKS_PER_SM", "STREAM_LONG_CHUNKS")]
STREAM_8X4 += [dict(STREAM_UNROLL=u, STREAM_BLOCKS_PER_SM=b, STREAM_LONG_CHUNKS={})
               for u, b in ((8, 4), (8, 3), (6, 4))]
for _dt, _k in (("float16", 8192), ("float16", 16384), ("float16", 32768), ("float16", 65536), ("float16", 131072),
                ("float16", 262144), ("float16", 1 << 20), ("bfloat16", 32768), ("float8_e4m3fn", 65536)):
    SWEEPS[f"{_dt}_rows{_k}_stream_8x4"] = (tc_plan, STREAM_8X4, _dt, ((1 << 28) // _k, _k), -1,
                                            [(3, _k), (37, _k), (5, _k + 256)])
# ... and where the H200's long-row setting begins (STREAM_LONG_CHUNKS: the committed 16 first, then session 18's 32);
# run with --turns (the margin is under 1%). The same sums
STREAM_LONG_FROM = [committed(tc_plan, "STREAM_LONG_CHUNKS"), dict(STREAM_LONG_CHUNKS={2: 32, 1: 32})]
for _dt, _k in (("float16", 8192), ("bfloat16", 8192), ("float8_e4m3fn", 16384), ("float16", 4096)):
    SWEEPS[f"{_dt}_rows{_k}_stream_long_from"] = (tc_plan, STREAM_LONG_FROM, _dt, ((1 << 28) // _k, _k), -1,
                                                  [(3, _k), (37, _k), (5, _k + 256)])
# shuffle_rows with a block per row: a one-pass grid instead of a resident grid looping over rows (the same sums)
for _k in (16384, 65536):
    SWEEPS[f"shuffle_rows{_k}"] = (shuffle_plan, [dict(ONE_PASS_ROWS=p) for p in (True, False)], "float16",
                                   ((1 << 28) // _k, _k), -1, [(333, _k), (3, _k)], "shuffle")
# ... and in blocks shaped like inductor's long-row programs (R0_BLOCK 2048 on 16 warps, 32 registers, 4 programs per
# SM: read_probe part 1c, session 16: a block of 512 threads per row reads 4,480-4,490 GB/s on an H200 at rows of
# 16384-32768, 2% above tc_rows_stream): BLOCK threads per row, UNROLL chunks in flight per thread, blocks per SM; the
# block size changes the order of additions (the fold over BLOCK / 32 warps), which the twin reads from the plan
SHUFFLE_ROW_BLOCKS = [committed(shuffle_plan, "BLOCK", "UNROLL", "BLOCKS_PER_SM")]
SHUFFLE_ROW_BLOCKS += [dict(BLOCK=b, UNROLL=u, BLOCKS_PER_SM={"rows": m, "cols": 2})
                       for b, u, m in ((512, 1, 4), (512, 2, 4), (512, 2, 3), (512, 4, 2), (1024, 1, 2), (1024, 2, 2),
                                       (256, 2, 8), (256, 1, 8))]
for _dt, _isz, _ks in (("float16", 2, (8192, 32768, 65536)), ("float32", 4, (4096, 16384, 32768))):
    for _k in _ks:
        SWEEPS[f"shuffle_{_dt}_rows{_k}_blocks"] = (shuffle_plan, SHUFFLE_ROW_BLOCKS, _dt,
                                                    ((1 << 29) // _isz // _k, _k), -1,
                                                    [(333, _k), (3, _k + 5), (70, 4 * _k)], "shuffle")


def bits_match(dtype: str, shape: tuple[int, ...], axis: Any, rng: np.random.Generator,
               method: str = "tensorcore") -> bool:
    import tcreduce
    import tcreduce.emulate as em
    from tcreduce._device import current_device
    from tcreduce.testing import random_input, same_bits, to_device

    xh = random_input(rng, shape, dtype)
    xd, kw = to_device(xh)  # bf16 and fp8: raw bits with format=
    # the twin of this GPU's plan (until session 23 the H100's: "NO" where an H200's own tuning planned otherwise)
    want = em.sum(xh, axis=axis, method=method, gpu=current_device()[1])
    return same_bits(tcreduce.sum(xd, axis=axis, method=method, **kw), want)


def planned(module: Any, setting: dict | None):
    """The context a sweep row plans in: ``setting`` patched (:func:`tcreduce.testing.patched_plans`), or None: the
    module as this GPU plans it."""
    return contextlib.nullcontext() if setting is None else patched(module, setting)


def setting_label(setting: dict | None) -> str:
    return "(as this GPU plans it)" if setting is None else " ".join(f"{k}={v}" for k, v in setting.items())


def interleaved_sweep(module: Any, settings: list[dict], dtype: str, x: Any, axis: Any, kw: dict, method: str,
                      check_shapes: list, rng: np.random.Generator, turns: int, scrub: Any) -> None:
    """``--turns``: each setting's bits checked, then its plan fixed in a :func:`tcreduce.reducer` handle built while
    the setting is patched; ``turns`` interleaved turns of every handle and ``shuffle`` as this GPU plans it
    (:func:`experiments.timing.interleaved_samples`, each sample after ``scrub``, a read of twice the L2's size:
    :func:`experiments.ceiling.l2_scrubber`), each timed as the mean of its samples' middle 80%."""
    import cupy

    import tcreduce
    from experiments.timing import Timed, interleaved_samples, middle_mean

    def handle(method_name: str) -> Timed:
        r = tcreduce.reducer(like=x, axis=axis, method=method_name, **kw)
        out = cupy.empty(r.result_shape, r.result_dtype)
        return Timed(lambda xx: r(xx, out=out), [x])

    timed, checks = {"shuffle": handle("shuffle")}, {}
    for setting in [None, *settings]:
        label = setting_label(setting)
        try:
            with planned(module, setting):
                checks[label] = all(bits_match(dtype, s, axis, rng, method) for s in check_shapes)
                timed[label] = handle(method)
        except Exception as e:  # report and go on
            print(f"  {label:60} failed: {type(e).__name__}: {e}", flush=True)
    series = interleaved_samples(timed, turns, before=scrub)
    base = middle_mean(series.pop("shuffle"))[0]
    for label, times in series.items():
        t, p10, p90 = middle_mean(times)
        print(f"  {label:60} {x.nbytes / t / 1e9:6.0f} GB/s {t * 1e6:9.2f} us (p10 {p10 * 1e6:.2f}, p90 "
              f"{p90 * 1e6:.2f})  x shuffle {base / t:.3f}  GPU == emulator: {'yes' if checks[label] else 'NO'}",
              flush=True)


def kernels_of(names: list[str], device: Any) -> set[tuple[str, str]]:
    """(source, name expression) of every launch the sweeps ``names`` make on ``device`` (each setting, the large
    shape and the check shapes, contiguous and 16-byte aligned as the sweep allocates them)."""
    from tcreduce._api import get_plan
    from tcreduce.testing import contiguous_problem

    found = set()
    for name in names:
        module, settings, dtype, shape, axis, check_shapes, *rest = SWEEPS[name]
        method = rest[0] if rest else "tensorcore"
        for setting in [None, *settings]:
            with planned(module, setting):
                for shp in [shape, *check_shapes]:
                    problem = contiguous_problem(shp, axis, dtype)
                    for ln in get_plan(method, problem, dtype, "float32", device).launches:
                        found.add((ln.source, ln.kernel))
    return found


def precompile(names: list[str], device: Any, workers: int) -> int:
    """Compile the sweeps' kernels into tcreduce's disk cache on ``workers`` processes (NVRTC runs one kernel per
    process at a time); returns how many there were."""
    from concurrent.futures import ProcessPoolExecutor

    from tcreduce._compile import compile_kernel

    todo = sorted(kernels_of(names, device))
    with ProcessPoolExecutor(workers) as pool:
        for ck in pool.map(compile_kernel, *zip(*todo), [device.arch] * len(todo)):
            if ck.spills:
                print(f"  note: {ck.name_expression} spills on {ck.arch}", flush=True)
    return len(todo)


def select(only: str) -> list[str]:
    """The sweeps ``--only`` names, in SWEEPS order: comma-separated names or shell patterns (``'*_few_loop'``); all
    when empty. A name or pattern that matches no sweep is an error."""
    if not only:
        return list(SWEEPS)
    patterns = [p for p in only.split(",") if p]
    unknown = [p for p in patterns if not fnmatch.filter(SWEEPS, p)]
    if unknown:
        raise SystemExit(f"--only: no sweep matches {', '.join(unknown)}")
    return [name for name in SWEEPS if any(fnmatch.fnmatchcase(name, p) for p in patterns)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--triton", action="store_true",
                    help="also time the tuned Triton sum and torch.compile'd torch.sum (experiments.competitors)")
    ap.add_argument("--only", default="", help="comma-separated sweeps or shell patterns such as '*_few_loop' "
                    "(default: all): " + ", ".join(SWEEPS))
    ap.add_argument("--precompile", type=int, default=0, metavar="N",
                    help="first compile every kernel of the chosen sweeps on N processes (0: compile as they run)")
    ap.add_argument("--device", default="", help="with --precompile and no GPU: compile for this GPU (e.g. H100) "
                    "and exit")
    ap.add_argument("--turns", type=int, default=0, metavar="N",
                    help="time the settings of a sweep together in N interleaved turns (one call of each per turn, "
                    "in a random order; GB/s from the mean of the middle 80%% of samples) instead of one after another "
                    "back to back, where a 512 MiB call can keep one of two speeds 2.5%% apart for seconds")
    ap.add_argument("--graph", action="store_true", help="time every call inside a CUDA graph (the GPU's time per "
                    "call without host dispatch: small sizes, the *_flat_cluster_* sweeps)")
    args = ap.parse_args()
    names = select(args.only)
    if args.device:
        from tcreduce._device import named_device

        print(f"{precompile(names, named_device(args.device), max(args.precompile, 1))} kernels compiled")
        return
    import cupy

    import tcreduce

    try:
        import torch
    except ImportError:
        torch = None
    if args.precompile:
        from tcreduce._device import current_device

        print(f"{precompile(names, current_device()[1], args.precompile)} kernels compiled", flush=True)
    rng = np.random.default_rng(7)
    scrub = None
    if args.turns:  # one buffer for every sweep's turns
        from experiments.ceiling import l2_scrubber

        scrub = l2_scrubber()
    def timed(fn, reps: int, lib: str = "cupy") -> float:
        """Seconds per call: inside a CUDA graph (--graph; ``lib`` "torch" for torch's calls) or back to back."""
        return graph_timed(fn, reps, lib) if args.graph else back_to_back(fn, reps)

    for name in names:
        module, settings, dtype, shape, axis, check_shapes, *rest = SWEEPS[name]
        method = rest[0] if rest else "tensorcore"
        x, xt, kw = make_input(cupy.random.default_rng(1), shape, dtype, torch)
        nbytes = x.nbytes
        base = {"shuffle": timed(lambda: tcreduce.sum(x, axis=axis, method="shuffle", **kw), args.reps)}
        if xt is not None:
            base["torch.sum"] = timed(lambda: torch.sum(xt, dtype=torch.float32) if axis is None
                                      else torch.sum(xt, dim=axis, dtype=torch.float32), args.reps, "torch")
            if args.triton:  # the tuned competitors take the torch tensor (bf16 and fp8: torch's own dtype)
                from experiments.competitors import tuned_competitors

                for comp in tuned_competitors(axis):
                    comp.prepare(xt)
                    base[comp.label] = timed(lambda: comp.call(xt), args.reps, "torch")
        print(f"== {name}: {dtype} {shape} axis={axis}; " +
              ", ".join(f"{k} {nbytes / t / 1e9:.0f} GB/s ({t * 1e6:.2f} us)" for k, t in base.items()), flush=True)
        if args.turns:
            interleaved_sweep(module, settings, dtype, x, axis, kw, method, check_shapes, rng, args.turns, scrub)
            x = xt = None
            continue
        for setting in [None, *settings]:
            label = setting_label(setting)
            try:
                with planned(module, setting):
                    ok = all(bits_match(dtype, s, axis, rng, method) for s in check_shapes)
                    t = timed(lambda: tcreduce.sum(x, axis=axis, method=method, **kw), args.reps)
                ratios = "  ".join(f"x {k} {b / t:.3f}" for k, b in base.items())
                print(f"  {label:60} {nbytes / t / 1e9:6.0f} GB/s {t * 1e6:9.2f} us  {ratios}  "
                      f"GPU == emulator: {'yes' if ok else 'NO'}", flush=True)
            except Exception as e:  # report and go on
                print(f"  {label:60} failed: {type(e).__name__}: {e}", flush=True)
        x = xt = None  # free the input before the next sweep


if __name__ == "__main__":
    main()
