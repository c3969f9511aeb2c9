"""Method "exact": the exact sum of float16 / float32 input, rounded once to the output dtype (round to nearest,
ties to even). Kernels: ``kernels/exact.cu`` (``exact_flat``, ``exact_seg``, ``exact_finalize``), whose header
explains the arithmetic; the state encoding is :mod:`tcreduce.exact`'s; emulator twin: ``tcreduce/emulate/exact.py``.

What it launches: one kernel per call, nothing else.

- Full sums (:class:`~tcreduce._layout.Flat`): ``exact_flat``, a grid-stride kernel with 16-byte loads (``UNROLL``
  chunks in flight per thread, ``MINB`` blocks of ``BLOCK`` threads per SM: :data:`FLAT_TUNING`); the last block to
  finish adds the block states and rounds (or writes the state).
- Every other form (:class:`~tcreduce._layout.Rows` as ``a = m, b = 1, sa = ld, sr = 1``, and
  :class:`~tcreduce._layout.Cols`): ``exact_seg``, a group of ``G`` threads per output walking the reduced axis one
  element at a time: rows get ``G`` = up to 32 lanes along the row (coalesced), other axes ``G = 1`` (a thread per
  output, coalesced across outputs), more lanes while the outputs are too few to fill the GPU, a whole block for
  few long reductions, and ``splits`` blocks per output (combined by the last block of the tile) when even that
  leaves the GPU idle.

The output dtype "int64" is the state itself (``L = state_limbs`` int64 per output): tcreduce.exact.partial_state.
Every plan keeps fewer than :data:`MAX_PER_THREAD` elements per thread (the kernel's int64 headroom).

bfloat16 input (raw 16-bit words) runs the fp32 engine on ``word << 16`` (``exact_detail::InBF16``).
"""

from __future__ import annotations

from .._layout import Cols, Flat, Problem, Rows
from .._plan import Buf, DeviceSpec, KernelLaunch, Plan
from ..registry import Method, UnsupportedDtype, register
from ._common import cdiv, next_pow2

__all__ = ["plan_exact", "IN_TAG", "LIMBS", "LSB", "state_limbs", "FLAT_TUNING", "kernel_names", "SOURCE",
           "seg_shape", "seg_work"]

SOURCE = "exact.cu"
BLOCK = 256
IN_TAG = {"float16": "exact_detail::InF16", "float32": "exact_detail::InF32", "bfloat16": "exact_detail::InBF16"}
ITEMSIZE = {"float16": 2, "float32": 4, "bfloat16": 2}
LIMBS = {"float16": 4, "float32": 11, "bfloat16": 11}  # value limbs K of the state
LSB = {"float16": -24, "float32": -149, "bfloat16": -149}  # exponent of the state's unit
NCOUNT = 3  # NaN, +inf, -inf counts after the value limbs
# Full sums: (UNROLL, blocks per SM): the most chunks in flight that compile without spills at that occupancy
# (fp16: 40 registers, 48 KiB in flight per SM; fp32: 80 registers, 30 KiB of shared memory per block).
FLAT_TUNING = {"float16": (2, 6), "float32": (4, 3), "bfloat16": (4, 3)}
SEG_MINB = 4  # exact_seg: __launch_bounds__(BLOCK, 4)
OUT_CTYPE = {"float16": "__half", "float32": "float", "float64": "double", "int64": "long long"}
MAX_PER_THREAD = 1 << 22  # elements per thread, at most (int64 headroom: 2^22 * 2^40 < 2^63)
MIN_PER_THREAD = 64  # a split leaves every thread at least this many elements
MAX_SPLITS = 65535  # gridDim.y


def state_limbs(in_dtype: str) -> int:
    """L, the int64 values per output of the exact state of ``in_dtype`` input (K value limbs + 3 counts)."""
    if in_dtype not in LIMBS:
        raise TypeError(f"exact sums take float16, bfloat16 or float32 input, not {in_dtype}")
    return LIMBS[in_dtype] + NCOUNT


def _kernel_args(out_dtype: str, in_dtype: str) -> tuple[str, int]:
    if out_dtype not in OUT_CTYPE:
        raise TypeError(f"method 'exact' writes float16, float32 or float64 results (or its int64 state), "
                        f"not {out_dtype}")
    return OUT_CTYPE[out_dtype], 1 if out_dtype == "int64" else 0


def _plan_flat(problem: Flat, in_dtype: str, out_dtype: str, device: DeviceSpec) -> tuple[KernelLaunch, int, int,
                                                                                           dict]:
    unroll, minb = FLAT_TUNING[in_dtype]
    isz = ITEMSIZE[in_dtype]
    if problem.align % isz:
        raise ValueError(f"exact: a {in_dtype} array whose first element sits at byte {problem.align} mod 16 is not "
                         f"element-aligned; copy it first")
    per_chunk = 16 // isz
    head = min(problem.n, ((16 - problem.align) % 16) // isz)
    nv = (problem.n - head) // per_chunk
    grid = max(1, min(device.sm_count * minb, cdiv(nv, BLOCK * unroll)))
    grid = max(grid, cdiv(problem.n, BLOCK * MAX_PER_THREAD))
    out_t, mode = _kernel_args(out_dtype, in_dtype)
    name = f"exact_flat<{IN_TAG[in_dtype]}, {out_t}, {mode}, {BLOCK}, {unroll}, {minb}>"
    launch = KernelLaunch(SOURCE, name, (grid, 1, 1), (BLOCK, 1, 1),
                          (Buf("x"), problem.n, Buf("out"), Buf("ws"), Buf("counters")))
    L = state_limbs(in_dtype)
    params = dict(kernel="flat", block=BLOCK, unroll=unroll, minb=minb, grid=grid, head=head, nv=nv)
    return launch, (2 * L * grid if grid > 1 else 0), (1 if grid > 1 else 0), params


def seg_shape(problem: Problem) -> tuple[int, int, int, int, int]:
    """(a, r, b, sa, sr) of the strided form exact_seg reads: element (i, j, l) at i*sa + j*sr + l."""
    if isinstance(problem, Rows):
        return problem.m, problem.k, 1, problem.ld, 1
    assert isinstance(problem, Cols)
    return problem.a, problem.r, problem.b, problem.sa, problem.sr


def seg_work(a: int, r: int, b: int, sr: int, device: DeviceSpec, minb: int, max_per_thread: int,
             name: str) -> tuple[int, int, int, int]:
    """(group G, splits, tiles, grid) of a strided kernel with G threads per output (exact_seg, kahan_seg): G lanes
    along a contiguous reduced axis (sr == 1, up to 32), else one thread per output; more lanes while the outputs
    are too few to fill the GPU; a block per output (G = BLOCK) for few long reductions; ``splits`` blocks per output
    when even that leaves resident blocks idle (never fewer than MIN_PER_THREAD elements per thread) or a thread
    would get more than ``max_per_thread`` elements."""
    outputs = a * b
    blocks_cap = device.sm_count * minb
    want = blocks_cap * BLOCK  # threads that fill the GPU
    g = min(32, next_pow2(r)) if sr == 1 else 1  # lanes along a contiguous reduced axis, else across outputs
    while outputs * g < want and g < 32 and g < r:
        g *= 2
    if outputs * g < want and r >= 32 * BLOCK:  # few long reductions: a block each
        g = BLOCK
    tiles = cdiv(outputs, BLOCK // g)
    splits = 1
    if tiles < blocks_cap:
        splits = max(1, min(cdiv(blocks_cap, tiles), r // (g * MIN_PER_THREAD)))
    splits = max(splits, cdiv(r, g * max_per_thread))
    if splits > MAX_SPLITS:
        raise ValueError(f"{name}: {r} elements per output is beyond this plan ({MAX_SPLITS} splits of "
                         f"{g * max_per_thread})")
    grid = max(1, min(tiles, 8 * blocks_cap)) if splits == 1 else tiles
    return g, splits, tiles, grid


def _plan_seg(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> tuple[KernelLaunch, int, int,
                                                                                            dict]:
    if problem.align % ITEMSIZE[in_dtype]:
        raise ValueError(f"exact: a {in_dtype} array whose first element sits at byte {problem.align} mod 16 is not "
                         f"element-aligned; copy it first")
    a, r, b, sa, sr = seg_shape(problem)
    outputs = a * b
    g, splits, tiles, grid = seg_work(a, r, b, sr, device, SEG_MINB, MAX_PER_THREAD, "exact")
    out_t, mode = _kernel_args(out_dtype, in_dtype)
    name = f"exact_seg<{IN_TAG[in_dtype]}, {out_t}, {mode}, {BLOCK}, {g}, {SEG_MINB}>"
    launch = KernelLaunch(SOURCE, name, (grid, splits, 1), (BLOCK, 1, 1),
                          (Buf("x"), a, r, b, sa, sr, Buf("out"), Buf("ws"), Buf("counters"), splits))
    L = state_limbs(in_dtype)
    params = dict(kernel="seg", block=BLOCK, group=g, splits=splits, grid=grid, tiles=tiles)
    ws = 2 * L * outputs * splits if splits > 1 else 0
    return launch, ws, (tiles if splits > 1 else 0), params


def plan_exact(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
    """The launch plan of method "exact" (module docstring). ``out_dtype`` "int64" plans the state output.

    ``params``: kernel ("flat" or "seg"), block, grid; flat: unroll, minb, head (elements before the first 16-byte
    boundary), nv (whole chunks); seg: group (threads per output), splits (blocks per output), tiles."""
    if in_dtype not in IN_TAG:
        raise UnsupportedDtype(f"method 'exact' sums {', '.join(IN_TAG)} input, not {in_dtype}")
    if isinstance(problem, Flat):
        launch, ws, counters, params = _plan_flat(problem, in_dtype, out_dtype, device)
    elif isinstance(problem, (Rows, Cols)):
        launch, ws, counters, params = _plan_seg(problem, in_dtype, out_dtype, device)
    else:
        raise TypeError(f"unknown problem {problem!r}")
    return Plan(method="exact", problem=problem, in_dtype=in_dtype, out_dtype=out_dtype, device=device,
                launches=(launch,), workspace_floats=ws, counters=counters, params=tuple(sorted(params.items())))


def finalize_kernel(in_dtype: str, out_dtype: str) -> str:
    """The name expression of exact_finalize for one dtype pair (tcreduce.exact.finalize)."""
    if out_dtype not in ("float16", "float32", "float64"):
        raise TypeError(f"exact states round to float16, float32 or float64, not {out_dtype}")
    tag = IN_TAG.get(in_dtype) or {"bfloat16": "exact_detail::InBF16"}.get(in_dtype)
    if tag is None:
        raise TypeError(f"exact states are of float16, float32 or bfloat16 input, not {in_dtype}")
    return f"exact_finalize<{tag}, {OUT_CTYPE[out_dtype]}>"


def kernel_names(in_tag: str) -> list[str]:
    """Every kernel name expression the planner can produce for one input tag (for compile tests), all outputs and
    the state; ``in_tag`` as in :data:`IN_TAG` (``exact_detail::InBF16`` too)."""
    dtype = {v: k for k, v in IN_TAG.items()}.get(in_tag, "bfloat16")
    unroll, minb = FLAT_TUNING[dtype]
    names = []
    for out_t, mode in (("__half", 0), ("float", 0), ("double", 0), ("long long", 1)):
        names.append(f"exact_flat<{in_tag}, {out_t}, {mode}, {BLOCK}, {unroll}, {minb}>")
        for g in (1, 2, 4, 8, 16, 32, BLOCK):
            names.append(f"exact_seg<{in_tag}, {out_t}, {mode}, {BLOCK}, {g}, {SEG_MINB}>")
        if mode == 0:
            names.append(f"exact_finalize<{in_tag}, {out_t}>")
    return names


register(Method(
    name="exact",
    description="exact sum rounded once to the output dtype (round to nearest even): fp16 through exact double "
                "accumulation of re-based halves, fp32 through exponent-windowed doubles and a per-thread "
                "superaccumulator; integer state, deterministic on any GPU, plan or partition",
    dtypes=tuple(IN_TAG),
    reference="fixed-point / superaccumulator exact summation (Kulisch; Collange et al. ExBLAS 2015; Neal 2015), "
              "with per-thread double runs short enough to be exact",
    planner=plan_exact,
))
