"""Compile kernels with NVRTC (through cuda-python) and cache them.

- Sources live in ``kernels/`` (shipped inside the package as ``tcreduce/kernels``). Project headers included with
  ``#include "name.cuh"`` are inlined textually before compiling, so the cache key (a SHA-256 of the inlined source,
  the name expression, the options, the architecture and the NVRTC version) changes whenever any header changes.
  CuPy's own cache would miss such edits (facts.md; cupy/cupy#941); we only hand CuPy the finished cubin.
- The disk cache lives in ``$TCREDUCE_CACHE_DIR`` (default ``~/.cache/tcreduce``); loaded functions are memoized per
  device in memory.
- :func:`compile_kernel` needs no GPU: CI uses it to compile every kernel for sm_80 and sm_90 and to check the
  ptxas report (errors, warnings, spills) and the PTX (tensor-core instructions), with the options used at run time.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["kernel_dir", "load_source", "compile_kernel", "CompiledKernel", "get_function", "NVRTC_OPTIONS",
           "KernelCompileError"]

# The options every kernel is compiled with. No fast-math: it would flush subnormals and change rounding.
NVRTC_OPTIONS: tuple[str, ...] = ("-std=c++17", "--ptxas-options=-v", "--ptxas-options=--warn-on-spills",
                                  "-default-device")

_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)


class KernelCompileError(RuntimeError):
    pass


def kernel_dir() -> Path:
    """The folder holding the ``.cu``/``.cuh`` sources: the installed ``tcreduce/kernels`` or the checkout's
    ``kernels/``."""
    installed = Path(__file__).resolve().parent / "kernels"
    if installed.is_dir() and any(installed.glob("*.cu")):
        return installed
    checkout = Path(__file__).resolve().parent.parent / "kernels"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError("tcreduce kernel sources not found (neither tcreduce/kernels nor ../kernels)")


def load_source(name: str, _seen: frozenset[str] = frozenset()) -> str:
    """The source of ``kernels/name`` with project headers inlined (each at most once, like #pragma once)."""
    text = (kernel_dir() / name).read_text()

    def inline(match: re.Match) -> str:
        inc = match.group(1)
        if inc in _seen:
            return f"// {inc} already inlined"
        return f"// ---- begin {inc}\n{load_source(inc, _seen | {name, inc})}\n// ---- end {inc}"

    return _INCLUDE_RE.sub(inline, text)


@functools.lru_cache(maxsize=1)
def cuda_include_dirs() -> tuple[str, ...]:
    """Directories holding cuda_fp16.h and mma.h for NVRTC: $CUDA_PATH/include, /usr/local/cuda/include, or the
    headers of the pip CUDA wheels."""
    candidates = []
    for env in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(env):
            candidates.append(Path(os.environ[env]) / "include")
    candidates.append(Path("/usr/local/cuda/include"))
    try:
        import nvidia  # type: ignore

        for root in getattr(nvidia, "__path__", []):
            candidates.extend(Path(root).glob("*/include"))
            candidates.extend(Path(root).glob("cu*/include"))
    except ImportError:
        pass
    found = [p for p in candidates if (p / "cuda_fp16.h").is_file()]
    if not found:
        raise KernelCompileError("cuda_fp16.h not found: set CUDA_PATH to a CUDA 12/13 toolkit, or install the "
                                 "nvidia-cuda-runtime wheel")
    root = found[0]
    # CUDA 13 keeps libcu++ (cuda/std/*, needed by cooperative_groups.h) under include/cccl
    return (str(root),) + ((str(root / "cccl"),) if (root / "cccl").is_dir() else ())


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> tuple[int, int]:
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    return (major, minor)


@dataclass(frozen=True)
class CompiledKernel:
    """A compiled kernel: cubin bytes, PTX text, the lowered (mangled) name and the NVRTC/ptxas log."""

    name_expression: str
    lowered_name: str
    cubin: bytes
    ptx: str
    log: str
    arch: str
    key: str

    @property
    def spills(self) -> bool:
        return bool(re.search(r"[1-9]\d* bytes spill (stores|loads)", self.log))

    @property
    def registers(self) -> int | None:
        m = re.search(r"Used (\d+) registers", self.log)
        return int(m.group(1)) if m else None


def _check(result, prog=None, what: str = "") -> None:
    from cuda.bindings import nvrtc

    err = result[0] if isinstance(result, tuple) else result
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = _log(prog) if prog is not None else ""
        raise KernelCompileError(f"NVRTC {what} failed: {err}\n{log}")


def _log(prog) -> str:
    from cuda.bindings import nvrtc

    _, n = nvrtc.nvrtcGetProgramLogSize(prog)
    buf = b" " * n
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.decode(errors="replace").rstrip("\x00 \n")


def cache_dir() -> Path:
    d = Path(os.environ.get("TCREDUCE_CACHE_DIR", Path.home() / ".cache" / "tcreduce"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def compile_kernel(source: str, name_expression: str, arch: str, use_cache: bool = True) -> CompiledKernel:
    """Compile one kernel instantiation of ``kernels/source`` for ``arch`` (e.g. "sm_90") with NVRTC.

    Results are cached on disk by content hash; a hit returns the stored cubin, PTX and log."""
    text = load_source(source)
    options = NVRTC_OPTIONS + (f"--gpu-architecture={arch}",)
    key_src = "\0".join([text, name_expression, " ".join(options), repr(nvrtc_version())])
    key = hashlib.sha256(key_src.encode()).hexdigest()[:32]
    entry = cache_dir() / key
    if use_cache and (entry / "kernel.cubin").is_file():
        return CompiledKernel(name_expression, (entry / "lowered").read_text(), (entry / "kernel.cubin").read_bytes(),
                              (entry / "kernel.ptx").read_text(), (entry / "log").read_text(), arch, key)
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(text.encode(), source.encode(), 0, [], [])
    _check(err, what="create")
    try:
        _check(nvrtc.nvrtcAddNameExpression(prog, name_expression.encode()), prog, "name expression")
        opts = [o.encode() for o in options] + [f"-I{d}".encode() for d in cuda_include_dirs()]
        result = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        log = _log(prog)
        if result[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise KernelCompileError(f"compiling {source}:{name_expression} for {arch} failed:\n{log}")
        _, lowered = nvrtc.nvrtcGetLoweredName(prog, name_expression.encode())
        _, n = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b" " * n
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin), prog, "get cubin")
        _, n = nvrtc.nvrtcGetPTXSize(prog)
        ptx = b" " * n
        _check(nvrtc.nvrtcGetPTX(prog, ptx), prog, "get ptx")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    ck = CompiledKernel(name_expression, lowered.decode(), cubin, ptx.decode(errors="replace").rstrip("\x00"), log,
                        arch, key)
    if use_cache:
        tmp = Path(tempfile.mkdtemp(dir=cache_dir()))
        (tmp / "kernel.cubin").write_bytes(ck.cubin)
        (tmp / "kernel.ptx").write_text(ck.ptx)
        (tmp / "log").write_text(ck.log)
        (tmp / "lowered").write_text(ck.lowered_name)
        try:
            tmp.rename(entry)
        except OSError:  # another process won the race; theirs is identical
            pass
    return ck


_FUNCTIONS: dict[tuple[int, str, str], object] = {}
_MODULES: dict[tuple[int, str, str], object] = {}


def get_function(source: str, name_expression: str, device_id: int, arch: str):
    """The ``cupy.cuda.function.Function`` of one kernel on one device, compiled once and memoized. Call it as
    ``fn(grid, block, args, shared_mem, stream, enable_cooperative_groups)``."""
    k = (device_id, source, name_expression)
    fn = _FUNCTIONS.get(k)
    if fn is None:
        import cupy

        ck = compile_kernel(source, name_expression, arch)
        if os.environ.get("TCREDUCE_DEBUG"):
            print(f"[tcreduce] {source}:{name_expression} {arch}: {ck.registers} registers\n{ck.log}")
        path = cache_dir() / ck.key / "kernel.cubin"
        if not path.is_file():  # compiled with use_cache off elsewhere: write it now
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(ck.cubin)
        with cupy.cuda.Device(device_id):
            module = cupy.cuda.function.Module()
            module.load_file(str(path))
            fn = module.get_function(ck.lowered_name)
            _MODULES[k] = module  # keep the module loaded while its function is in use
        _FUNCTIONS[k] = fn
    return fn
