"""Method "shuffle": the modern CUDA-core baseline for fp16, bf16, fp8 and fp32 sums (fp32 round-to-nearest accumulation).

Kernels: ``kernels/shuffle.cu`` (``shuffle_flat``, ``shuffle_rows``, ``shuffle_cols``), whose header comments pin
the order of every addition; this module chooses their template arguments, grids and splits, and records in
``Plan.params`` everything the emulator needs to replay that order.

What it launches: exactly one kernel per call, and nothing else (no memset: the single-pass kernels reset the counters
they use).

- Full sums (:class:`~tcreduce._layout.Flat`): ``shuffle_flat``, a grid-stride kernel with 16-byte loads (8 halves or
  4 floats), ``unroll`` chunks in flight per thread, up to ``minb`` blocks of ``BLOCK`` threads per SM
  (``FLAT_TUNING[dtype] = (unroll, minb)``; never more blocks than there are ``BLOCK * unroll`` chunks). A
  misaligned start (a view ``x[1:]``) is handled by a scalar head before the first 16-byte boundary; the last block
  to finish combines the block partials. Large arrays on a GPU with ``FLAT_ROUNDS`` for their element size (fp32 on
  an H100 or H200) go in one pass instead: block b walks its own ``FLAT_ROUNDS`` rounds of ``BLOCK * unroll`` chunks
  and exits, the partials combined in two levels (groups of ``BLOCK`` blocks, then the groups).
- Last-axis sums (:class:`~tcreduce._layout.Rows`): ``shuffle_rows`` with a group of ``G`` lanes per row: rows of
  at most 32 chunks get ``G = next_pow2(chunks)`` (a segmented shuffle, no shared memory); rows of up to
  ``2 * BLOCK`` chunks, or longer rows when there are enough of them to fill the GPU, get a warp (``G = 32``);
  other long rows get a whole block (``G = BLOCK``), split over ``splits`` blocks when there are too few rows to fill
  the GPU (combined by the row's last block). Rows of at least ``ROWS_BLOCK_MIN_CHUNKS[itemsize]`` chunks always
  get a block. Rows that would get a warp but have at least ``64 * ROWS_GROUP_CHUNKS_PER_THREAD[itemsize]`` chunks
  take a group of ``G`` = 64 or 128 threads instead (several rows per block; fp16, bf16 and fp32).
- Other axes (:class:`~tcreduce._layout.Cols`): ``shuffle_cols``: each thread owns VEC consecutive columns and walks
  the reduced axis. With at least half a GPU of threads' worth of column chunks (or a short reduced axis), one
  thread per chunk walks it all (``CT = BLOCK``); otherwise strips of ``CT = min(32, next_pow2(chunks))`` chunks
  share a block whose other threads split the reduced axis, and ``splits`` blocks per strip split it further. When
  splits would be needed, the strips narrow (down to 8 chunks) if that alone fills the GPU, else run 16 chunks wide.
  A plan with no splits and one pass launches the one-item kernel (``ONE_ITEM``: no work-item loop, no combination
  of splits, so few registers) at ``COLS_ONE_ITEM_TUNING[itemsize]`` (rows in flight, blocks per SM), and chooses
  its strips for that many blocks per SM; otherwise the general kernel at ``COLS_UNROLL`` and
  ``BLOCKS_PER_SM["cols"]`` chooses them for its own.
- ``splits`` (rows and cols) is the fewest that fill the resident blocks within 5% of the best wave efficiency,
  never leaving a thread fewer than ``2 * UNROLL`` chunks (rows) or reduced rows (cols).

Float64 input is not supported (the API says so); fp16 and fp32 output rounding is one ``from_float`` at the end;
float64 output is the fp32 result widened exactly.
"""

from __future__ import annotations

import sys
from typing import Any

from .._layout import Cols, Flat, Problem, Rows
from .._plan import Buf, DeviceSpec, KernelLaunch, Plan, param_dict
from ..registry import Method, UnsupportedDtype, register
from ._common import (CLUSTER_MAX_BLOCKS, cdiv, choose_splits, combine_grid_additions, ctype, flagged_counters,
                      flat_cluster, flat_one_pass_grid, grid_groups, next_pow2, reaches_floor, tuned)
from ._common import ceil_log2 as _log2

__all__ = ["plan_shuffle", "chain_length", "kernel_names", "BLOCK", "UNROLL", "BLOCKS_PER_SM", "FLAT_TUNING",
           "SOURCE"]

SOURCE = "shuffle.cu"
BLOCK = 256  # threads per block, every kernel
UNROLL = 4  # 16-byte chunks in flight per thread (rows with G <= 32: rows per thread, 1 when rows are too few to
#              fill the GPU that way; rows with G == BLOCK: chunks; cols: j rows). Full sums: FLAT_TUNING.
# Blocks per SM each kernel is compiled for (__launch_bounds__(BLOCK, MINB)) and planned with: rows need up to 64
# registers for their 64-bit indexing and accumulators; cols run 2 blocks with COLS_UNROLL = 8 rows in flight
# (benchmarks/tune_plans.py on an H100: [1024, 2^18] over axis 0 2,418 -> 2,995 GB/s against 3 blocks with 4).
BLOCKS_PER_SM = {"rows": 4, "cols": 2}
# Full sums: (UNROLL, blocks per SM) per input dtype, from the H200 sweep of benchmarks/tune_flat.py
# (notes/performance.md: at N = 2^28, fp32 unroll 8 at 4 blocks/SM: 4242 GB/s; fp16 unroll 2 at 8 blocks/SM:
# 3982 GB/s).
FLAT_TUNING = {"float16": (2, 8), "float32": (8, 4), "bfloat16": (2, 8), "float8_e4m3fn": (2, 8),
               "float8_e5m2": (2, 8)}  # bf16 and fp8: fp16's (same bytes per chunk), not swept separately yet
# Full sums over a one-pass grid of short blocks (shuffle_flat ROUNDS > 0: block b owns FLAT_ROUNDS rounds of BLOCK x
# UNROLL chunks, its partial combined in two levels; the walk of Triton's and inductor's kernels, as tc_flat's
# FLAT_ROUNDS), keyed by bytes per element; a size not listed, or a grid of fewer than FLAT_ONE_PASS_MIN_WAVES waves
# of FLAT_TUNING's resident blocks: the resident grid. Another order of additions (the twin follows the plan). H200
# (session 20, tune_plans shuffle_fp32_flat_rounds_*, GB/s, resident grid / 4 / 8 / 16 rounds): fp32 2^30 4,629 /
# 4,670 / 4,668 / 4,667, 2^28 4,517 / 4,533 / 4,534 / 4,530, 2^27 4,405 / 4,390 / 4,382 / 4,297, 2^26 4,215 / 4,129 /
# 4,068 / 4,168: 8 rounds from 6 waves (2^28: 7.8 waves) in FAMILY_TUNING. H100 (same sweep, resident grid / 4 / 8
# rounds): 2^30 3,091 / 3,164 / 3,135, 2^28 3,065 / 3,104 / 3,079, 2^27 3,006 / 3,036 / 3,012, 2^26 2,937 / 2,909 /
# 2,830 (Triton 3,150 at 2^30): 4 rounds from 6 waves (2^27: 7.8 waves)
FLAT_ROUNDS: dict[int, int] = {}
FLAT_ONE_PASS_MIN_WAVES = 3
# Full sums whose resident grid has 2..FLAT_CLUSTER_MAX_BLOCKS blocks (up to 16) run as one thread-block cluster
# (shuffle_flat_cluster, sm_90; the same bits: plans/tensorcore.py's FLAT_CLUSTER_MAX_BLOCKS says why). GPU time in a
# graph, cluster / last block (H200, session 22): fp16 2^13-2^16 0.83-0.87, 2^17 0.98; fp32 2^14-2^17 0.87-0.90, 2^13
# (2 blocks) level. 0: never
FLAT_CLUSTER_MAX_BLOCKS = 16
ITEMSIZE = {"float16": 2, "float32": 4, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}
COLS_CT_MAX = 32  # cols: column chunks per strip when there are enough of them (a power of two below BLOCK)
COLS_UNROLL = 8  # cols: reduced rows in flight per thread (the order of additions does not depend on it)
# cols: strip widths (column chunks) when the reduced axis must be split: a split plan narrows its strips from
# COLS_CT_MAX to the first width whose strips alone fill the GPU (no split, no last-block combination) down to
# COLS_CT_UNSPLIT_MIN, and otherwise runs strips of COLS_CT_MIN chunks with splits (tune_plans run 11, H100:
# 256-byte strips read +1.5-7% faster than 512-byte ones with splits; 128-byte strips only without splits, 64-byte
# ones 15-20% slower)
COLS_CT_MIN = 16
COLS_CT_UNSPLIT_MIN = 8
# cols: strip width (column chunks) when the column chunks alone fill the GPU and the reduced axis is longer than
# MIN_J_PER_THREAD: BLOCK (every thread walks the whole axis) or narrower (BLOCK / width threads share a column, more
# and shorter blocks; another order of additions, step 3 of kernels/shuffle.cu)
COLS_CT_MANY = BLOCK
# cols plans with one work item per block (no splits, one pass: shuffle_cols<..., ONE_ITEM = true>, compiled without
# the combination of splits, so it needs far fewer registers): (rows in flight per thread, blocks per SM), keyed by
# bytes per element; a size not listed takes (COLS_UNROLL, BLOCKS_PER_SM["cols"]). The sums depend on neither.
COLS_ONE_ITEM_TUNING: dict[int, tuple[int, int]] = {}
# cols plans through the general kernel (splits or a resident grid): (rows in flight per thread, blocks per SM) keyed
# by bytes per element; a size not listed: (COLS_UNROLL, BLOCKS_PER_SM["cols"]), which is also the one-item kernel's
# setting for a size COLS_ONE_ITEM_TUNING does not list. The sums depend on neither. fp8's first-axis sums of 32768
# rows and more read 0.86-0.87 of the read ceiling at (8, 2) in the eaa22ef segment study (H200): converting 16
# elements per chunk, they may want more threads resident (tune_plans `shuffle_*_cols*_general`)
COLS_TUNING: dict[int, tuple[int, int]] = {}
# cols with many column chunks (the COLS_CT_MANY case) in torch.compile's tile, by bytes per element: (the fewest rows,
# the most rows, rows in flight per thread, blocks per SM). Between those the one-item kernel runs strips of
# max(16, BLOCK * rows in flight / rows) chunks (a power of two, at most BLOCK), so that a block's j lanes load their
# whole share of a 128-row tile at once, as inductor's [64 columns x 4 rows] fp32 tile, its loop unrolled whole, does
# (benchmarks/inductor_replica.py). Another order of additions (the strip width: step 3 of kernels/shuffle.cu); the
# twin reads ct from the plan. A size absent: never. tune_plans `shuffle_*_cols*_tile_at_once --turns` (H200, session
# 43, x the committed plan in the same scrubbed turns): fp32 64 rows 1.010 (32 chunks), 128 1.016, 256 1.017, 512
# 1.013 (16 chunks); fp16 64 1.014, 128 1.022, 256 1.018, 512 1.013; below 64 rows wider strips lose (fp16 32 rows
# 0.95 at 64 chunks) and fp8 loses at every length (0.96-0.99 at 128-512), GPU == emulator at every setting.
# FAMILY_TUNING: an H200 takes (64, 512, 8, 4) for 16-bit and fp32 data, the rows measured (longer columns were not:
# 5458a8e planned them too and, from 2049 rows, failed to plan); an H100 is not measured
COLS_TILE_AT_ONCE: dict[int, tuple[int, int, int, int]] = {}
COLS_TILE_MIN_CT = 16  # the narrowest strips COLS_TILE_AT_ONCE plans (chunks)
# cols: aligned first-axis sums over at least this many rows load their whole chunks evict-first in L1 and L2 (an L2
# cache-hint policy, as Triton's evict_first loads; kernels/shuffle.cu LOAD 1), the others through ld.global.nc; keyed
# by bytes per element, a size not listed: never. The same values either way. H200 below. An H100 keeps plain loads:
# its tune_plans sweep and ab_compare read the hint 1-3.5% faster (session 18, notes/data/2026-11-27-h100-s18: fp16
# 128 rows 2,957 -> 3,044 GB/s, fp32 64 rows 2,946 -> 3,053), but two segment studies with the H200's floors (26561a4)
# read `shuffle` level with the unhinted 130b71e run (fp16 128 rows 3,024 against 2,998) and, in one of the two, 4-5%
# slower (fp16 128 rows 2,882, 1024 rows 2,879 against 3,022)
COLS_EVICT_FIRST_MIN_ROWS: dict[int, int] = {}
# Per GPU family (tcreduce._device.gpu_family), measured there; read through plans._common.tuned. H200 (tune_plans
# run 49, fp16 and bf16 first-axis sums of 512 MiB against (8, 2) in the same run): (4, 4) +4.5-4.8% at 128 rows,
# +3-4% at 256, +5% at 1024 and 2048, +1-2% at 64, level at 32; (2, 8) and (4, 8) were bimodal (0.54-1.06x). Run 51
# (session 13): fp8 (4, 4) 64 rows 3,643 -> 3,858, 128 4,008 -> 4,047; fp32 level with (8, 2) at every setting
# (64-1024 rows: within -0.3..+0.8% at best), so it keeps (8, 2). Evict-first loads for 16-bit data from 64 rows
# (session 16, tune_plans_cols_load_9e8727f.log, fp16 at (4, 4)): 64 rows 4,178 -> 4,233, 128 4,279 -> 4,381, 256
# 4,353 -> 4,445, 1024 4,368 -> 4,420, 4096 4,411 -> 4,442; 32 rows 4,030 -> 3,909, hence the floor. fp32 and fp8
# (session 17, tune_plans_load_fp32_fp8.log and tune_plans_load_shuffle.log): fp32 32 rows 4,091 -> 4,100, 64 4,258 ->
# 4,413, 128 4,328 -> 4,485, 256 4,420 -> 4,496, 1024 4,411 -> 4,458, 65536 4,291 -> 4,323; fp8 64 rows 3,738 -> 3,745,
# 128 4,073 -> 4,119, 1024 4,169 -> 4,223. Rows, every chunk evict-first (same logs): fp32 rows of 64 4,153 -> 4,178,
# 256 4,292 -> 4,294, 1024 4,383 -> 4,410, 2048 4,426 -> 4,433, 4096 4,368 -> 4,380, 32768 4,392 -> 4,409, 2^20
# 4,250 -> 4,256; fp16 rows of 1024 4,314 -> 4,333, 32768 4,359 -> 4,369 (fp8 not measured); but rows of 4 chunks or
# fewer lose (tune_plans_rows_short.log, no hint / hint / no hint: fp32 rows of 16 4,042 / 3,899 / 4,024, fp16 rows of
# 16 3,833 / 3,692 / 3,837, of 32 3,993 / 3,928 / 3,999; fp32 rows of 32 level, of 64 4,149 / 4,196 / 4,159; fp16 rows
# of 64 level), hence 16 chunks. fp32 rows of 1024 chunks (4096 elements) read faster in groups of 128 threads than a
# block per row (same log: 4,448 against 4,379-4,380; a block per row at 6 blocks per SM 4,441-4,453, fp16 there
# 2,470), so an H200 keeps the block per row for 16-bit rows only
FAMILY_TUNING: dict[str, dict[str, Any]] = {"H100": {"FLAT_ROUNDS": {4: 4}, "FLAT_ONE_PASS_MIN_WAVES": 6},
                                            "H200": {"COLS_ONE_ITEM_TUNING": {2: (4, 4), 1: (4, 4)},
                                                     "COLS_TILE_AT_ONCE": {2: (64, 512, 8, 4), 4: (64, 512, 8, 4)},
                                                     "COLS_EVICT_FIRST_MIN_ROWS": {2: 64, 4: 64, 1: 128},
                                                     "ROWS_EVICT_FIRST_MIN_CHUNKS": {2: 16, 4: 16},
                                                     "ROWS_BLOCK_MIN_CHUNKS": {2: 4 * BLOCK},
                                                     "ROWS_SHORT_TUNING": {(1, c): (4, 6) for c in range(2, 33)},
                                                     "FLAT_ROUNDS": {4: 8}, "FLAT_ONE_PASS_MIN_WAVES": 6}}
_THIS = sys.modules[__name__]
# rows: rows of at least this many chunks get a block per row (G == BLOCK, one pass) even when they are plentiful
# enough for a warp each; keyed by bytes per element, a size not listed: only rows too few to fill the GPU with warps
# (tune_plans runs 11-12, H100, 1024 chunks per row: fp32 [32768, 4096] 2,925 -> 3,109 GB/s, fp16 and bf16
# [32768, 8192] +3-4%; 2 chunks per thread 8-16% slower than a warp per row; fp8 [32768, 16384] 2,931 -> 1,924: not
# for fp8)
ROWS_BLOCK_MIN_CHUNKS = {2: 4 * BLOCK, 4: 4 * BLOCK}
# rows that get a warp (G = 32) although they have at least 64 * this many chunks: a group of G = 64 .. BLOCK/2
# threads instead (BLOCK / G rows per block), G the largest power of two giving each thread at least this many
# chunks; keyed by bytes per element, a size not listed: a warp (tune_plans run 14, H100, 4 chunks per thread:
# +2.0-3.9% over a warp per row at fp32 [131072, 1024], [65536, 2048], fp16 and bf16 [131072, 2048], [65536, 4096])
ROWS_GROUP_CHUNKS_PER_THREAD = {2: 4, 4: 4}
# rows that a group of G <= 32 threads takes (up to 32 chunks, or a warp per row): (rows in flight per thread, blocks
# per SM) keyed by (bytes per element, chunks per row); a key not listed: (UNROLL, BLOCKS_PER_SM["rows"]). Neither
# changes the sums (the fold of a row's G lanes is fixed by G). fp8 converts 16 elements per chunk, so its short rows
# may want more threads resident than 16-bit rows (session 35, tune_plans on an H200, fp8 rows of 32 through the global
# constants: (4, 6) +4.9%, (8, 4) +4.1% over (4, 4); rows of 16 level). Session 36 swept this knob (H200, 512 MiB,
# tune_plans_s36_e603d04.log, GB/s at (4, 4) -> (4, 6)): fp8 rows of 32 3,685 -> 3,863, 64 3,797 -> 4,057, 128
# 3,861 -> 4,151, 256 3,927 -> 4,200, 512 3,907 -> 4,240 ((8, 4) +4.3-5.7%, (2, 8) +1-2.4%); rows of 16 (1 chunk)
# level at every setting, so an H200 takes (4, 6) for fp8 rows of 2-32 chunks
ROWS_SHORT_TUNING: dict[tuple[int, int], tuple[int, int]] = {}
# rows: rows of at least this many chunks load their whole chunks evict-first in L1 and L2 (kernels/shuffle.cu LOAD 1,
# as COLS_EVICT_FIRST_MIN_ROWS), the others through ld.global.nc; keyed by bytes per element, a size not listed: never
ROWS_EVICT_FIRST_MIN_CHUNKS: dict[int, int] = {}
ONE_PASS_ROWS = True  # rows: a grid over every row (G == BLOCK: every row split), no grid stride (same sums)
ONE_PASS_COLS = True  # cols: a grid over every (strip, split) work item, likewise
MIN_CHUNKS_PER_THREAD = 2 * UNROLL  # a split of a long row gives every thread at least this many chunks
MIN_J_PER_THREAD = 2 * UNROLL  # a split of the reduced axis (cols) gives every thread at least this many rows


def _vec(in_dtype: str) -> int:
    return 16 // ITEMSIZE[in_dtype]


def _bool(b: bool) -> str:
    return "true" if b else "false"


def _halvings(start: int, stop: int) -> list[int]:
    """start, start/2, ... down to stop (or to start, when start <= stop): powers of two."""
    out = [start]
    while out[-1] > stop:
        out.append(out[-1] // 2)
    return out


def _load_arg(load: int) -> str:
    """shuffle_rows' and shuffle_cols' last template argument, LOAD, where it is not its default (0)."""
    return f", {load}" if load else ""


def _check_elements_aligned(align: int, in_dtype: str) -> None:
    if align % ITEMSIZE[in_dtype]:
        raise ValueError(f"shuffle: a {in_dtype} array whose first element sits at byte {align} mod 16 is not "
                         f"element-aligned; copy it first")


def _plan_flat(problem: Flat, in_dtype: str, out_dtype: str, device: DeviceSpec) -> tuple[KernelLaunch, int, int,
                                                                                            dict[str, Any]]:
    vec = _vec(in_dtype)
    unroll, minb = FLAT_TUNING[in_dtype]
    _check_elements_aligned(problem.align, in_dtype)
    aligned = problem.align == 0
    head = 0 if aligned else min(problem.n, ((16 - problem.align) % 16) // ITEMSIZE[in_dtype])
    nv = (problem.n - head) // vec
    tail = problem.n - head - nv * vec
    rounds = tuned(_THIS, "FLAT_ROUNDS", device).get(ITEMSIZE[in_dtype], 0)
    grid = flat_one_pass_grid(nv, BLOCK * unroll, rounds, tuned(_THIS, "FLAT_ONE_PASS_MIN_WAVES", device), device,
                              minb)
    if grid:  # a one-pass grid; its block partials in groups of BLOCK (a group total, a counter each)
        groups, extra = grid_groups(grid, BLOCK), dict(rounds=rounds)
    else:
        grid, groups, extra = max(1, min(device.sm_count * minb, cdiv(nv, BLOCK * unroll))), 0, {}
    params = dict(kernel="flat", block=BLOCK, unroll=unroll, vec=vec, minb=minb, aligned=aligned, grid=grid,
                  head=head, nv=nv, tail=tail, **extra)
    cluster = 0 if extra else flat_cluster(grid, tuned(_THIS, "FLAT_CLUSTER_MAX_BLOCKS", device), device)
    if cluster:  # the grid as one cluster: no workspace, no counters
        name = (f"shuffle_flat_cluster<{ctype(in_dtype)}, {ctype(out_dtype)}, {BLOCK}, {unroll}, {_bool(aligned)}, "
                f"{minb}, {cluster}>")
        launch = KernelLaunch(SOURCE, name, (grid, 1, 1), (BLOCK, 1, 1), (Buf("x"), problem.n, Buf("out")),
                              cluster=cluster)
        return launch, 0, 0, dict(params, cluster=cluster)
    name = (f"shuffle_flat<{ctype(in_dtype)}, {ctype(out_dtype)}, {BLOCK}, {unroll}, {_bool(aligned)}, {minb}"
            f"{f', {rounds}' if extra else ''}>")
    launch = KernelLaunch(SOURCE, name, (grid, 1, 1), (BLOCK, 1, 1), (Buf("x"), problem.n, Buf("out"),
                                                                       Buf("counters")))
    return launch, 0, flagged_counters(grid, groups), params


def _plan_rows(problem: Rows, in_dtype: str, out_dtype: str, device: DeviceSpec) -> tuple[KernelLaunch, int, int,
                                                                                            dict[str, Any]]:
    vec, minb, isz = _vec(in_dtype), BLOCKS_PER_SM["rows"], ITEMSIZE[in_dtype]
    _check_elements_aligned(problem.align, in_dtype)
    m, k = problem.m, problem.k
    aligned = problem.align == 0 and (m == 1 or (problem.ld * isz) % 16 == 0)
    chunks = cdiv(k, vec)
    cap = device.sm_count * minb
    warps = BLOCK // 32
    if chunks <= 32:
        # one pass of G lanes covers the row (session 19, H100: G / 2 or G / 4 lanes walking 2 or 4 chunks each, the
        # same loads, read 1-8% slower on fp16, bf16 and fp32 rows of 4-16 chunks; likely because a warp's load then
        # covers half of each of twice as many rows)
        group = next_pow2(chunks)
    elif chunks < tuned(_THIS, "ROWS_BLOCK_MIN_CHUNKS", device).get(isz, chunks + 1) and (
            chunks <= 2 * BLOCK or cdiv(m, UNROLL * warps) >= cap):
        group = 32  # a warp per row: rows too short to give a block's threads 2 chunks each, or rows plentiful
        per_thread = ROWS_GROUP_CHUNKS_PER_THREAD.get(isz)
        if per_thread and chunks >= 64 * per_thread:
            group = min(BLOCK // 2, 1 << ((chunks // per_thread).bit_length() - 1))  # several warps per row
    else:
        group = BLOCK  # a block (or several) per row
    unroll = UNROLL
    if group <= 32:
        unroll, minb = tuned(_THIS, "ROWS_SHORT_TUNING", device).get((isz, chunks), (UNROLL, minb))
        cap = device.sm_count * minb
        splits = 1
        if cdiv(m, unroll * (BLOCK // group)) < cap:
            unroll = 1  # too few rows for `unroll` rows per thread: spread them over more blocks instead
        grid = cdiv(m, unroll * (BLOCK // group))
        grid = max(1, grid if ONE_PASS_ROWS else min(cap, grid))
    elif group < BLOCK:
        splits = 1  # the kernel splits rows only with a block per row
        grid = cdiv(m, BLOCK // group)
        grid = max(1, grid if ONE_PASS_ROWS else min(cap, grid))
    else:
        splits = choose_splits(m, chunks // (BLOCK * MIN_CHUNKS_PER_THREAD), cap)
        grid = max(1, min(m * splits, (1 << 31) - 1) if ONE_PASS_ROWS else min(cap, m * splits))
    load = int(aligned and reaches_floor(_THIS, "ROWS_EVICT_FIRST_MIN_CHUNKS", device, isz, chunks))
    name = (f"shuffle_rows<{ctype(in_dtype)}, {ctype(out_dtype)}, {BLOCK}, {unroll}, {group}, {_bool(aligned)}, "
            f"{minb}{_load_arg(load)}>")
    launch = KernelLaunch(SOURCE, name, (grid, 1, 1), (BLOCK, 1, 1),
                          (Buf("x"), m, k, problem.ld, Buf("out"), Buf("ws"), Buf("counters"), splits))
    params = dict(kernel="rows", block=BLOCK, unroll=unroll, vec=vec, minb=minb, aligned=aligned, grid=grid,
                  group=group, splits=splits, chunks=chunks)
    ws = m * splits if splits > 1 else 0
    return launch, ws, (m if splits > 1 else 0), params


def _plan_cols(problem: Cols, in_dtype: str, out_dtype: str, device: DeviceSpec) -> tuple[KernelLaunch, int, int,
                                                                                            dict[str, Any]]:
    vec, isz = _vec(in_dtype), ITEMSIZE[in_dtype]
    unroll, minb = tuned(_THIS, "COLS_TUNING", device).get(isz, (COLS_UNROLL, BLOCKS_PER_SM["cols"]))
    _check_elements_aligned(problem.align, in_dtype)
    a, r, b = problem.a, problem.r, problem.b
    aligned = (problem.align == 0 and (problem.sr * isz) % 16 == 0
               and (a == 1 or (problem.sa * isz) % 16 == 0))
    cvecs = cdiv(b, vec)
    ncv = a * cvecs  # column chunks

    def strips_and_splits(cap: int) -> tuple[int, int]:
        """(ct, splits) when ``cap`` blocks fit on the GPU at once."""
        if r <= MIN_J_PER_THREAD:
            return BLOCK, 1  # one thread per column chunk walks the whole reduced axis
        if ncv >= device.sm_count * minb * BLOCK // 2:
            return tuned(_THIS, "COLS_CT_MANY", device), 1
        widest = COLS_CT_MAX if ncv >= COLS_CT_MAX else next_pow2(ncv)

        def splits_for(width: int) -> int:
            return choose_splits(cdiv(ncv, width), r // ((BLOCK // width) * MIN_J_PER_THREAD), cap)

        width = next((w for w in _halvings(widest, COLS_CT_UNSPLIT_MIN) if splits_for(w) == 1),
                     min(widest, COLS_CT_MIN))
        return width, splits_for(width)

    # a block per strip and no splits at the one-item kernel's blocks per SM where that gives more strips than the
    # general kernel's blocks fit at once (fewer: every block is resident anyway, and fewer rows in flight per block
    # only lose loads in flight; H200 segments at 67d5cbf: 256 blocks at (4, 4) read 2.4-4.3% below (8, 2)); else
    # the strips and splits that fill the general kernel's blocks, through the one-item kernel when there are no
    # splits
    one_unroll, one_minb = tuned(_THIS, "COLS_ONE_ITEM_TUNING", device).get(isz, (unroll, minb))
    tile = tuned(_THIS, "COLS_TILE_AT_ONCE", device).get(isz)
    ct, splits = strips_and_splits(device.sm_count * one_minb)
    if (tile is not None and tile[0] <= r <= tile[1] and ONE_PASS_COLS
            and (ct, splits) == (tuned(_THIS, "COLS_CT_MANY", device), 1)):
        unroll, minb = tile[2], tile[3]
        ct = min(BLOCK, max(COLS_TILE_MIN_CT, 1 << (max(1, BLOCK * unroll // r).bit_length() - 1)))
    elif splits == 1 and ONE_PASS_COLS and cdiv(ncv, ct) > device.sm_count * minb:
        unroll, minb = one_unroll, one_minb
    else:
        ct, splits = strips_and_splits(device.sm_count * minb)
    one_item = splits == 1 and ONE_PASS_COLS
    cap = device.sm_count * minb
    jt = BLOCK // ct
    nj = BLOCK // max(ct, 32)
    strips = cdiv(ncv, ct)
    grid = max(1, strips * splits if ONE_PASS_COLS else min(cap, strips * splits))
    load = int(aligned and reaches_floor(_THIS, "COLS_EVICT_FIRST_MIN_ROWS", device, isz, r))
    name = (f"shuffle_cols<{ctype(in_dtype)}, {ctype(out_dtype)}, {BLOCK}, {unroll}, {ct}, {_bool(aligned)}, "
            f"{minb}, {_bool(one_item)}{_load_arg(load)}>")
    launch = KernelLaunch(SOURCE, name, (grid, 1, 1), (BLOCK, 1, 1),
                          (Buf("x"), a, r, b, problem.sa, problem.sr, Buf("out"), Buf("ws"), Buf("counters"), splits))
    params = dict(kernel="cols", block=BLOCK, unroll=unroll, vec=vec, minb=minb, aligned=aligned, grid=grid,
                  ct=ct, jt=jt, nj=nj, splits=splits, strips=strips, cvecs=cvecs)
    ws = strips * ct * vec * splits if splits > 1 else 0
    return launch, ws, (strips if splits > 1 else 0), params


def plan_shuffle(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
    """The launch plan of method "shuffle" for a canonical problem on ``device`` (see the module docstring).

    ``params`` (see :func:`~tcreduce._plan.param_dict`): kernel ("flat", "rows", "cols"), block (threads), unroll, vec
    (elements per 16-byte chunk), minb (blocks per SM compiled for), aligned (16-byte loads legal), grid (blocks); flat:
    head, nv (whole chunks), tail (elements), rounds (one-pass walks only); rows: group (threads per row: 1-32, 64-128
    or BLOCK), splits, chunks (per row); cols: ct (column chunks per strip), jt (j lanes per block), nj (j groups
    combined through shared memory), splits, strips, cvecs (column chunks per row of the output)."""
    if in_dtype not in ITEMSIZE:
        raise UnsupportedDtype(f"method 'shuffle' sums {', '.join(ITEMSIZE)} input, not {in_dtype}")
    if out_dtype not in ("float16", "float32", "float64"):
        raise TypeError(f"method 'shuffle' writes float16, float32 or float64 results, not {out_dtype}")
    if isinstance(problem, Flat):
        launch, ws, counters, params = _plan_flat(problem, in_dtype, out_dtype, device)
    elif isinstance(problem, Rows):
        launch, ws, counters, params = _plan_rows(problem, in_dtype, out_dtype, device)
    elif isinstance(problem, Cols):
        launch, ws, counters, params = _plan_cols(problem, in_dtype, out_dtype, device)
    else:
        raise TypeError(f"unknown problem {problem!r}")
    return Plan(method="shuffle", problem=problem, in_dtype=in_dtype, out_dtype=out_dtype, device=device,
                launches=(launch,), workspace_floats=ws, counters=counters, params=tuple(sorted(params.items())))




def chain_length(plan: Plan) -> int:
    """The longest chain of fp32 round-to-nearest additions any input element goes through on its way to its output
    (counting the first addition to +0.0f). With L this number, every output of the plan satisfies
    ``|computed - exact| <= gamma_L * sum|x|`` with ``gamma_L = L*u / (1 - L*u)``, ``u = 2**-24`` (Higham, ch. 4),
    before the final rounding to the output dtype."""
    p = param_dict(plan)
    # block_fold: warp_fold (5 levels), then warp 0 folds the warps' totals (log2(warps) levels that add values;
    # the other levels add the 0.0f padding, which is exact)
    fold = 5 + _log2(p["block"] // 32)
    prob = plan.problem
    if p["kernel"] == "flat":
        rounds = p.get("rounds", 0)
        per_thread = (min(rounds * p["unroll"], cdiv(p["nv"], p["block"])) if rounds  # chunks of a thread's block
                      else cdiv(p["nv"], p["grid"] * p["block"]))
        return (p["head"] + p["tail"] + p["vec"] * per_thread + fold
                + combine_grid_additions(p["grid"], p["block"], bool(rounds), fold))
    if p["kernel"] == "rows":
        assert isinstance(prob, Rows)
        if p["group"] <= 32:
            return p["vec"] * cdiv(p["chunks"], p["group"]) + _log2(p["group"])
        length = p["vec"] * cdiv(p["chunks"], p["splits"] * p["group"]) + 5 + _log2(p["group"] // 32)
        if p["splits"] > 1:
            length += cdiv(p["splits"], p["block"]) + fold
        return length
    assert isinstance(prob, Cols)
    length = cdiv(prob.r, p["splits"] * p["jt"])
    if p["ct"] < 32:
        length += _log2(32 // p["ct"])
    if p["nj"] > 1:
        length += p["nj"] - 1
    if p["splits"] > 1:
        length += cdiv(p["splits"], 32) + 5
    return length


def kernel_names(in_dtype: str, out_dtype: str) -> list[str]:
    """Every kernel name expression the planner can produce for one dtype pair (for compile tests)."""
    it, ot, isz = ctype(in_dtype), ctype(out_dtype), ITEMSIZE[in_dtype]

    def anywhere(name: str) -> tuple:  # a constant's module value and every GPU family's own
        return (getattr(_THIS, name), *(own[name] for own in FAMILY_TUNING.values() if name in own))

    defaults = {(COLS_UNROLL, BLOCKS_PER_SM["cols"])} | {t[isz] for t in anywhere("COLS_TUNING") if isz in t}
    # the one-item kernel where the tuned one would not fill, or at the general kernel's setting
    cols_one_item = (defaults | {t[isz] for t in anywhere("COLS_ONE_ITEM_TUNING") if isz in t}
                     | {t[isz][2:] for t in anywhere("COLS_TILE_AT_ONCE") if isz in t})
    rows_short = [(UNROLL, BLOCKS_PER_SM["rows"])] + [um for t in anywhere("ROWS_SHORT_TUNING")
                                                      for (size, _), um in t.items() if size == isz]
    rows_hinted = any(isz in t for t in anywhere("ROWS_EVICT_FIRST_MIN_CHUNKS"))
    cols_hinted = any(isz in t for t in anywhere("COLS_EVICT_FIRST_MIN_ROWS"))
    names = []
    fu, fm = FLAT_TUNING[in_dtype]
    flat_rounds = sorted({r for t in anywhere("FLAT_ROUNDS") for size, r in t.items() if size == isz and r})
    clusters = range(2, min(max(anywhere("FLAT_CLUSTER_MAX_BLOCKS")), CLUSTER_MAX_BLOCKS) + 1)  # sm_90 and newer
    for al in (True, False):
        names.append(f"shuffle_flat<{it}, {ot}, {BLOCK}, {fu}, {_bool(al)}, {fm}>")
        names += [f"shuffle_flat<{it}, {ot}, {BLOCK}, {fu}, {_bool(al)}, {fm}, {r}>" for r in flat_rounds]
        names += [f"shuffle_flat_cluster<{it}, {ot}, {BLOCK}, {fu}, {_bool(al)}, {fm}, {c}>" for c in clusters]
        rows_loads = (0, 1) if al and rows_hinted else (0,)
        for g in (1, 2, 4, 8, 16, 32, 64, 128, BLOCK):
            settings = {(u1, m) for u, m in rows_short for u1 in (u, 1)} if g <= 32 else set(rows_short[:1])
            names += [f"shuffle_rows<{it}, {ot}, {BLOCK}, {u}, {g}, {_bool(al)}, {m}{_load_arg(ld)}>"
                      for u, m in sorted(settings) for ld in rows_loads]
        for ct in (1, 2, 4, 8, 16, 32, BLOCK):
            for ld in ((0, 1) if al and cols_hinted else (0,)):
                names += [f"shuffle_cols<{it}, {ot}, {BLOCK}, {u}, {ct}, {_bool(al)}, {m}, false{_load_arg(ld)}>"
                          for u, m in sorted(defaults)]
                names += [f"shuffle_cols<{it}, {ot}, {BLOCK}, {u}, {ct}, {_bool(al)}, {m}, true{_load_arg(ld)}>"
                          for u, m in sorted(cols_one_item)]
    return names


register(Method(
    name="shuffle",
    description="CUDA-core baseline: 16-byte loads, fp32 register sums, __shfl_xor_sync warp folds, one smem hop per "
                "block, single-pass deterministic grid combination (last block done); full, last-axis and "
                "other-axis kernels",
    dtypes=tuple(ITEMSIZE),
    reference="modern CUDA-core baseline: seed 003 v5-v6, seed 001/004 reduce7 (warp shuffle), CUB-like "
              "deterministic two-level combination",
    planner=plan_shuffle,
    deterministic=True,
))
