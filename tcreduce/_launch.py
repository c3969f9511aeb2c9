"""Run a :class:`~tcreduce._plan.Plan` on the GPU: resolve its symbolic arguments and launch its kernels in order on
CuPy's current stream, without synchronising the host.

Per-call cost: a :class:`Launcher` looks its kernels up once; :meth:`Launcher.bind` turns every argument that does not
change between calls (the workspace and counter addresses, the integers) into CuPy kernel-argument objects once, so
that a call builds only the input and output addresses (:class:`BoundLaunch`). ``tcreduce.sum`` binds each launcher
once per stream, to that stream's workspace and counters; a :func:`tcreduce.reducer` binds its own.

Small calls replay CUDA graphs (:class:`BoundLaunch`): a plan that reads at most ``GRAPH_MAX_BYTES`` is host-bound
(CuPy's kernel launch costs more host time than the GPU spends on the kernel), so when a call repeats the input and
output addresses of a recent call on the same stream, its launches are captured once into a CUDA graph (on a private
capture stream) and that graph is replayed from then on: one ``cudaGraphLaunch`` instead of a CuPy launch per kernel,
the same kernels with the same arguments, so the same bits. At most ``GRAPH_CACHE`` graphs per bound plan (the oldest
is dropped); a bound plan that keeps dropping them (``GRAPH_DROPS_MAX``), or whose capture fails, launches directly
from then on. A stream that is itself capturing (the caller's CUDA graph) always gets the kernels, never a graph
launch (which CUDA refuses there), so capturing tcreduce calls keeps working as before.

Workspace and counters (``workspace_for``, ``counters_for``): one pool per (device, stream), allocated on first use
and grown when a plan needs more. A pool that grows is replaced, never freed: launches bound to the old buffer (and
CUDA graphs that captured them) keep valid memory. Allocating a pool while the stream captures a CUDA graph would
bake a fresh allocation into the graph: that raises :class:`CaptureError` instead (warm up outside the capture).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ._compile import get_function
from ._plan import Buf, Plan, TensorMapOfX

__all__ = ["run_plan", "counters_for", "workspace_for", "Launcher", "BoundLaunch", "launcher_for", "kernel_arg",
           "CaptureError", "is_capturing", "GRAPH_MAX_BYTES"]

try:  # an 8-byte kernel argument CuPy passes through as is (no conversion per launch)
    from cupy.cuda.function import CIntptr as kernel_arg
except ImportError:  # pragma: no cover - older CuPy: numpy scalars, converted by CuPy at every launch
    kernel_arg = np.int64

_COUNTERS: dict[tuple[int, int], Any] = {}
_WORKSPACES: dict[tuple[int, int], Any] = {}
_RETIRED: list = []  # pools replaced by larger ones: kept alive for launches and graphs bound to them

# graph replay of small calls (module docstring): plans reading at most this many input bytes (0: never); graphs kept
# per bound plan; graphs dropped before a bound plan stops capturing; addresses remembered per bound plan.
# call_overhead at 77af3df (H100, fp16 full sums, back to back): the kernels launched through CuPy cost 10.4 us of host
# time per handle call up to 2^23 elements (16 MiB), where one graph launch keeps the GPU busy for 7.2 us
GRAPH_MAX_BYTES = 1 << 24
GRAPH_CACHE = 8
GRAPH_DROPS_MAX = 64
GRAPH_SEEN_MAX = 64
_CAPTURE_STREAMS: dict[int, Any] = {}  # device id -> the private stream graphs are captured on
_CAPTURE_LOCK = threading.Lock()


class CaptureError(RuntimeError):
    """Something tcreduce would have to allocate or free is needed while the stream is capturing a CUDA graph."""


def is_capturing(stream_ptr: int) -> bool:
    """Whether the stream (a raw handle) is capturing a CUDA graph (False for the legacy default stream, 0 or 1,
    which cannot capture)."""
    global _stream_is_capturing
    if stream_ptr in (0, 1):
        return False
    query = _stream_is_capturing
    if query is None:
        import cupy

        query = _stream_is_capturing = cupy.cuda.runtime.streamIsCapturing
    try:
        return bool(query(stream_ptr))
    except Exception:  # an illegal query counts as capturing: the caller then refuses to allocate
        return True


_stream_is_capturing: Any = None  # cupy.cuda.runtime.streamIsCapturing, looked up on first use


def _pool(pools: dict, device_id: int, stream_ptr: int, size: int, what: str, make):
    key = (device_id, stream_ptr)
    buf = pools.get(key)
    if buf is None or buf.size < size:
        if is_capturing(stream_ptr):
            raise CaptureError(
                f"tcreduce needs {size} {what} on this stream and allocates them on first use; the stream is "
                "capturing a CUDA graph, where that would be unsafe. Call tcreduce.sum once with the same shapes "
                "on this stream before the capture (a warm-up), or capture a tcreduce.reducer built beforehand.")
        if buf is not None:
            _RETIRED.append(buf)
            size = max(size, 2 * buf.size)
        buf = pools[key] = make(size)
    return buf


COUNTERS_MIN = 1 << 16  # the smallest counters pool: 256 KiB, room for the flagged slots of any resident grid


def counters_for(device_id: int, stream_ptr: int, count: int):
    """Zeroed uint32 counters for single-pass kernels, one pool per (device, stream). Kernels reset every counter
    they use before they exit (and zero the flagged slots of a full sum's combination, kernels/common.cuh
    combine_grid_values, once read), so the pool stays zero between launches; launches on one stream never
    overlap."""
    import cupy

    return _pool(_COUNTERS, device_id, stream_ptr, count, "counters",
                 lambda n: cupy.zeros(max(n, COUNTERS_MIN), dtype=np.uint32))


def workspace_for(device_id: int, stream_ptr: int, floats: int):
    """fp32 scratch for the partials of multi-block plans, one buffer per (device, stream), grown on demand.
    Reuse is safe: launches on one stream run in order, and each plan finishes with its workspace before the next
    call's kernels start."""
    import cupy

    return _pool(_WORKSPACES, device_id, stream_ptr, floats, "workspace floats",
                 lambda n: cupy.empty(max(n, 1 << 16), dtype=np.float32))


def capture_stream(device_id: int):
    """The private non-blocking stream of ``device_id`` that :class:`BoundLaunch` captures its graphs on."""
    st = _CAPTURE_STREAMS.get(device_id)
    if st is None:
        import cupy

        with cupy.cuda.Device(device_id):
            st = _CAPTURE_STREAMS[device_id] = cupy.cuda.Stream(non_blocking=True)
    return st


def graph_launch(graph: Any, stream_ptr: int) -> None:
    """Launch a captured CuPy graph on a raw stream handle (``cudaGraphLaunch``)."""
    global _graph_launch
    if _graph_launch is None:
        import cupy

        _graph_launch = cupy.cuda.runtime.graphLaunch
    _graph_launch(graph.graphExec, stream_ptr)


_graph_launch: Any = None  # cupy.cuda.runtime.graphLaunch, looked up on first use


MAX_DYNAMIC_SHARED_SIZE_BYTES = 8  # CUfunction_attribute CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14  # CUfunction_attribute CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED


def allow_shared(fn: Any, nbytes: int) -> None:
    """Let ``fn`` (a CuPy ``Function``) launch with ``nbytes`` of dynamic shared memory: a block whose static and
    dynamic shared memory exceed 48 KiB must opt in (cuFuncSetAttribute). The limit is only ever raised, since plans
    that share a kernel may launch it with different amounts."""
    from cupy_backends.cuda.api import driver

    if driver.funcGetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, fn.ptr) < nbytes:
        driver.funcSetAttribute(fn.ptr, MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)


class _TensorMapArg:
    """A CUtensorMap's 128 bytes in host memory and the CuPy kernel argument that passes them by value (kept together:
    the argument points into the array)."""

    __slots__ = ("bytes", "arg")

    def __init__(self, opaque: Any):
        from cupy.cuda.function import CPointer

        self.bytes = np.array(opaque, dtype=np.uint64)
        self.arg = CPointer(self.bytes.ctypes.data)


def allow_cluster(fn: Any, blocks: int) -> None:
    """Let ``fn`` (a CuPy ``Function`` whose kernel declares clusters of ``blocks`` blocks) launch: clusters of more
    than 8 blocks (the portable maximum; 16 on Hopper) need the non-portable size allowed (cuFuncSetAttribute)."""
    from cupy_backends.cuda.api import driver

    if blocks > 8:
        driver.funcSetAttribute(fn.ptr, NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)


def tensor_map_arg(spec: TensorMapOfX, x_ptr: int) -> Any:
    """The kernel argument of ``spec`` for the input at ``x_ptr``: a CUtensorMap encoded by cuTensorMapEncodeTiled
    (tiled, no interleave or swizzle, L2 promotion of 256 bytes, elements outside the array read as zero); its owner
    must outlive the launch."""
    from cuda.bindings import driver as drv

    if spec.dtype != "float32":
        raise ValueError(f"no tensor maps of {spec.dtype} here")
    rank = len(spec.dims)
    err, tmap = drv.cuTensorMapEncodeTiled(
        drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32, rank, x_ptr,
        [drv.cuuint64_t(d) for d in spec.dims], [drv.cuuint64_t(st) for st in spec.strides],
        [drv.cuuint32_t(bx) for bx in spec.box], [drv.cuuint32_t(1)] * rank,
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != drv.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed ({err}) for {spec} at 0x{x_ptr:x}")
    return _TensorMapArg(tmap.opaque)


def plan_bytes(plan: Plan) -> int:
    """Bytes of input a plan reads (its outputs times the length of each, times the input's element size)."""
    from .formats import get_format

    return plan.problem.outputs * plan.problem.length * get_format(plan.in_dtype).itemsize


class BoundLaunch:
    """A plan's launches with every argument but the input and output addresses converted once (the workspace and
    counters resolved): ``self(x_ptr, out_ptr, stream)`` launches them in order on ``stream``, replaying a captured
    CUDA graph for small plans whose addresses repeat (module docstring); :meth:`launch` always launches the
    kernels."""

    __slots__ = ("steps", "workspace_ptr", "counters_ptr", "device_id", "graphs", "_seen", "_drops", "_maps",
                 "_single")

    def __init__(self, launcher: "Launcher", workspace_ptr: int, counters_ptr: int):
        self.workspace_ptr = workspace_ptr
        self.counters_ptr = counters_ptr
        self.device_id = launcher.device_id
        steps = []
        for fn, grid, block, shared, coop, template in launcher.steps:
            raw: list[int] = []  # every argument as an integer (0 where it changes per call)
            xs, outs, maps = [], [], []
            for i, a in enumerate(template):
                if isinstance(a, TensorMapOfX):  # encoded per input address (launch)
                    maps.append((i, a))
                    raw.append(0)
                elif isinstance(a, tuple):
                    name, byte_offset = a
                    if name == "x":
                        xs.append(i)
                        raw.append(0)
                    elif name == "out":
                        outs.append(i)
                        raw.append(0)
                    else:
                        raw.append((workspace_ptr if name == "ws" else counters_ptr) + byte_offset)
                else:
                    raw.append(int(a))
            per_call = {*xs, *outs, *(i for i, _ in maps)}
            const = tuple(None if i in per_call else kernel_arg(v) for i, v in enumerate(raw))
            steps.append((fn, grid, block, shared, coop, const, tuple(xs), tuple(outs), tuple(maps)))
        self.steps = tuple(steps)
        # one kernel taking the input and the output once each, no tensor maps (most small plans): launch's short path
        self._single = None
        if len(steps) == 1 and len(steps[0][6]) == len(steps[0][7]) == 1 and not steps[0][8]:
            fn, grid, block, shared, coop, const, xs, outs, _ = steps[0]
            self._single = (fn, grid, block, shared, coop, const, xs[0], outs[0])
        self._maps: tuple = (None, None)  # (x_ptr, its tensor-map arguments per step) of the last launch
        small = plan_bytes(launcher.plan) <= GRAPH_MAX_BYTES
        # graphs: (x_ptr, out_ptr, stream_ptr) -> captured graph, oldest first; None: always launch the kernels
        self.graphs: dict | None = {} if small and steps and not any(st[4] for st in steps) else None
        self._seen: dict = {}
        self._drops = 0

    def __call__(self, x_ptr: int, out_ptr: int, stream) -> None:
        graphs = self.graphs
        if graphs is not None:
            sp = stream.ptr
            key = (x_ptr, out_ptr, sp)
            g = graphs.get(key)
            if g is None and key in self._seen:
                g = self._capture(key, x_ptr, out_ptr)
            if g is not None:
                if sp < 2 or not is_capturing(sp):
                    graph_launch(g, sp)
                    return
            elif len(self._seen) < GRAPH_SEEN_MAX:
                self._seen[key] = None
            else:
                self._seen = {key: None}
        self.launch(x_ptr, out_ptr, stream)

    def launch(self, x_ptr: int, out_ptr: int, stream) -> None:
        """Launch the kernels in order on ``stream`` (no graph)."""
        single = self._single
        if single is not None:
            fn, grid, block, shared, coop, const, xi, oi = single
            args = list(const)
            args[xi] = kernel_arg(x_ptr)
            args[oi] = kernel_arg(out_ptr)
            fn(grid, block, args, shared, stream, coop)
            return
        xa = kernel_arg(x_ptr)
        oa = kernel_arg(out_ptr)
        for k, (fn, grid, block, shared, coop, const, xs, outs, maps) in enumerate(self.steps):
            args = list(const)
            for i in xs:
                args[i] = xa
            for i in outs:
                args[i] = oa
            if maps:
                owners = self._map_args(x_ptr)[k]
                for (i, _), owner in zip(maps, owners):
                    args[i] = owner.arg
            fn(grid, block, args, shared, stream, coop)

    def _map_args(self, x_ptr: int) -> list:
        """Per step, the tensor-map arguments for the input at ``x_ptr`` (encoded once per input address: the last
        one is kept, with the host bytes the arguments point to, which CUDA copies at each launch)."""
        last_ptr, owners = self._maps
        if last_ptr != x_ptr:
            owners = [[tensor_map_arg(spec, x_ptr) for _, spec in st[8]] for st in self.steps]
            self._maps = (x_ptr, owners)
        return owners

    def _capture(self, key: tuple, x_ptr: int, out_ptr: int) -> Any:
        """Capture this call's launches into a graph kept under ``key``; None while the caller's stream is itself
        capturing, or when capturing fails (then graphs are off for this bound plan)."""
        graphs = self.graphs
        if key[2] >= 2 and is_capturing(key[2]):
            return None
        side = capture_stream(self.device_id)
        try:
            with _CAPTURE_LOCK:
                side.begin_capture()
                try:
                    self.launch(x_ptr, out_ptr, side)
                finally:
                    g = side.end_capture()
        except Exception:  # the direct launch that follows reports any real error
            self.graphs = None
            return None
        if len(graphs) >= GRAPH_CACHE:
            del graphs[next(iter(graphs))]
            self._drops += 1
            if self._drops > GRAPH_DROPS_MAX:  # addresses that never settle: capturing costs more than it saves
                self.graphs = None
        graphs[key] = g
        return g


class Launcher:
    """A plan bound to one device: kernels compiled and looked up once, arguments pre-converted per stream (see the
    module docstring), so that a call costs a few microseconds of Python."""

    def __init__(self, plan: Plan, device_id: int):
        self.plan = plan
        self.device_id = device_id
        self.steps = []
        self._bound: dict[int, BoundLaunch] = {}
        for ln in plan.launches:
            template: list = []
            for a in ln.args:
                if isinstance(a, TensorMapOfX):
                    template.append(a)
                elif isinstance(a, Buf):
                    if a.name not in ("x", "out", "ws", "counters"):
                        raise ValueError(f"unknown buffer {a.name!r} in {ln.kernel}")
                    if a.offset and a.name not in ("ws", "counters"):
                        raise ValueError(f"offsets are only supported into ws and counters, not {a.name}")
                    template.append((a.name, 4 * a.offset))
                else:
                    template.append(int(a))
            fn = get_function(ln.source, ln.kernel, device_id, plan.device.arch)
            if ln.shared_bytes:
                allow_shared(fn, ln.shared_bytes)
            if ln.cluster:
                allow_cluster(fn, ln.cluster)
            self.steps.append((fn, ln.grid, ln.block, ln.shared_bytes, ln.cooperative, tuple(template)))

    def bind(self, workspace_ptr: int, counters_ptr: int) -> BoundLaunch:
        """The launches with this workspace and these counters (which the caller keeps alive)."""
        return BoundLaunch(self, workspace_ptr, counters_ptr)

    def bound_for(self, stream_ptr: int) -> BoundLaunch:
        """The launches bound to the workspace and counter pools of ``stream_ptr`` (bound once per stream)."""
        b = self._bound.get(stream_ptr)
        if b is None:
            plan = self.plan
            ws = workspace_for(self.device_id, stream_ptr, plan.workspace_floats).data.ptr \
                if plan.workspace_floats else 0
            ctr = counters_for(self.device_id, stream_ptr, plan.counters).data.ptr if plan.counters else 0
            b = self._bound[stream_ptr] = self.bind(ws, ctr)
        return b

    def __call__(self, x_ptr: int, out_ptr: int, stream) -> None:
        b = self._bound.get(stream.ptr)
        if b is None:
            b = self.bound_for(stream.ptr)
        b(x_ptr, out_ptr, stream)


_LAUNCHERS: dict[tuple[Plan, int], Launcher] = {}


def launcher_for(plan: Plan, device_id: int) -> Launcher:
    key = (plan, device_id)
    ln = _LAUNCHERS.get(key)
    if ln is None:
        ln = _LAUNCHERS[key] = Launcher(plan, device_id)
    return ln


def run_plan(plan: Plan, x_ptr: int, out_ptr: int, device_id: int) -> None:
    """Launch ``plan`` reading the problem whose base element is at device address ``x_ptr`` and writing the
    contiguous output (``plan.out_dtype``) at ``out_ptr``, on CuPy's current stream. The caller keeps both buffers
    alive until the stream has used them."""
    import cupy

    launcher_for(plan, device_id)(x_ptr, out_ptr, cupy.cuda.get_current_stream())
