"""float32 input for method "tensorcore" (and, with a chain, "tensorcore_chained"): each value split into three bf16
pieces (hi + mid + lo = x exactly for |x| >= 2^-110) summed with mma.sync m16n8k16.bf16 against ones, fp32-accurate.
Kernels: ``kernels/tensorcore_fp32.cu`` (the split and its order) on the forms of ``kernels/tensorcore_f32.cuh``
(``tc32_flat``, ``tc32_rows``, ``tc32_cols`` / ``tc32_cols_tma``, ``tc32_rows_stream``, ``tc32_rows4``, whose comments
pin the order of additions); emulator twin: ``tcreduce/emulate/tensorcore_fp32.py``; bound: ``tcreduce/bounds.py``.
:func:`plan_forms` is shared with ``tensorcore_tf32`` (same forms, another format policy).

What it launches: one kernel per call.

- Full sums (:class:`~tcreduce._layout.Flat`): ``tc32_flat``, a grid-stride kernel, ``FLAT_UNROLL`` 16-byte vectors
  in flight per lane (steps of 2), 4 blocks of 256 threads per SM; a misaligned start or a tail goes through one extra
  step of warp 0; the last block combines the block partials. Large arrays on an H100 or H200 (``FLAT_ROUNDS``) go in
  one pass of blocks of a fixed number of rounds instead, their partials combined in two levels.
- Last-axis sums (:class:`~tcreduce._layout.Rows`): rows whose starts are all 16-byte aligned go 4 per warp
  (``tc32_rows4``) when their length falls in a ``ROWS4_K`` range (per method) and they are many (``ROWS4_MIN_FILL``
  4-row tiles per resident warp); other aligned rows of at least ``STREAM_MIN_K`` elements stream one per warp group
  (``tc32_rows_stream``, tc32_flat's step on 256 elements of one row); the rest go to ``tc32_rows``: 16 rows per warp
  (one per mma row), 16-element chunks, 16-byte loads where the rows are 16-byte aligned and scalar loads otherwise;
  rows of at most 16 elements take the short path (4 row tiles in flight per warp). Few rows: several warps per tile,
  then several blocks (splits) combined by the tile's last block. An H200 (its ``FAMILY_TUNING``) takes the short path
  for rows of up to 112 elements (the split's rows not 16-byte aligned: 96; ``TILE_SHORT_MAX_CHUNKS``,
  ``TILE_SHORT_MAX_CHUNKS_SCALAR``), keeps the split's rows of 128-352 but 256 and tf32's of 129-223 and 257-288 on
  the tile loop, gives its ``tc32_rows4`` 4 chunks in flight (``ROWS4_UNROLL``), the split's rows of up to 16384
  elements and tf32's of up to 1023 (``ROWS4_K``), and the split's rows of 8192 or more 8 chunks in flight on 2 blocks
  per SM from 0.9 tiles per resident warp (``ROWS4_LONG``, ``ROWS4_MIN_FILL``).
- Other axes (:class:`~tcreduce._layout.Cols`): ``tc32_cols``, tc_cols' design (the data as the A operand read
  transposed): a warp owns a strip of 32 columns and walks the reduced axis in chunks of 16 rows, each lane loading
  16 bytes of 4 rows per chunk (scalar loads where the strides are not 16-byte multiples); strips go to warp groups
  (warps per strip chosen by wave efficiency), and the rows of few strips to several blocks (splits, also by wave
  efficiency) where no grouping fills ``COLS_SPLIT_BELOW_EFFICIENCY`` of its waves; rows of at most 16 take the short
  path (``COLS_UNROLL_SHORT`` adjacent strips in flight per warp); ``tensorcore_tf32`` loads a chunk ahead
  (``COLS_PREFETCH``). An H200 (its ``FAMILY_TUNING``, measured there only) takes further paths: strips of 2-4
  chunks the few-chunk path (``COLS_FEW_PATH_MAX_CHUNKS``: a warp per 2 chunks, both loaded at once), tf32's longer
  strips off TMA the same in trips (``COLS_FEW_LOOP``), and the split's rows 8-byte aligned but not 16 8-byte loads
  (``COLS_LOAD8``). On sm_90, inputs of at least 16 MiB with aligned rows and strips of ``COLS_TMA_MIN_CHUNKS`` chunks
  or more take ``tc32_cols_tma`` instead (where the rows are split over blocks, only from ``COLS_TMA_LONG_ROWS``
  rows): the same chunks in the same order, brought by TMA boxes (16 rows x 32 columns) into a
  ring of ``COLS_TMA_STAGES`` shared-memory buffers per warp; the plan's last argument is the input's tensor map
  (:class:`~tcreduce._plan.TensorMapOfX`); from ``COLS_TMA_LONG_ROWS`` rows the ring has ``COLS_TMA_STAGES_LONG``
  buffers. An H200 keeps the split on the register loop, and tf32 on it from ``COLS_TMA_LONG_ROWS`` rows (its
  ``FAMILY_TUNING``: as fast or faster there since the loops load whole chunks without end checks).

The constants below were tuned on an H100; a GPU family measured apart (the H200) sets some of them in
``FAMILY_TUNING``, which the planner reads through :func:`~tcreduce.plans._common.tuned`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from .._layout import Cols, Flat, Problem, Rows
from .._plan import Buf, DeviceSpec, KernelLaunch, Plan, TensorMapOfX
from ..registry import UnsupportedDtype
from ._common import (WorkSplit, cdiv, choose_group, choose_splits, ctype, flagged_counters, flat_one_block,
                      flat_one_pass_grid, full_grid, grid_groups, is_aligned, next_pow2, one_pass, rebalance_splits,
                      split_work, spread_rows, stream_work, tuned, wave_efficiency)

__all__ = ["plan_tensorcore_fp32", "plan_forms", "F32Format", "BLOCK", "FLAT_UNROLL", "FLAT_BLOCKS_PER_SM",
           "STREAM_MIN_K", "SOURCE"]

SOURCE = "tensorcore_fp32.cu"
BLOCK = 256
# 16-byte vectors in flight per lane in tc32_flat (UNROLL / 2 steps per iteration), per method: the split runs faster
# with 4 than with 8 (H100: 0.989-0.991x shuffle against 0.973-0.975x, benchmarks/tune_plans.py, notes/performance.md);
# tf32 keeps 8 until it is swept
FLAT_UNROLL = {"tensorcore": 4, "tensorcore_tf32": 8}
FLAT_BLOCKS_PER_SM = 4  # tc32_flat: __launch_bounds__(256, 4), up to 64 registers
FLAT_LOAD = 2  # cache-streaming 16-byte loads (__ldcs), as tc_flat
# tc32_flat over a one-pass grid of short blocks (ROUNDS > 0: block b owns FLAT_ROUNDS rounds of BLOCK x FLAT_UNROLL
# vectors, its pair combined in two levels; tc_flat's FLAT_ROUNDS), per method; a method not listed, or a grid of
# fewer than FLAT_ONE_PASS_MIN_WAVES waves of FLAT_BLOCKS_PER_SM resident blocks: the resident grid. Another order of
# additions (the twin follows the plan). H200 (session 20, tune_plans fp32_flat_rounds_* and tf32_flat_rounds_*, GB/s,
# resident grid / 8 / 16 / 32 rounds): the split 2^30 4,567 / 4,572 / 4,612 / 4,623, 2^28 4,444 / 4,331 / 4,383 /
# 4,431, 2^27 4,304 / 4,110 / 4,220 / 4,271 (4 rounds 6-10% slower: the split's short blocks are instruction-bound);
# tf32 2^30 4,613 / 4,660 / 4,659 / 4,620, 2^28 4,499 / 4,514 / 4,479 / 4,497: 32 and 8 rounds from 6 waves
# (FAMILY_TUNING: the split from 2^29, tf32 from 2^28). H100 (same sweeps, resident grid / 4 / 8 rounds): the split
# 2^30 3,071 / 3,170 / 3,164, 2^28 3,025 / 3,090 / 3,075, 2^27 2,997 / 3,001 / 2,990; tf32 2^30 3,073 / 3,166 / 3,141,
# 2^28 3,029 / 3,105 / 3,074 (Triton 3,150 at 2^30): 4 rounds from 12 waves (the split from 2^27, tf32 from 2^28)
FLAT_ROUNDS: dict[str, int] = {}
FLAT_ONE_PASS_MIN_WAVES = 3
# tc32_flat as one block where the resident grid would spread a small full sum over several blocks (tc_flat's
# FLAT_ONE_BLOCK), per method: (16-byte vectors per thread, blocks per SM it is compiled for, trips: the most loops of
# the block over its vectors). One block writes its value itself, so the last block's combination (its slots, the
# counter's atomic and a round trip through L2) is gone. H200 (session 26, tune_plans --graph
# fp32_*_flat_small_grid_2p*, GPU time per call, resident grid / one block): the split 2^13 3.23 / 2.48 us at 8
# vectors (16: 3.51, its warps each step 8 times in a row), 2^14 3.00 / 3.28-3.48 (every shape), 2^15 3.12 / 3.08;
# tf32 2^14 3.08 / 2.43 at 16 vectors (8: 2.53). So one trip of 8 vectors for the split, of 16 for tf32 (FAMILY_TUNING).
# NVRTC sm_90 at 16 vectors on 2 blocks per SM: the split 112 registers, tf32 93, no spills
FLAT_ONE_BLOCK: dict[str, tuple[int, int, int]] = {}
TILE_UNROLL = 2  # chunks in flight per warp in tc32_rows, at TILE_BLOCKS_PER_SM (H100, [2^22, 32]: 2,708 GB/s
#                   against 2,305 with 4 at 3 blocks: benchmarks/tune_plans.py, notes/performance.md)
TILE_UNROLL_SHORT = 4  # row tiles in flight per warp in tc32_rows' short path (k <= 16)
# ... and per method the most chunks per row its short path takes (SHORT_CHUNKS: every chunk of a warp's tiles loaded
# at once, TILE_UNROLL_SHORT2 tiles of 2 chunks in flight at 4 blocks per SM: 61-64 registers, no spills; 4 spill at
# 3 blocks); 1: rows of 17-32 on the tile loop. The same sums (a warp per tile, its chunks in order). tune_plans
# *_short2 at 47a9b55 (H200, 512 MiB, GB/s, 2 tiles in flight; 1 tile in parentheses): the split [2^22, 32] 3,293 ->
# 4,002 (3,526; `shuffle` 4,110), [5592405, 24] 2,392 -> 2,893, [7895160, 17] 1,515 -> 1,975; tf32 3,730 -> 4,016
# (4,064), 2,624 -> 3,599, 1,761 -> 2,387. Measured on an H200 only: an H200 sets it (FAMILY_TUNING; to 6-7 since)
TILE_SHORT_MAX_CHUNKS = {"tensorcore": 1, "tensorcore_tf32": 1}
TILE_UNROLL_SHORT2 = 2
# ... and rows of 33-64 (3-4 chunks; TILE_SHORT_MAX_CHUNKS 4): TILE_UNROLL_SHORT4 tiles in flight (also for 5-8 chunks,
# below; 1: 62-64 registers at 4 blocks per SM, no spills; 2 spill at 3 blocks, as do 8 chunks of one tile). tune_plans
# *_short4 at 7c155a3 (H200, 512 MiB, GB/s, against the tile loop): the split [4067203, 33] 1,993 -> 2,297, [2796202,
# 48] 3,217 -> 3,889, [2^21, 64] 3,705 -> 4,063 (`shuffle` 2,499, 4,033, 4,397); tf32 2,289 -> 2,882, 3,549 -> 4,074,
# 4,025 -> 4,111. GPU == twin with it on an H200 (752366e). An H200 takes it (FAMILY_TUNING, session 31)
TILE_UNROLL_SHORT4 = 1
# ... and rows of 65-128 (5-8 chunks; TILE_SHORT_MAX_CHUNKS 8): one tile in flight at TILE_SHORT8_BLOCKS_PER_SM blocks
# per SM (2: the split 103-128 registers, tf32 86-90, no spills; at 3, 5-6 chunks fit in 78-80 registers, and 7 but
# the split's scalar loads (16 bytes spilled), 8 spill 8-16 bytes). Rows of 128 go to tc32_rows4 first (ROWS4_K).
# tune_plans *_short8 at 9edd0f1 (H200, 512 MiB, GB/s, the tile loop -> 2 blocks per SM, 3): the split [1677721, 80]
# 3,593 -> 3,394, 4,001; [1398101, 96] 3,888 -> 3,562, 4,119; [1198372, 112] 3,739 -> 3,679, 4,120 (`shuffle` 3,949,
# 4,403, 4,491); tf32 3,891 -> 4,147, 4,167; 4,144 -> 4,180, 4,200; 3,910 -> 4,091, 4,183. Rows of 128 (tc32_rows4,
# the tile loop, 2, 3): the split 3,598, 3,962, 3,756, 3,904 (`shuffle` 4,500); tf32 4,256, 4,193, 4,190, 4,107. So an
# H200 (FAMILY_TUNING) takes 5-6 chunks (the split) or 5-7 (tf32) at 3 blocks per SM, and the split's rows of 128
# the tile loop
TILE_SHORT8_BLOCKS_PER_SM = 2
TILE_SHORT_CHUNKS_MAX = 8  # the most chunks per tile the short path holds in registers
# ... and the most for rows not 16-byte aligned (scalar loads), per method: the split's 7 chunks with scalar loads
# spill 16 bytes at 3 blocks per SM on sm_90 (NVRTC 13.5), its 16-byte loads none, so an H200 sets the split's 6 here
# and 7 above (FAMILY_TUNING): its aligned rows of 97-112 take the short path ([1198372, 112] 3,739 -> 4,120 at
# 9edd0f1, the *_short8 sweep above: those rows are aligned)
TILE_SHORT_MAX_CHUNKS_SCALAR = {"tensorcore": TILE_SHORT_CHUNKS_MAX, "tensorcore_tf32": TILE_SHORT_CHUNKS_MAX}
COLS_STRIP = 32  # columns per warp strip in tc32_cols (kernels/tensorcore_f32.cuh: SW)
COLS_UNROLL = 1  # 16-row chunks (2 KiB per warp each) in flight per warp in tc32_cols, at COLS_BLOCKS_PER_SM
COLS_UNROLL_SHORT = 2  # adjacent strips in flight per warp in its short path (r <= 16; 4 blocks per SM)
TILE_BLOCKS_PER_SM = 4  # tc32_rows: __launch_bounds__(256, 4) (its MINB)
# tc32_cols' MINB: more resident warps hide the split's latency; columns of few chunks per strip (the epilogue weighs
# more) run 4 blocks per SM (H100, [32, 2^22]: 2,606 GB/s against 2,487 at 3 and 2,299 at 2 with 2 chunks), others 3
# ([2^20, 128]: 2,718 against 2,511 at 4)
COLS_BLOCKS_PER_SM = 3
# tc32_cols on strips of more than COLS_FEW_CHUNKS chunks, per method: a software pipeline (chunk ch + WPS loaded
# before chunk ch steps: a load in flight while the warp computes; the same sums) at COLS_BLOCKS_PER_SM_PREFETCH blocks
# per SM. tune_plans runs 24-25 (H100, 512 MiB): tf32 [128, 2^20] 2,097 -> 2,621 GB/s, [1024, 2^17] 2,183 -> 2,910,
# [4096, 2^15] 2,116 -> 2,832, [2^20, 128] 2,187 -> 2,808 (3 blocks per SM: 2-11% less); the split loses 4-17% (its
# step needs the registers: 114 at 2 blocks per SM, spills at 3)
COLS_PREFETCH = {"tensorcore": False, "tensorcore_tf32": True}
COLS_BLOCKS_PER_SM_PREFETCH = 2
# tc32_cols_tma on sm_90 and later, for inputs of at least COLS_TMA_MIN_BYTES whose strips have at least
# COLS_TMA_MIN_CHUNKS chunks (below) and 16-byte aligned rows (split rows: COLS_TMA_SPLITS), per method: the chunks
# arrive as TMA boxes (16 rows x 32 columns) in a ring of this many shared-memory buffers per warp (2 KiB each),
# refilled after each step, at COLS_BLOCKS_PER_SM_TMA blocks per SM (the same chunks in the same order: the same sums);
# 0: off. tune_plans runs 30-31 (H100, 512 MiB, single readings about 2-3% apart run to run): the split at 2 buffers, 3
# blocks per SM: [128, 2^20] 2,682 -> 2,836 GB/s, [256, 2^19] 2,772 -> 2,867, [1024, 2^17] 2,694 -> 2,792, [4096, 2^15]
# 2,696 -> 2,657, [16384, 2^13] 2,765 -> 2,750; tf32 at 2 buffers, 4 blocks per SM: 2,632 -> 2,847, 2,761 -> 2,858,
# 2,919 -> 2,935, 2,874 -> 2,941, 2,829 -> 2,882. Where the rows are split over blocks (few strips) it lost (run 30,
# [2^20, 128]: 2,728 -> 2,644), so split plans kept the register loop; from 1024 rows, at 2 blocks per SM, they take TMA
# (COLS_TMA_SPLITS). Runs 32-33 (H100): tf32 reads 128-512 rows 1-2.5% faster at 3 blocks per SM than at 4 (run 33:
# 2,869 -> 2,915, 2,857 -> 2,928, 2,929 -> 2,955 GB/s), so both run 3 ...
COLS_TMA_STAGES = {"tensorcore": 2, "tensorcore_tf32": 2}
COLS_BLOCKS_PER_SM_TMA = {"tensorcore": 3, "tensorcore_tf32": 3}
# ... below COLS_TMA_LONG_ROWS rows, and COLS_BLOCKS_PER_SM_TMA_LONG from there: long strips keep 2 blocks per SM
# busy (fewer, longer blocks; no split up to 16384 rows of 2^13). Run 33, the split at 3 -> 2 blocks per SM: [1024,
# 2^17] 2,798 -> 2,949, [4096, 2^15] 2,635 -> 2,962, [16384, 2^13] 2,825 -> 2,918 (run 32: [2048, 2^16] 2,772 ->
# 2,919, [8192, 2^14] 2,665 -> 2,892); tf32 at 4 -> 2: 2,936 -> 2,945, 2,942 -> 2,972, 2,889 -> 2,986, [2048, 2^16]
# 2,935 -> 2,995, [8192, 2^14] 2,858 -> 3,008; at 512 rows and fewer 2 blocks per SM read 0.4-6% slower than 3
COLS_TMA_LONG_ROWS = 1024
COLS_BLOCKS_PER_SM_TMA_LONG = 2
# ... and a ring of this many buffers from COLS_TMA_LONG_ROWS rows, per method (0: the register loop there)
COLS_TMA_STAGES_LONG = {"tensorcore": 2, "tensorcore_tf32": 2}
# tc32_cols_tma from this many chunks per strip, per method (fewer: the register loop, at COLS_BLOCKS_PER_SM_FEW
# blocks per SM up to COLS_FEW_CHUNKS chunks). Run 34 (H100, 512 MiB, TMA at 2 buffers and 3 blocks per SM against
# the register loop at 4): tf32 [32, 2^22] 2,132 -> 2,752 GB/s, [64, 2^21] 2,176 -> 2,851; the split [64, 2^21] 2,625
# -> 2,754 but [32, 2^22] 2,617 -> 2,461. An H200 leaves tf32's strips of 2 chunks to the few-chunk path (below)
COLS_TMA_MIN_CHUNKS = {"tensorcore": 4, "tensorcore_tf32": 2}
# TMA also where the rows are split over blocks (few strips), from COLS_TMA_LONG_ROWS rows (2 blocks per SM; at 3 it
# loses: run 30, run 36). Run 36 (H100, 512 MiB), the split against the register loop: [32768, 2^12] 2,848 -> 2,884
# GB/s, [2^17, 2^10] 2,858 -> 2,893, [2^20, 2^7] 2,724 -> 2,779 (at 3 blocks per SM: 2,768, 2,730, 2,650); tf32 [2^20,
# 2^7] 2,821 -> 2,846
COLS_TMA_SPLITS = True
COLS_TMA_MIN_BYTES = 1 << 24  # smaller inputs keep tc32_cols (a tensor map is encoded per input address)
TMA_MAX_COORD = (1 << 31) - 1  # TMA coordinates are 32-bit signed
TMA_MAX_STRIDE = 1 << 40  # bytes
COLS_BLOCKS_PER_SM_FEW = 4
COLS_FEW_CHUNKS = 4  # 16-row chunks per strip up to which columns count as few
# tc32_cols' few-chunk path, per method: strips of 2 .. COLS_FEW_PATH_MAX_CHUNKS (at most COLS_FEW_CHUNKS) chunks that
# the register loop would walk with one warp per strip and no splits take a warp per COLS_FEW_PATH_CHUNKS_PER_WARP
# chunks instead, each loading all of its chunks at once, then stepping them in order (at COLS_BLOCKS_PER_SM_FEW):
# the register loop's sums in one round trip per strip; 0: off. tune_plans *_few_path at 6f83763 (H200, 512 MiB,
# GB/s, `shuffle` 4,084-4,099 at 32 rows): the split [32, 2^22] 3,029 -> 3,667 at 4 blocks per SM (3,392 at 3); tf32
# there 3,603 (TMA) -> 4,048. One warp loading 4 chunks (2 blocks per SM: it spills at 3) lost but for tf32 [64, 2^21]
# (3,979 -> 4,077): the split [64, 2^21] 3,371 -> 3,075, [48, 2796202] (rows not 16-byte aligned) 2,888 -> 2,712, tf32
# there 3,623 -> 3,227. Two warps of 2 chunks each for 3-4 chunks (50ed366): the split [64, 2^21] 3,410 -> 3,566,
# tf32 3,984 (TMA) -> 4,120, 48 rows level; with 8-byte loads the split's 48 rows not 16-byte aligned 3,014 -> 3,191
# (47a9b55). Measured on an H200 only: an H200 sets 4 and tf32's COLS_TMA_MIN_CHUNKS 5 (FAMILY_TUNING), other GPUs keep
# the register loop until measured there
COLS_FEW_PATH_MAX_CHUNKS = {"tensorcore": 0, "tensorcore_tf32": 0}
COLS_FEW_PATH_CHUNKS_PER_WARP = 2  # kernels/tensorcore_f32.cuh: FEW (64 registers for the split at 4 blocks per SM)
# ... and on longer strips without splits, per method: the few-chunk path in trips of COLS_FEW_PATH_CHUNKS_PER_WARP
# chunks per warp while chunks remain (FEW_LOOP: 2 chunks in flight per warp where the register loop has 1, tf32's
# pipeline 1 ahead), warps per strip as the register loop's, at COLS_FEW_LOOP_BLOCKS_PER_SM (the split: 80 registers
# at 3, no spills; it spills at 4). The same sums. tune_plans *_few_loop at 47a9b55 (H200, 512 MiB, GB/s, strips off
# TMA): tf32 [1024, 2^17] 3,972 -> 4,108, [4096, 2^15] 3,989 -> 4,104, [2^17, 1024] level; the split [4096, 2^15]
# 3,631 -> 3,733 but [128, 2^20] 3,312 -> 3,266, others within 1%. An H200 sets tf32's (FAMILY_TUNING); others off
COLS_FEW_LOOP = {"tensorcore": False, "tensorcore_tf32": False}
COLS_FEW_LOOP_BLOCKS_PER_SM = 3
# tc32_cols on rows 8-byte aligned but not 16, per method: two 8-byte loads per row of a lane's 4 columns instead of 4
# scalar ones (the same values; ALIGNED8). tune_plans *_load8 at 47a9b55 (H200, 512 MiB, b = 2 mod 4, GB/s): the split
# +2-8% at 16-8192 rows ([32, 4194302] 3,469 -> 3,750, [1024, 131070] 3,037 -> 3,236); tf32 loses at 16-48 and 8192
# rows (3,605 -> 2,223 at 16, 3,691 -> 3,359 at 8192; +1-5% at 128-1024). An H200 sets the split's (FAMILY_TUNING)
COLS_LOAD8 = {"tensorcore": False, "tensorcore_tf32": False}
# tc32_cols without splits: warps per strip chosen by wave efficiency (_common.choose_group) also where one warp per
# strip already fills the resident warps ([1024, 2^17]: 4096 strips made 512 blocks, 1.29 waves on 396 slots; 8 warps
# per strip: 2,360 -> 2,670 GB/s, tf32 1,712 -> 2,153; [256, 2^19] and [512, 2^18] +3-4%: tune_plans run 19, H100)
COLS_GROUP_BY_WAVES = True
# ... and where the best of those grids still fills less than this fraction of its waves (few strips: [8192, 2^14]
# has 512 strips, 256 blocks of 2 strips on 396 slots), a block per strip with the rows split over blocks
# (_common.choose_splits; each warp keeps at least 4 chunks per split); 0 never splits there. Run 20 (H100): 2,491
# -> 2,694 GB/s at [8192, 2^14] (tf32 1,724 -> 2,194); splitting grids that already fill 86% of their waves loses
# ([4096, 2^15] 2,689 -> 2,600, [2048, 2^16] 2,765 -> 2,518), hence 0.75
COLS_SPLIT_BELOW_EFFICIENCY = 0.75
ONE_PASS = True  # tc32_rows, tc32_cols, tc32_rows_stream without splits: a grid of one pass (_common.one_pass)
SHORT_BLOCKS_PER_SM = 4  # the short path of both: __launch_bounds__(256, 4)
# aligned rows at least this long stream one per warp (tc32_rows_stream), not 16 per warp (tc32_rows' 64 bytes of a
# row per load): [2^18, 512] 2,685 -> 2,785 GB/s from 1024, tf32 2,050 -> 3,031; at 256 the stream loses (1,943
# against 2,713): tune_plans runs 17 and 19, H100
STREAM_MIN_K = 512
STREAM_UNROLL = 2  # 256-element chunks in flight per warp in tc32_rows_stream (4 vectors per lane)
STREAM_BLOCKS_PER_SM = 4  # tc32_rows_stream: __launch_bounds__(256, 4)
# few long rows split over blocks: the fewest splits that fill the resident blocks (True), or about 4 waves of blocks
# (_common.stream_work). Run 33 (H100, 512 MiB, GB/s, against the old rule): the split's [128, 2^20] 2,710 -> 2,917,
# [256, 2^19] 2,824 -> 2,971, [512, 2^18] 2,914 -> 2,970; tf32 2,811 -> 2,940, 2,926 -> 2,972, 2,977 -> 3,024 (at 300
# rows, 5 splits against 8, mixed: the split 2,764 -> 2,857, tf32 2,876 -> 2,748 on the same grid)
STREAM_SPLIT_FILL = True
# tc32_rows_stream: more warps per row beyond this many steps per warp (_common.spread_rows; H100, 512 MiB: 4 reads
# [16384, 8192] at 2,993 GB/s against 2,925 without, 1 and 2 lose where the split's combine weighs more)
STREAM_MAX_STEPS = 4
# tc32_rows4 (4 rows per warp, 256 contiguous bytes of a row per load, kernels/tensorcore_f32.cuh): aligned rows whose
# length falls in one of these half-open ranges of elements, per method (none: off), when there are rows enough
# (ROWS4_MIN_FILL); tc32_rows_stream (STREAM_MIN_K) takes longer aligned rows, tc32_rows the rest.
# - From where: tune_plans run 21 (H100, against tc32_rows): [2^20, 128] 2,746 -> 2,915 GB/s, [2^19, 256] 2,696 ->
#   2,973, [349525, 384] 2,689 -> 3,008 (tf32 at 128 and 256: 2,458 -> 2,704, 2,175 -> 2,755); rows of 64 (one chunk
#   per warp, then the fold) lose, 2,770 -> 2,049. An H200 keeps the split's rows of 128-255 on the tile loop (*_short8
#   above; tune_plans fp32_rows*_rows4_or_tiles at 465e425, H200, 512 MiB, GB/s, tc32_rows4 -> the tile loop: [932067,
#   144] 2,604 -> 3,703, [838860, 160] 2,879 -> 3,931, [699050, 192] 3,720 -> 3,931, [599186, 224] 3,376 -> 3,965,
#   [559240, 240] 3,581 -> 3,632; `shuffle` 3,596-4,479).
# - Holes: tc32_rows4 walks a row in rounds of ROWS4_UNROLL 64-element chunks, so a length just past a whole round
#   leaves most of its last round idle. tune_plans at f3a8201 (H200, 512 MiB, GB/s, tc32_rows4 -> the tile loop;
#   `rows4_tf32_tiles_long` log): the split [466033, 288] 3,208 -> 3,962, [419430, 320] 3,724 -> 3,858, [349525, 384]
#   3,985 -> 3,809; tf32 [932067, 144] 3,136 -> 3,815, [838860, 160] 3,358 -> 4,101, [699050, 192] 3,962 -> 4,088,
#   [599186, 224] 4,126 -> 4,105 (`shuffle` 3,592-4,485). At 1da0ec7 (`tune_rows4_fill_long_tiles` log, each length
#   alone): the split 336 3,571 -> 3,625, 352 3,699 -> 3,917, 368 3,819 -> 3,519, 448 4,209 -> 3,866, 500 4,170 ->
#   3,476; tf32 240 4,204 -> 3,693, 288 3,810 -> 4,080 (a last round of its 2 chunks a quarter full), 320 4,172 ->
#   3,974, 384 4,304 -> 3,918, 448 4,200 -> 3,993; tf32's rows of 128, one whole round, read 4,256 in tc32_rows4
#   against the tile loop's 4,193 (session 31).
# - Up to where: tune_plans run 22 (H100): the split reads [2^18, 512] at 3,005 GB/s in rows4 against 2,792 streamed,
#   [174762, 768] 2,894 against 2,655; tf32 reads them faster streamed (3,078 against 2,867; 2,944 against 2,796).
#   tune_plans fp32_rows*_rows4_long at b084cf9 (H200, 512 MiB, GB/s, the split streamed -> tc32_rows4 at 4 chunks in
#   flight on 4 blocks per SM, 3): [131072, 1024] 3,866 -> 4,283, 4,209; [65536, 2048] 4,051 -> 4,188, 4,082; [32768,
#   4096] 4,070 -> 4,148, 4,046 (`shuffle` 4,490-4,496); from 8192 see ROWS4_MIN_FILL. tf32 (f3a8201 and 1da0ec7,
#   streamed -> tc32_rows4 at 4 on 4): [262144, 512] 3,978 -> 4,316, [174762, 768] 3,718 -> 4,331, [131072, 1024]
#   4,371 -> 4,337, [87381, 1536] 4,370 -> 4,333, [65536, 2048] 4,250 -> 4,287, [32768, 4096] 4,330 -> 4,243.
# So an H200 (FAMILY_TUNING) gives tc32_rows4 the split's rows of 256 and 353-16384 elements and tf32's of 128,
# 224-256 and 289-1023
ROWS4_K: dict[str, tuple[tuple[int, int], ...]] = {"tensorcore": ((128, 1024),), "tensorcore_tf32": ((128, 512),)}
# ... when there are at least this many 4-row tiles per resident warp (a warp per tile, one pass: fewer leave warps
# idle), per method. Long rows keep 4-8 chunks of 4 rows (4-8 KiB) in flight per warp (ROWS4_LONG), so on them fewer
# busy warps may still cover the memory's latency. tune_plans *_rows4_fill at 1da0ec7 (H200, 512 MiB, GB/s, streamed
# -> tc32_rows4 at 4 chunks in flight on 4 blocks per SM, 8 on 2): the split [16384, 8192] 4,071 -> 4,159, 4,171;
# [8192, 16384] 3,970 -> 3,972, 4,132 (8 on 2: 2048 tiles for 2112 resident warps); [4096, 32768] 4,186 -> 2,724, 3,175
# (a warp per tile on a quarter or half of them); tf32 loses at each (4,360 -> 4,237, 4,293; 4,301 -> 4,164, 4,195;
# 4,318 -> 3,295, 3,580). So an H200 (FAMILY_TUNING) runs the split's rows of 8192-16384 in tc32_rows4 at 8 on 2
# (ROWS4_LONG) from 0.9 tiles per resident warp
ROWS4_MIN_FILL = {"tensorcore": 1.0, "tensorcore_tf32": 1.0}
# 64-element chunks in flight per warp, per method. tune_plans *_rows4 at a8f8243 (H200, 512 MiB, GB/s, 2 -> 4): the
# split [2^19, 256] 4,008 -> 4,312 (`shuffle` 4,522), [349525, 384] 4,076 -> 4,034; tf32 [2^19, 256] 4,352 -> 4,349,
# [2^20, 128] 4,277 -> 3,190. An H200 sets the split's 4 (FAMILY_TUNING). fp32_rows*_rows4_inflight at b084cf9 (the
# split, 2 -> 4 chunks in flight on 4 blocks per SM, then 4 on 3): [838860, 160] 2,804 -> 2,900, 2,723; [699050,
# 192] 3,483 -> 3,739, 3,446; [419430, 320] 3,800 -> 3,723, 3,564; [299593, 448] 3,945 -> 4,211, 4,049; [268435,
# 500] 3,907 -> 4,173, 4,014 (`shuffle` 3,817-4,410): 4 is kept for them all (320 and 384 lose 1-2%)
ROWS4_UNROLL = {"tensorcore": 2, "tensorcore_tf32": 2}
ROWS4_BLOCKS_PER_SM = 4  # __launch_bounds__(256, 4)
# ... and longer rows more chunks in flight on fewer blocks (the same sums: chunks fold in order), in (k from, chunks
# in flight, blocks per SM) tiers, the longest last. Run 23 (H100, split): (4, 3) against (2, 4) reads [2^18, 512] at
# 3,037 against 2,995 GB/s, [174762, 768] 3,021 against 2,964, [134217, 1000] 2,893 against 2,828; at 128-384 it
# loses (run 21: 2,515 against 2,915 at 128). An H200 (FAMILY_TUNING) runs 4 chunks on 4 blocks from 512 elements
# (session 9) and 8 on 2 from 8192 (ROWS4_MIN_FILL)
ROWS4_LONG: tuple[tuple[int, int, int], ...] = ((512, 4, 3),)
ITEMSIZE = 4
# Per GPU family, the constants it sets apart from the values above (an H100's), read through _common.tuned. H200
# (tune_plans runs 40-42, session 9, 512 MiB, GB/s against the H100 values in the same run; notes/performance.md):
# tc32_rows4 from 512 elements at 4 chunks in flight on 4 blocks per SM (ROWS4_LONG): [2^18, 512] 4,088 -> 4,259. Since
# session 27 the split's register loop loads whole chunks without end checks, and on an H200 it reads first-axis sums as
# fast as the TMA ring or faster (tune_plans fp32_cols*_tma at 3aa2329, the register loop at 3 blocks per SM against TMA
# at 2 buffers and 3 blocks per SM): 128 rows 3,140 -> 3,361 GB/s, 256 3,495 -> 3,541, 512 3,514 -> 3,533, 1024 3,488 ->
# 3,524, 2048 3,652 -> 3,596, 4096 3,624 -> 3,637, 16384 3,700 -> 3,716: the split leaves TMA. Since session 28 tf32's
# one-chunk pipeline loads whole chunks too, and from COLS_TMA_LONG_ROWS rows it reads as fast as TMA or faster
# (tune_plans tf32_cols*_tma at 39e3f26, the pipeline at 2 blocks per SM against TMA at 2 buffers and 3 blocks per SM,
# session 9's setting for long rows; two readings of it): 1024 rows 3,912-3,917 -> 3,969, 4096 3,593-3,660 -> 3,998 (TMA
# at 2 blocks per SM: 4,005 there, 3,091 at 1024 rows); below, TMA stays ahead (256 rows 3,740 against 4,012). With no
# TMA from COLS_TMA_LONG_ROWS rows, session 9's settings for TMA there went (3 blocks per SM: [4096, 2^15] 3,136 ->
# 3,542; COLS_TMA_SPLITS off, few strips on the register loop: [2^20, 2^7] 2,928 -> 3,142; both now the loop's)
FAMILY_TUNING: dict[str, dict[str, Any]] = {
    "H100": dict(FLAT_ROUNDS={"tensorcore": 4, "tensorcore_tf32": 4}, FLAT_ONE_PASS_MIN_WAVES=12),
    "H200": dict(ROWS4_LONG=((512, 4, 4), (8192, 8, 2)), COLS_TMA_STAGES={"tensorcore": 0, "tensorcore_tf32": 2},
                 COLS_TMA_STAGES_LONG={"tensorcore": 0, "tensorcore_tf32": 0},
                 COLS_TMA_MIN_CHUNKS={"tensorcore": 4, "tensorcore_tf32": 5},
                 COLS_FEW_PATH_MAX_CHUNKS={"tensorcore": 4, "tensorcore_tf32": 4},
                 COLS_FEW_LOOP={"tensorcore": False, "tensorcore_tf32": True},
                 COLS_LOAD8={"tensorcore": True, "tensorcore_tf32": False},
                 TILE_SHORT_MAX_CHUNKS={"tensorcore": 7, "tensorcore_tf32": 7}, TILE_SHORT8_BLOCKS_PER_SM=3,
                 TILE_SHORT_MAX_CHUNKS_SCALAR={"tensorcore": 6, "tensorcore_tf32": 7},
                 ROWS4_K={"tensorcore": ((256, 257), (353, 16385)),
                          "tensorcore_tf32": ((128, 129), (224, 257), (289, 1024))},
                 ROWS4_MIN_FILL={"tensorcore": 0.9, "tensorcore_tf32": 1.0},
                 ROWS4_UNROLL={"tensorcore": 4, "tensorcore_tf32": 2},
                 FLAT_ROUNDS={"tensorcore": 32, "tensorcore_tf32": 8}, FLAT_ONE_PASS_MIN_WAVES=6,
                 FLAT_ONE_BLOCK={"tensorcore": (8, 2, 1), "tensorcore_tf32": (16, 2, 1)}),
}
_THIS = sys.modules[__name__]


@dataclass(frozen=True)
class F32Format:
    """A float32 tensor-core format: the plan's method name, its kernel file, and the C++ format policy the forms
    are instantiated with (``tcr32::Split`` or ``tcr32::Tf32``)."""

    method: str
    source: str
    policy: str


def _bool(b: bool) -> str:
    return "true" if b else "false"


def _split_launch(common: dict, fmt: F32Format, name: str, work: WorkSplit, problem_args: tuple, items: int,
                  outputs_per_item: int, params: dict, tail_args: tuple = (), shared_bytes: int = 0) -> Plan:
    """The one launch of tc32_rows, tc32_cols(_tma), tc32_rows4 or tc32_rows_stream: grid (grid_x, splits),
    arguments (x, *problem_args, out, ws, counters, splits, *tail_args), ``shared_bytes`` of dynamic shared memory;
    with splits > 1 two workspace floats (a pair) per output and split and a counter per work item (tile or row) for
    the last-block combination."""
    launch = KernelLaunch(fmt.source, name, (work.grid_x, work.splits, 1), (BLOCK, 1, 1),
                          (Buf("x"), *problem_args, Buf("out"), Buf("ws"), Buf("counters"), work.splits, *tail_args),
                          shared_bytes)
    split = work.splits > 1
    params = dict(params, block=BLOCK, splits=work.splits, grid=work.grid_x, wpt=work.warps_per_tile)
    return Plan(**common, launches=(launch,),
                workspace_floats=2 * items * outputs_per_item * work.splits if split else 0,
                counters=items if split else 0, params=tuple(sorted(params.items())))


def _steps_per_warp(chunks: int, splits: int, wpt: int) -> int:
    """The most chunks (steps) any warp runs: chunks cut into splits ranges, warp q of wpt taking q, q + wpt, ..."""
    return cdiv(cdiv(chunks, splits), wpt) if chunks else 0


def _plan_tiles(common: dict, fmt: F32Format, out_t: str, problem: Rows, device: DeviceSpec) -> Plan:
    length, tiles = problem.k, cdiv(problem.m, 16)
    vector = is_aligned(problem.align, (problem.ld * ITEMSIZE,), 16)
    chunks = cdiv(length, 16)
    work = split_work(tiles, chunks, BLOCK // 32, device, TILE_BLOCKS_PER_SM)
    most = min(tuned(_THIS, "TILE_SHORT_MAX_CHUNKS", device)[fmt.method], TILE_SHORT_CHUNKS_MAX)
    if not vector:
        most = min(most, tuned(_THIS, "TILE_SHORT_MAX_CHUNKS_SCALAR", device)[fmt.method])
    short = 0 < chunks <= most and work.splits == 1 and work.warps_per_tile == 1
    minb, unroll = TILE_BLOCKS_PER_SM, TILE_UNROLL  # __launch_bounds__(BLOCK, minb); chunks in flight per warp
    if short:  # 4 blocks per SM up to 4 chunks per tile, fewer beyond; tiles in flight per warp; a grid for them
        minb = SHORT_BLOCKS_PER_SM if chunks <= 4 else tuned(_THIS, "TILE_SHORT8_BLOCKS_PER_SM", device)
        unroll = TILE_UNROLL_SHORT if chunks == 1 else TILE_UNROLL_SHORT2 if chunks == 2 else TILE_UNROLL_SHORT4
        work = split_work(tiles, 1, BLOCK // 32, device, minb)
    if ONE_PASS:  # the short path's warp takes `unroll` tiles per round
        work = one_pass(work, tiles, BLOCK // 32, unroll if short else 1)
    name = (f"tc32_rows<{fmt.policy}, {BLOCK}, {work.warps_per_tile}, {_bool(vector)}, {unroll}, {out_t}, "
            f"{_bool(short)}, {minb}{f', {chunks}' if short and chunks > 1 else ''}>")  # SHORT_CHUNKS
    steps = _steps_per_warp(chunks, work.splits, work.warps_per_tile)
    return _split_launch(common, fmt, name, work, (problem.m, problem.k, problem.ld), tiles, 16,
                         dict(form="rows", vector=vector, unroll=unroll, short=short, chunks=chunks, steps=steps))


def _plan_rows4(common: dict, fmt: F32Format, out_t: str, problem: Rows, device: DeviceSpec) -> Plan:
    """tc32_rows4: a warp per 4 rows on a one-pass grid, no splits (the kernel writes its sums directly)."""
    tiles = cdiv(problem.m, 4)
    work = WorkSplit(1, 1, cdiv(tiles, BLOCK // 32))
    unroll, blocks_per_sm = _rows4_geometry(fmt, problem.k, device)
    name = f"tc32_rows4<{fmt.policy}, {BLOCK}, {unroll}, {out_t}, {blocks_per_sm}>"
    chunks = cdiv(problem.k, 64)
    return _split_launch(common, fmt, name, work, (problem.m, problem.k, problem.ld), tiles, 4,
                         dict(form="rows4", unroll=unroll, chunks=chunks, steps=chunks))


def _rows4_geometry(fmt: F32Format, k: int, device: DeviceSpec) -> tuple[int, int]:
    """tc32_rows4's (chunks in flight per warp, blocks per SM) for rows of ``k`` elements (ROWS4_LONG's last tier
    that ``k`` reaches, else ROWS4_UNROLL and ROWS4_BLOCKS_PER_SM)."""
    geometry = tuned(_THIS, "ROWS4_UNROLL", device)[fmt.method], ROWS4_BLOCKS_PER_SM
    for k_from, unroll, blocks_per_sm in tuned(_THIS, "ROWS4_LONG", device):
        if k >= k_from:
            geometry = unroll, blocks_per_sm
    return geometry


def _takes_rows4(fmt: F32Format, problem: Rows, device: DeviceSpec) -> bool:
    """Whether tc32_rows4 takes these rows: aligned rows whose length falls in a ROWS4_K[method] range, at least
    ROWS4_MIN_FILL[method] 4-row tiles per resident warp."""
    k, method = problem.k, fmt.method
    return (any(lo <= k < hi for lo, hi in tuned(_THIS, "ROWS4_K", device)[method])
            and is_aligned(problem.align, (problem.ld * ITEMSIZE,), 16)
            and cdiv(problem.m, 4) >= (tuned(_THIS, "ROWS4_MIN_FILL", device)[method]
                                       * device.sm_count * _rows4_geometry(fmt, k, device)[1] * (BLOCK // 32)))


def _plan_cols(common: dict, fmt: F32Format, out_t: str, problem: Cols, device: DeviceSpec,
               tma_ok: bool = True, few_loop_ok: bool = True) -> Plan:
    strides = (problem.sa * ITEMSIZE, problem.sr * ITEMSIZE)
    aligned = is_aligned(problem.align, strides, 16)
    aligned8 = not aligned and tuned(_THIS, "COLS_LOAD8", device)[fmt.method] and is_aligned(problem.align, strides, 8)
    strips = problem.a * cdiv(problem.b, COLS_STRIP)
    chunks = cdiv(problem.r, 16)
    big = problem.a * problem.r * problem.b * ITEMSIZE >= COLS_TMA_MIN_BYTES
    long_rows = problem.r >= COLS_TMA_LONG_ROWS
    stages = tuned(_THIS, "COLS_TMA_STAGES_LONG" if long_rows else "COLS_TMA_STAGES", device)[fmt.method]
    tma = (stages if tma_ok and big and chunks >= max(tuned(_THIS, "COLS_TMA_MIN_CHUNKS", device)[fmt.method], 2)
           and _tma_fits(problem, aligned, device) else 0)
    # the few-chunk path's strips: 2 .. few_max chunks in one trip; longer ones in trips (COLS_FEW_LOOP)
    few_max = min(tuned(_THIS, "COLS_FEW_PATH_MAX_CHUNKS", device)[fmt.method], COLS_FEW_CHUNKS)
    few_loop = (few_loop_ok and tuned(_THIS, "COLS_FEW_LOOP", device)[fmt.method] and not tma
                and chunks > max(few_max, 1))
    prefetch = COLS_PREFETCH[fmt.method] and chunks > COLS_FEW_CHUNKS and not tma and not few_loop
    if tma:
        blocks_per_sm = (tuned(_THIS, "COLS_BLOCKS_PER_SM_TMA_LONG", device) if long_rows else
                         COLS_BLOCKS_PER_SM_TMA[fmt.method])
    elif few_loop:
        blocks_per_sm = COLS_FEW_LOOP_BLOCKS_PER_SM
    else:
        blocks_per_sm = (COLS_BLOCKS_PER_SM_FEW if chunks <= COLS_FEW_CHUNKS else
                         COLS_BLOCKS_PER_SM_PREFETCH if prefetch else COLS_BLOCKS_PER_SM)
    work = split_work(strips, chunks, BLOCK // 32, device, blocks_per_sm)
    cap = device.sm_count * blocks_per_sm
    if work.splits > 1:
        work = rebalance_splits(work, chunks, cap)
    elif work.warps_per_tile > 1 or (COLS_GROUP_BY_WAVES and chunks > 1):
        # a one-pass grid of equal blocks: warps per strip by wave efficiency
        wpt = choose_group(strips, chunks, BLOCK // 32, cap)
        work = WorkSplit(wpt, 1, cdiv(strips, (BLOCK // 32) // wpt))
        if wave_efficiency(work.grid_x, cap) < COLS_SPLIT_BELOW_EFFICIENCY:  # a block per strip, strips split
            splits = choose_splits(strips, cdiv(chunks, (BLOCK // 32) * 4), cap)
            if splits > 1:
                work = WorkSplit(BLOCK // 32, splits, strips)
    if tma and work.splits > 1 and not (tuned(_THIS, "COLS_TMA_SPLITS", device) and long_rows):
        return _plan_cols(common, fmt, out_t, problem, device, tma_ok=False)
    if few_loop and work.splits > 1:  # the few-chunk path has no splits: the register loop
        return _plan_cols(common, fmt, out_t, problem, device, tma_ok=tma_ok, few_loop_ok=False)
    short = few = 0
    if chunks == 1 and work.splits == 1 and work.warps_per_tile == 1:  # one chunk per strip
        short = COLS_UNROLL_SHORT
        work = split_work(cdiv(strips, short), 1, BLOCK // 32, device, SHORT_BLOCKS_PER_SM)
    elif 1 < chunks <= few_max and not tma and not prefetch and work.splits == 1 and work.warps_per_tile == 1:
        few = COLS_FEW_PATH_CHUNKS_PER_WARP
        wpt = next_pow2(cdiv(chunks, few))
        work = WorkSplit(wpt, 1, cdiv(strips, (BLOCK // 32) // wpt))
    elif few_loop:  # no splits (above): the register loop's warps per strip, in trips
        few = COLS_FEW_PATH_CHUNKS_PER_WARP
    if ONE_PASS:  # the short path's warp takes `short` adjacent strips per round
        work = one_pass(work, strips, BLOCK // 32, max(short, 1))
    minb = SHORT_BLOCKS_PER_SM if short else blocks_per_sm  # __launch_bounds__(BLOCK, minb)
    unroll = 1 if short else min(COLS_UNROLL, cdiv(chunks, work.warps_per_tile * work.splits))
    steps = 1 if short else _steps_per_warp(chunks, work.splits, work.warps_per_tile)
    params = dict(form="cols", aligned=aligned, aligned8=aligned8, unroll=unroll, short=short > 0, short_unroll=short,
                  chunks=chunks, steps=steps, tma=tma, few=few, few_loop=few_loop)
    args = (problem.a, problem.r, problem.b, problem.sa, problem.sr)
    if tma:  # at least 2 chunks, so never short
        name = f"tc32_cols_tma<{fmt.policy}, {BLOCK}, {work.warps_per_tile}, {out_t}, {minb}, {tma}>"
        x_map = TensorMapOfX("float32", (problem.b, problem.r, problem.a),
                             (problem.sr * ITEMSIZE, _plane_stride(problem) * ITEMSIZE), (COLS_STRIP, 16, 1))
        return _split_launch(common, fmt, name, work, args, strips, COLS_STRIP, params, tail_args=(x_map,),
                             shared_bytes=(BLOCK // 32) * tma * 16 * COLS_STRIP * ITEMSIZE)
    # the trailing template arguments PREFETCH, FEW, ALIGNED8, FEW_LOOP, the defaults at the end left out (prefetch:
    # never short, never few)
    trailing = [_bool(prefetch), str(few), _bool(aligned8), _bool(few_loop)]
    while trailing and trailing[-1] == ("false", "0", "false", "false")[len(trailing) - 1]:
        trailing.pop()
    tail = "".join(", " + arg for arg in trailing)
    name = (f"tc32_cols<{fmt.policy}, {BLOCK}, {work.warps_per_tile}, {_bool(aligned)}, {unroll}, {out_t}, {short}, "
            f"{minb}{tail}>")
    return _split_launch(common, fmt, name, work, args, strips, COLS_STRIP, params)


def _plane_stride(problem: Cols) -> int:
    """The elements between i-planes in the tensor map: sa, or any valid stride (r * sr) when there is one plane."""
    return problem.sa if problem.a > 1 else problem.r * problem.sr


def _tma_fits(problem: Cols, aligned: bool, device: DeviceSpec) -> bool:
    """Whether tc32_cols_tma can take these columns: sm_90, 16-byte aligned rows (and i-planes), coordinates and
    strides within TMA's ranges."""
    return (device.cc >= (9, 0) and aligned and max(problem.a, problem.r, problem.b) <= TMA_MAX_COORD
            and max(problem.sr, _plane_stride(problem)) * ITEMSIZE < TMA_MAX_STRIDE)


def _plan_stream(common: dict, fmt: F32Format, out_t: str, problem: Rows, device: DeviceSpec) -> Plan:
    chunks = cdiv(problem.k, 256)
    work = stream_work(problem.m, chunks, BLOCK // 32, device, STREAM_BLOCKS_PER_SM, STREAM_SPLIT_FILL)
    if ONE_PASS:
        work = one_pass(work, problem.m, BLOCK // 32)
        work = spread_rows(work, problem.m, chunks, STREAM_UNROLL, BLOCK // 32, STREAM_MAX_STEPS)
    name = (f"tc32_rows_stream<{fmt.policy}, {BLOCK}, {work.warps_per_tile}, {STREAM_UNROLL}, {out_t}, {FLAT_LOAD}, "
            f"{STREAM_BLOCKS_PER_SM}>")
    return _split_launch(common, fmt, name, work, (problem.m, problem.k, problem.ld), problem.m, 1,
                         dict(form="stream", unroll=STREAM_UNROLL, chunks=chunks,
                              steps=_steps_per_warp(chunks, work.splits, work.warps_per_tile)))


def plan_forms(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec, fmt: F32Format) -> Plan:
    """The launch plan of a float32 tensor-core format for a canonical problem (module docstring).

    ``params`` (:func:`~tcreduce._plan.param_dict`): form ("flat", "rows", "cols", "stream", "rows4"), block, grid,
    unroll (flat: 16-byte vectors in flight per lane; others: chunks in flight), steps (the most steps any warp runs,
    the head/tail step included; per column for cols); flat: minb, head, nvec, tail, rounds (one pass only); others: wpt
    (warps per tile, row or column strip), splits, chunks (per segment: 16 elements, 256 when streaming, 64 in rows4);
    rows: vector (16-byte loads), short; cols: aligned (16-byte loads), short, short_unroll (adjacent strips in flight,
    0 off the short path)."""
    if in_dtype != "float32":
        raise UnsupportedDtype(f"method {fmt.method!r} plans float32 input here, not {in_dtype}")
    if out_dtype not in ("float16", "float32", "float64"):
        raise TypeError(f"method {fmt.method!r} writes float16, float32 or float64 results, not {out_dtype}")
    if problem.align % ITEMSIZE:
        raise ValueError(f"{fmt.method}: a float32 array whose first element sits at byte {problem.align} mod 16 is "
                         f"not element-aligned; copy it first")
    out_t = ctype(out_dtype)
    common = dict(method=fmt.method, problem=problem, in_dtype=in_dtype, out_dtype=out_dtype, device=device)
    if isinstance(problem, Flat):
        head = min(((16 - problem.align) % 16) // ITEMSIZE, problem.n)
        nvec = (problem.n - head) // 4
        tail = problem.n - head - 4 * nvec
        unroll = FLAT_UNROLL[fmt.method]
        rounds = tuned(_THIS, "FLAT_ROUNDS", device).get(fmt.method, 0)
        grid = flat_one_pass_grid(nvec, BLOCK * unroll, rounds, tuned(_THIS, "FLAT_ONE_PASS_MIN_WAVES", device),
                                  device, FLAT_BLOCKS_PER_SM)
        minb = FLAT_BLOCKS_PER_SM
        if grid:  # a warp's trips: at most its block's rounds
            trips, groups = min(rounds, cdiv(nvec, BLOCK * unroll)), grid_groups(grid, BLOCK)
            extra: dict[str, Any] = dict(rounds=rounds)
        else:
            resident = full_grid(nvec, BLOCK * unroll, device, minb)
            grid, unroll, minb = flat_one_block(resident, unroll, minb, nvec, BLOCK,
                                                tuned(_THIS, "FLAT_ONE_BLOCK", device).get(fmt.method))
            trips, groups, extra = cdiv(nvec, grid * BLOCK * unroll), 0, {}
        steps = trips * (unroll // 2) + (1 if head + tail else 0)
        name = (f"tc32_flat<{fmt.policy}, {BLOCK}, {unroll}, {out_t}, {FLAT_LOAD}, {minb}"
                f"{f', {rounds}' if extra else ''}>")
        launch = KernelLaunch(fmt.source, name, (grid, 1, 1), (BLOCK, 1, 1),
                              (Buf("x"), problem.n, Buf("out"), Buf("counters")))
        params = dict(form="flat", block=BLOCK, unroll=unroll, minb=minb, grid=grid, head=head,
                      nvec=nvec, tail=tail, steps=steps, **extra)
        return Plan(**common, launches=(launch,), counters=flagged_counters(grid, groups, slots_per_value=2),
                    params=tuple(sorted(params.items())))
    if isinstance(problem, Rows):
        if _takes_rows4(fmt, problem, device):
            return _plan_rows4(common, fmt, out_t, problem, device)
        if problem.k >= STREAM_MIN_K and is_aligned(problem.align, (problem.ld * ITEMSIZE,), 16):
            return _plan_stream(common, fmt, out_t, problem, device)
        return _plan_tiles(common, fmt, out_t, problem, device)
    if isinstance(problem, Cols):
        return _plan_cols(common, fmt, out_t, problem, device)
    raise TypeError(f"unknown problem {problem!r}")


def plan_tensorcore_fp32(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec,
                         chain: int = 1) -> Plan:
    """Plan of method "tensorcore" for float32 input (``tcreduce/plans/tensorcore.py`` hands float32 problems here).
    ``chain`` must be 1: every step's row sums leave the tensor core at once (the split's exactness depends on it;
    chained accumulation, "tensorcore_chained", is a float16 study)."""
    if chain != 1:
        raise ValueError(f"tensorcore on float32 input flushes every step (chain 1); chain={chain} is a float16 "
                         f"setting (tensorcore_chained)")
    return plan_forms(problem, in_dtype, out_dtype, device, SPLIT)


SPLIT = F32Format("tensorcore", SOURCE, "tcr32::Split")
