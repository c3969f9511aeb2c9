"""Methods "kahan" (compensated summation on CUDA cores, fp16 and fp32 input) and "tensorcore_kahan" (fp16: tensor-core
partial sums flushed into compensated fp32 accumulators). Kernels: ``kernels/kahan.cu`` (``kahan_flat``,
``tc_kahan_flat``), whose comments pin the order of every operation; emulator twin: ``tcreduce/emulate/kahan.py``.

One launch per call. Full sums (:class:`~tcreduce._layout.Flat`): a grid-stride kernel whose last block combines
the block pairs; ``kahan`` keeps shuffle_flat's order of elements and tuning (``tcreduce/plans/shuffle.py``: 16-byte
loads, unroll and blocks per SM per dtype); ``tensorcore_kahan`` keeps tc_flat's loads, mmas and grid
(``tcreduce/plans/tensorcore.py``). Other axes (Rows, Cols), ``kahan`` only: ``kahan_seg``, a group of G threads per
output walking the reduced axis one element at a time, with exact_seg's work split (``plans/exact.py`` seg_work).
``tensorcore_kahan`` takes full sums only (ValueError otherwise: use axis=None).
"""

from __future__ import annotations

from typing import Any

from .._layout import Cols, Flat, Problem, Rows
from .._plan import Buf, DeviceSpec, KernelLaunch, Plan, param_dict
from ..registry import Method, UnsupportedDtype, register
from . import shuffle as _shuffle
from . import tensorcore as _tc
from ._common import ceil_log2, cdiv, ctype, full_grid
from .exact import seg_shape, seg_work

__all__ = ["plan_kahan", "plan_tensorcore_kahan", "chain_lengths", "SOURCE", "kernel_names"]

SOURCE = "kahan.cu"
BLOCK = 256
FLAT_TUNING = dict(_shuffle.FLAT_TUNING)  # (unroll, blocks per SM) per input dtype, as shuffle_flat
TC_UNROLL, TC_MINB = _tc.FLAT_UNROLL, _tc.BLOCKS_PER_SM
ITEMSIZE = {"float16": 2, "float32": 4}
SEG_MINB = 4  # kahan_seg: __launch_bounds__(BLOCK, 4)
MAX_PER_THREAD = 1 << 30  # kahan_seg: no integer headroom to keep; the bound's analysis wants n u small anyway


def _check(name: str, problem: Problem, in_dtype: str, out_dtype: str, dtypes: tuple[str, ...],
           flat_only: bool = True) -> Problem:
    if in_dtype not in dtypes:
        raise UnsupportedDtype(f"method {name!r} sums {', '.join(dtypes)} input, not {in_dtype}")
    if out_dtype not in ("float16", "float32", "float64"):
        raise TypeError(f"method {name!r} writes float16, float32 or float64 results, not {out_dtype}")
    if flat_only and not isinstance(problem, Flat):
        raise ValueError(f"method {name!r} computes full sums only (a Flat problem), not {problem}; "
                         "use axis=None")
    if problem.align % ITEMSIZE[in_dtype]:
        raise ValueError(f"{name}: a {in_dtype} array whose first element sits at byte {problem.align} mod 16 is "
                         f"not element-aligned; copy it first")
    return problem


def plan_kahan(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
    """Plan of ``kahan_flat`` (Flat) or ``kahan_seg`` (Rows, Cols). ``params``: kernel, block, grid; flat: unroll,
    minb, vec (elements per chunk), head, nv (whole chunks), tail; seg: group (threads per output), splits, tiles."""
    prob = _check("kahan", problem, in_dtype, out_dtype, ("float16", "float32"), flat_only=False)
    if isinstance(prob, (Rows, Cols)):
        return _plan_seg(prob, in_dtype, out_dtype, device)
    unroll, minb = FLAT_TUNING[in_dtype]
    vec = 16 // ITEMSIZE[in_dtype]
    head = min(prob.n, ((16 - prob.align) % 16) // ITEMSIZE[in_dtype])
    nv = (prob.n - head) // vec
    grid = max(1, min(device.sm_count * minb, cdiv(nv, BLOCK * unroll)))
    name = f"kahan_flat<{ctype(in_dtype)}, {ctype(out_dtype)}, {BLOCK}, {unroll}, {minb}>"
    launch = KernelLaunch(SOURCE, name, (grid, 1, 1), (BLOCK, 1, 1),
                          (Buf("x"), prob.n, Buf("out"), Buf("ws"), Buf("counters")))
    params = dict(kernel="kahan_flat", block=BLOCK, unroll=unroll, minb=minb, grid=grid, vec=vec, head=head, nv=nv,
                  tail=prob.n - head - nv * vec)
    return Plan(method="kahan", problem=prob, in_dtype=in_dtype, out_dtype=out_dtype, device=device,
                launches=(launch,), workspace_floats=3 * grid if grid > 1 else 0, counters=1 if grid > 1 else 0,
                params=tuple(sorted(params.items())))


def _plan_seg(prob: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
    a, r, b, sa, sr = seg_shape(prob)
    g, splits, tiles, grid = seg_work(a, r, b, sr, device, SEG_MINB, MAX_PER_THREAD, "kahan")
    name = f"kahan_seg<{ctype(in_dtype)}, {ctype(out_dtype)}, {BLOCK}, {g}, {SEG_MINB}>"
    launch = KernelLaunch(SOURCE, name, (grid, splits, 1), (BLOCK, 1, 1),
                          (Buf("x"), a, r, b, sa, sr, Buf("out"), Buf("ws"), Buf("counters"), splits))
    params = dict(kernel="kahan_seg", block=BLOCK, group=g, splits=splits, tiles=tiles, grid=grid)
    return Plan(method="kahan", problem=prob, in_dtype=in_dtype, out_dtype=out_dtype, device=device,
                launches=(launch,), workspace_floats=3 * a * b * splits if splits > 1 else 0,
                counters=tiles if splits > 1 else 0, params=tuple(sorted(params.items())))


def plan_tensorcore_kahan(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
    """Plan of ``tc_kahan_flat`` (tc_flat's grid). ``params``: block, unroll, grid, head, nvec."""
    prob = _check("tensorcore_kahan", problem, in_dtype, out_dtype, ("float16",))
    head = min(((16 - prob.align) % 16) // 2, prob.n)
    nvec = (prob.n - head) // 8
    grid = full_grid(nvec, BLOCK * TC_UNROLL, device, TC_MINB)
    name = f"tc_kahan_flat<{BLOCK}, {TC_UNROLL}, {ctype(out_dtype)}, {TC_MINB}>"
    launch = KernelLaunch(SOURCE, name, (grid, 1, 1), (BLOCK, 1, 1),
                          (Buf("x"), prob.n, Buf("out"), Buf("ws"), Buf("counters")))
    params = dict(kernel="tc_kahan_flat", block=BLOCK, unroll=TC_UNROLL, grid=grid, head=head, nvec=nvec)
    return Plan(method="tensorcore_kahan", problem=prob, in_dtype=in_dtype, out_dtype=out_dtype, device=device,
                launches=(launch,), workspace_floats=3 * grid if grid > 1 else 0, counters=1 if grid > 1 else 0,
                params=tuple(sorted(params.items())))


def chain_lengths(plan: Plan) -> dict[str, Any]:
    """What the error bound of a Kahan plan needs (tcreduce/bounds.py): ``n``, the longest per-thread Kahan chain
    (elements, or mmas for tensorcore_kahan), and ``levels``, the longest chain of pair additions a thread's pair
    goes through to the output (the warp butterfly, the block combination, the serial partials and their folds)."""
    p = param_dict(plan)
    threads = p["grid"] * p["block"]
    warps_per_block = p["block"] // 32
    block_levels = 5 + (warps_per_block - 1).bit_length()  # warp butterfly, then warp 0 over the warps' pairs
    if p["kernel"] == "kahan_seg":
        a, r, b, sa, sr = seg_shape(plan.problem)
        g, splits = p["group"], p["splits"]
        n = cdiv(cdiv(r, splits), g)
        levels = (block_levels if g == p["block"] else ceil_log2(g)) + (splits if splits > 1 else 0)
        return dict(n=n, levels=levels, mma=False)
    if p["kernel"] == "kahan_flat":
        n = p["head"] + p["tail"] + p["vec"] * cdiv(p["nv"], threads)
        levels = block_levels
    else:
        n = cdiv(p["nvec"], threads * p["unroll"]) * p["unroll"] + 1
        levels = 1 + 3 + (warps_per_block - 1).bit_length()  # lo + hi, butterfly over 8 row groups, the warps
    if p["grid"] > 1:
        levels += cdiv(p["grid"], p["block"]) + block_levels
    return dict(n=n, levels=levels, mma=p["kernel"] == "tc_kahan_flat")


def kernel_names(in_dtype: str, out_dtype: str) -> list[str]:
    unroll, minb = FLAT_TUNING[in_dtype]
    names = [f"kahan_flat<{ctype(in_dtype)}, {ctype(out_dtype)}, {BLOCK}, {unroll}, {minb}>"]
    names += [f"kahan_seg<{ctype(in_dtype)}, {ctype(out_dtype)}, {BLOCK}, {g}, {SEG_MINB}>"
              for g in (1, 2, 4, 8, 16, 32, BLOCK)]
    if in_dtype == "float16":
        names.append(f"tc_kahan_flat<{BLOCK}, {TC_UNROLL}, {ctype(out_dtype)}, {TC_MINB}>")
    return names


register(Method(
    name="kahan",
    description="Kahan compensated summation per thread on CUDA cores (fp32 pairs), shuffle_flat's order and loads; "
                "pairs combined by double-word additions (TwoSum); full sums and every axis",
    dtypes=("float16", "float32"),
    reference="Kahan, CACM 1965; Higham 2002 sec. 4.3 (compensated summation); Dekker 1971 / Joldes, Muller and "
              "Popescu 2017 (double-word addition)",
    planner=plan_kahan,
))

register(Method(
    name="tensorcore_kahan",
    description="mma.sync m16n8k16 row sums against ones (tc_flat's loads, chain 1) flushed into Kahan-compensated "
                "fp32 accumulators; pairs combined by double-word additions; full sums",
    dtypes=("float16",),
    reference="Dakkak et al., ICS 2019 (sum = product with ones) with Kahan's compensated accumulation",
    planner=plan_tensorcore_kahan,
))
