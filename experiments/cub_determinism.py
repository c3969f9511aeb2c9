"""CUB's determinism levels from Python: ``cub::DeviceReduce::Sum`` with ``cuda::execution::require(determinism::
gpu_to_gpu)`` (or ``run_to_run``), the comparison point issue 11 asks for beside the exact sum.

The ``cuda-cccl`` package's Python ``reduce_into`` exposes only ``run_to_run`` and ``not_guaranteed``, so this module
compiles ``experiments/cub_determinism.cu`` once with ``nvcc`` against the CCCL headers CuPy ships (CCCL >= 3.1 has
gpu_to_gpu) into a shared library under ``$TCREDUCE_CACHE_DIR`` (or the system temp folder) and calls it through
ctypes on CuPy's current stream. float32, 1-D contiguous, fewer than 2^31 elements. Benchmarks only: nothing in
tcreduce depends on it.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

__all__ = ["missing", "build", "cub_sum_f32"]

SOURCE = Path(__file__).with_name("cub_determinism.cu")


def _cccl_include() -> Optional[Path]:
    import cupy

    root = Path(cupy.__file__).parent / "_core" / "include" / "cupy" / "_cccl"
    ok = (root / "libcudacxx" / "cuda" / "__execution" / "determinism.h").is_file()
    return root if ok else None


def _nvcc() -> Optional[str]:
    cuda_path = os.environ.get("CUDA_PATH", "/usr/local/cuda")
    return shutil.which("nvcc") or (str(Path(cuda_path) / "bin" / "nvcc") if (Path(cuda_path) / "bin" / "nvcc").is_file()
                                    else None)


def missing() -> Optional[str]:
    """Why CUB's gpu_to_gpu sum cannot be built here (None: it can)."""
    try:
        if _cccl_include() is None:
            return "CUB gpu_to_gpu: CuPy's bundled CCCL has no cuda::execution::determinism (CCCL >= 3.1 needed)"
    except ImportError:
        return "CUB gpu_to_gpu: CuPy is not installed"
    if _nvcc() is None:
        return "CUB gpu_to_gpu: no nvcc to build the CUB call"
    return None


def build(arch: str, cache: Path) -> Path:
    """The shared library for ``arch`` (e.g. "sm_90") in ``cache``, compiled unless already there."""
    why = missing()
    if why:
        raise RuntimeError(why)
    inc = _cccl_include()
    key = hashlib.sha256(SOURCE.read_bytes() + f"{inc}{arch}".encode()).hexdigest()[:16]
    cache.mkdir(parents=True, exist_ok=True)
    lib = cache / f"libcub_determinism_{key}.so"
    if not lib.is_file():
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        cmd = [_nvcc(), "-std=c++17", "-O3", f"-arch={arch}", "-shared", "-Xcompiler", "-fPIC",
               f"-I{inc / 'libcudacxx'}", f"-I{inc / 'cub'}", f"-I{inc / 'thrust'}", str(SOURCE), "-o", str(tmp)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"building CUB's gpu_to_gpu sum failed:\n{done.stderr[-2000:]}")
        tmp.replace(lib)
    return lib


@lru_cache(maxsize=None)
def _library() -> ctypes.CDLL:
    import cupy

    arch = f"sm_{cupy.cuda.Device().compute_capability}"  # "90" on Hopper
    cache = Path(os.environ.get("TCREDUCE_CACHE_DIR", tempfile.gettempdir())) / "cub_determinism"
    so = ctypes.CDLL(str(build(arch, cache)))
    so.tcr_cub_sum_f32.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    so.tcr_cub_sum_f32.restype = ctypes.c_int
    return so


def cub_sum_f32(x: Any, gpu_to_gpu: bool = True, out: Any = None) -> Any:
    """The float32 sum of the 1-D contiguous CuPy float32 array ``x`` by CUB (0-d CuPy array, or ``out``)."""
    import cupy

    if x.dtype != cupy.float32 or x.ndim != 1 or not x.flags.c_contiguous:
        raise TypeError("cub_sum_f32 takes a 1-D contiguous float32 CuPy array")
    if x.size >= 2**31:
        raise ValueError("CUB's gpu_to_gpu reduction takes fewer than 2^31 elements (32-bit offsets)")
    out = cupy.empty((), cupy.float32) if out is None else out
    err = _library().tcr_cub_sum_f32(x.data.ptr, out.data.ptr, x.size, cupy.cuda.get_current_stream().ptr,
                                     int(gpu_to_gpu))
    if err:
        raise RuntimeError(f"cub::DeviceReduce::Sum failed: {cupy.cuda.runtime.getErrorString(err).decode()}")
    return out
