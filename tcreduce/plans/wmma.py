"""Method "wmma": the tensor-core reductions of Dakkak et al. (ICS 2019, c3sr/tcu_scope) on ``nvcuda::wmma``
16x16x16 fragments, fp16 or bf16 inputs (:data:`DTYPES`; the kernels are templated on the input type) and fp32
accumulators. Kernels: ``kernels/wmma.cu`` (its comments pin the order of every addition); emulator twin:
``tcreduce/emulate/wmma.py``.

Variants (``params["variant"]``), all reading ``Rows(m, k, ld)``; a full sum is ``Rows(1, n, n)``:

- ``"r16n"``: Reduction16 / Reduction16n (``wmma_rows16``): a warp owns 16 rows, a 16x16 tile of 16 row pieces times
  P^T (first column ones) leaves the 16 row sums in column 0; ceil(k/16) products chained in one fp32 accumulator.
  The default for k <= 256. Grid-stride over row groups, 128-thread blocks.
- ``"r256n"``: Reduction256 / 256n (``wmma_rows256n``): a warp per row, V = P * (sum_t A_t) * P^T over the row's
  256-element tiles; the final product with P^T goes through the fp32-exact hand-off (below). The default for
  256 < k <= 4096 when there are enough rows to fill the GPU (m >= 16 warps per SM).
- ``"block"``: the block variant (seg_wmma_256n_block, ``wmma_rows_block``): 8 warps share a stretch of one row (tiles
  interleaved), their column sums stacked as the rows of one matrix times P^T, then summed once more; long rows and
  few rows are split over several blocks whose partials the last block of the row combines
  (``tcr::arrive_last`` + ``tcr::combine_partials``: deterministic, one launch). The default for full sums and for
  long rows. Each warp chains at most :data:`BLOCK_CHAIN` products.
- other axes (``Cols``): the paper has no column kernel, so the plan first launches ``wmma_transpose``, a tiled
  transposing copy of the 16-bit data into the workspace in the rows layout (row ``i*b + l`` holds the r reduced
  values, rows padded to a multiple of 8 elements so that they are 16-byte aligned; a bit copy, one kernel for both
  formats), then the rows kernel reads ``Rows(a*b, r, ldw)`` from the workspace. Two launches; the copy costs one
  extra read and write of the input.

The fp32 hand-off: where the paper stores an accumulator and loads it back as a half operand, each fp32 value is
split into three parts of the input format, hi + mid + lo, and three chained products with P^T (lo, mid, hi) sum the
48 parts in the tensor core. fp16: each row is first scaled by a power of two (its largest finite value into
[2^14, 2^15)), split with round-to-nearest (11 + 11 + 2 significant bits) and the result scaled back; exact down to
2^-39 of the row's largest value. bf16 (fp32's exponent range, 8 significant bits): no scaling, three truncations
(8 + 8 + 8 bits, from the fp32 encoding), exact for every multiple of 2^-133, which every partial sum of bf16 data
is. Either way the hand-off's error is that of three tensor-core accumulation steps (fp16: plus at most 2^-39 of
the row's largest value per part; bf16: nothing more), where the paper's half partials lost 2^-11.

Misaligned views (x[1:]) and row strides that are not multiples of 8 halves use masked scalar loads; aligned data
uses 16-byte loads. Every tail (k or n not a multiple of 16/256) is masked with zeros. Deterministic, 64-bit indexing.
"""

from __future__ import annotations

from .._layout import Cols, Flat, Problem, Rows
from .._plan import Arg, Buf, DeviceSpec, KernelLaunch, Plan
from ..registry import Method, UnsupportedDtype, register
from ._common import cdiv, ctype, is_aligned

__all__ = ["plan_wmma", "choose_variant", "block_split", "kernel_names", "VARIANTS", "CHAIN",
           "BLOCK_CHAIN", "TILE", "DTYPES"]

SOURCE = "wmma.cu"
TILE = 256  # elements per 16x16 tile
VARIANTS = ("r16n", "r256n", "block")
WARP_KERNEL_WARPS = 4  # r16n and r256n: 128-thread blocks, grid-stride
WARP_KERNEL_BLOCKS_PER_SM = 16  # 16 x 4 warps = 64 resident warps per SM
BLOCK_WARPS = 8  # the block variant: 256 threads, one hand-off row per warp (at most 16)
BLOCK_BLOCKS_PER_SM = 8  # blocks per SM the block variant aims to fill the GPU with
CHAIN = 16  # most products chained into one fp32 accumulator by the default r16n / r256n choices
R16_MAX_K = 16 * CHAIN  # r16n up to k = 256
R256_MAX_K = TILE * CHAIN  # r256n up to k = 4096
BLOCK_CHAIN = 32  # most tiles chained per warp in the block variant (H200: 2^28 elements at 3.2 TB/s vs 2.8 with 16)
STAGE = 4  # tiles staged per warp per batch (kernels/wmma.cu STAGE)
MAX_GRID = (1 << 31) - 1
OUT_TYPES = ("float16", "float32", "float64")
DTYPES = ("float16", "bfloat16")  # input formats: the wmma fragment types __half and __nv_bfloat16 (sm_80+)


def _vec(rows: Rows) -> bool:
    """16-byte vector loads are legal: every row starts 16-byte aligned (base and, with several rows, the stride)."""
    return is_aligned(rows.align, (rows.ld * 2,) if rows.m > 1 else (), 16)


def choose_variant(rows: Rows, device: DeviceSpec) -> str:
    """The default variant for a rows problem (full sums are Rows(1, n, n))."""
    if rows.k <= R16_MAX_K:
        return "r16n"
    if rows.k <= R256_MAX_K and rows.m >= 16 * device.sm_count:
        return "r256n"
    return "block"


def _name(kernel: str, in_t: str, out_t: str, vec: bool, warps: int) -> str:
    return f"{kernel}<{in_t}, {out_t}, {str(vec).lower()}, {warps}>"


def kernel_names(in_dtypes: tuple[str, ...] = DTYPES) -> list[str]:
    """Every kernel name expression the planner can produce for the input dtypes ``in_dtypes`` (for compile checks);
    the transposing copy is one kernel for every 16-bit format."""
    names = []
    for in_dtype in in_dtypes:
        for out in OUT_TYPES:
            for vec in (False, True):
                names.append(_name("wmma_rows16", ctype(in_dtype), ctype(out), vec, WARP_KERNEL_WARPS))
                names.append(_name("wmma_rows256n", ctype(in_dtype), ctype(out), vec, WARP_KERNEL_WARPS))
                names.append(_name("wmma_rows_block", ctype(in_dtype), ctype(out), vec, BLOCK_WARPS))
    names += [f"wmma_transpose<{tj}>" for tj in (16, 32)]
    return names


def block_split(rows: Rows, device: DeviceSpec) -> tuple[int, int]:
    """(splits, tiles per block) of the block variant: enough blocks to fill the GPU (about BLOCK_BLOCKS_PER_SM per
    SM), at most BLOCK_CHAIN tiles per warp, at least about one tile per warp; every block gets at least one tile."""
    tiles = cdiv(rows.k, TILE)
    least = cdiv(tiles, BLOCK_WARPS * BLOCK_CHAIN)
    want = cdiv(device.sm_count * BLOCK_BLOCKS_PER_SM, rows.m)
    most = cdiv(tiles, BLOCK_WARPS)
    splits = max(least, min(want, most), 1)
    tpb = cdiv(tiles, splits)
    return cdiv(tiles, tpb), tpb


def _rows_plan(rows: Rows, in_dtype: str, out_dtype: str, device: DeviceSpec, variant: str, x: Buf,
               ws_offset: int) -> tuple[list[KernelLaunch], int, int, dict]:
    """Launch, workspace floats beyond ws_offset, counters and params of one rows problem."""
    in_t, out_t = ctype(in_dtype), ctype(out_dtype)
    vec = _vec(rows)
    m, k = rows.m, rows.k
    args: tuple[Arg, ...] = (x, m, k, rows.ld, Buf("out"), Buf("ws", ws_offset), Buf("counters"))
    if variant == "r16n":
        groups = cdiv(m, 16)
        grid = max(1, min(cdiv(groups, WARP_KERNEL_WARPS), device.sm_count * WARP_KERNEL_BLOCKS_PER_SM))
        launch = KernelLaunch(SOURCE, _name("wmma_rows16", in_t, out_t, vec, WARP_KERNEL_WARPS), (grid, 1, 1),
                              (WARP_KERNEL_WARPS * 32, 1, 1), args + (1,))
        params = dict(variant=variant, warps=WARP_KERNEL_WARPS, block=WARP_KERNEL_WARPS * 32, grid=grid, vec=vec,
                      tiles=cdiv(k, 16), chain=cdiv(k, 16), splits=1, stage=STAGE)
        return [launch], 0, 0, params
    if variant == "r256n":
        grid = max(1, min(cdiv(m, WARP_KERNEL_WARPS), device.sm_count * WARP_KERNEL_BLOCKS_PER_SM))
        launch = KernelLaunch(SOURCE, _name("wmma_rows256n", in_t, out_t, vec, WARP_KERNEL_WARPS), (grid, 1, 1),
                              (WARP_KERNEL_WARPS * 32, 1, 1), args + (1,))
        params = dict(variant=variant, warps=WARP_KERNEL_WARPS, block=WARP_KERNEL_WARPS * 32, grid=grid, vec=vec,
                      tiles=cdiv(k, TILE), chain=cdiv(k, TILE), splits=1, stage=STAGE)
        return [launch], 0, 0, params
    if variant == "block":
        splits, tpb = block_split(rows, device)
        grid = m * splits
        if grid > MAX_GRID or splits >= 1 << 32:
            raise ValueError(f"wmma: {m} rows x {splits} splits exceed the grid limit")
        launch = KernelLaunch(SOURCE, _name("wmma_rows_block", in_t, out_t, vec, BLOCK_WARPS), (grid, 1, 1),
                              (BLOCK_WARPS * 32, 1, 1), args + (splits, tpb))
        params = dict(variant=variant, warps=BLOCK_WARPS, block=BLOCK_WARPS * 32, grid=grid, vec=vec,
                      tiles=cdiv(k, TILE), chain=cdiv(tpb, BLOCK_WARPS), splits=splits, tpb=tpb, stage=STAGE)
        multi = splits > 1
        return [launch], (m * splits if multi else 0), (m if multi else 0), params
    raise ValueError(f"wmma: unknown variant {variant!r}; variants: {', '.join(VARIANTS)}")


def plan_wmma(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec, variant: str = "auto") -> Plan:
    """The launch plan of method "wmma" for a canonical problem. ``variant``: "auto" (the default rule,
    :func:`choose_variant`) or one of :data:`VARIANTS` to force a kernel (tests, experiments); every variant takes
    every problem."""
    if in_dtype not in DTYPES:
        raise UnsupportedDtype(f"method 'wmma' sums {' and '.join(DTYPES)} input, not {in_dtype}")
    if out_dtype not in OUT_TYPES:
        raise ValueError(f"wmma: output dtype {out_dtype!r} not in {OUT_TYPES}")
    if variant != "auto" and variant not in VARIANTS:
        raise ValueError(f"wmma: unknown variant {variant!r}; variants: auto, {', '.join(VARIANTS)}")
    common = dict(method="wmma", problem=problem, in_dtype=in_dtype, out_dtype=out_dtype, device=device)
    if isinstance(problem, (Flat, Rows)):
        rows = Rows(1, problem.n, problem.n, problem.align) if isinstance(problem, Flat) else problem
        if rows.m <= 0 or rows.k <= 0:
            raise ValueError(f"wmma: empty problem {problem!r} (the API returns zeros without launching)")
        if variant == "auto":
            variant = "block" if isinstance(problem, Flat) else choose_variant(rows, device)
        launches, ws, counters, params = _rows_plan(rows, in_dtype, out_dtype, device, variant, Buf("x"), 0)
        params["rows"] = rows
        return Plan(**common, launches=tuple(launches), workspace_floats=ws, counters=counters,
                    params=tuple(sorted(params.items())))
    if isinstance(problem, Cols):
        a, r, b = problem.a, problem.r, problem.b
        if a * r * b <= 0:
            raise ValueError(f"wmma: empty problem {problem!r} (the API returns zeros without launching)")
        ldw = cdiv(r, 8) * 8
        rows = Rows(a * b, r, ldw, 0)
        ws_off = cdiv(cdiv(rows.m * ldw, 2), 64) * 64  # the 16-bit copy, in floats, rounded to 256 bytes
        tj = 16 if r <= 16 else 32  # transpose tile: tj (reduced axis) x 2048/tj (kept contiguous axis)
        tgrid = a * cdiv(r, tj) * cdiv(b, 2048 // tj)
        if tgrid > MAX_GRID:
            raise ValueError(f"wmma: transposing copy of {problem!r} exceeds the grid limit")
        transpose = KernelLaunch(SOURCE, f"wmma_transpose<{tj}>", (tgrid, 1, 1), (256, 1, 1),
                                 (Buf("x"), a, r, b, problem.sa, problem.sr, Buf("ws"), ldw))
        if variant == "auto":
            variant = choose_variant(rows, device)
        launches, ws, counters, params = _rows_plan(rows, in_dtype, out_dtype, device, variant, Buf("ws"), ws_off)
        params.update(rows=rows, transpose_ld=ldw, transpose_tile=tj, transpose_grid=tgrid, ws_offset=ws_off)
        return Plan(**common, launches=(transpose, *launches), workspace_floats=ws_off + ws, counters=counters,
                    params=tuple(sorted(params.items())))
    raise TypeError(f"wmma: unknown problem {problem!r}")

register(Method(
    name="wmma",
    description="Dakkak et al.'s WMMA kernels with fp32 accumulators (fp16 or bf16 fragments): Reduction16/16n "
                "(A*P), Reduction256/256n (P*A*P^T, fp32 partials handed back to the tensor core as exact hi/mid/lo "
                "splits in the input format), the block variant with a last-block grid combination for full sums and "
                "long rows; other axes through a transposing copy",
    dtypes=DTYPES,
    reference="Dakkak et al., Accelerating Reduction and Scan Using Tensor Core Units, ICS 2019 (c3sr/tcu_scope)",
    planner=plan_wmma,
))
