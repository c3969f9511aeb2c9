"""Method "tensorcore" (and "tensorcore_chained"): fp16, bf16 and fp8 sums on tensor cores with mma.sync.m16n8k16
against an all-ones operand, fp32 accumulation (fp8 converted to fp16 in registers, exactly). Kernels:
``kernels/tensorcore.cu`` (tc_flat, tc_rows, tc_rows16, tc_rows32, tc_rows_stream, tc_cols, whose comments pin the
order of additions); emulator twin: ``tcreduce/emulate/tensorcore.py``.

What it launches: one kernel per call. Full sums: a grid-stride kernel (about 4 blocks of 256 threads per SM) whose last
block combines the block partials, or, for large 16-bit arrays on an H100 or H200 and large fp8 ones on an H200
(FLAT_ROUNDS, FLAT_ONE_PASS), a one-pass grid of blocks of a fixed number of rounds, their partials combined in two
levels (float32: tensorcore_fp32.py, the same walk).
Last-axis sums: row tiles of 16 rows per warp group, columns split across warps and, for few long rows, across blocks
(the last block of a tile combines; rows of at most 16 elements may take tc_rows16, one load of 8 elements per lane,
where ROWS16_PAIRED_LOADS has their format, and fp8 rows starting 16-byte aligned a whole row per lane where
ROWS16_WHOLE_ROWS has it; fp8 rows of 17-32 elements so aligned half a row per lane in tc_rows32 where
ROWS32_HALF_ROW_LOADS has it); rows of at least STREAM_MIN_K aligned columns are streamed one row per warp
group instead (tc_flat's inner loop), split the same way; short rows back to back, 2-8 to a warp's 512-byte load, go
through tc_rows_stream's packed path where a family sets ROWS_PACKED (an H200).
Other axes: the data as the A operand read transposed (16-byte row loads paired by byte permutes), 64-column strips
per warp, split the same way (a strip per warp group in one pass through the one-item walk where a family sets
COLS_ONE_ITEM_TUNING, long strips at COLS_ONE_ITEM_LONG's candidates); fp8's one-item walks in 128-column strips of
16-byte loads where a family sets COLS_WIDE_STRIPS (an H200; long strips at COLS_WIDE_LONG_STRIPS' candidates), and
their splits and short columns so where it sets COLS_WIDE_GENERAL and COLS_WIDE_SHORT.

The constants below were tuned on an H100; a GPU family measured apart (the H200) sets some of them in
``FAMILY_TUNING``, which the planner reads through :func:`~tcreduce.plans._common.tuned`.
"""

from __future__ import annotations

import sys
from typing import Any

from .._layout import Cols, Flat, Problem, Rows
from .._plan import Buf, DeviceSpec, KernelLaunch, Plan
from ..registry import Method, register
from ..formats import get_format
from ._common import (SPLIT_TOLERANCE, WorkSplit, cdiv, ctype, flagged_counters, flat_cluster, flat_one_block,
                      flat_one_pass_grid, full_grid, grid_groups, is_aligned, one_pass, reaches_floor,
                      rebalance_splits, split_work, spread_rows, stream_work, tuned, wave_efficiency)

SOURCE = "tensorcore.cu"
BLOCK = 256
BLOCKS_PER_SM = 6  # tc_flat: __launch_bounds__(256, 6) (benchmarks/tune_flat.py, notes/performance.md)
FLAT_LOAD = 2  # cache-streaming 16-byte loads (__ldcs)
BLOCKS_PER_SM_TILED = 2  # tc_rows, tc_cols: __launch_bounds__(256, 2), up to 128 registers
FLAT_UNROLL = 2
# tc_flat's walk, by element size (bytes): k rounds, a one-pass grid of blocks that each sum BLOCK * FLAT_UNROLL * k
# vectors and exit (Triton's and inductor's walk, which read 1.3-3% faster in benchmarks/read_probe.py), their partials
# combined in two levels; absent, a resident grid looping over the array. Another order of additions (the twin follows
# the plan). Tune_plans run 45 (H200, session 11, *_flat_rounds_*): 1-4 rounds read 0.56-0.93x the resident grid (each
# short block pays its partial's store, fence and counter), 16 rounds 1.024x at 2^30 fp16 but 1.003x at 2^28. Set for
# an H200 (FAMILY_TUNING). An H100 gains too (run 48, fp16, GB/s against the resident grid: 16 rounds 3,041 / 3,028 at
# 2^28, 3,101 / 3,073 at 2^29, 3,147 / 3,091 at 2^30; 8 rounds 3,054 / 3,122 / 3,160, the best; the throughput study at
# ffc4c5b with 16: fp16 2^30 0.985 of the read kernel against 0.966, but 2^27, at 3.1 waves, 0.954 -> 0.945): set for an
# H100 at 8 rounds from 4 waves (FAMILY_TUNING, session 19, with its studies re-run); other GPUs keep the resident grid
FLAT_ROUNDS: dict[int, int] = {}
# ... and only where that grid has at least this many waves of resident blocks (fewer: the resident grid). Run 46
# (H200, GB/s against the resident grid in the same run): 32 rounds (256 KiB blocks) fp16 2^26 (0.8 waves) 3,746 /
# 3,729, 2^27 (1.6) 4,026 / 4,101, 2^28 (3.1) 4,387 / 4,339, 2^29 4,539 / 4,475, 2^30 4,620 / 4,555; bf16 2^28 4,385
# / 4,326, 2^30 4,622 / 4,556; fp8 2^29 4,255 / 4,233, 2^31 4,560 / 4,544; 2^25: every one-pass walk below. An H100
# takes 4 (FAMILY_TUNING: at 8 rounds, fp16 2^26 is 3.1 waves, where one pass read 1.2% below the resident grid)
FLAT_ONE_PASS_MIN_WAVES = 3
# tc_flat's resident grid by element size (bytes): (vectors in flight per thread, blocks per SM) in place of
# (FLAT_UNROLL, BLOCKS_PER_SM). An fp8 vector is two mmas, 8 conversions and 4 shifts where fp16's is one mma, so a warp
# spends longer between its loads and fewer bytes stay in flight. Tune_plans float8_*_flat_unroll_2p* (H200, session
# 22, GB/s, 2 on 6 / 8 on 4): e4m3 2^28 4,134 / 4,172 (4 on 4: 4,193), 2^29 4,321 / 4,405, 2^30 4,452 / 4,499; e5m2
# 2^30 4,455 / 4,516 (3 on 5, 4 on 4, 6 on 4 and 8 on 3 in between). 16-bit sums on the resident grid (2^27 and
# below on an H200) gain too: tune_plans --graph float16_flat_unroll_2p* (H200, session 23, GB/s of GPU time per call
# in a graph, 2 on 6 / 8 on 3): 2^14 13 / 18 (one block), 2^16 47 / 47, 2^17 79 / 93, 2^18 162 / 168, 2^20 596 / 612,
# 2^22 1,546 / 1,964, 2^26 3,899 / 3,973, 2^27 4,179 / 4,253; bf16 2^27 4,181 / 4,246 (4 on 4 best at 2^16 only: 50).
# FAMILY_TUNING; an H100 is not measured
FLAT_RESIDENT: dict[int, tuple[int, int]] = {}
FLAT_ROUNDS_BLOCKS_PER_SM = 5  # ... compiled for 5 blocks per SM (at 6, fp16's 40 registers spill 8 bytes)
# tc_flat's one-pass grid by element size (bytes): (vectors in flight per thread, blocks per SM) in place of
# (FLAT_UNROLL, FLAT_ROUNDS_BLOCKS_PER_SM); a block still owns FLAT_ROUNDS rounds of BLOCK x unroll vectors (another
# order of additions for another unroll: the twin follows the plan)
FLAT_ONE_PASS: dict[int, tuple[int, int]] = {}
# ... and, by element size, that size's own FLAT_ONE_PASS_MIN_WAVES (a size absent: FLAT_ONE_PASS_MIN_WAVES). fp8 in one
# pass of 16 vectors per thread at 2 blocks per SM, 4 rounds (256 KiB blocks): tune_plans --turns 300
# float8_*_flat_one_pass_2p* (H200, session 45, `notes/data/2026-12-01-h200-s45/fp8_one_pass*.log`, GB/s against the
# resident grid of 8 on 4 in the same turns): e4m3 2^28 (3.9 waves) 4,110 / 4,130, 2^29 (7.8) 4,338 / 4,325, 2^30
# (15.5) 4,477 / 4,443; e5m2 2^30 4,456 / 4,421 (8 on 3 at 8 rounds +0.6-0.7% at 2^30, -0.3% at 2^29; 2 on 5 at 32
# rounds, fp16's, -1.0 to -3.8%), GPU == emulator at every one (another order of additions: the twin follows the
# plan). FAMILY_TUNING: an H200's fp8 from 6 waves; an H100 is not measured
FLAT_ONE_PASS_SIZE_MIN_WAVES: dict[int, int] = {}
# Full sums whose resident grid has 2..FLAT_CLUSTER_MAX_BLOCKS blocks (up to 16; 2^13-2^16 fp16) run as one thread-block
# cluster (tc_flat_cluster, sm_90): the partials combined through distributed shared memory instead of the last block's
# fence, counter and L2 round trip; the same additions in the same order, so the same bits. GPU time per call in a CUDA
# graph, cluster / last block (tune_plans --graph, H200, session 22): fp16 2^13-2^16 0.85-0.88, 2^17 0.95; fp8 2^14-2^17
# 0.83-0.87, 2^13 level (an fp16 2^16 sum 3.2 -> 2.7 us). 0: never
FLAT_CLUSTER_MAX_BLOCKS = 16
# ... but, by element size, sums of at most trips * BLOCK * unroll 16-byte vectors run as one block of (unroll, blocks
# per SM it is compiled for, trips), whose total is the result: no cluster, no combination. GPU time per call in a
# graph on an H200 (session 23, us), one block of 16 vectors per thread against the cluster of today's plan: in the
# throughput study (inputs rotated through DRAM; notes/data/2026-11-28-h200-s23/throughput_one_block_489330b.csv)
# one trip fp16 2^15 1.97 / 2.76, bf16 1.95 / 2.82, fp8 2^16 2.25 / 2.84, but two trips fp16 2^16 3.20 / 2.99 (the
# second trip waits on DRAM; tune_plans --graph, one L2-resident buffer, had read it 2.56 / 2.82). An H200 takes one
# trip (FAMILY_TUNING); an H100 is not measured
FLAT_ONE_BLOCK: dict[int, tuple[int, int, int]] = {}
ROWS_UNROLL_SHORT = {4: 4, 8: 2}  # vec -> row tiles in flight per warp in tc_rows SHORT (4 blocks per SM)
# fp8 in tc_rows SHORT and tc_cols: its loads bring half the bytes of fp16's and stay raw (1 byte per element) while
# in flight, so twice the tiles or chunks in flight: the same bytes in flight in the same registers
FP8_IN_FLIGHT = {1: 2}  # element size (bytes) -> factor
ROWS_UNROLL_LONG = 2  # chunks in flight per warp otherwise
# ... but fp16 and bf16 rows of ROWS_WHOLE_TILE_CHUNKS[0] .. [1] chunks (97-256 elements) keep ROWS_UNROLL_WIDE
# chunks in flight (tune_plans run 15, H100, 512 MiB: rows of 128 at 2,873 GB/s against 2,822 with 2, 0.984x
# shuffle_rows; rows of 64, 2 chunks: 4 in flight reads 0.77x)
ROWS_WHOLE_TILE_CHUNKS = (4, 8)
ROWS_UNROLL_WIDE = 4
# tc_rows' SHORT path (every chunk of a warp's row tiles loaded at once, 4 blocks per SM, one warp per tile) for rows
# of up to this many chunks (more: the path above, chunks in flight at 2 blocks per SM; an H200 takes 4 chunks, an
# H100 has not been measured) ...
ROWS_SHORT_MAX_CHUNKS = 1
# ... with tiles of 2-4 chunks in flight per warp: as many as fit in this many bytes of the row tiles' elements (at
# least one). Tune_plans runs 46-47, H200, GB/s: fp16 rows of 40 3,029 with 2 tiles (2.5 KiB), 2,654 with 1; rows of
# 48 3,412 with 2 (3 KiB), 3,096 with 1; rows of 64 3,970 with 1 (2 KiB), 3,309 with 2; fp8 rows of 64 3,697 with 2,
# 3,613 with 3, 3,039 with 1; fp8 rows of 96 3,605 with 2 (3 KiB), 3,427 with 1 ...
ROWS_SHORT_BYTES_IN_FLIGHT = 3072
# ... and no more than compile without spilling at 64 registers (sm_90) for every output type and chain, by (element
# size, rows aligned to a lane's load: the kernel's ALIGNED) and chunks per tile (unaligned fp8 tiles of 3 chunks spill
# 8 bytes with 2 in flight; aligned fp8 tiles of 2 chunks with 3 in flight spill 16-24 bytes into fp16 outputs at
# chains 2, 4 and 2^30: session 28, a scan of the plans beyond test_compile's problems; rows of 64 read 3,697 GB/s with
# 2 and 3,613 with 3 in runs 46-47)
ROWS_SHORT_MAX_TILES_IN_FLIGHT = {(2, True): {2: 2, 3: 1, 4: 1}, (2, False): {2: 2, 3: 1, 4: 1},
                                  (1, True): {2: 2, 3: 2, 4: 1}, (1, False): {2: 3, 3: 1, 4: 1}}
# tc_rows SHORT rows of at most 16 elements whose starts are aligned to 8 elements: tc_rows16 (one load of 8 elements
# per lane and a shuffle of half of it instead of two loads of 4 elements; the same 16 values per mma row, so the same
# sums), by element size (bytes) -> on, on a grid of one pass (True) or a resident grid. Tune_plans run 54 (H200,
# session 14, fp16 [2^24, 16], GB/s, x shuffle in the same run): tc_rows resident 3,660 (0.956), one pass 3,331 (0.870);
# tc_rows16 one pass 3,828 (1.000), resident 3,685; 8 tiles in flight 3,758, 2 tiles 3,633; bf16 alike (3,647 -> 3,821,
# 1.001). Set for an H200 (FAMILY_TUNING); an H100 reads it level with tc_rows (run 55: fp16 2,691 against 2,692 GB/s)
# and keeps tc_rows. fp8 (one 8-byte load per lane where tc_rows takes two 4-byte ones, 8 tiles in flight, 53
# registers): tune_plans run 57 (H200, session 15, [2^24, 16]): tc_rows resident 2,310, one pass 2,317 (0.782x
# shuffle); tc_rows16 one pass 2,572 (0.867x), resident 2,513, 4 tiles 2,500; run 58 (H100): tc_rows 2,132-2,153
# (0.915-0.924x), tc_rows16 one pass 2,277 (0.978x), resident 2,222: fp8 on for both
ROWS16_PAIRED_LOADS: dict[int, bool] = {2: False, 1: True}
ROWS16_ONE_PASS = True
# ... and, by element size (fp8 only: 1), whole-row loads where every row start is 16-byte aligned: tc_rows16's
# WHOLE_ROWS walk (a lane loads a whole row of 16 fp8 values with one 16-byte load, a warp 32 rows; a word transpose
# within each quad, two mmas; the same 16 values per mma row, so the same sums) with half the units in flight, the
# same bytes. Session 36 (fp8 rows of 16 read 0.76x `shuffle` on tc_rows16 in the 9dcc468 segment study, 3,289
# against 4,343 GB/s, its warps loading 8 bytes per lane and shuffling outputs); tune_plans float8_e4m3fn_rows16_whole
# (H200, session 37, [2^25, 16]): 2,639 -> 3,349 GB/s, 0.768 -> 0.974x shuffle, GPU == emulator (at 2 units in flight
# 3,196; tc_rows16 resident 3,240). FAMILY_TUNING: an H200; an H100 is not measured
ROWS16_WHOLE_ROWS: dict[int, bool] = {}
# tc_rows SHORT rows of one 32-element chunk (17-32 elements) by element size (fp8 only: 1): tc_rows32 where every row
# start is 16-byte aligned (a lane loads half a row with one 16-byte load where tc_rows takes two 8-byte loads of two
# rows; a swap of two words between lanes t and t ^ 2; the same two blocks per row in the same order, so the same
# sums), as many row tiles in flight. Session 36: fp8 rows of 32 read 0.84x `shuffle` on tc_rows in the 9dcc468
# segment study (3,647 against 4,342 GB/s); nvcc sm_90: 720 SASS instructions per 4 tiles against tc_rows' 1,008, 52
# registers against 64. Tune_plans float8_e4m3fn_rows32_half (H200, session 37, [2^24, 32]): 3,273 -> 3,741 GB/s,
# 0.854 -> 0.976x shuffle, GPU == emulator (2 tiles in flight: 3,538). FAMILY_TUNING: an H200; an H100 not measured
ROWS32_HALF_ROW_LOADS: dict[int, bool] = {}
STREAM_MIN_K = 256  # rows at least this long (and 16-byte aligned) are streamed one per warp by tc_rows_stream
STREAM_UNROLL = 4  # chunks (a 16-byte load per lane) in flight per warp in tc_rows_stream (rows of <= 4 chunks: 8 per warp)
STREAM_BLOCKS_PER_SM = 4  # tc_rows_stream: __launch_bounds__(256, 4)
# ... a GPU family's own values of those two hold, by element size (bytes), for rows of up to STREAM_LONG_CHUNKS[size]
# chunks (a size absent: every row); longer rows take STREAM_LONG_TUNING, (chunks in flight, blocks per SM), where a
# family has one (empty: the values above). An H200 took 8 on 4 from 33 chunks in session 18, and for 16-bit rows from
# 17 in session 45: tune_plans --turns (sessions 44-45, `notes/data/2026-12-01-h200-s4[45]/tune_turns_stream*.log`
# and `ab_long_from.log`, GB/s, 8 on 4 / 8 on 3, three H200s): fp16 rows of 8192 (32 chunks) 4,442 / 4,410, 4,436 /
# 4,402, 4,502 / 4,468 and 4,442 / 4,402; bf16 4,474 / 4,441 and 4,441 / 4,408; fp8 rows of 16384 (32 chunks) 4,221 /
# 4,224 and 4,176 / 4,192, so fp8 keeps 8 on 3 there. The same sums. (4 on 4 beyond 256 chunks read +1.0-1.2% at fp16
# rows of 2^17-2^18 on one H200 and -0.6-0.7% on the other, fp8 rows of 2^18 -2.8%: not taken)
STREAM_LONG_CHUNKS: dict[int, int] = {}
STREAM_LONG_TUNING: tuple[int, ...] = ()
# few long rows split over blocks: the fewest splits that fill the resident blocks (True), or about 4 waves of blocks
# (_common.stream_work). Run 33 (H100, 512 MiB, GB/s, against the old rule): float16 [128, 2^21] 2,857 -> 2,957,
# [256, 2^20] 2,919 -> 2,968; bfloat16 2,835 -> 2,935, 2,895 -> 2,935; at 300 rows (5 splits against 8) float16 2,935
# -> 2,890, bfloat16 2,922 -> 2,926
STREAM_SPLIT_FILL = True
# tc_rows_stream: more warps per row beyond this many steps per warp (_common.spread_rows; H100, 512 MiB: [16384,
# 16384] 3,067 GB/s against 2,943 without, [4096, 65536] 3,024 against 2,981)
STREAM_MAX_STEPS = 1
ONE_PASS_SHORT_ROWS = True  # tc_rows_stream's short rows: a grid of one pass (_common.one_pass)
# Short rows back to back: tc_rows_stream's packed path (RPC rows per chunk, a warp load reading 512 contiguous bytes;
# _packs says which rows), by element size -> (the shortest row it takes, chunks in flight per warp, blocks per SM); a
# size not listed, or shorter rows: tc_rows' tiles. H200 below
ROWS_PACKED: dict[int, tuple[int, int, int]] = {}
# ... and their chunks in flight per warp (rows in flight = this // chunks per row), by element size ...
SHORT_ROWS_CHUNKS_IN_FLIGHT = {1: 8, 2: 8}
# ... but at most this many rows in flight, by (element size, blocks per SM, chunks per row), where more would not fit
# the registers: fp8 values are converted to fp16 pairs in registers, and fp8 rows of 4 chunks (1,537-2,048 values)
# with 2 in flight at 4 blocks per SM (an H100's plan) spill 16 bytes on sm_90; with 1 they compile clean
SHORT_ROWS_MAX_IN_FLIGHT = {(1, 4, 4): 1}
# ... and, where a family has its (element size, chunks per row), (rows in flight, blocks per SM) of those short rows
# in place of the rows in flight above and STREAM_BLOCKS_PER_SM. The same sums: each row's chunks alone in the same
# order, the same fold. Tune_plans float8_e4m3fn_rows512_stream (H200, session 38, [2^20, 512], GB/s, x shuffle of
# the same run; the H200's 8 rows on 3 blocks per SM 3,914, 0.930x): 8 on 4 4,284-4,288 (1.02), 4 on 3-5
# 4,176-4,185, 4 on 6 4,332 (1.029), GPU == emulator at every one; NVRTC sm_90 (session 37): 4 rows on 3-6 40-42
# registers, no spills. FAMILY_TUNING: an H200 takes 4 on 6 for fp8 rows of one chunk (257-512 values); an H100 is
# not measured
SHORT_ROWS_STREAM_TUNING: dict[tuple[int, int], tuple[int, int]] = {}
# tc_rows SHORT (rows of one chunk): a grid of one pass, by the elements of a lane's load (rows of up to 16: 4, of
# 17-32: 8)
ONE_PASS_SHORT_TILES = {4: True, 8: True}
ONE_PASS_TILES = True  # the other tc_rows, tc_rows_stream and tc_cols launches without splits (not tc_cols' short path)
COLS_ONE_PASS_MIN_CHUNKS = 0  # ... tc_cols from this many 16-row chunks per strip (fewer: a resident grid)
COLS_STRIP = 64  # columns per warp strip in tc_cols (kernels/tensorcore.cu: SW)
COLS_UNROLL_SHORT = 1  # 64-column strips in flight per warp in tc_cols when r <= 16 (4 blocks per SM) ...
# ... on a grid of one pass (True) or a resident grid (fp8's 128-column strips: COLS_WIDE_SHORT). Tune_plans run 58
# (H100, session 15, [16, 2^24], GB/s): fp16 2,566 -> 2,689 (1.006x shuffle), bf16 2,601 -> 2,656 (1.001x); 2 strips in
# flight 2,593-2,610 in one pass. An earlier session read one pass 1% slower there. Run 56 (H200, session 14): fp16
# 3,690 -> 3,763 (0.983 -> 1.003x shuffle), bf16 3,668 -> 3,733; 2 strips in flight 3,697-3,710 in one pass
COLS_SHORT_ONE_PASS = True
COLS_UNROLL_LONG = 2  # 16-row chunks (2 KiB per warp each) in flight per warp in tc_cols otherwise (2 blocks per SM)
# tc_cols plans in one pass without splits (a strip per group of warps) launch tc_cols<..., ONE_ITEM = true> where
# COLS_ONE_ITEM_TUNING has the element size: compiled without the grid-stride loop and the combination of splits,
# each mma from a zero C (the flush after every mma), so few registers. The entry lists (chunks in flight,
# blocks per SM) candidates in order of preference: the first whose blocks fill its resident slots within
# SPLIT_TOLERANCE of the general kernel's fill at BLOCKS_PER_SM_TILED, else the general kernel's chunks in flight at
# BLOCKS_PER_SM_TILED (strips of several warps: the general kernel itself). The same chunks in the same order: the
# same sums. An element size absent, or tensorcore_chained (its C fragments stay live across the walk, which spills
# at these blocks per SM): the general kernel
COLS_ONE_ITEM_TUNING: dict[int, tuple[tuple[int, int], ...]] = {}
# ... and, by element size, (rows, candidates): strips of at least that many rows take these candidates in place of
# COLS_ONE_ITEM_TUNING's (a size absent: those for every length), as COLS_WIDE_LONG_STRIPS does for fp8's wide strips.
# The same sums. Tune_plans --turns 200 {float16,bfloat16}_cols*_one_item (H200, session 45, `notes/data/
# 2026-12-01-h200-s45/cols_one_item_all.log`, GB/s, (2, 3) / (1, 4) / (2, 2) / the committed plan; x shuffle of the
# same run): fp16 32 rows 4,025 / 4,011 / 4,012; 64 4,347 / 4,329 / 4,268; 128 4,282 / 4,334 (0.987) / 4,237; 256
# 4,303 / 4,365 / 4,303; 1024 4,299 / 4,315 / 4,298; 4096 4,159 / 4,304 / 4,258; 8192 4,086 / 4,305 / 4,203; 16384
# 4,222 / 4,221 / 4,298 (0.996: (1, 4)'s 4 blocks per SM fill too few slots there, so the committed plan was the
# general kernel at 4,224); bf16 64 4,350 / 4,306 / 4,273; 128 4,273 / 4,330 (0.990); 16384 4,224 / 4,224 / 4,299
# (0.996); GPU == emulator at every one. FAMILY_TUNING: an H200 takes (1, 4), then (2, 2), from 128 rows (16-bit);
# an H100 is not measured
COLS_ONE_ITEM_LONG: dict[int, tuple[int, tuple[tuple[int, int], ...]]] = {}
# ... and fp8's one-item walks in strips of 128 columns (tc_cols' LE = 16: each lane loads 16 bytes of a row where
# 64-column strips load 8, so a load instruction reads 4 rows x 128 bytes as fp16's does; 8 mmas per chunk): (chunks
# in flight, blocks per SM) candidates as COLS_ONE_ITEM_TUNING's, keyed by bytes per element (fp8 only); used where
# the 128-column plan is a one-item plan and the rows are 16-byte aligned, else the 64-column plan. The same additions
# per column: the same sums. A size absent: never. NVRTC sm_90 (session 35): (1, 3) 80 registers, (2, 2) 104, (4, 2)
# 123 without spills; 4 blocks per SM spill. Tune_plans float8_e4m3fn_cols*_wide (H200, session 37, GB/s, 64-column
# strips -> (4, 2) -> (1, 3) -> (2, 2); x shuffle of the same run after): 32 rows 2,247 -> 3,179 -> 3,423 (0.93) ->
# 3,180; 64 2,585 -> 3,815 (0.99) -> 3,759 -> 3,577; 128 3,079 -> 3,943 (0.95) -> 3,841 -> 3,795; 256 3,249 -> 4,032
# (0.95) -> 4,028 -> 3,956; 1024 3,697 -> 4,188 (0.98) -> 4,196 -> 4,176; 4096 3,219 -> 4,086 (0.94) -> 3,242 ->
# 4,128; 8192 3,180 -> 4,063 (0.93) -> 3,195 -> 4,127; 16384 3,449 -> 4,196 (0.99) -> 3,455 -> 4,230, GPU == emulator
# at every one. FAMILY_TUNING: an H200 takes (4, 2), then (1, 3) for strips of fewer than 4 chunks (below 1024 rows:
# COLS_WIDE_LONG_STRIPS); an H100 is not measured
COLS_WIDE_STRIPS: dict[int, tuple[tuple[int, int], ...]] = {}
# ... and, by element size (fp8 only), (rows, candidates): strips of at least that many rows take these candidates in
# place of COLS_WIDE_STRIPS' (a size absent: those for every length). The same additions per column: the same sums.
# Tune_plans float8_e4m3fn_cols*_wide_load (H200, session 40, GB/s, (4, 2) -> (2, 2); x shuffle of the same run at
# (2, 2)): 64 rows 4,022 -> 3,798; 128 4,066 -> 3,941; 256 4,114 -> 4,090; 1024 4,232 -> 4,324 (0.992); 2048 4,171 ->
# 4,315 (0.977); 4096 4,155 -> 4,306 (0.972); 8192 4,186 -> 4,283 (0.966), GPU == emulator at every one (session 37:
# 16384 4,196 -> 4,230). FAMILY_TUNING: an H200 takes (2, 2) from 1024 rows; an H100 is not measured
COLS_WIDE_LONG_STRIPS: dict[int, tuple[int, tuple[tuple[int, int], ...]]] = {}
# ... and, by element size (fp8 only), the chunks in flight per warp of the general walk in those strips (tc_cols' LE
# = 16 without ONE_ITEM: splits of the rows, or strips of several warps that no candidate above fills), the mmas from a
# zero C; a size absent: those plans keep 64-column strips. The same additions per column: the same sums (the twin
# reads splits, warps per strip and chain). NVCC sm_90 (session 37): 2 chunks 114 registers without spills, 4 spill
# 384 bytes. Tune_plans float8_e4m3fn_cols*_wide_general (H200, session 38, GB/s, 64-column strips -> 2 chunks -> 1
# chunk; x shuffle of the same run at 2): 32768 rows 3,140 -> 4,045 (1.044) -> 3,618; 131072 3,288 -> 4,060 (1.051)
# -> 3,617; 2^20 3,002 -> 3,902 (0.993) -> 3,478, GPU == emulator at every one. FAMILY_TUNING: an H200 takes 2; an
# H100 is not measured
COLS_WIDE_GENERAL: dict[int, int] = {}
# ... and, by element size (fp8 only), (strips in flight per warp, blocks per SM, one pass) of their short path (at
# most 16 rows: one chunk per strip, each mma from a zero C into a zero sum, the same flush as the 64-column short
# path's, so the same sums; one pass: a grid of one pass over the warps' groups of strips, else a resident grid whose
# warps stride over them, as COLS_SHORT_ONE_PASS is for 64-column strips); a size absent: 64-column strips. NVRTC
# sm_90 (session 37): (1, 2-4) 60-63 registers, (2, 2-3) 72, (4, 2) 108, none spills; (2, 4), (4, 3) and (4, 4) spill.
# Tune_plans float8_e4m3fn_cols16_wide_short (H200, [16, 2^25], GB/s, x shuffle of the same run), in one pass: session
# 38 64-column strips 2,811 (0.840); (1, 4) 3,083, (1, 3) 3,080, (2, 3) 3,112, (2, 2) 3,120 (0.932), (4, 2) 3,022;
# session 42 (1, 4) 3,093, (1, 3) 3,094, (2, 3) 3,166, (2, 2) 3,152, (4, 2) 3,043; on a resident grid (session 42):
# (1, 4) 3,294 (0.954), (1, 3) 3,183, (2, 3) 3,228, (2, 2) 2,984, (4, 2) 3,156; GPU == emulator at every one.
# FAMILY_TUNING: an H200 takes (1, 4) on a resident grid; an H100 is not measured
COLS_WIDE_SHORT: dict[int, tuple[int, int, bool]] = {}
# ... and the one-item walks of 16-bit data over at least this many rows load their whole chunks evict-first in L1
# and L2 (tcr::load16's MODE 3; shuffle's COLS_EVICT_FIRST_MIN_ROWS likewise), the others through __ldg; keyed by bytes
# per element (2; 1 for fp8's 128-column strips, whose lanes load 16 bytes per row: its 64-column strips load 8 and
# never take the hint), a size not listed: never. The same values either way. An H100 reads
# level with the hint (session 18, tune_plans_load_cdb34bd.log, GB/s, no hint -> hint: fp16 64 rows 2,828 -> 2,831, 128
# 2,855 -> 2,853, 256 2,905 -> 2,907, 1024 3,005 -> 3,013; bf16 128 2,855 -> 2,858), so only an H200 has it (below)
COLS_EVICT_FIRST_MIN_ROWS: dict[int, int] = {}
TENSORCORE_DTYPES = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
NO_FLUSH = 1 << 30  # a chain that never flushes: the tensor core accumulates the whole sum
# Per GPU family, the constants it sets apart from the values above (an H100's), read through _common.tuned. H200
# (tune_plans runs 40-42, session 9, 512 MiB, GB/s against the H100 values in the same run; notes/performance.md):
# tc_rows_stream 8 chunks in flight on 3 blocks per SM: rows of 256 4,110 -> 4,222, 1024 4,293 -> 4,367, 2048 4,098
# -> 4,519, 4096 4,003 -> 4,303, 8192 4,035 -> 4,425, but longer rows (more than 32 chunks) keep 4 on 4 (16384-2^20:
# 0.98-1.00x in the tuning run, 0.93-0.99x in the segment run at eaeabe7); tc_rows SHORT on a resident grid: rows
# of 16 3,220 -> 3,528 (rows of 17-32, 8-element loads, keep one pass: 0.968x on a resident grid in the segment run
# at 9839564; run 43, rows of 32: 3,889 one pass, 3,818 resident); rows of 97-255 with 2 chunks in flight: rows of
# 128 3,606 -> 3,738; tc_cols on a resident grid up to 256 rows: 32 rows 3,310 -> 3,736, 64 rows 3,690 -> 3,820,
# 128 rows 3,750 -> 3,866, 256 rows 3,918 -> 3,988 (run 43; 4096 rows: 4,065 one pass, 3,985 resident); tc_rows'
# whole-tile path for rows of 2-4 chunks (runs 46-47, session 11: fp16 rows of 40 2,253 -> 3,029, 64 3,515 -> 3,970,
# 96 3,207 -> 3,988, 128 3,849 -> 3,973; fp8 rows of 64 2,370 -> 3,697); tc_flat in one pass of 32 rounds from 3
# waves for fp16 and bf16 (FLAT_ONE_PASS_MIN_WAVES above; fp8 kept the resident grid until session 45: the
# throughput study at aed24eb read its one pass 0.8-1.3% slower at 2^29-2^30, where fp16 gained 1%); tc_cols' one-item
# walk in one pass from the first chunk (run 50, session 13, 512 MiB, GB/s against the resident grid up to 256 rows
# and the one-pass general
# kernel from 512: fp16 (2, 3) 32 rows 3,639 -> 3,993, 64 3,870 -> 4,045, 128 3,917 -> 4,080; (1, 4) 256 4,033 ->
# 4,183, 512 4,124 -> 4,231, 1024 4,164 -> 4,133; bf16 (2, 3) 64 3,733 -> 4,045, 128 3,795 -> 3,995; (1, 4) 256
# 3,886 -> 4,174, 1024 4,177 -> 4,244; fp8 (2 fp8 chunks, 4 blocks per SM) 64 3,007 -> 3,425, 128 3,208 -> 3,568,
# 1024 3,432 -> 3,612; (2, 3) at 1024 rows, 1.3 waves of blocks: 3,503, hence the fill rule); tc_rows16 for 16-bit
# rows of up to 16 elements too (above: run 54, session 14, 0.956 -> 1.000x shuffle; fp8 ones go through it on every
# GPU); tc_cols' one-item walk of 16-bit data loading evict-first from 64 rows (session 17, tune_plans_load_tc.log, GB/s:
# fp16 64 rows 4,051 -> 4,067, 128 4,103 -> 4,252, 256 4,263 -> 4,394, 1024 4,253 -> 4,314, 4096 4,246 -> 4,288; bf16
# 128 4,111 -> 4,264, 1024 4,240 -> 4,314); rows longer than 32 chunks with 8 chunks in flight at 4 blocks per SM
# (session 18, tune_plans_stream_8x4_826f7ac.log, GB/s against 4 at 4: fp16 rows of 16384 4,503 -> 4,506, 32768
# 4,458 -> 4,498, 65536 4,446 -> 4,507, 2^20 4,387 -> 4,377; bf16 32768 4,462 -> 4,514; fp8 65536 4,253 -> 4,302,
# tune_plans_stream_8x4_fp8_fc5d847.log; 60-62 registers without spills for every format and tensorcore_chained;
# rows of 512-1024 chunks too, session 19, tune_split_tolerance_8x4_8bb367a.log: fp16 rows of 131072 4,364 -> 4,388,
# 262144 4,380 -> 4,394); packed short rows (session 34, tune_packed_e6b5923.log, GB/s against the committed paths in
# the same run): 16-bit rows of 64 and 128 at 2 chunks in flight on 4 blocks per SM (fp16 64 3,965 -> 4,068, 128 3,992
# -> 4,109; bf16 3,964 -> 4,067, 3,986 -> 4,117; rows of 32 lose 1-4%, so they keep the tiles), fp8 rows of 64-256 at
# 4 on 4 (64 3,745 -> 3,892, 128 3,429 -> 4,011, 256 1,243 -> 4,317: one chunk per row, half of each load masked)
FAMILY_TUNING: dict[str, dict[str, Any]] = {
    "H100": dict(FLAT_ROUNDS={2: 8}, FLAT_ONE_PASS_MIN_WAVES=4),
    "H200": dict(STREAM_UNROLL=8, STREAM_BLOCKS_PER_SM=3, STREAM_LONG_CHUNKS={2: 16, 1: 32},
                 STREAM_LONG_TUNING=(8, 4),
                 ONE_PASS_SHORT_TILES={4: False, 8: True}, ROWS_UNROLL_WIDE=2, ROWS_SHORT_MAX_CHUNKS=4,
                 FLAT_ROUNDS={2: 32, 1: 4}, FLAT_ONE_PASS={1: (16, 2)}, FLAT_ONE_PASS_SIZE_MIN_WAVES={1: 6},
                 FLAT_RESIDENT={1: (8, 4), 2: (8, 3)},
                 FLAT_ONE_BLOCK={2: (16, 2, 1), 1: (16, 2, 1)},
                 COLS_ONE_ITEM_TUNING={2: ((2, 3), (1, 4)), 1: ((2, 4),)},
                 COLS_ONE_ITEM_LONG={2: (128, ((1, 4), (2, 2)))}, ROWS16_PAIRED_LOADS={2: True, 1: True},
                 COLS_EVICT_FIRST_MIN_ROWS={2: 64}, ROWS_PACKED={2: (64, 2, 4), 1: (64, 4, 4)},
                 ROWS16_WHOLE_ROWS={1: True}, ROWS32_HALF_ROW_LOADS={1: True}, COLS_WIDE_STRIPS={1: ((4, 2), (1, 3))},
                 COLS_WIDE_LONG_STRIPS={1: (1024, ((2, 2), (1, 3)))}, COLS_WIDE_GENERAL={1: 2},
                 COLS_WIDE_SHORT={1: (1, 4, False)}, SHORT_ROWS_STREAM_TUNING={(1, 1): (4, 6)}),
}
_THIS = sys.modules[__name__]


def flat_resident(itemsize: int, device: DeviceSpec) -> tuple[int, int]:
    """(16-byte vectors in flight per thread, blocks per SM) of tc_flat's resident grid on ``device`` for elements of
    ``itemsize`` bytes (FLAT_RESIDENT, else FLAT_UNROLL on BLOCKS_PER_SM)."""
    return tuned(_THIS, "FLAT_RESIDENT", device).get(itemsize, (FLAT_UNROLL, BLOCKS_PER_SM))


def _split_plan(common: dict, name: str, work: WorkSplit, problem_args: tuple, items: int, outputs_per_item: int,
                params: dict) -> Plan:
    """The one launch of tc_rows, tc_rows_stream or tc_cols: grid (grid_x, splits), arguments (x, *problem_args, out,
    ws, counters, splits); with splits > 1, a workspace float per output and split and a counter per work item
    (row tile, row or strip of ``outputs_per_item`` outputs) for the last-block combination."""
    launch = KernelLaunch(SOURCE, name, (work.grid_x, work.splits, 1), (BLOCK, 1, 1),
                          (Buf("x"), *problem_args, Buf("out"), Buf("ws"), Buf("counters"), work.splits))
    split = work.splits > 1
    params = dict(params, block=BLOCK, splits=work.splits, grid=work.grid_x)
    return Plan(**common, launches=(launch,), workspace_floats=items * outputs_per_item * work.splits if split else 0,
                counters=items if split else 0, params=tuple(sorted(params.items())))


def _packs(problem: Rows, itemsize: int) -> bool:
    """Whether tc_rows_stream's packed path can take these rows: back to back (ld = k) from a 16-byte aligned start,
    2, 4 or 8 of them filling a chunk (a warp's 512-byte load) exactly, each of whole quads (4 lanes' loads), so every
    mma row sums 16 elements of one row: k = 32, 64 or 128 for 16-bit formats, 64, 128 or 256 for fp8."""
    vec = 16 // itemsize
    k = problem.k
    return (problem.ld == k and problem.align % 16 == 0 and k % (4 * vec) == 0 and 32 * vec % k == 0
            and 2 <= 32 * vec // k <= 8)


def _one_item_candidates(knob: str, long_knob: str, isz: int, rows: int,
                         device: DeviceSpec) -> tuple[tuple[int, int], ...] | None:
    """tc_cols' one-item candidates for strips of ``rows`` rows of ``isz``-byte elements on ``device``: ``long_knob``'s
    (rows, candidates) from that many rows where the size has an entry in both knobs, else ``knob``'s (None: the size
    absent, so the general kernel)."""
    candidates = tuned(_THIS, knob, device).get(isz)
    long = tuned(_THIS, long_knob, device).get(isz)
    return long[1] if candidates and long and rows >= long[0] else candidates


def _plan_cols(common: dict, problem: Cols, isz: int, chain: int, device: DeviceSpec, strip_cols: int,
               candidates: tuple[tuple[int, int], ...] | None) -> Plan | None:
    """tc_cols' plan in strips of ``strip_cols`` columns (64, or 128 for fp8's wide strips: tc_cols' LE =
    strip_cols / 8), with ``candidates`` for its one-item walk (COLS_ONE_ITEM_TUNING's or COLS_WIDE_STRIPS'). The
    wide strips' short path (one chunk per strip) takes COLS_WIDE_SHORT's strips in flight, blocks per SM and grid
    (one pass or resident), their general walk (splits, or strips of several warps the one-item walk leaves)
    COLS_WIDE_GENERAL's chunks in flight; None where that knob lacks the element size (the caller plans 64-column
    strips)."""
    out_t, in_t = ctype(common["out_dtype"]), ctype(common["in_dtype"])
    aligned = is_aligned(problem.align, (problem.sa * isz, problem.sr * isz), 8 * isz)
    strips = problem.a * cdiv(problem.b, strip_cols)
    chunks = cdiv(problem.r, 16)
    work = split_work(strips, chunks, BLOCK // 32, device, BLOCKS_PER_SM_TILED)
    work = rebalance_splits(work, chunks, device.sm_count * BLOCKS_PER_SM_TILED)
    short = 0
    short_minb = 4
    wide = strip_cols != COLS_STRIP
    if problem.r <= 16 and work.splits == 1 and work.warps_per_tile == 1:  # one chunk per strip
        short = COLS_UNROLL_SHORT
        if wide:
            wide_short = tuned(_THIS, "COLS_WIDE_SHORT", device).get(isz)
            if wide_short is None:
                return None
            short, short_minb, short_one_pass = wide_short
        else:
            short_one_pass = tuned(_THIS, "COLS_SHORT_ONE_PASS", device)
        # a warp takes `short` adjacent strips
        work = split_work(cdiv(strips, short), 1, BLOCK // 32, device, short_minb)
        if short_one_pass:
            work = one_pass(work, cdiv(strips, short), BLOCK // 32)
    if ONE_PASS_TILES and not short and chunks >= tuned(_THIS, "COLS_ONE_PASS_MIN_CHUNKS", device):
        work = one_pass(work, strips, BLOCK // 32)
    unroll_max = COLS_UNROLL_LONG * FP8_IN_FLIGHT.get(isz, 1) if aligned else 2  # (scalar loads: 4 spill)
    unroll = 1 if short else min(unroll_max, cdiv(chunks, work.warps_per_tile * work.splits))
    minb = short_minb if short else BLOCKS_PER_SM_TILED
    one_item = (candidates is not None and chain == 1 and not short and work.splits == 1
                and work.grid_x == cdiv(strips, BLOCK // 32 // work.warps_per_tile))  # one pass
    if one_item:
        fill = wave_efficiency(work.grid_x, device.sm_count * minb)
        for i, (one_unroll, one_minb) in enumerate(candidates):
            # more chunks in flight than a strip has, at no more blocks per SM than the general kernel: nothing
            # gained, so the next candidate, if any (fp8's wide strips of 32 rows, 2 chunks: (4, 2) 0.87x shuffle,
            # (1, 3) 0.93x)
            if one_unroll > chunks and one_minb <= minb and i + 1 < len(candidates):
                continue
            if wave_efficiency(work.grid_x, device.sm_count * one_minb) >= (1.0 - SPLIT_TOLERANCE) * fill:
                unroll = min(one_unroll, chunks) if aligned else min(one_unroll, unroll_max, chunks)
                minb = one_minb
                break
        else:  # strips of several warps at 2 blocks per SM: the general kernel (run 52: the one-item one
            one_item = work.warps_per_tile == 1  # read 15% below it at 512 blocks, not understood)
    if wide and not one_item and not short:  # the wide strips' general walk (16-byte loads)
        wide_unroll = tuned(_THIS, "COLS_WIDE_GENERAL", device).get(isz)
        if wide_unroll is None:
            return None
        unroll = min(wide_unroll, cdiv(chunks, work.warps_per_tile * work.splits))
    lane_elements = strip_cols // 8
    # the hint needs 16-byte loads per lane and row; fp8's 128-column strips hold 8 mmas' A fragments per chunk, and
    # with it 4 chunks in flight spill at 2 blocks per SM (136 bytes, NVRTC sm_90), so they take it up to 2
    evict_first = (one_item and aligned and lane_elements * isz == 16 and (lane_elements == 8 or unroll <= 2)
                   and reaches_floor(_THIS, "COLS_EVICT_FIRST_MIN_ROWS", device, isz, problem.r))
    tail = f", {3 if evict_first else 0}, {lane_elements}" if lane_elements != 8 else ", 3" if evict_first else ""
    name = (f"tc_cols<{in_t}, {BLOCK}, {work.warps_per_tile}, {str(aligned).lower()}, {chain}, {out_t}, {short}, "
            f"{unroll}, {minb}, {str(one_item).lower()}{tail}>")
    return _split_plan(common, name, work, (problem.a, problem.r, problem.b, problem.sa, problem.sr), strips,
                       strip_cols,
                       dict(aligned=aligned, chain=chain, wps=work.warps_per_tile, short_unroll=short,
                            unroll=unroll, blocks_per_sm=minb, one_item=one_item,
                            **(dict(strip=strip_cols) if wide else {})))


def plan_tensorcore(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec, chain: int = 1) -> Plan:
    """Plan for the tensor-core kernels. ``chain``: mmas accumulated in the tensor core's C before each
    round-to-nearest flush into a register sum (1: every mma starts from zero)."""
    if in_dtype == "float32":  # three bf16 pieces per value: tcreduce/plans/tensorcore_fp32.py
        from .tensorcore_fp32 import plan_tensorcore_fp32
        return plan_tensorcore_fp32(problem, in_dtype, out_dtype, device, chain)
    out_t, in_t = ctype(out_dtype), ctype(in_dtype)
    isz = get_format(in_dtype).itemsize  # every kernel reads 8 elements (8 * isz bytes) where fp16 reads 8 halves
    common = dict(method="tensorcore" if chain == 1 else "tensorcore_chained", problem=problem, in_dtype=in_dtype,
                  out_dtype=out_dtype, device=device)
    if isinstance(problem, Flat):
        vec = 16 // isz  # elements of a lane's 16-byte load (fp8: two A fragments)
        head = min(((16 - problem.align % 16) % 16) // isz, problem.n)
        nvec = (problem.n - head) // vec
        rounds = tuned(_THIS, "FLAT_ROUNDS", device).get(isz, 0)
        unroll, minb = tuned(_THIS, "FLAT_ONE_PASS", device).get(isz, (FLAT_UNROLL, FLAT_ROUNDS_BLOCKS_PER_SM))
        min_waves = tuned(_THIS, "FLAT_ONE_PASS_SIZE_MIN_WAVES", device).get(
            isz, tuned(_THIS, "FLAT_ONE_PASS_MIN_WAVES", device))
        grid = flat_one_pass_grid(nvec, BLOCK * unroll, rounds, min_waves, device, minb)
        if grid:  # a one-pass grid; its block partials in groups of BLOCK (a group total, a counter each)
            groups, cluster = grid_groups(grid, BLOCK), 0
            tail_args, extra = f"{minb}, {rounds}", dict(rounds=rounds)
        else:
            unroll, minb = flat_resident(isz, device)
            resident = full_grid(nvec, BLOCK * unroll, device, minb)
            grid, unroll, minb = flat_one_block(resident, unroll, minb, nvec, BLOCK,
                                                tuned(_THIS, "FLAT_ONE_BLOCK", device).get(isz))
            groups = 0
            cluster = flat_cluster(grid, tuned(_THIS, "FLAT_CLUSTER_MAX_BLOCKS", device), device)
            tail_args, extra = f"{minb}", {}
        params = dict(block=BLOCK, unroll=unroll, chain=chain, grid=grid, head=head, nvec=nvec, vec=vec, **extra)
        if cluster:  # the grid as one cluster: no workspace, no counters
            name = (f"tc_flat_cluster<{in_t}, {BLOCK}, {unroll}, {chain}, {out_t}, {FLAT_LOAD}, {tail_args}, "
                    f"{cluster}>")
            launch = KernelLaunch(SOURCE, name, (grid, 1, 1), (BLOCK, 1, 1), (Buf("x"), problem.n, Buf("out")),
                                  cluster=cluster)
            return Plan(**common, launches=(launch,), params=tuple(sorted(dict(params, cluster=cluster).items())))
        name = f"tc_flat<{in_t}, {BLOCK}, {unroll}, {chain}, {out_t}, {FLAT_LOAD}, {tail_args}>"
        launch = KernelLaunch(SOURCE, name, (grid, 1, 1), (BLOCK, 1, 1), (Buf("x"), problem.n, Buf("out"),
                                                                           Buf("counters")))
        return Plan(**common, launches=(launch,), counters=flagged_counters(grid, groups),
                    params=tuple(sorted(params.items())))
    packed = tuned(_THIS, "ROWS_PACKED", device).get(isz)
    if isinstance(problem, Rows) and packed and problem.k >= packed[0] and _packs(problem, isz):
        chunk = 32 * (16 // isz)
        rpc = chunk // problem.k
        units = cdiv(problem.m, rpc)
        rif, blocks_per_sm = packed[1:]
        unroll = tuned(_THIS, "STREAM_UNROLL", device)
        work = one_pass(split_work(units, 1, BLOCK // 32, device, blocks_per_sm), units, BLOCK // 32, rif)
        name = (f"tc_rows_stream<{in_t}, {BLOCK}, 1, {unroll}, {chain}, {out_t}, {blocks_per_sm}, 1, {rif}, "
                f"{rpc}>")
        return _split_plan(common, name, work, (problem.m, problem.k, problem.ld), problem.m, 1,
                           dict(stream=True, unroll=unroll, chain=chain, wpt=1, chunks_per_row=1,
                                rows_in_flight=rif, chunk=chunk, rows_per_chunk=rpc))
    if isinstance(problem, Rows) and problem.k >= STREAM_MIN_K and is_aligned(problem.align, (problem.ld * isz,),
                                                                               16):
        chunk = 32 * (16 // isz)  # a lane's 16-byte load per chunk: 256 halves, 512 fp8 values (two A fragments)
        chunks = cdiv(problem.k, chunk)
        if 0 < tuned(_THIS, "STREAM_LONG_CHUNKS", device).get(isz, 0) < chunks:
            unroll, blocks_per_sm = tuned(_THIS, "STREAM_LONG_TUNING", device) or (STREAM_UNROLL, STREAM_BLOCKS_PER_SM)
        else:
            unroll, blocks_per_sm = tuned(_THIS, "STREAM_UNROLL", device), tuned(_THIS, "STREAM_BLOCKS_PER_SM", device)
        work = stream_work(problem.m, chunks, BLOCK // 32, device, blocks_per_sm, STREAM_SPLIT_FILL)
        cpr = chunks if work.warps_per_tile == 1 and work.splits == 1 and chunks <= unroll else 0
        rif = max(1, SHORT_ROWS_CHUNKS_IN_FLIGHT[isz] // cpr) if cpr else 1
        rif = min(rif, SHORT_ROWS_MAX_IN_FLIGHT.get((isz, blocks_per_sm, cpr), rif))
        short_tuning = tuned(_THIS, "SHORT_ROWS_STREAM_TUNING", device).get((isz, cpr)) if cpr else None
        if short_tuning:  # taken where its blocks per SM leave the rows whole, one warp each (as they do for one chunk)
            tuned_work = stream_work(problem.m, chunks, BLOCK // 32, device, short_tuning[1], STREAM_SPLIT_FILL)
            if tuned_work.warps_per_tile == 1 and tuned_work.splits == 1:
                work, (rif, blocks_per_sm) = tuned_work, short_tuning
        if ONE_PASS_SHORT_ROWS if cpr else ONE_PASS_TILES:
            work = one_pass(work, problem.m, BLOCK // 32, rif)
            if not cpr:
                work = spread_rows(work, problem.m, chunks, unroll, BLOCK // 32, STREAM_MAX_STEPS)
        name = (f"tc_rows_stream<{in_t}, {BLOCK}, {work.warps_per_tile}, {unroll}, {chain}, {out_t}, "
                f"{blocks_per_sm}, {cpr}, {rif}>")
        return _split_plan(common, name, work, (problem.m, problem.k, problem.ld), problem.m, 1,
                           dict(stream=True, unroll=unroll, chain=chain, wpt=work.warps_per_tile,
                                chunks_per_row=cpr, rows_in_flight=rif, chunk=chunk))
    if isinstance(problem, Rows):
        vec = 8 if problem.k > 16 else 4
        aligned = is_aligned(problem.align, (problem.ld * isz,), isz * vec)
        chunk = 4 * vec
        tiles = cdiv(problem.m, 16)
        chunks = cdiv(problem.k, chunk)
        work = split_work(tiles, chunks, BLOCK // 32, device, BLOCKS_PER_SM_TILED)
        whole = chunks <= tuned(_THIS, "ROWS_SHORT_MAX_CHUNKS", device) and work.splits == 1
        short = chunks if whole and work.warps_per_tile == 1 else 0  # chunks per tile of the SHORT kernel
        if short:  # the SHORT kernel runs 4 blocks per SM: size the grid for them
            work = split_work(tiles, 1, BLOCK // 32, device, 4)
        if short == 1:
            unroll = ROWS_UNROLL_SHORT[vec] * FP8_IN_FLIGHT.get(isz, 1)
        elif short:
            fit = ROWS_SHORT_BYTES_IN_FLIGHT // (16 * problem.k * isz)
            unroll = max(1, min(fit, ROWS_SHORT_MAX_TILES_IN_FLIGHT[isz, aligned][short]))
        elif isz == 2 and ROWS_WHOLE_TILE_CHUNKS[0] <= chunks <= ROWS_WHOLE_TILE_CHUNKS[1]:
            unroll = tuned(_THIS, "ROWS_UNROLL_WIDE", device)
        else:
            unroll = ROWS_UNROLL_LONG
        paired = (short == 1 and vec == 4 and tuned(_THIS, "ROWS16_PAIRED_LOADS", device)[isz]
                  and is_aligned(problem.align, (problem.ld * isz,), 8 * isz))
        rows_16_byte_aligned = is_aligned(problem.align, (problem.ld * isz,), 16)
        whole_rows = paired and tuned(_THIS, "ROWS16_WHOLE_ROWS", device).get(isz, False) and rows_16_byte_aligned
        half_rows = (short == 1 and vec == 8 and tuned(_THIS, "ROWS32_HALF_ROW_LOADS", device).get(isz, False)
                     and rows_16_byte_aligned)
        if whole_rows:
            unroll = max(1, unroll // 2)  # units of 32 rows of 16 bytes: the bytes of twice as many 8-byte tiles
        if not short:
            in_one_pass = ONE_PASS_TILES
        elif paired:
            in_one_pass = tuned(_THIS, "ROWS16_ONE_PASS", device)
        else:
            in_one_pass = tuned(_THIS, "ONE_PASS_SHORT_TILES", device)[vec]
        if in_one_pass:
            work = one_pass(work, cdiv(problem.m, 32) if whole_rows else tiles, BLOCK // 32, unroll if short else 1)
        if half_rows:
            name = f"tc_rows32<{in_t}, {BLOCK}, {unroll}, {chain}, {out_t}>"
        elif whole_rows:
            name = f"tc_rows16<{in_t}, {BLOCK}, {unroll}, {out_t}, true>"
        elif paired:
            name = f"tc_rows16<{in_t}, {BLOCK}, {unroll}, {out_t}>"
        else:
            name = (f"tc_rows<{in_t}, {BLOCK}, {work.warps_per_tile}, {vec}, {str(aligned).lower()}, {unroll}, "
                    f"{chain}, {out_t}, {short}>")
        return _split_plan(common, name, work, (problem.m, problem.k, problem.ld), tiles, 16,
                           dict(vec=vec, aligned=aligned, unroll=unroll, chain=chain, wpt=work.warps_per_tile,
                                paired_loads=paired, **(dict(whole_rows=True) if whole_rows else {}),
                                **(dict(half_rows=True) if half_rows else {})))
    if isinstance(problem, Cols):
        wide = _one_item_candidates("COLS_WIDE_STRIPS", "COLS_WIDE_LONG_STRIPS", isz, problem.r, device)
        if wide and chain == 1 and is_aligned(problem.align, (problem.sa * isz, problem.sr * isz), 16):
            plan = _plan_cols(common, problem, isz, chain, device, 2 * COLS_STRIP, wide)
            if plan is not None:
                return plan
        return _plan_cols(common, problem, isz, chain, device, COLS_STRIP,
                          _one_item_candidates("COLS_ONE_ITEM_TUNING", "COLS_ONE_ITEM_LONG", isz, problem.r, device))
    raise TypeError(f"unknown problem {problem!r}")


register(Method(
    name="tensorcore",
    description="mma.sync m16n8k16 with fp16 data against all-ones, fp32 accumulators flushed after every mma "
                "(round-to-nearest register sums); full, last-axis (rows as A) and other-axis (ones as A) kernels; "
                "float32 data as three exact bf16 pieces per value (m16n8k16.bf16, tensorcore_fp32.py)",
    dtypes=TENSORCORE_DTYPES + ("float32",),
    reference="Dakkak et al., ICS 2019 (sum = product with ones), on PTX mma.sync with fp32 accumulation",
    planner=plan_tensorcore,
))

register(Method(
    name="tensorcore_chained",
    description="as tensorcore, but every warp keeps one tensor-core accumulator for its whole share (no flushes): "
                "the truncating, round-toward-zero accumulation of Navarro et al. and of the prototype, for contrast",
    dtypes=TENSORCORE_DTYPES,
    reference="Navarro et al., TPDS 2021 (chained MMA accumulation), with an fp32 accumulator",
    planner=lambda p, i, o, d: plan_tensorcore(p, i, o, d, chain=NO_FLUSH),
))
