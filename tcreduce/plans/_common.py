"""Planning helpers shared by the method planners: C++ type names, alignment tests, and how to spread
(output tiles x chunks of work) over a GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .._device import gpu_family
from .._plan import DeviceSpec

__all__ = ["CTYPE", "ctype", "is_aligned", "next_pow2", "ceil_log2", "cdiv", "WorkSplit", "split_work",
           "stream_work", "spread_rows", "one_pass", "flat_one_pass_grid", "flat_cluster", "CLUSTER_MAX_BLOCKS",
           "grid_groups", "combine_grid_additions", "choose_splits",
           "rebalance_splits", "choose_group", "wave_efficiency", "tuned", "STREAM_WAVES", "SPLIT_TOLERANCE"]

STREAM_WAVES = 4  # stream_work(fill=False): few long rows are split until the grid is about this many waves of blocks
SPLIT_TOLERANCE = 0.05  # choose_splits: the fewest splits whose wave efficiency is within this fraction of the best

CTYPE = {"float16": "__half", "float32": "float", "float64": "double", "bfloat16": "__nv_bfloat16",
         "float8_e4m3fn": "__nv_fp8_e4m3", "float8_e5m2": "__nv_fp8_e5m2"}


def ctype(dtype: str) -> str:
    """The C++ type of a dtype name ("float16" -> "__half")."""
    return CTYPE[dtype]


def tuned(module: ModuleType, name: str, device: DeviceSpec) -> Any:
    """Planner constant ``name`` of ``module`` on ``device``: ``module.FAMILY_TUNING[family][name]`` where the device's
    GPU family (:func:`tcreduce._device.gpu_family`) has a setting of its own, measured on that GPU
    (benchmarks/tune_plans.py, notes/performance.md), else the module-level value (tuned on an H100). The constants
    are launch geometry: every setting keeps the plan and its emulator twin in step, since the twin reads the plan."""
    own = getattr(module, "FAMILY_TUNING", {}).get(gpu_family(device.name) or "", {})
    return own[name] if name in own else getattr(module, name)


def reaches_floor(module: ModuleType, name: str, device: DeviceSpec, itemsize: int, value: int) -> bool:
    """Whether ``value`` is at least the floor that planner constant ``name`` (a dict keyed by bytes per element, read
    through :func:`tuned`) sets for ``itemsize``; a size not listed never reaches one."""
    floor = tuned(module, name, device).get(itemsize)
    return floor is not None and value >= floor


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def ceil_log2(n: int) -> int:
    """ceil(log2(n)) for n >= 1 (0 for n <= 1): the levels of a halving fold over n values."""
    return (n - 1).bit_length() if n > 1 else 0


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def is_aligned(align: int, strides_bytes: tuple[int, ...], vector_bytes: int) -> bool:
    """True when a base address ``align`` (mod 16) and every stride (bytes) are multiples of ``vector_bytes``."""
    return align % vector_bytes == 0 and all(s % vector_bytes == 0 for s in strides_bytes)


@dataclass(frozen=True)
class WorkSplit:
    """How tiles of independent outputs and their chunks of work spread over the GPU.

    warps_per_tile: warps of one block that share a tile (they take its chunks round-robin); splits: ranges of
    chunks handled by different blocks (their partials combined by the last block of the tile); grid_x: blocks along
    the tiles (tiles are grid-strided when fewer than needed)."""

    warps_per_tile: int
    splits: int
    grid_x: int


def split_work(tiles: int, chunks: int, warps_per_block: int, device: DeviceSpec, blocks_per_sm: int) -> WorkSplit:
    """Give every resident warp work: one warp per tile when tiles are plentiful, else several warps per tile, else
    several blocks per tile (``splits``), never more parallel workers on a tile than it has chunks."""
    resident_warps = device.sm_count * blocks_per_sm * warps_per_block
    max_blocks = device.sm_count * blocks_per_sm
    if tiles >= resident_warps or chunks <= 1:
        wpt = 1
    else:
        wpt = min(warps_per_block, next_pow2(cdiv(resident_warps, tiles)), next_pow2(chunks))
    splits = 1
    if wpt == warps_per_block and tiles * wpt < resident_warps:
        splits = max(1, min(cdiv(resident_warps, tiles * wpt), cdiv(chunks, wpt * 4)))
    groups = warps_per_block // wpt
    grid_x = cdiv(tiles, groups) if splits > 1 else min(cdiv(tiles, groups), max_blocks)
    return WorkSplit(wpt, splits, max(1, grid_x))


def stream_work(rows: int, chunks: int, warps_per_block: int, device: DeviceSpec, blocks_per_sm: int,
                 fill: bool = True) -> WorkSplit:
    """:func:`split_work` for kernels that stream one row per warp group (``chunks`` per row): when the rows are too
    few for one block each, splits of at least 8 chunks per warp each. ``fill``: the fewest splits whose grid fills
    the resident blocks within :data:`SPLIT_TOLERANCE` of the best fill (:func:`choose_splits`; 128 rows on 528 block
    slots: 4 splits, 97% of one wave); else enough splits for about :data:`STREAM_WAVES` waves of blocks, whatever
    the last wave holds (128 rows: 17 splits, 82% of 5 waves)."""
    work = split_work(rows, chunks, warps_per_block, device, blocks_per_sm)
    if work.splits > 1:
        s_max = cdiv(chunks, work.warps_per_tile * 8)
        cap = device.sm_count * blocks_per_sm
        splits = (choose_splits(rows, s_max, cap) if fill
                  else max(work.splits, min(cdiv(STREAM_WAVES * cap, rows), s_max)))
        work = WorkSplit(work.warps_per_tile, splits, work.grid_x)
    return work


def spread_rows(work: WorkSplit, rows: int, chunks: int, chunks_per_step: int, warps_per_block: int,
                max_steps: int) -> WorkSplit:
    """``work`` (streamed rows, no splits) with more warps per row when one warp would run more than ``max_steps``
    steps of ``chunks_per_step`` chunks over a row: the fewest warps (a power of two, at most a block) that bring it
    to ``max_steps``, on a one-pass grid. A block then reads a long row in a few rounds of adjacent chunks and exits:
    a read walk of many short blocks reads 2-3% faster than warps that loop long over their own rows
    (benchmarks/read_probe.py, notes/performance.md). ``max_steps`` 0, or work with splits: unchanged."""
    if max_steps <= 0 or work.splits > 1:
        return work
    wpt = min(warps_per_block, max(work.warps_per_tile, next_pow2(cdiv(chunks, chunks_per_step * max_steps))))
    if wpt == work.warps_per_tile:
        return work
    return WorkSplit(wpt, 1, max(1, cdiv(rows, warps_per_block // wpt)))


def wave_efficiency(items: int, cap: int) -> float:
    """Fraction of the block slots busy when ``items`` equal work items run on ``cap`` resident blocks."""
    return items / (cap * cdiv(items, cap))


def choose_splits(units: int, s_max: int, cap: int) -> int:
    """Splits per unit (row, column strip) so that ``units * splits`` work items fill ``cap`` resident blocks
    evenly: the fewest splits whose wave efficiency is at least (1 - SPLIT_TOLERANCE) times the best in
    1..s_max."""
    s_max = max(1, min(s_max, 4 * cap))
    effs = [wave_efficiency(units * s, cap) for s in range(1, s_max + 1)]
    best = max(effs)
    return next(s for s, e in enumerate(effs, start=1) if e >= (1.0 - SPLIT_TOLERANCE) * best)


def rebalance_splits(work: WorkSplit, chunks: int, cap: int) -> WorkSplit:
    """``work`` from :func:`split_work` with its splits re-chosen by :func:`choose_splits` (split_work rounds them up,
    which can leave a nearly empty last wave of blocks on ``cap`` resident blocks), each warp keeping at least 4 of a
    unit's ``chunks`` per split. Work without splits is returned as it is."""
    if work.splits == 1:
        return work
    splits = choose_splits(work.grid_x, cdiv(chunks, work.warps_per_tile * 4), cap)
    return WorkSplit(work.warps_per_tile, splits, work.grid_x)


def choose_group(units: int, chunks: int, warps_per_block: int, cap: int) -> int:
    """Warps per unit (column strip) for a one-pass grid without splits, where a block takes warps_per_block / wpt
    units and every block has the same work: the fewest warps (a power of two, at most one per chunk) whose grid of
    cdiv(units, warps_per_block / wpt) blocks fills ``cap`` resident blocks within SPLIT_TOLERANCE of the best."""
    options = [w for w in (1 << i for i in range(warps_per_block.bit_length())) if w <= warps_per_block
               and (w == 1 or w <= next_pow2(chunks))]
    effs = [wave_efficiency(cdiv(units, warps_per_block // w), cap) for w in options]
    best = max(effs)
    return next(w for w, e in zip(options, effs) if e >= (1.0 - SPLIT_TOLERANCE) * best)


def one_pass(work: WorkSplit, tiles: int, warps_per_block: int, tiles_per_warp: int = 1) -> WorkSplit:
    """``work`` with a grid of one pass over ``tiles`` (no grid stride) when it has no splits; a warp group takes
    ``tiles_per_warp`` tiles per round. Every tile's sum is the same whichever block computes it, so this changes
    only speed (notes/performance.md: a one-pass grid reads short rows 4-7% faster than a resident grid)."""
    if work.splits > 1:
        return work
    groups = warps_per_block // work.warps_per_tile
    return WorkSplit(work.warps_per_tile, 1, max(1, cdiv(tiles, groups * tiles_per_warp)))


def full_grid(work_items: int, items_per_block: int, device: DeviceSpec, blocks_per_sm: int) -> int:
    """Blocks for a grid-stride kernel: enough to fill the GPU, no more than there is work for."""
    return max(1, min(math.ceil(work_items / items_per_block), device.sm_count * blocks_per_sm))


def flat_one_pass_grid(vectors: int, per_round: int, rounds: int, min_waves: float, device: DeviceSpec,
                       blocks_per_sm: int) -> int:
    """Blocks of a full sum's one-pass walk (tc_flat, tc32_flat, shuffle_flat with ROUNDS > 0: block b owns
    ``rounds`` rounds of ``per_round`` 16-byte vectors), or 0, the resident grid-stride walk, when ``rounds`` is 0 or
    that grid has fewer than ``min_waves`` waves of ``blocks_per_sm`` resident blocks per SM (few short blocks lose to
    a resident grid: notes/performance.md, sessions 11 and 19)."""
    if not rounds:
        return 0
    grid = max(1, cdiv(vectors, per_round * rounds))
    return grid if grid >= min_waves * device.sm_count * blocks_per_sm else 0


def flat_one_block(grid: int, unroll: int, minb: int, nvec: int, block: int,
                   setting: tuple[int, int, int] | None) -> tuple[int, int, int]:
    """(grid, 16-byte vectors per thread, blocks per SM) of a full sum's resident walk of ``nvec`` vectors, given the
    resident grid's (``grid``, ``unroll``, ``minb``) and a FLAT_ONE_BLOCK ``setting`` (vectors per thread, blocks per
    SM, trips; tc_flat's and tc32_flat's): one block of the setting's shape where the resident grid has several blocks
    and the sum fits the block's trips (it then writes its value itself: no combination), else the resident grid."""
    if setting and grid > 1 and nvec <= setting[2] * block * setting[0]:
        return 1, setting[0], setting[1]
    return grid, unroll, minb


CLUSTER_MAX_BLOCKS = 16  # the largest thread-block cluster Hopper runs (above 8 with the non-portable size allowed)


def flat_cluster(grid: int, max_blocks: int, device: DeviceSpec) -> int:
    """Blocks of the one thread-block cluster a full sum's resident grid of ``grid`` blocks runs as (tc_flat_cluster,
    shuffle_flat_cluster: the block partials combined through distributed shared memory, in combine_partials' order,
    so the same bits as the last-block combination): ``grid`` when 2 <= grid <= ``max_blocks`` (at most
    CLUSTER_MAX_BLOCKS) on a GPU with clusters (compute capability 9.0 or newer), else 0."""
    return grid if 2 <= grid <= min(max_blocks, CLUSTER_MAX_BLOCKS) and device.cc >= (9, 0) else 0


def grid_groups(grid: int, block: int) -> int:
    """Groups of ``block`` consecutive block partials a one-pass grid combines in two levels (combine_grid_slots'
    TWO_LEVEL, kernels/common.cuh): each group's total, then the groups' (0 for a grid of one block)."""
    return cdiv(grid, block) if grid > 1 else 0


def flagged_counters(grid: int, groups: int, slots_per_value: int = 1) -> int:
    """Counters (32-bit words of the zeroed counters pool) of a full sum whose ``grid`` block partials
    combine_grid_values combines (kernels/common.cuh; ``groups`` from :func:`grid_groups` for a two-level one-pass
    grid, 0 for one level): its counters (1, or groups + 1), padded to an even count, then ``slots_per_value`` 64-bit
    flagged slots per partial and per group total (1 for a float, 2 for tc32_flat's (s, e) pairs). 0 for a grid of one
    block (no combination)."""
    return (groups + 2) // 2 * 2 + 2 * slots_per_value * (grid + groups) if grid > 1 else 0


def combine_grid_additions(grid: int, block: int, two_level: bool, fold: int) -> int:
    """The longest chain of additions a block partial goes through in combine_grid_slots / combine_grid2
    (kernels/common.cuh, kernels/tensorcore_f32.cuh), ``fold`` the additions of the block fold that ends each
    combine_partials: its serial sum of cdiv(grid, block) partials per thread, then the fold; in two levels, a group's
    (one partial per thread), then the groups' totals the same way. 0 for a grid of one block (no combination)."""
    if grid <= 1:
        return 0
    if two_level:
        return (1 + fold) + (cdiv(grid_groups(grid, block), block) + fold)
    return cdiv(grid, block) + fold
