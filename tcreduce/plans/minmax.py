"""``tcreduce.max`` and ``tcreduce.min``: methods "shuffle" of kinds "max" and "min" (kernels in ``kernels/minmax.cu``).

Seed 001's reduce_max_x4 machinery (grid-stride 16-byte vector loads, warp shuffles, one shared-memory hop per block)
for every canonical problem:

- :class:`~tcreduce._layout.Flat`: one GPU-filling grid-stride launch; the last block to finish reduces the block
  partials (single pass).
- :class:`~tcreduce._layout.Rows`: one thread per row for k <= 16, one warp per row for moderate rows (or when the rows
  alone fill the GPU), else one block per row, split over several blocks when there are too few rows to fill the GPU
  (the last block of a row combines its splits). Every row's alignment is taken from its own address, so any ``ld``
  and start work with vector loads.
- :class:`~tcreduce._layout.Cols`: 2-D blocks, threads along the contiguous axis (a 16-byte vector of columns each
  when every address allows it) and along the reduced axis; splits of the reduced axis when there are too few column
  tiles to fill the GPU.

The initial value is -inf (max) / +inf (min), not seed 001's FLT_MIN, which is wrong for negative data. Every
comparison is PTX ``max.NaN``/``min.NaN`` (IEEE 754-2019 maximum/minimum: NaN if any input is NaN, as NumPy; +0.0 >
-0.0), which is associative and commutative, so the result is exact and independent of the order of comparisons:
deterministic by nature. The output dtype is the input dtype by default (the API passes ``out_dtype``); a float32 max
written as float16 is rounded once.
"""

from __future__ import annotations

from .._layout import Cols, Flat, Problem, Rows
from .._plan import Buf, DeviceSpec, KernelLaunch, Plan
from ..registry import Method, register
from ._common import cdiv, ctype, next_pow2

__all__ = ["BLOCK", "THREAD_ROW_MAX", "WARP_ROW_MAX", "resident_blocks", "plan_minmax"]

SOURCE = "minmax.cu"
BLOCK = 256
THREAD_ROW_MAX = 16  # rows of at most this many elements: one thread per row
WARP_ROW_MAX = 1024  # rows of at most this many elements: one warp per row (longer rows too, if rows fill the GPU)
_OPS = {"max": 0, "min": 1}
_VEC = {"float32": 4, "float16": 8}
_ITEMSIZE = {"float32": 4, "float16": 2}
_MAX_GRID_X = 2 ** 31 - 1
_MAX_GRID_Y = 65535


def resident_blocks(device: DeviceSpec) -> int:
    """256-thread blocks that fill the GPU once (2048 threads per SM; 1536 on sm_86/sm_89)."""
    per_sm = (1536 if device.cc in ((8, 6), (8, 9)) else 2048) // BLOCK
    return device.sm_count * per_sm


def _plan(name: str, kind: str, problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec,
          launch: KernelLaunch, ws: int, counters: int, params: dict) -> Plan:
    return Plan(name, problem, in_dtype, out_dtype, device, (launch,), workspace_floats=ws, counters=counters,
                params=tuple(sorted(dict(params, kind=kind).items())))


def plan_minmax(kind: str, problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
    """The launch plan of ``tcreduce.max`` (kind "max") or ``tcreduce.min`` (kind "min") for a canonical problem."""
    if kind not in _OPS:
        raise ValueError(f"kind must be 'max' or 'min', not {kind!r}")
    name = "shuffle"
    op = _OPS[kind]
    t, o = ctype(in_dtype), ctype(out_dtype)
    vec = _VEC[in_dtype]
    fill = resident_blocks(device)

    if isinstance(problem, Flat):
        if problem.n < 1:
            raise ValueError(f"{kind} of an empty array has no identity")
        g = max(1, min(fill, cdiv(problem.n, vec * BLOCK)))
        launch = KernelLaunch(SOURCE, f"minmax_flat<{op}, {t}, {o}, {BLOCK}>", (g, 1, 1), (BLOCK, 1, 1),
                              (Buf("x"), problem.n, Buf("out"), Buf("ws"), Buf("counters")))
        return _plan(name, kind, problem, in_dtype, out_dtype, device, launch, g if g > 1 else 0, 1,
                     dict(block=BLOCK, grid=g, vec=vec))

    if isinstance(problem, Rows):
        m, k = problem.m, problem.k
        if m < 1 or k < 1:
            raise ValueError(f"{kind} over an empty axis has no identity")
        args_tail = (Buf("out"), Buf("ws"), Buf("counters"))
        resident_warps = fill * (BLOCK // 32)
        if k <= THREAD_ROW_MAX:
            g = cdiv(m, BLOCK)
            kernel, splits, mode = f"minmax_rows_thread<{op}, {t}, {o}, {BLOCK}>", 1, "thread"
        elif k <= WARP_ROW_MAX or m >= resident_warps:
            g = min(cdiv(m, BLOCK // 32), _MAX_GRID_X)
            kernel, splits, mode = f"minmax_rows_warp<{op}, {t}, {o}, {BLOCK}>", 1, "warp"
        else:
            vectors = k // vec
            splits = max(1, min(cdiv(fill, m), cdiv(vectors, BLOCK * 4)))
            g = m * splits
            if g > _MAX_GRID_X:
                raise ValueError(f"too many rows for one launch: {problem}")
            kernel, mode = f"minmax_rows_block<{op}, {t}, {o}, {BLOCK}>", "block"
        launch = KernelLaunch(SOURCE, kernel, (g, 1, 1), (BLOCK, 1, 1),
                              (Buf("x"), m, k, problem.ld) + args_tail + (splits,))
        ws = m * splits if splits > 1 else 0
        return _plan(name, kind, problem, in_dtype, out_dtype, device, launch, ws, m if splits > 1 else 0,
                     dict(block=BLOCK, grid=g, splits=splits, mode=mode, vec=vec))

    if isinstance(problem, Cols):
        a, r, b, sa, sr = problem.a, problem.r, problem.b, problem.sa, problem.sr
        if a < 1 or r < 1 or b < 1:
            raise ValueError(f"{kind} over an empty axis has no identity")
        size = _ITEMSIZE[in_dtype]
        vec_ok = (problem.align % 16 == 0 and b % vec == 0 and (sr * size) % 16 == 0
                  and (a == 1 or (sa * size) % 16 == 0))
        cv = vec if vec_ok else 1
        groups = b // cv
        tx = min(32, next_pow2(groups))
        ty = BLOCK // tx
        tiles = a * cdiv(groups, tx)
        if tiles > _MAX_GRID_X:
            raise ValueError(f"too many output tiles for one launch: {problem}")
        splits = 1
        if tiles < fill:
            splits = max(1, min(cdiv(fill, tiles), cdiv(r, ty * 8), _MAX_GRID_Y))
        launch = KernelLaunch(SOURCE, f"minmax_cols<{op}, {t}, {o}, {cv}>", (tiles, splits, 1), (tx, ty, 1),
                              (Buf("x"), a, r, b, sa, sr, Buf("out"), Buf("ws"), Buf("counters"), splits))
        ws = tiles * splits * tx * cv if splits > 1 else 0
        return _plan(name, kind, problem, in_dtype, out_dtype, device, launch, ws, tiles if splits > 1 else 0,
                     dict(block=(tx, ty), tiles=tiles, splits=splits, vec=cv))

    raise TypeError(f"unknown problem {problem!r}")


def _planner(kind: str):
    def planner(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
        return plan_minmax(kind, problem, in_dtype, out_dtype, device)

    planner.__doc__ = f"Plan tcreduce.{kind} (method 'shuffle')."
    return planner


_REFERENCE = ("seed 001 reduce_max_x4 / reduce_max_atomic (float4 grid-stride loop, warp shuffles), starting from "
              "{init} instead of the seed's FLT_MIN, NaN-propagating (PTX {k}.NaN), last block combines")

register(Method(name="shuffle", kind="max", dtypes=("float32", "float16"), planner=_planner("max"),
                reference=_REFERENCE.format(init="-inf", k="max"),
                description="Maximum with 16-byte vector loads (float4 / 8 halves) and warp shuffles; NaN "
                            "propagates, +0.0 > -0.0; exact, so deterministic; Flat, Rows and Cols problems.",
                deterministic=True))
register(Method(name="shuffle", kind="min", dtypes=("float32", "float16"), planner=_planner("min"),
                reference=_REFERENCE.format(init="+inf", k="min"),
                description="Minimum with 16-byte vector loads (float4 / 8 halves) and warp shuffles; NaN "
                            "propagates, -0.0 < +0.0; exact, so deterministic; Flat, Rows and Cols problems.",
                deterministic=True))
