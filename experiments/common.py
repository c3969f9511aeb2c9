"""Shared machinery of the experiments: environment and metadata, CSV files, a progress bar, GPU timing, the
measured bandwidth ceiling, the competitors, exact sums on the GPU, and the inputs of every study.

Conventions (every study follows them):

- Each study writes ``<study>.csv`` (raw measurements), ``<study>.json`` (metadata), and its figures as ``.png`` and
  ``.pdf`` into the output folder. The CSV opens with ``# key: value`` comment lines (device, commit, date, command,
  and study scalars such as the ceiling), then a normal header row: ``pandas.read_csv(path, comment="#")`` or
  :func:`read_csv` reads it. The figures are drawn from the CSV alone (:mod:`experiments.plotting`).
- Timing (:func:`time_gpu`): CUDA events on CuPy's current stream; warm-up calls first; then many samples, each a
  batch of back-to-back calls bracketed by two events (batches of up to 64 calls while one call takes under 0.2 ms,
  so launch gaps overlap with the previous call's work); the median sample over the batch size is the time of one
  call. Small inputs rotate among several buffers (:func:`rotating_views`) so that the bytes touched between two
  reads of one buffer exceed the L2 cache (60 MiB on H200, 50 MB on H100) where memory allows. Inputs are random,
  never zeros.
- Bandwidth: decimal GB/s of the fewest bytes a call must move (each input element read once, each output element
  written once); the copy ceiling counts bytes read plus bytes written.
- The ceiling is measured in the same run: a device-to-device copy and the plain read kernel of
  ``kernels/bandwidth.cu``; ``ceiling_gbs`` is the larger of the two.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import functools
import io
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "paper_figures"

__all__ = [
    "REPO", "DEFAULT_OUT", "StudySkipped", "MissingInterface", "Context", "gpu_status", "device_info", "git_info",
    "metadata",
    "write_csv", "read_csv", "write_metadata", "Progress", "Timing", "time_gpu", "rotating_views", "Ceiling",
    "measure_ceiling", "time_read_kernel", "time_copy", "competitors", "cupy_accelerators", "sum_methods",
    "LADDER_ORDER", "exact_sum_gpu", "make_input", "DISTRIBUTIONS", "case_seed", "dtype_label", "fmt",
    "require", "run_setting", "time_graph", "dist_label", "MethodSetting", "rel_error", "exact_sum_host",
]

# Methods that compute full sums only (axis=None): kept out of the per-axis studies (segments).
FULL_SUM_ONLY = ("tensorcore_kahan",)
# The ladder rungs in the order of the seeds' walk (issue 5); unknown rungs follow in registration order.
LADDER_ORDER = (
    "ladder_atomic", "ladder_interleaved_divergent", "ladder_interleaved", "ladder_sequential", "ladder_first_add",
    "ladder_unroll_last_warp", "ladder_unroll_complete", "ladder_multi_element", "ladder_warp_shuffle",
    "ladder_float4", "ladder_atomic_per_block", "ladder_last_block", "ladder_grid_sync", "ladder_cluster",
)


class MissingInterface(RuntimeError):
    """A tcreduce interface a study needs is not in this checkout (written in parallel): the message names it."""


class StudySkipped(Exception):
    """Raised by a study that cannot run here; the message says why (printed as 'skipped <study>: <why>')."""


# ------------------------------------------------------------------------------------------------- environment
@functools.lru_cache(maxsize=1)
def gpu_status() -> tuple[bool, str]:
    """(True, device name) when CuPy sees a CUDA device, else (False, why not)."""
    try:
        import cupy
    except Exception as e:  # pragma: no cover - depends on the install
        return False, f"CuPy does not import ({type(e).__name__}: {e})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        return False, f"CuPy sees no CUDA device ({msg})"
    if n < 1:
        return False, "CuPy sees no CUDA device (device count 0)"
    return True, device_info().get("gpu_name", "a CUDA GPU")


@functools.lru_cache(maxsize=1)
def device_info() -> dict[str, Any]:
    """GPU name, SM count, L2 size, memory, driver and CUDA runtime versions (empty when there is no GPU)."""
    try:
        import cupy

        rt = cupy.cuda.runtime
        dev = cupy.cuda.Device()
        props = rt.getDeviceProperties(dev.id)
    except Exception:
        return {}

    def ver(v: int) -> str:
        return f"{v // 1000}.{(v % 1000) // 10}"

    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    info = {
        "gpu_name": name,
        "device_id": dev.id,
        "sm_count": int(props["multiProcessorCount"]),
        "compute_capability": f"{props['major']}.{props['minor']}",
        "l2_bytes": int(props.get("l2CacheSize", 0)),
        "memory_bytes": int(props.get("totalGlobalMem", 0)),
        "cuda_driver_api": ver(rt.driverGetVersion()),
        "cuda_runtime": ver(rt.runtimeGetVersion()),
    }
    for key in ("clockRate", "memoryClockRate", "memoryBusWidth"):
        if key in props:
            info[key] = int(props[key])
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem",
                              "-i", str(dev.id), "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            parts = [p.strip() for p in out.stdout.strip().splitlines()[0].split(",")]
            info["driver"] = parts[0]
            if len(parts) >= 3:
                info["max_sm_clock"], info["max_mem_clock"] = parts[1], parts[2]
    except Exception:
        pass
    return info


@functools.lru_cache(maxsize=1)
def git_info() -> dict[str, Any]:
    """The commit the results come from: ``$TCREDUCE_COMMIT`` when the caller names it (a copy of the tree without
    its own .git, e.g. on a lent GPU machine), else this checkout's HEAD and whether tracked files differ from it;
    commit None when neither is known (a copy nested inside some other repository does not count)."""
    def git(*args: str) -> Optional[str]:
        try:
            r = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=20)
            return r.stdout.strip() if r.returncode == 0 else None
        except Exception:
            return None

    if os.environ.get("TCREDUCE_COMMIT"):
        return {"commit": os.environ["TCREDUCE_COMMIT"], "dirty": None, "from": "TCREDUCE_COMMIT"}
    top = git("rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != REPO.resolve():
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None}


def _version(module: str) -> Optional[str]:
    try:
        from importlib import metadata as md

        return md.version(module)
    except Exception:
        return None


@functools.lru_cache(maxsize=1)
def torch_version() -> Optional[str]:
    try:
        import torch  # noqa: F401

        return torch.__version__
    except Exception:
        return None


def command_line() -> str:
    """The exact command this process was started with."""
    argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
    return shlex.join(argv)


def metadata(study: str, ctx: "Context", config: dict[str, Any], extra: Optional[dict[str, Any]] = None) -> dict:
    """The metadata of one study's run (written as ``<study>.json``, summarised in the CSV header)."""
    import tcreduce

    dev = device_info() if ctx.gpu else {}
    meta: dict[str, Any] = {
        "study": study,
        "date_utc": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "command": ctx.command,
        "mode": ctx.mode,
        "quick": ctx.quick,
        "backend": "gpu" if ctx.gpu else f"emulator ({ctx.emulated_gpu})",
        "device": dev,
        "git": git_info(),
        "versions": {
            "python": platform.python_version(),
            "tcreduce": getattr(tcreduce, "__version__", None),
            "numpy": np.__version__,
            "cupy": _version("cupy-cuda13x") or _version("cupy-cuda12x") or _version("cupy"),
            "torch": torch_version() if ctx.gpu else _version("torch"),
            "matplotlib": _version("matplotlib"),
            "cuda-bindings": _version("cuda-bindings"),
        },
        "platform": platform.platform(),
        "config": config,
    }
    if extra:
        meta.update(extra)
    return meta


def device_label(meta: dict) -> str:
    dev = meta.get("device") or {}
    if dev.get("gpu_name"):
        return f"{dev['gpu_name']} ({dev.get('sm_count', '?')} SMs)"
    return str(meta.get("backend", "CPU"))


def csv_header(meta: dict) -> dict[str, str]:
    """The flat ``key: value`` lines at the top of a CSV (what a figure footer needs)."""
    dev = meta.get("device") or {}
    git = meta.get("git") or {}
    commit = git.get("commit") or "unknown"
    head = {
        "study": meta.get("study", ""),
        "device": device_label(meta),
        "driver": dev.get("driver") or dev.get("cuda_driver_api") or "",
        "cuda_runtime": dev.get("cuda_runtime", ""),
        "commit": commit[:12] + ("+dirty" if git.get("dirty") else ""),
        "date_utc": meta.get("date_utc", ""),
        "command": meta.get("command", ""),
        "backend": meta.get("backend", ""),
        "quick": str(meta.get("quick", "")),
    }
    for k, v in (meta.get("csv_header") or {}).items():
        head[k] = str(v)
    return head


# ------------------------------------------------------------------------------------------------------- CSV
def fmt(v: Any) -> str:
    """A CSV cell: floats round-trip exactly (repr), None and NaN become empty."""
    if v is None:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return "" if math.isnan(f) else repr(f)
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return str(v)


def write_csv(path: Path, rows: Sequence[dict], columns: Sequence[str], meta: dict) -> Path:
    """Write rows (dicts; missing keys empty) under a ``# key: value`` metadata header."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    for k, v in csv_header(meta).items():
        buf.write(f"# {k}: {str(v).replace(chr(10), ' ')}\n")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([fmt(r.get(c)) for c in columns])
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(buf.getvalue())
    tmp.replace(path)
    return path


def read_csv(path: Path) -> tuple[list[dict[str, str]], dict[str, str]]:
    """(rows as dicts of strings, header metadata) of a CSV written by :func:`write_csv`."""
    meta: dict[str, str] = {}
    body = []
    with open(path, newline="") as f:
        for line in f:
            if line.startswith("#") and not body:
                k, _, v = line[1:].strip().partition(":")
                meta[k.strip()] = v.strip()
            else:
                body.append(line)
    rows = list(csv.DictReader(body))
    return rows, meta


def write_metadata(path: Path, meta: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(meta, indent=2, sort_keys=False, default=str) + "\n")
    return path


def num(s: Any, default: float = float("nan")) -> float:
    """A CSV cell as float (empty -> default)."""
    if s is None or s == "":
        return default
    try:
        return float(s)
    except ValueError:
        return default


# -------------------------------------------------------------------------------------------------- progress
class Progress:
    """A progress bar on stderr. On a terminal it redraws one line; otherwise (logs, remote runs) it prints a line
    at every 10% step or every 30 s, whichever comes first."""

    def __init__(self, total: int, label: str, stream=None, enabled: bool = True):
        self.total = max(int(total), 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.done = 0
        self.t0 = time.perf_counter()
        self._last_print = self.t0
        self._last_decile = -1
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, n: int = 1, info: str = "") -> None:
        self.done = min(self.done + n, self.total)
        if not self.enabled:
            return
        now = time.perf_counter()
        frac = self.done / self.total
        elapsed = now - self.t0
        eta = elapsed / frac - elapsed if frac > 0 else float("nan")
        width = 28
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        text = (f"{self.label:>10} [{bar}] {self.done}/{self.total} {elapsed:6.1f}s"
                f" eta {eta:5.0f}s {info[:40]}")
        if self.tty:
            self.stream.write("\r" + text.ljust(110))
            if self.done == self.total:
                self.stream.write("\n")
            self.stream.flush()
            return
        decile = int(frac * 10)
        if decile > self._last_decile or now - self._last_print > 30 or self.done == self.total:
            self._last_decile = decile
            self._last_print = now
            self.stream.write(text + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.done < self.total and self.enabled:
            self.done = self.total - 1
            self.update(1, "")


# --------------------------------------------------------------------------------------------------- context
@dataclass
class Context:
    """What a study needs to know about this run."""

    out: Path
    quick: bool = False
    gpu: bool = False
    gpu_reason: str = ""
    mode: str = "full"  # "full", "quick" or "tiny" (tests)
    command: str = field(default_factory=command_line)
    emulated_gpu: str = "H100"
    methods: Optional[tuple[str, ...]] = None  # restrict tcreduce methods (None: all)
    progress: bool = True
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def error(self, msg: str) -> None:
        """Record a failure of one measurement (the study goes on; the run ends with a non-zero status)."""
        self.errors.append(msg)
        sys.stderr.write(f"  ! {msg}\n")
        sys.stderr.flush()

    def note(self, msg: str) -> None:
        self.notes.append(msg)
        sys.stderr.write(f"  - {msg}\n")
        sys.stderr.flush()

    def bar(self, total: int, label: str) -> Progress:
        return Progress(total, label, enabled=self.progress)

    def want(self, method: str) -> bool:
        return self.methods is None or method in self.methods


def require(module: str, what: str, attrs: Sequence[str] = ()):
    """Import ``module`` (and check it has ``attrs``) or fail with a message naming what needs it: some interfaces
    are written in parallel with the experiments."""
    import importlib

    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise MissingInterface(f"{what} needs {module}, which is not available in this tcreduce checkout "
                           f"({type(e).__name__}: {e})") from e
    missing = [a for a in attrs if not hasattr(mod, a)]
    if missing:
        raise MissingInterface(f"{what} needs {module}.{', '.join(missing)}, which this tcreduce checkout does "
                               "not have yet")
    return mod


# ----------------------------------------------------------------------------------------------- methods
def sum_methods(dtype: str, *, ladder: Optional[bool] = None, emulated_only: bool = False,
                ctx: Optional[Context] = None) -> list:
    """tcreduce's registered sum methods that take ``dtype`` (MethodInfo rows). ladder: None for all, True for the
    ladder rungs only (in the seeds' order), False for the others."""
    import tcreduce

    out = []
    for m in tcreduce.methods():
        if dtype not in m.dtypes:
            continue
        is_ladder = m.name.startswith("ladder_")
        if ladder is not None and is_ladder != ladder:
            continue
        if emulated_only and not m.emulated:
            continue
        if ctx is not None and not ctx.want(m.name):
            continue
        out.append(m)
    if ladder:
        rank = {n: i for i, n in enumerate(LADDER_ORDER)}
        out.sort(key=lambda m: rank.get(m.name, len(rank)))
    return out


@dataclass(frozen=True)
class MethodSetting:
    """One point of the trade-off study: a label, a registered method, and keyword settings of its planner (for
    example ``{"chain": 16}`` for the tensor-core planner's chain length). Empty settings mean the public
    ``tcreduce.sum(x, method=method)``."""

    label: str
    method: str
    settings: tuple[tuple[str, Any], ...] = ()

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.settings)


_SETTING_PLANS: dict = {}


def run_setting(x, setting: MethodSetting):
    """Full sum of the CuPy array ``x`` with a method setting: ``tcreduce.sum`` when it has no settings, else the
    method's planner called with the settings as keyword arguments and the plan launched like ``tcreduce.sum``
    launches it (fp32 output)."""
    import tcreduce

    if not setting.settings:
        return tcreduce.sum(x, method=setting.method)
    import inspect

    import cupy

    from tcreduce import registry
    from tcreduce._device import current_device
    from tcreduce._launch import run_plan
    from tcreduce._layout import plan_layout

    key = (setting, x.shape, x.dtype.str, x.data.ptr % 16)
    entry = _SETTING_PLANS.get(key)
    if entry is None:
        m = registry.get(setting.method)
        if m.runner is not None:
            raise ValueError(f"method {setting.method!r} delegates to a library; it takes no planner settings")
        params = inspect.signature(m.planner).parameters
        unknown = [k for k in setting.kwargs if k not in params]
        if unknown and not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            raise ValueError(f"the planner of {setting.method!r} takes no setting {', '.join(unknown)} "
                             f"(its parameters: {', '.join(params)})")
        itemsize = x.dtype.itemsize
        strides = tuple(s // itemsize for s in x.strides)
        layout = plan_layout(x.shape, strides, tuple(range(x.ndim)), itemsize, x.data.ptr % 16)
        if layout.copy_order is not None:
            raise ValueError("run_setting takes contiguous arrays")
        _, device = current_device()
        in_dtype = {2: "float16", 4: "float32"}[itemsize]
        if in_dtype not in m.dtypes:
            raise TypeError(f"method {setting.method!r} does not take {in_dtype}")
        plan = m.planner(layout.problem, in_dtype, "float32", device, **setting.kwargs)
        entry = (plan, layout.base_offset * itemsize)
        _SETTING_PLANS[key] = entry
    plan, offset = entry
    dev_id = x.device.id
    res = cupy.empty((), dtype=np.float32)
    run_plan(plan, x.data.ptr + offset, res.data.ptr, dev_id)
    return res


# ------------------------------------------------------------------------------------------------ inputs
# Input distributions of the accuracy and trade-off studies. Parameters are fixed (recorded in the metadata).
DISTRIBUTIONS: dict[str, dict[str, Any]] = {
    "uniform": {"label": "uniform [0, 1)", "dtypes": ("float16", "float32")},
    "normal": {"label": "normal N(0, 1)", "dtypes": ("float16", "float32")},
    "mixed": {"label": "mixed sign, κ≈1e4", "dtypes": ("float16", "float32"), "kappa": 1e4},
    "lognormal": {"label": "lognormal, wide range", "dtypes": ("float16", "float32"),
                  "sigma": {"float16": 2.0, "float32": 4.0}},
    "near_overflow": {"label": "near overflow [2^15, 65504)", "dtypes": ("float16",)},
}


def dist_label(dist: str, dtype: Optional[str] = None) -> str:
    """A distribution's label in figures (with the parameter that applies to ``dtype``)."""
    spec = DISTRIBUTIONS.get(dist)
    if spec is None:
        return dist
    if dist == "lognormal" and dtype in spec["sigma"]:
        return f"lognormal exp(σN(0,1)), σ={spec['sigma'][dtype]:g}"
    return spec["label"]


def case_seed(*parts: Any) -> int:
    """A fixed seed per case (stable across runs and machines)."""
    return zlib.crc32("/".join(str(p) for p in parts).encode()) & 0x7FFFFFFF


def make_input(dist: str, dtype: str, n: int, seed: int, xp=np):
    """``n`` random values of ``dist`` as ``dtype`` (NumPy or CuPy, with that library's generator and ``seed``).

    uniform: [0, 1). normal: N(0, 1). mixed: uniform (-1, 1), centred, shifted by 1/(2 kappa) so that
    sum|x| / |sum x| is about kappa (the CSV records the actual value). lognormal: exp(sigma N(0, 1)), clipped to
    60000 for fp16. near_overflow (fp16): uniform in [32768, 65504)."""
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {dist!r}; known: {', '.join(DISTRIBUTIONS)}")
    spec = DISTRIBUTIONS[dist]
    if dtype not in spec["dtypes"]:
        raise ValueError(f"distribution {dist!r} is not defined for {dtype}")
    f32 = np.float32
    if xp is np:
        rng = np.random.default_rng(seed)

        def uniform(k):
            return rng.random(k, dtype=f32)

        def normal(k):
            return rng.standard_normal(k, dtype=f32)
    else:
        rs = xp.random.RandomState(seed)

        def uniform(k):
            return rs.random_sample(k, dtype=f32)

        def normal(k):
            return rs.standard_normal(k, dtype=f32)

    if dist == "uniform":
        v = uniform(n)
    elif dist == "normal":
        v = normal(n)
    elif dist == "mixed":
        v = uniform(n)
        v *= f32(2.0)
        v -= f32(1.0)
        v -= f32(float(v.mean(dtype=np.float64)))
        v += f32(1.0 / (2.0 * spec["kappa"]))
    elif dist == "lognormal":
        v = normal(n)
        v *= f32(spec["sigma"][dtype])
        xp.exp(v, out=v)
        if dtype == "float16":
            xp.minimum(v, f32(60000.0), out=v)
    else:  # near_overflow
        v = uniform(n)
        v *= f32(65504.0 - 32768.0)
        v += f32(32768.0)
    return v.astype(dtype, copy=False)


def dtype_label(dtype: str) -> str:
    return {"float16": "fp16", "float32": "fp32"}.get(dtype, dtype)


# ---------------------------------------------------------------------------------------- exact sums on GPU
_EXACT_SRC = r"""
// Exact sum by exponent bins: value = m * 2^(e - bias) with an integer significand m (sign included). Each block
// adds the signed significands of its elements into 64-bit shared bins, one per biased exponent (exactly: |m| < 2^24,
// so up to 2^39 elements fit), then adds its bins into the global bins. The host combines the bins exactly.
template <typename U, int EBITS, int MBITS>
__device__ __forceinline__ void bin_of(U b, int& e, long long& m, bool& bad) {
    const unsigned ub = (unsigned)b;
    e = (int)((ub >> MBITS) & ((1u << EBITS) - 1u));
    long long mm = (long long)(ub & ((1u << MBITS) - 1u));
    bad = (e == (1 << EBITS) - 1);
    if (e) mm |= (1ll << MBITS); else e = 1;
    m = ((ub >> (EBITS + MBITS)) & 1u) ? -mm : mm;
}

template <typename U, int EBITS, int MBITS>
__device__ void exact_bins(const U* x, long long n, unsigned long long* bins, unsigned* nonfinite) {
    __shared__ unsigned long long sb[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) sb[i] = 0ull;
    __syncthreads();
    bool any_bad = false;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int e; long long m; bool bad;
        bin_of<U, EBITS, MBITS>(x[i], e, m, bad);
        if (bad) { any_bad = true; continue; }
        if (m) atomicAdd(&sb[e], (unsigned long long)m);
    }
    if (any_bad) atomicOr(nonfinite, 1u);
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        if (sb[i]) atomicAdd(&bins[i], sb[i]);
}

extern "C" __global__ void exact_bins_f32(const unsigned* x, long long n, unsigned long long* bins, unsigned* bad) {
    exact_bins<unsigned, 8, 23>(x, n, bins, bad);
}
extern "C" __global__ void exact_bins_f16(const unsigned short* x, long long n, unsigned long long* bins,
                                          unsigned* bad) {
    exact_bins<unsigned short, 5, 10>(x, n, bins, bad);
}
"""

_EXACT_PARAMS = {"float32": ("exact_bins_f32", 150), "float16": ("exact_bins_f16", 25)}


@functools.lru_cache(maxsize=None)
def _exact_kernel(name: str, device_id: int):
    import cupy

    mod = cupy.RawModule(code=_EXACT_SRC, options=("-std=c++17",))
    return mod.get_function(name)


def exact_sum_gpu(x, absolute: bool = False) -> float:
    """The exact sum of a CuPy float16/float32 array (or of its absolute values), correctly rounded to float64.

    One pass on the GPU into 64-bit bins per exponent, combined on the host with Python integers; the final
    ``int / int`` division rounds correctly. NaN or Inf in the input: the float64 sum (which propagates them)."""
    import cupy

    x = cupy.ascontiguousarray(x).ravel()
    dtype = str(x.dtype)
    if dtype not in _EXACT_PARAMS:
        raise TypeError(f"exact_sum_gpu takes float16 or float32, not {dtype}")
    name, bias = _EXACT_PARAMS[dtype]
    if absolute:
        x = cupy.abs(x)
    n = x.size
    if n == 0:
        return 0.0
    view = x.view(cupy.uint32 if dtype == "float32" else cupy.uint16)
    bins = cupy.zeros(256, dtype=cupy.uint64)
    bad = cupy.zeros(1, dtype=cupy.uint32)
    fn = _exact_kernel(name, x.device.id)
    sms = device_info().get("sm_count", 132)
    grid = int(max(1, min(sms * 8, -(-n // 256))))
    fn((grid,), (256,), (view, np.int64(n), bins, bad))
    if int(bad.get()[0]):
        return float(cupy.sum(x, dtype=cupy.float64))
    total = 0
    for e, s in enumerate(bins.get().tolist()):
        if s:
            s = s - (1 << 64) if s >= (1 << 63) else s
            total += s << (e - 1)  # value of bin e: s * 2^(e - bias) = s * 2^(e - 1) / 2^(bias - 1)
    return total / (1 << (bias - 1))


def rel_error(computed: float, exact: float) -> float:
    """|computed - exact| / |exact|, evaluated exactly (fractions) and rounded once; 0/0 is 0, x/0 is inf."""
    if math.isnan(computed) or math.isnan(exact):
        return float("nan")
    if math.isinf(exact) or math.isinf(computed):
        return 0.0 if computed == exact else float("inf")
    if exact == 0.0:
        return 0.0 if computed == 0.0 else float("inf")
    from fractions import Fraction

    return float(abs(Fraction(computed) - Fraction(exact)) / abs(Fraction(exact)))


def exact_sum_host(x: np.ndarray) -> float:
    """The exact sum of a NumPy float array, correctly rounded (math.fsum of the exactly converted values)."""
    return math.fsum(np.asarray(x, dtype=np.float64).ravel().tolist())


# ------------------------------------------------------------------------------------------------------ timing
@dataclass(frozen=True)
class Timing:
    median_s: float
    p10_s: float
    p90_s: float
    reps: int
    batch: int
    buffers: int


@dataclass(frozen=True)
class TimingConfig:
    """How hard :func:`time_gpu` tries: about ``target_s`` of timed GPU work per measurement, within
    [min_reps, max_reps] samples after ``warmup`` calls."""

    target_s: float = 0.1
    warmup: int = 3
    min_reps: int = 5
    max_reps: int = 100
    batch_target_s: float = 2e-4
    max_batch: int = 64
    slow_s: float = 0.02  # above this per call: warm up once and take min_reps samples

    @staticmethod
    def for_mode(mode: str) -> "TimingConfig":
        if mode == "full":
            return TimingConfig()
        return TimingConfig(target_s=0.02, warmup=2, min_reps=3, max_reps=20, max_batch=32)


def time_gpu(fn: Callable[[Any], Any], inputs: Sequence[Any], cfg: TimingConfig = TimingConfig()) -> Timing:
    """Median device time of one ``fn(input)`` call, rotating through ``inputs`` (see the module docstring)."""
    import cupy

    stream = cupy.cuda.get_current_stream()
    nb = len(inputs)
    if nb == 0:
        raise ValueError("time_gpu needs at least one input")
    e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
    e0.record(stream)
    fn(inputs[0])  # first call: compiles, plans, allocates
    e1.record(stream)
    e1.synchronize()
    t_first = cupy.cuda.get_elapsed_time(e0, e1) / 1e3
    k = 1
    if t_first < cfg.slow_s:
        for _ in range(cfg.warmup):
            fn(inputs[k % nb])
            k += 1
    e0.record(stream)
    fn(inputs[k % nb])
    k += 1
    e1.record(stream)
    e1.synchronize()
    t1 = max(cupy.cuda.get_elapsed_time(e0, e1) / 1e3, 1e-7)
    if t1 >= cfg.slow_s:
        batch, reps = 1, cfg.min_reps
    else:
        batch = int(min(cfg.max_batch, max(1, math.ceil(cfg.batch_target_s / t1))))
        reps = int(min(cfg.max_reps, max(cfg.min_reps, cfg.target_s / (t1 * batch))))
    events = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(reps)]
    for s, e in events:
        s.record(stream)
        for _ in range(batch):
            fn(inputs[k % nb])
            k += 1
        e.record(stream)
    events[-1][1].synchronize()
    times = np.array([cupy.cuda.get_elapsed_time(s, e) / 1e3 / batch for s, e in events])
    return Timing(float(np.median(times)), float(np.percentile(times, 10)), float(np.percentile(times, 90)), reps,
                  batch, min(nb, k))


def time_graph(fn: Callable[[Any], Any], inputs: Sequence[Any], cfg: TimingConfig = TimingConfig(),
               lib: str = "cupy", max_calls: int = 256) -> Timing:
    """Median device time of one ``fn(input)`` call inside a CUDA graph: up to ``max_calls`` calls (rotating through
    ``inputs``) captured once on a fresh stream, the graph replayed many times between CUDA events. Host dispatch
    (Python, launch API) is out of the number: this is what the kernels cost back to back on the GPU. ``lib``:
    "cupy" (CuPy stream capture; tcreduce, cupy.sum and RawKernel launches run on CuPy's current stream) or "torch"
    (torch.cuda.graph). Raises if the calls cannot be captured."""
    if lib == "torch":
        return _time_graph_torch(fn, inputs, cfg, max_calls)
    import cupy

    nb = len(inputs)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        for i in range(max(2, cfg.warmup)):
            fn(inputs[i % nb])
        e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
        e0.record(s)
        fn(inputs[0])
        e1.record(s)
        e1.synchronize()
        t1 = max(cupy.cuda.get_elapsed_time(e0, e1) / 1e3, 1e-7)
        per = int(min(max_calls, max(min(nb, max_calls), math.ceil(5 * cfg.batch_target_s / t1), 1)))
        s.begin_capture()
        try:
            for j in range(per):
                fn(inputs[j % nb])
        finally:
            graph = s.end_capture()
        graph.launch(s)
        s.synchronize()
        e0.record(s)
        graph.launch(s)
        e1.record(s)
        e1.synchronize()
        t_rep = max(cupy.cuda.get_elapsed_time(e0, e1) / 1e3, 1e-7)
        reps = int(min(cfg.max_reps, max(cfg.min_reps, cfg.target_s / t_rep)))
        events = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(reps)]
        for a, b in events:
            a.record(s)
            graph.launch(s)
            b.record(s)
        events[-1][1].synchronize()
        times = np.array([cupy.cuda.get_elapsed_time(a, b) / 1e3 / per for a, b in events])
    del graph
    return Timing(float(np.median(times)), float(np.percentile(times, 10)), float(np.percentile(times, 90)), reps,
                  per, min(nb, per))


def _time_graph_torch(fn, inputs, cfg: TimingConfig, max_calls: int) -> Timing:
    torch = _torch()
    if torch is None:
        raise RuntimeError("torch is not available")
    nb = len(inputs)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(max(3, cfg.warmup)):
            fn(inputs[i % nb])
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn(inputs[0])
        e1.record()
    torch.cuda.current_stream().wait_stream(side)
    e1.synchronize()
    t1 = max(e0.elapsed_time(e1) / 1e3, 1e-7)
    per = int(min(max_calls, max(min(nb, max_calls), math.ceil(5 * cfg.batch_target_s / t1), 1)))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for j in range(per):
            fn(inputs[j % nb])
    graph.replay()
    torch.cuda.synchronize()
    e0.record()
    graph.replay()
    e1.record()
    e1.synchronize()
    t_rep = max(e0.elapsed_time(e1) / 1e3, 1e-7)
    reps = int(min(cfg.max_reps, max(cfg.min_reps, cfg.target_s / t_rep)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in events:
        a.record()
        graph.replay()
        b.record()
    events[-1][1].synchronize()
    times = np.array([a.elapsed_time(b) / 1e3 / per for a, b in events])
    del graph
    return Timing(float(np.median(times)), float(np.percentile(times, 10)), float(np.percentile(times, 90)), reps,
                  per, min(nb, per))


def l2_bytes() -> int:
    return int(device_info().get("l2_bytes") or 60 * 2**20)


def rotating_views(pool, n: int, max_views: int = 1024) -> list:
    """Views of ``n`` elements at 256-byte aligned offsets of ``pool`` (a 1-D CuPy array), enough that the bytes
    they cover exceed twice the L2 cache where the pool and ``max_views`` allow (one view when one input does)."""
    itemsize = pool.dtype.itemsize
    nbytes = n * itemsize
    step = -(-n // (256 // itemsize)) * (256 // itemsize)  # elements, rounded up to 256 bytes
    want = max(1, math.ceil(2 * l2_bytes() / max(nbytes, 1)))
    fit = max(1, (pool.size - n) // step + 1) if pool.size >= n else 0
    if fit == 0:
        raise ValueError(f"pool of {pool.size} elements is smaller than one input of {n}")
    count = int(min(want, fit, max_views))
    # spread the views over the whole pool
    span = (pool.size - n) // step
    offsets = sorted({(i * span // max(count - 1, 1)) * step for i in range(count)}) if count > 1 else [0]
    return [pool[o:o + n] for o in offsets]


def random_pool(dtype: str, n: int, seed: int, low: float = 0.0, high: float = 1.0):
    """A CuPy array of ``n`` uniform random values in [low, high) (never zeros-only data)."""
    import cupy

    rs = cupy.random.RandomState(seed)
    v = rs.random_sample(n, dtype=np.float32)
    if (low, high) != (0.0, 1.0):
        v *= np.float32(high - low)
        v += np.float32(low)
    return v.astype(dtype, copy=False)


# ------------------------------------------------------------------------------------------------- ceilings
# Read-kernel launch configurations tried for the ceiling: (loads in flight per thread, ld.global.cs, blocks per SM).
READ_CONFIGS = ((4, True, 4), (8, True, 4), (8, False, 4), (4, True, 8), (8, True, 2), (16, True, 2))


def _read_fn(unroll: int, stream: bool):
    from tcreduce._compile import get_function
    from tcreduce._device import current_device

    dev_id, spec = current_device()
    return get_function("bandwidth.cu", f"tcr_bw::read16<{unroll}, {'true' if stream else 'false'}>", dev_id,
                        spec.arch)


@functools.lru_cache(maxsize=1)
def _sink():
    import cupy

    return cupy.zeros(4, dtype=np.uint32)


def read_launcher(config: tuple[int, bool, int]) -> Callable[[Any], None]:
    """A function launching the read kernel over one CuPy array (its whole 16-byte words)."""
    import cupy

    unroll, stream, bps = config
    fn = _read_fn(unroll, stream)
    sms = device_info().get("sm_count", 132)
    sink = _sink()

    def launch(x) -> None:
        n16 = x.nbytes // 16
        grid = int(max(1, min(sms * bps, -(-n16 // 256))))
        fn((grid, 1, 1), (256, 1, 1), (np.uint64(x.data.ptr), np.int64(n16), np.uint64(sink.data.ptr)), 0,
           cupy.cuda.get_current_stream(), False)

    return launch


def time_read_kernel(inputs: Sequence[Any], cfg: TimingConfig, config: Optional[tuple[int, bool, int]] = None
                     ) -> tuple[Timing, tuple[int, bool, int]]:
    """(timing, config) of the read kernel over ``inputs``: the given config, or the best of :data:`READ_CONFIGS`."""
    configs = [config] if config is not None else list(READ_CONFIGS)
    best = None
    for c in configs:
        t = time_gpu(read_launcher(c), inputs, cfg)
        if best is None or t.median_s < best[0].median_s:
            best = (t, c)
    assert best is not None
    return best


def time_copy(nbytes: int, cfg: TimingConfig) -> Timing:
    """Timing of a device-to-device copy of ``nbytes`` (cudaMemcpyAsync) between two random buffers."""
    import cupy

    n = nbytes // 4
    src = random_pool("float32", n, seed=7)
    dst = cupy.empty_like(src)
    rt = cupy.cuda.runtime

    def copy(_):
        rt.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, rt.memcpyDeviceToDevice,
                       cupy.cuda.get_current_stream().ptr)

    return time_gpu(copy, [None], cfg)


@dataclass(frozen=True)
class Ceiling:
    """The bandwidth ceiling measured in this run."""

    read_gbs: float
    copy_gbs: float
    bytes: int
    read_config: tuple[int, bool, int]

    @property
    def gbs(self) -> float:
        return max(self.read_gbs, self.copy_gbs)

    def as_dict(self) -> dict[str, Any]:
        return {"ceiling_gbs": self.gbs, "read_kernel_gbs": self.read_gbs, "copy_gbs": self.copy_gbs,
                "ceiling_bytes": self.bytes, "read_kernel_config": "unroll=%d stream=%s blocks_per_sm=%d"
                % self.read_config}


def measure_ceiling(nbytes: int, cfg: TimingConfig) -> Ceiling:
    """The read kernel (best configuration) over a random buffer of ``nbytes`` and a device-to-device copy of
    ``nbytes`` (counting read + written bytes)."""
    import cupy

    x = random_pool("float32", nbytes // 4, seed=3)
    t_read, config = time_read_kernel([x], cfg)
    del x
    cupy.get_default_memory_pool().free_all_blocks()
    t_copy = time_copy(nbytes, cfg)
    cupy.get_default_memory_pool().free_all_blocks()
    return Ceiling(nbytes / t_read.median_s / 1e9, 2 * nbytes / t_copy.median_s / 1e9, nbytes, config)


# ---------------------------------------------------------------------------------------------- competitors
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
    ``call`` takes (a zero-copy torch view for torch)."""

    label: str
    call: Callable[[Any], Any]
    wrap: Callable[[Any], Any] = lambda x: x
    context: Callable[[], Any] = contextlib.nullcontext


@functools.lru_cache(maxsize=1)
def _torch():
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        return torch
    except Exception:
        return None


def torch_missing_reason() -> str:
    try:
        import torch

        return "" if torch.cuda.is_available() else "torch sees no CUDA device"
    except Exception as e:
        return f"torch does not import ({type(e).__name__})"


def competitors(axis: Optional[int] = None, *, float64: bool = False, native: bool = True) -> list[Competitor]:
    """torch.sum (fp32 accumulation; where torch imports and sees the GPU), cupy.sum with CUB on and off (fp32
    accumulation); with ``float64``, also both libraries accumulating in float64."""
    import cupy

    out: list[Competitor] = []
    torch = _torch()
    if torch is not None:
        def to_torch(x):
            return torch.from_dlpack(x)

        def t32(t):
            return torch.sum(t, dtype=torch.float32) if axis is None else torch.sum(t, dim=axis, dtype=torch.float32)

        out.append(Competitor("torch.sum", t32, to_torch))
        if float64:
            def t64(t):
                return torch.sum(t, dtype=torch.float64) if axis is None else torch.sum(t, dim=axis,
                                                                                        dtype=torch.float64)

            out.append(Competitor("torch.sum fp64", t64, to_torch))

    def c32(x):
        return cupy.sum(x, axis=axis, dtype=np.float32)

    out.append(Competitor("cupy.sum CUB", c32, context=lambda: cupy_accelerators(True)))
    if native:
        out.append(Competitor("cupy.sum no CUB", c32, context=lambda: cupy_accelerators(False)))
    if float64:
        def c64(x):
            return cupy.sum(x, axis=axis, dtype=np.float64)

        out.append(Competitor("cupy.sum fp64", c64, context=lambda: cupy_accelerators(True)))
    return out


def torch_stream_guard():
    """Make torch launch on CuPy's current stream (so CuPy's events time torch's work)."""
    torch = _torch()
    import cupy

    ptr = cupy.cuda.get_current_stream().ptr
    if torch is None or ptr == 0:
        return contextlib.nullcontext()
    return torch.cuda.stream(torch.cuda.ExternalStream(ptr))


def free_gpu_memory() -> None:
    try:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
        torch = _torch()
        if torch is not None:
            torch.cuda.empty_cache()
    except Exception:
        pass


def error_note(e: BaseException) -> str:
    """The CSV note of a failed measurement: the exception's type and first line."""
    first = str(e).splitlines()[0] if str(e) else ""
    return f"error: {type(e).__name__}: {first}"


def fill_timing(row: dict, t: "Timing", ceiling_gbs: float | None = None) -> None:
    """Write a Timing into a CSV row: time_us, p10_us, p90_us, reps, batch, and, when the row has "bytes",
    gbs (bytes / median time) and frac_ceiling."""
    row.update(time_us=t.median_s * 1e6, p10_us=t.p10_s * 1e6, p90_us=t.p90_s * 1e6, reps=t.reps, batch=t.batch)
    if "bytes" in row:
        row["gbs"] = row["bytes"] / t.median_s / 1e9
        row["frac_ceiling"] = row["gbs"] / ceiling_gbs if ceiling_gbs else None
