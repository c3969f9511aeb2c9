"""The seeds' CUDA-core reduction ladder: one registered sum method per rung (kernels in ``kernels/ladder.cu``).

The seed notes (``../shared/seeds/`` 001-004) take a full sum from one global atomic per element (seed 003 v0, 1.5% of
peak on an H100 by its table) to a Hopper cluster reduce (v7, 97%), along the path of NVIDIA's cuda-samples reduce0-7.
Each rung here is one registered method whose description says what it changes relative to the previous rung;
:data:`LADDER` lists them in order (the ladder experiment plots them in that order).

All rungs compute full sums only (:class:`~tcreduce._layout.Flat` problems: ``axis=None``; the API copies a
non-contiguous view into a contiguous one first), take float32 (as in the seeds) and float16 input (converted exactly
to fp32 on load), accumulate in fp32 with round-to-nearest additions and write the result through ``tcr::from_float``.

- Multi-kernel rungs (reduce0-reduce7 style) relaunch their kernel on the per-block partials until one block remains;
  the plan lists every launch, the partials ping-pong between two regions of the workspace (``Buf("ws", offset)``).
- The two atomic rungs (``ladder_atomic``, ``ladder_atomic_per_block``) zero an fp32 accumulator in a launch of their
  own and are NOT deterministic: the order in which the atomics land is the point of those rungs.
- Every other rung is deterministic; its kernel comment pins the order of additions, and its emulator twin
  (tcreduce/emulate/ladder.py) replays it.

Every plan's params carry ``chain``: an upper bound on the number of fp32 additions on the path from any input element
to the result (the depth of the summation tree, counting additions of exact zeros), so that
``gamma(chain) * sum|x|`` (gamma_k = k u / (1 - k u), u = 2^-24) bounds the rounding error (Higham, Accuracy and
Stability of Numerical Algorithms, 2nd ed., eq. (4.3) applied to a tree whose leaves are at most ``chain`` deep).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from .._layout import Flat, Problem
from .._plan import Buf, DeviceSpec, KernelLaunch, Plan
from ..registry import Method, register

__all__ = ["LADDER", "BLOCK", "FOLD", "CLUSTER", "GRID_SYNC_MIN_BLOCKS", "CLUSTER_BLOCKS_PER_SM",
           "resident_blocks_per_sm", "fill_grid", "chain_length"]

SOURCE = "ladder.cu"
BLOCK = 256  # threads per block of every rung (reduce5 picks smaller ones for small launches)
FOLD = 2  # elements each thread folds during the load in reduce5 (seed 002's `fold`)
CLUSTER = 8  # blocks per cluster in ladder_cluster: the portable maximum (seed 003 v7 uses 16, an opt-in size)
GRID_SYNC_MIN_BLOCKS = 8  # __launch_bounds__(BLOCK, 8) of ladder_grid_sync: registers for 8 resident blocks per SM
# Blocks per SM the cluster rung's grid is sized for. Clusters are placed whole inside one GPC, so not every SM's 8
# block slots can be filled with clusters of 8: measured on an H200 (132 SMs, 10^8 floats), 1056 blocks (8 per SM)
# ran 109 us (a second, partial wave), 792 blocks (6 per SM) 97 us, the last-block rung 93 us. The exact figure is
# cudaOccupancyMaxActiveClusters, which a pure-Python plan cannot ask for.
CLUSTER_BLOCKS_PER_SM = 6

_CTYPE = {"float32": "float", "float16": "__half", "float64": "double"}
_VEC = {"float32": 4, "float16": 8}  # elements per 16-byte vector load
_BLOCK_FOLD_DEPTH = 10  # tcr::block_fold with >= 2 warps: 5 butterfly steps per warp, then 5 more in warp 0


def _ctype(dtype: str) -> str:
    try:
        return _CTYPE[dtype]
    except KeyError:
        raise ValueError(f"unsupported dtype {dtype!r} (supported: {', '.join(_CTYPE)})") from None


def resident_blocks_per_sm(device: DeviceSpec, block: int = BLOCK) -> int:
    """Blocks of ``block`` threads that fit on one SM by the thread limit (2048 threads per SM on sm_80, sm_87, sm_90;
    1536 on sm_86 and sm_89). Seed 001 sizes its grid this way: 82 SMs x 6 blocks of 256 on an RTX 3090."""
    threads = 1536 if device.cc in ((8, 6), (8, 9)) else 2048
    return max(1, threads // block)


def fill_grid(device: DeviceSpec, block: int = BLOCK) -> int:
    """Blocks that fill the GPU once (all resident at the same time): SMs x resident blocks per SM."""
    return device.sm_count * resident_blocks_per_sm(device, block)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _log2(b: int) -> int:
    return int(math.log2(b))


def _check_flat(name: str, problem: Problem) -> int:
    if not isinstance(problem, Flat):
        raise ValueError(f"ladder method {name!r} computes full sums only (a Flat problem), not {problem}; "
                         "ladder methods compute full sums: use axis=None")
    if problem.n < 1:
        raise ValueError(f"ladder method {name!r}: empty problem {problem}")
    return problem.n


# ------------------------------------------------------------------------------------------ plan builders

@dataclass(frozen=True)
class _Stage:
    """One launch of a multi-kernel rung: ``kernel(T, OutT)`` gives its name expression; it reads ``n_in`` values
    and writes ``blocks`` partials (or the result, if it is the last stage)."""

    kernel: Callable[[str, str], str]
    n_in: int
    blocks: int
    block: int
    shared_bytes: int
    chain: int


def _round4(k: int) -> int:
    return _ceil(k, 4) * 4  # keep every workspace region 16-byte aligned (vector loads in the next stage)


def _chained_plan(name: str, problem: Flat, in_dtype: str, out_dtype: str, device: DeviceSpec,
                  stages: list[_Stage], params: dict) -> Plan:
    """Launch the stages in order; stage k > 0 reads stage k-1's partials. Partials alternate between workspace
    region 0 (offset 0) and region 1 (after region 0), so no launch reads and writes the same floats."""
    assert stages and stages[-1].blocks == 1
    sizes = [_round4(stages[0].blocks) if len(stages) > 1 else 0,
             _round4(stages[1].blocks) if len(stages) > 2 else 0]
    offsets = [0, sizes[0]]
    launches = []
    for k, st in enumerate(stages):
        last = k == len(stages) - 1
        src = Buf("x") if k == 0 else Buf("ws", offsets[(k - 1) % 2])
        dst = Buf("out") if last else Buf("ws", offsets[k % 2])
        t = _ctype(in_dtype) if k == 0 else "float"
        out_t = _ctype(out_dtype) if last else "float"
        launches.append(KernelLaunch(SOURCE, st.kernel(t, out_t), (st.blocks, 1, 1), (st.block, 1, 1),
                                     (src, st.n_in, dst, Buf("ws"), Buf("counters")), st.shared_bytes))
    params = dict(params, passes=len(stages), blocks=tuple(st.blocks for st in stages),
                  chain=sum(st.chain for st in stages))
    return Plan(name, problem, in_dtype, out_dtype, device, tuple(launches), workspace_floats=sizes[0] + sizes[1],
                counters=0, params=tuple(sorted(params.items())))


def _fixed_stages(kernel: Callable[[str, str], str], n: int, per_block: int, chain: int,
                  shared: bool = True) -> list[_Stage]:
    """reduce0-reduce4: each block covers ``per_block`` consecutive values; relaunch until one block is left."""
    stages = []
    while True:
        blocks = _ceil(n, per_block)
        stages.append(_Stage(kernel, n, blocks, BLOCK, BLOCK * 4 if shared else 0, chain))
        if blocks == 1:
            return stages
        n = blocks


def _thread_chain_vec(n: int, vec: int, workers: int) -> int:
    """Longest chain of lad::thread_sum_vec: head (1) + log2(vec) inside a vector + one add per vector + tail (1)."""
    return 2 + _log2(vec) + _ceil(n, vec * workers)


# ------------------------------------------------------------------------------------------------ rungs

def _plan_atomic(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
    name = "ladder_atomic"
    n = _check_flat(name, problem)
    acc = Buf("out") if out_dtype == "float32" else Buf("ws")
    launches = [KernelLaunch(SOURCE, "ladder_zero", (1, 1, 1), (1, 1, 1), (acc,)),
                KernelLaunch(SOURCE, f"ladder_atomic<{_ctype(in_dtype)}>", (_ceil(n, BLOCK), 1, 1), (BLOCK, 1, 1),
                             (Buf("x"), n, acc, Buf("ws"), Buf("counters")))]
    if out_dtype != "float32":
        launches.append(KernelLaunch(SOURCE, f"ladder_convert<{_ctype(out_dtype)}>", (1, 1, 1), (1, 1, 1),
                                     (Buf("ws"), Buf("out"))))
    params = dict(block=BLOCK, grid=_ceil(n, BLOCK), chain=n)
    return Plan(name, problem, in_dtype, out_dtype, device, tuple(launches),
                workspace_floats=0 if out_dtype == "float32" else 1, params=tuple(sorted(params.items())))


def _smem_rung(name: str, kernel: str, first_add: bool) -> Callable[..., Plan]:
    per_block = 2 * BLOCK if first_add else BLOCK
    chain = _log2(BLOCK) + (1 if first_add else 0)

    def planner(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
        n = _check_flat(name, problem)
        stages = _fixed_stages(lambda t, o: f"{kernel}<{t}, {o}>", n, per_block, chain)
        return _chained_plan(name, problem, in_dtype, out_dtype, device, stages, dict(block=BLOCK))

    return planner


def reduce5_block(n: int) -> int:
    """reduce5's block size for a launch over n values: the smallest power of two in [64, 256] with block * FOLD >= n
    (seed 002 dispatches on the block size with a switch over template instantiations)."""
    want = _ceil(n, FOLD)
    b = 64
    while b < want and b < BLOCK:
        b *= 2
    return b


def _plan_reduce5(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
    name = "ladder_unroll_complete"
    n = _check_flat(name, problem)
    stages = []
    while True:
        b = reduce5_block(n)
        blocks = _ceil(n, b * FOLD)
        stages.append(_Stage(lambda t, o, b=b: f"ladder_reduce5<{t}, {o}, {b}, {FOLD}>", n, blocks, b, 0,
                             (FOLD - 1) + _log2(b)))
        if blocks == 1:
            break
        n = blocks
    return _chained_plan(name, problem, in_dtype, out_dtype, device, stages, dict(block=BLOCK, fold=FOLD))


def _grid_stride_rung(name: str, kernel: str, vector: bool) -> Callable[..., Plan]:
    """reduce6, reduce7, float4: one GPU-filling launch, then (if it had more than one block) one single-block launch
    of the same kernel over its partials."""

    def stage(n: int, blocks: int, elem: str) -> _Stage:
        workers = blocks * BLOCK
        if vector:
            chain = _thread_chain_vec(n, _VEC[elem], workers) + _BLOCK_FOLD_DEPTH
        else:
            per_thread = 2 * _ceil(n, 2 * workers)
            chain = per_thread + (_BLOCK_FOLD_DEPTH if kernel == "ladder_reduce7" else _log2(BLOCK))
        return _Stage(lambda t, o: f"{kernel}<{t}, {o}, {BLOCK}>", n, blocks, BLOCK, 0, chain)

    def planner(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
        n = _check_flat(name, problem)
        per_block = BLOCK * (_VEC[in_dtype] if vector else 2)
        g = min(fill_grid(device), _ceil(n, per_block))
        stages = [stage(n, g, in_dtype)]
        if g > 1:
            stages.append(stage(g, 1, "float32"))
        return _chained_plan(name, problem, in_dtype, out_dtype, device, stages, dict(block=BLOCK, grid=g))

    return planner


def _single_pass_grid(n: int, in_dtype: str, limit: int) -> int:
    return max(1, min(limit, _ceil(n, BLOCK * _VEC[in_dtype])))


def _plan_atomic_per_block(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
    name = "ladder_atomic_per_block"
    n = _check_flat(name, problem)
    g = _single_pass_grid(n, in_dtype, fill_grid(device))
    acc = Buf("out") if out_dtype == "float32" else Buf("ws")
    launches = [KernelLaunch(SOURCE, "ladder_zero", (1, 1, 1), (1, 1, 1), (acc,)),
                KernelLaunch(SOURCE, f"ladder_atomic_block<{_ctype(in_dtype)}, {BLOCK}>", (g, 1, 1), (BLOCK, 1, 1),
                             (Buf("x"), n, acc, Buf("ws"), Buf("counters")))]
    if out_dtype != "float32":
        launches.append(KernelLaunch(SOURCE, f"ladder_convert<{_ctype(out_dtype)}>", (1, 1, 1), (1, 1, 1),
                                     (Buf("ws"), Buf("out"))))
    chain = _thread_chain_vec(n, _VEC[in_dtype], g * BLOCK) + _BLOCK_FOLD_DEPTH + g
    params = dict(block=BLOCK, grid=g, chain=chain)
    return Plan(name, problem, in_dtype, out_dtype, device, tuple(launches),
                workspace_floats=0 if out_dtype == "float32" else 1, params=tuple(sorted(params.items())))


def _serial_chain(count: int) -> int:
    """tcr::combine_partials over count partials: the serial part, then block_fold."""
    return _ceil(count, BLOCK) + _BLOCK_FOLD_DEPTH


def _plan_last_block(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
    name = "ladder_last_block"
    n = _check_flat(name, problem)
    g = _single_pass_grid(n, in_dtype, fill_grid(device))
    launch = KernelLaunch(SOURCE, f"ladder_last_block<{_ctype(in_dtype)}, {_ctype(out_dtype)}, {BLOCK}>",
                          (g, 1, 1), (BLOCK, 1, 1), (Buf("x"), n, Buf("out"), Buf("ws"), Buf("counters")))
    chain = _thread_chain_vec(n, _VEC[in_dtype], g * BLOCK) + _BLOCK_FOLD_DEPTH + _serial_chain(g)
    params = dict(block=BLOCK, grid=g, chain=chain)
    return Plan(name, problem, in_dtype, out_dtype, device, (launch,), workspace_floats=_round4(g), counters=1,
                params=tuple(sorted(params.items())))


def _plan_grid_sync(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
    name = "ladder_grid_sync"
    n = _check_flat(name, problem)
    # co-resident blocks: the thread limit per SM and the register budget __launch_bounds__ reserves
    per_sm = min(resident_blocks_per_sm(device), GRID_SYNC_MIN_BLOCKS)
    g = _single_pass_grid(n, in_dtype, device.sm_count * per_sm)
    launch = KernelLaunch(SOURCE, f"ladder_grid_sync<{_ctype(in_dtype)}, {_ctype(out_dtype)}, {BLOCK}, "
                                  f"{GRID_SYNC_MIN_BLOCKS}>",
                          (g, 1, 1), (BLOCK, 1, 1), (Buf("x"), n, Buf("out"), Buf("ws"), Buf("counters")),
                          cooperative=True)
    chain = _thread_chain_vec(n, _VEC[in_dtype], g * BLOCK) + _BLOCK_FOLD_DEPTH + _serial_chain(g)
    params = dict(block=BLOCK, grid=g, chain=chain)
    return Plan(name, problem, in_dtype, out_dtype, device, (launch,), workspace_floats=_round4(g), counters=0,
                params=tuple(sorted(params.items())))


def _plan_cluster(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
    name = "ladder_cluster"
    n = _check_flat(name, problem)
    if device.cc < (9, 0):
        raise ValueError(f"method {name!r} needs thread-block clusters (compute capability 9.0 or newer); "
                         f"{device.name} is {device.cc[0]}.{device.cc[1]}")
    need = _ceil(n, BLOCK * _VEC[in_dtype])
    per_sm = min(resident_blocks_per_sm(device), CLUSTER_BLOCKS_PER_SM)
    clusters = max(1, min(device.sm_count * per_sm // CLUSTER, _ceil(need, CLUSTER)))
    g = clusters * CLUSTER
    launch = KernelLaunch(SOURCE, f"ladder_cluster<{_ctype(in_dtype)}, {_ctype(out_dtype)}, {BLOCK}, {CLUSTER}>",
                          (g, 1, 1), (BLOCK, 1, 1), (Buf("x"), n, Buf("out"), Buf("ws"), Buf("counters")))
    chain = (_thread_chain_vec(n, _VEC[in_dtype], g * BLOCK) + _BLOCK_FOLD_DEPTH + 5  # warp_fold of the cluster
             + _serial_chain(clusters))
    params = dict(block=BLOCK, grid=g, cluster=CLUSTER, clusters=clusters, chain=chain)
    return Plan(name, problem, in_dtype, out_dtype, device, (launch,), workspace_floats=_round4(clusters), counters=1,
                params=tuple(sorted(params.items())))


def chain_length(plan: Plan) -> int:
    """Upper bound on the fp32 additions between any input element and the result of a ladder plan (see the module
    docstring); for the atomic rungs it assumes the worst order of the atomics."""
    return int(dict(plan.params)["chain"])


# ------------------------------------------------------------------------------------------------ registry

_DTYPES = ("float32", "float16")

_RUNGS: list[tuple[str, str, str, Callable[..., Plan], bool, tuple[int, int]]] = [
    # (name, reference, description, planner, deterministic, requires_cc)
    ("ladder_atomic",
     "seed 003 v0 (naive: one global atomicAdd per element)",
     "Rung 0: every thread atomically adds its one element to a single fp32 accumulator (zeroed by a launch "
     "first); the n atomics serialise. Not deterministic: the order of the atomics is the point.",
     _plan_atomic, False, (8, 0)),
    ("ladder_interleaved_divergent",
     "seed 004 reduce0 / seed 003 v1 (interleaved addressing, tid % (2*s))",
     "Rung 1: one element per thread, a shared-memory tree per block with interleaved addressing "
     "(tid % (2*s) == 0: divergent warps), relaunched on the block partials until one block is left. Replaces "
     "rung 0's atomics with a tree.",
     _smem_rung("ladder_interleaved_divergent", "ladder_reduce0", False), True, (8, 0)),
    ("ladder_interleaved",
     "seed 004 reduce1 (interleaved addressing, strided index, bank conflicts)",
     "Rung 2: as rung 1, but thread t works on index 2*s*t, so active threads are contiguous (no divergence) "
     "while shared-memory accesses are strided (bank conflicts). Same additions as rung 1.",
     _smem_rung("ladder_interleaved", "ladder_reduce1", False), True, (8, 0)),
    ("ladder_sequential",
     "seed 004 reduce2 / seed 002 V2 / seed 003 v2 (sequential addressing)",
     "Rung 3: sequential addressing: thread t adds element t + s for s = B/2, ..., 1 (conflict-free, contiguous "
     "active threads). Changes the tree's shape from interleaved to halving.",
     _smem_rung("ladder_sequential", "ladder_reduce2", False), True, (8, 0)),
    ("ladder_first_add",
     "seed 004 reduce3 / seed 002 V3 / seed 003 v3 (first add during load)",
     "Rung 4: each thread loads two elements a block apart and adds them before the tree, so half as many blocks "
     "and no thread idles in the first step.",
     _smem_rung("ladder_first_add", "ladder_reduce3", True), True, (8, 0)),
    ("ladder_unroll_last_warp",
     "seed 004 reduce4 / seed 002 V4 (unrolled last warp)",
     "Rung 5: as rung 4, but the last six tree steps (one warp) are unrolled without __syncthreads (read, "
     "__syncwarp, write: the Volta-safe form of the seeds' volatile warpReduce). Same additions as rung 4.",
     _smem_rung("ladder_unroll_last_warp", "ladder_reduce4", True), True, (8, 0)),
    ("ladder_unroll_complete",
     "seed 004 reduce5 / seed 002 V5 (block size as a template parameter; seed 002's templated kernel and fold)",
     "Rung 6: the block size becomes a template parameter chosen per launch (64-256), so the whole tree is "
     "unrolled at compile time; each thread folds FOLD=2 elements on load (seed 002's fold).",
     _plan_reduce5, True, (8, 0)),
    ("ladder_multi_element",
     "seed 004 reduce6 / seed 001 reduce_sum_opt (grid-stride loop; grid = SMs x resident blocks per SM)",
     "Rung 7: a grid-stride loop sized to fill the GPU once (SMs x resident blocks, seed 001's reasoning): each "
     "thread adds many elements before the unrolled tree; a second one-block launch sums the block partials.",
     _grid_stride_rung("ladder_multi_element", "ladder_reduce6", vector=False), True, (8, 0)),
    ("ladder_warp_shuffle",
     "seed 004 reduce7 / seed 001 reduce_sum_shuffle and cg::reduce (warp shuffle)",
     "Rung 8: as rung 7, but the block reduces in registers with warp shuffles (tcr::block_fold, one "
     "__syncthreads) instead of the shared-memory tree.",
     _grid_stride_rung("ladder_warp_shuffle", "ladder_reduce7", vector=False), True, (8, 0)),
    ("ladder_float4",
     "seed 003 v4-v5 (float4 loads + warp shuffle) / seed 001 reduce_max_x4",
     "Rung 9: as rung 8, but the grid-stride loop loads 16-byte vectors (float4, or 8 halves) with a scalar head "
     "and tail for unaligned starts.",
     _grid_stride_rung("ladder_float4", "ladder_float4", vector=True), True, (8, 0)),
    ("ladder_atomic_per_block",
     "seed 003 v6 / seed 001 reduce_max_atomic (single pass, one atomicAdd per block)",
     "Rung 10: rung 9's first launch only; each block atomically adds its sum to an fp32 accumulator (zeroed "
     "first) instead of a second kernel. Not deterministic: the order of the block atomics is the point.",
     _plan_atomic_per_block, False, (8, 0)),
    ("ladder_last_block",
     "cuda-samples threadFenceReduction (single pass by the last block; seed 003 v6 made deterministic)",
     "Rung 11: as rung 10, but blocks write partials, fence and take a ticket; the last block to arrive sums "
     "the partials in a fixed order (tcr::arrive_last). Single pass and deterministic.",
     _plan_last_block, True, (8, 0)),
    ("ladder_grid_sync",
     "cuda-samples reductionMultiBlockCG / seed 001 cooperative groups (grid.sync())",
     "Rung 12: as rung 11, but a cooperative launch of co-resident blocks and cg::this_grid().sync() replace "
     "the fence-and-ticket; block 0 sums the partials in the same fixed order.",
     _plan_grid_sync, True, (8, 0)),
    ("ladder_cluster",
     "seed 003 v7 (Hopper cluster reduce over distributed shared memory)",
     "Rung 13 (sm_90+): blocks form clusters of 8; rank 0 of each cluster folds its blocks' sums through "
     "distributed shared memory, then the last cluster sums the cluster partials in a fixed order (deterministic "
     "finish instead of seed 003's one atomic per cluster).",
     _plan_cluster, True, (9, 0)),
]

#: The rung names in ladder order (the ladder experiment and its figure use this order).
LADDER: tuple[str, ...] = tuple(r[0] for r in _RUNGS)

for _name, _ref, _desc, _planner, _det, _cc in _RUNGS:
    register(Method(name=_name, description=_desc, dtypes=_DTYPES, reference=_ref, planner=_planner,
                    deterministic=_det, requires_cc=_cc, kind="sum"))
