"""The environment of a run: the repository, the GPU (through CuPy), the commit, library versions, torch with CUDA,
the L2 size, and freeing GPU memory between studies."""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

__all__ = ["REPO", "DEFAULT_OUT", "gpu_status", "device_info", "git_info", "package_version", "torch_version",
           "command_line", "l2_bytes", "torch_cuda", "torch_missing_reason", "free_gpu_memory"]

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "paper_figures"


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


def package_version(module: str) -> Optional[str]:
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


def cpu_list(text: str) -> list[int]:
    """The CPUs of a Linux CPU list ("0-3,8,10-11", sysfs' and taskset's format), in order."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus += list(range(int(lo), int(hi or lo) + 1))
    return cpus


def gpu_local_cpus() -> list[int]:
    """The CPUs local to the current CUDA device (sysfs ``local_cpulist`` of its PCI bus id); empty where unknown (no
    GPU, no sysfs entry)."""
    try:
        import cupy

        bus = cupy.cuda.Device().pci_bus_id.lower()
        return cpu_list(Path(f"/sys/bus/pci/devices/{bus}/local_cpulist").read_text())
    except Exception:
        return []


def l2_bytes() -> int:
    return int(device_info().get("l2_bytes") or 60 * 2**20)


@functools.lru_cache(maxsize=1)
def torch_cuda():
    """torch where it imports and sees a CUDA device, else None."""
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


def free_gpu_memory() -> None:
    try:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
        torch = torch_cuda()
        if torch is not None:
            torch.cuda.empty_cache()
    except Exception:
        pass
