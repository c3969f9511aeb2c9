"""The library sums timed beside tcreduce, all accumulating in fp32 into an fp32 result: torch.sum, cupy.sum with
CUB on and off (float64 too for the trade-off study), and, with ``tuned=True``, a tuned Triton kernel per form
(:mod:`experiments.triton_kernels`) and ``torch.compile``'d torch.sum (``pip install -e ".[bench]"``).

Tuned competitors are checked before they are timed (a wrong competitor is worse than none): on integer-valued data
of the same shape (exactly summable in fp32 in any order) their result must equal the float64 sum bit for bit, and on
the real input it must lie within the fp32 error bound of its summation depth (:func:`check_exact`,
:func:`check_real`); a failure raises :class:`WrongResult` and the study records an error instead of a time.
Without torch or Triton the studies say what they skipped (:func:`tuned_missing`)."""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from .env import torch_cuda, torch_missing_reason

__all__ = ["cupy_accelerators", "Competitor", "competitors", "torch_stream_guard", "tuned_competitors",
           "tuned_missing", "WrongResult", "integer_data", "reduce64", "check_exact", "check_real", "TRITON_LABEL",
           "COMPILE_LABEL"]

TRITON_LABEL = "triton (tuned)"
COMPILE_LABEL = "torch.compile"
U32 = 2.0 ** -24  # unit roundoff of fp32


@contextlib.contextmanager
def cupy_accelerators(on: bool):
    """CuPy's CUB accelerator on (routines and reductions) or off, restored afterwards."""
    from cupy._core import _accelerator as acc

    saved = (acc.get_routine_accelerators(), acc.get_reduction_accelerators())
    names = ["cub"] if on else []
    acc.set_routine_accelerators(names)
    acc.set_reduction_accelerators(names)
    try:
        yield
    finally:
        acc.set_routine_accelerators([_acc_name(a) for a in saved[0]])
        acc.set_reduction_accelerators([_acc_name(a) for a in saved[1]])


def _acc_name(a: Any) -> str:
    from cupy._core import _accelerator as acc

    if isinstance(a, str):
        return a
    return {acc.ACCELERATOR_CUB: "cub", acc.ACCELERATOR_CUTENSOR: "cutensor",
            getattr(acc, "ACCELERATOR_CUTENSORNET", -99): "cutensornet"}.get(a, "cub")


@dataclass(frozen=True)
class Competitor:
    """A library sum timed beside tcreduce: ``call(x)`` on a CuPy array; ``wrap`` turns a CuPy input into what
    ``call`` takes (a zero-copy torch view for torch). ``prepare(wrapped input)`` runs once per input shape before
    timing (tuning, compilation, correctness checks; raises :class:`WrongResult`). ``lib``: the library whose CUDA
    graph capture the calls need ("cupy" or "torch")."""

    label: str
    call: Callable[[Any], Any]
    wrap: Callable[[Any], Any] = lambda x: x
    context: Callable[[], Any] = contextlib.nullcontext
    prepare: Callable[[Any], Any] = lambda x: None
    lib: str = "cupy"
    describe: Callable[[Any], str] = lambda x: ""  # after prepare: what was tuned or compiled (the CSV note)


def competitors(axis: Optional[int] = None, *, float64: bool = False, native: bool = True,
                tuned: bool = False) -> list[Competitor]:
    """torch.sum (fp32 accumulation; where torch imports and sees the GPU), cupy.sum with CUB on and off (fp32
    accumulation); with ``float64``, also both libraries accumulating in float64; with ``tuned``, the tuned Triton
    kernel and torch.compile where they are available (:func:`tuned_missing` says why not)."""
    import cupy

    out: list[Competitor] = []
    torch = torch_cuda()
    if torch is not None:
        def to_torch(x):
            return torch.from_dlpack(x)

        def t32(t):
            return torch.sum(t, dtype=torch.float32) if axis is None else torch.sum(t, dim=axis, dtype=torch.float32)

        out.append(Competitor("torch.sum", t32, to_torch, lib="torch"))
        if float64:
            def t64(t):
                return torch.sum(t, dtype=torch.float64) if axis is None else torch.sum(t, dim=axis,
                                                                                        dtype=torch.float64)

            out.append(Competitor("torch.sum fp64", t64, to_torch, lib="torch"))

    def c32(x):
        return cupy.sum(x, axis=axis, dtype=np.float32)

    out.append(Competitor("cupy.sum CUB", c32, context=lambda: cupy_accelerators(True)))
    if native:
        out.append(Competitor("cupy.sum no CUB", c32, context=lambda: cupy_accelerators(False)))
    if float64:
        def c64(x):
            return cupy.sum(x, axis=axis, dtype=np.float64)

        out.append(Competitor("cupy.sum fp64", c64, context=lambda: cupy_accelerators(True)))
    if tuned:
        out.extend(tuned_competitors(axis))
    return out


def torch_stream_guard():
    """Make torch launch on CuPy's current stream (so CuPy's events time torch's work)."""
    torch = torch_cuda()
    import cupy

    ptr = cupy.cuda.get_current_stream().ptr
    if torch is None or ptr == 0:
        return contextlib.nullcontext()
    return torch.cuda.stream(torch.cuda.ExternalStream(ptr))


def competitor_context(call: Any) -> Callable[[], Any]:
    """The context a competitor's calls run in when timed: its own (CuPy's accelerators) with torch on CuPy's
    current stream (:func:`torch_stream_guard`), as :class:`experiments.timing.Timed` takes it."""
    def context() -> Any:
        stack = contextlib.ExitStack()
        stack.enter_context(call.context())
        stack.enter_context(torch_stream_guard())
        return stack

    return context


# -------------------------------------------------------------------------------------- tuned competitors
def _triton_missing() -> str:
    if torch_cuda() is None:
        return f"torch with CUDA is needed ({torch_missing_reason()})"
    try:
        import triton  # noqa: F401
    except Exception as e:
        return f"triton does not import ({type(e).__name__}: {e})"
    return ""


def tuned_missing() -> list[str]:
    """Why each tuned competitor is not measured here (empty when all are), as notes for the study."""
    why = _triton_missing()
    if not why:
        return []
    return [f"{TRITON_LABEL} not measured: {why}", f"{COMPILE_LABEL} not measured: {why} (inductor needs Triton)"]


@functools.lru_cache(maxsize=None)
def _tuned_pair(axis: Optional[int]) -> tuple:
    """The tuned Triton sum and the compiled torch.sum over ``axis`` (cached: their tuning survives across calls)."""
    from .triton_kernels import TunedSum

    return TunedSum(axis), CompiledSum(axis)


def tuned_competitors(axis: Optional[int]) -> list[Competitor]:
    """The tuned Triton kernel and torch.compile'd torch.sum over ``axis`` (empty without torch with CUDA and
    Triton: :func:`tuned_missing`)."""
    if _triton_missing():
        return []
    torch = torch_cuda()
    triton_sum, compiled = _tuned_pair(axis)

    def to_torch(x):
        return torch.from_dlpack(x)

    return [Competitor(TRITON_LABEL, triton_sum, to_torch, prepare=triton_sum.prepare, lib="torch",
                       describe=triton_sum.describe),
            Competitor(COMPILE_LABEL, compiled, to_torch, prepare=compiled.prepare, lib="torch",
                       describe=compiled.describe)]


def inductor_autotuners() -> list:
    """Every live inductor autotuner (``CachingAutotuner``: one per generated Triton kernel); empty without inductor."""
    import gc
    import sys
    import warnings

    if "torch._inductor.runtime.triton_heuristics" not in sys.modules:
        return []
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    found = []
    with warnings.catch_warnings():  # isinstance on deprecated aliases (torch.distributed.reduce_op) warns
        warnings.simplefilter("ignore", FutureWarning)
        for obj in gc.get_objects():
            try:
                if isinstance(obj, CachingAutotuner):
                    found.append(obj)
            except ReferenceError:  # a dead weak proxy among the objects
                continue
    return found


def describe_autotuner(tuner: Any) -> str:
    """An inductor kernel and the launch configuration its autotuner kept ("name: XBLOCK: 256, R0_BLOCK: 2,
    num_warps: 4, ..."; several launchers while it has not benchmarked yet)."""
    try:
        name = getattr(tuner.fn, "__name__", None) or repr(tuner.fn)
    except AttributeError:  # a JIT function whose module is gone
        name = getattr(tuner, "kernel_name", "?")
    kept = [str(getattr(ln, "config", ln)) for ln in getattr(tuner, "launchers", None) or []]
    return f"{name}: {' | '.join(kept) if kept else 'not launched'}"


class CompiledSum:
    """``torch.compile(torch.sum(t, [dim=axis], dtype=float32), dynamic=False)``: one specialisation per shape,
    compiled and checked in :meth:`prepare`. Dynamo's recompilation limit is raised so that a sweep over many shapes
    never falls back to eager torch.sum silently."""

    def __init__(self, axis: Optional[int]):
        torch = torch_cuda()
        cfg = torch._dynamo.config
        for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                     "accumulated_recompile_limit"):
            if hasattr(cfg, name):
                setattr(cfg, name, max(getattr(cfg, name), 4096))
        self.axis = axis
        self.checked: set = set()
        self.picks: dict[tuple, str] = {}  # key -> the inductor kernels compiled for it and their kept configs
        if axis is None:
            def f(t):
                return torch.sum(t, dtype=torch.float32)
        else:
            def f(t):
                return torch.sum(t, dim=axis, dtype=torch.float32)
        self.fn = torch.compile(f, dynamic=False)

    def prepare(self, t) -> None:
        key = tensor_key(t)
        if key in self.checked:
            return
        before = {id(a) for a in inductor_autotuners()}
        check_exact(self.fn, t, self.axis, COMPILE_LABEL)  # the first call compiles and autotunes
        terms = t.numel() if self.axis is None else t.shape[self.axis]
        check_real(self.fn(t), t, self.axis, max(int(terms), 1), COMPILE_LABEL)
        self.picks[key] = "; ".join(describe_autotuner(a) for a in inductor_autotuners() if id(a) not in before)
        self.checked.add(key)

    def describe(self, t) -> str:
        """The inductor kernels compiled for ``t``'s shape and the configurations their autotuners kept ("" when
        none were new, e.g. a shape compiled before)."""
        return self.picks.get(tensor_key(t), "")

    def __call__(self, t):
        return self.fn(t)


def tensor_key(t) -> tuple:
    """What a tuned competitor's kernels depend on (shape, strides, dtype, 16-byte alignment, device): the key it
    tunes, compiles and checks once per."""
    return (tuple(t.shape), tuple(t.stride()), t.dtype, t.data_ptr() % 16, t.device.index)


# ------------------------------------------------------------------------------------------------- checks
class WrongResult(AssertionError):
    """A competitor returned a wrong sum (the message says where): it is never timed."""


REDUCE64_CHUNK = 1 << 26  # full sums: elements per float64 partial (torch converts a chunk to float64 first)


def reduce64(t, axis: Optional[int], absolute: bool = False):
    """The float64 sum of the torch tensor ``t`` (or of its absolute values) over ``axis``, torch accumulating in
    float64. Full sums go by chunks of REDUCE64_CHUNK elements, so that the float64 (and, for fp8's absolute values,
    fp32) copies torch makes stay small: 2^31 fp8 elements at once would need 16 GiB more."""
    torch = torch_cuda()

    def one(u):
        if absolute:
            u = (u if u.element_size() >= 2 else u.float()).abs()  # torch has no fp8 abs
        return torch.sum(u, dtype=torch.float64) if axis is None else torch.sum(u, dim=axis, dtype=torch.float64)

    if axis is not None or t.numel() <= REDUCE64_CHUNK:
        return one(t)
    flat = t.reshape(-1)
    return torch.stack([one(flat[i:i + REDUCE64_CHUNK]) for i in range(0, flat.numel(), REDUCE64_CHUNK)]).sum()


def integer_data(t, seed: int = 12345):
    """A torch tensor with ``t``'s shape, strides and dtype holding values in {-2, -1, 1, 2} at random: every
    partial sum of any subset in any order is an integer far below 2^24 in magnitude (random signs), so fp32 sums
    of it are exact whatever the order, and any element dropped, doubled or misplaced shows."""
    torch = torch_cuda()
    g = torch.Generator(device=t.device)
    g.manual_seed(seed)
    k = torch.randint(0, 4, tuple(t.shape), generator=g, device=t.device, dtype=torch.int8)
    k -= 2
    k += (k >= 0).to(torch.int8)  # {-2, -1, 0, 1} -> {-2, -1, 1, 2}
    y = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device=t.device)
    y.copy_(k)
    return y


def check_exact(fn: Callable[[Any], Any], t, axis: Optional[int], what: str, y=None) -> None:
    """Run ``fn`` on integer-valued data shaped like ``t`` (:func:`integer_data`, or ``y``) and require the float64
    sum bit for bit (fp32 result of the right shape). Raises :class:`WrongResult`."""
    torch = torch_cuda()
    y = integer_data(t) if y is None else y
    got = fn(y)
    want = reduce64(y, axis)
    if tuple(got.shape) != tuple(want.shape) or got.dtype != torch.float32:
        raise WrongResult(f"{what}: result of shape {tuple(got.shape)} and dtype {got.dtype}, want "
                          f"{tuple(want.shape)} float32")
    bad = got.double() != want
    if bool(bad.any()):
        g, w = got.reshape(-1).double(), want.reshape(-1)
        idx = torch.nonzero(bad.reshape(-1))[:5].flatten().tolist()
        detail = ", ".join(f"[{i}] {g[i].item()!r} != {w[i].item()!r}" for i in idx)
        raise WrongResult(f"{what} is wrong on exactly summable integer data of shape {tuple(t.shape)}: "
                          f"{int(bad.sum())} of {bad.numel()} outputs differ ({detail})")


def check_real(got, t, axis: Optional[int], depth: int, what: str) -> None:
    """``got`` (the fp32 sum of ``t`` over ``axis``) against the float64 sum within gamma(depth) * sum|t| +
    u * |sum|: fp32 summation in which no element goes through more than ``depth`` roundings, then the rounding of
    the result. Raises :class:`WrongResult` (NaN or Inf included: the inputs are finite)."""
    want = reduce64(t, axis)
    absum = reduce64(t, axis, absolute=True)
    du = depth * U32
    gamma = du / (1.0 - du) if du < 0.5 else math.inf
    bound = gamma * absum + U32 * want.abs()
    got64 = got.double().reshape(want.shape)
    excess = (got64 - want).abs() - bound
    excess = excess.nan_to_num(nan=math.inf)
    if bool((excess > 0).any()):
        i = int(excess.reshape(-1).argmax().item())
        raise WrongResult(f"{what}: output {i} is {got64.reshape(-1)[i].item()!r}, the float64 sum is "
                          f"{want.reshape(-1)[i].item()!r}, beyond the bound {bound.reshape(-1)[i].item():.3g}")
