"""What a study writes: ``<study>.csv`` (raw measurements under a ``# key: value`` metadata header: device, commit,
date, command and study scalars such as the ceiling, then a normal header row; ``pandas.read_csv(path,
comment="#")`` or :func:`read_csv` reads it) and ``<study>.json`` (the run's metadata, :func:`metadata`). Figures are
drawn from the CSV alone (:mod:`experiments.plotting`)."""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
import platform
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np

from .env import device_info, git_info, package_version, torch_version
from .timing import timing_cpu

if TYPE_CHECKING:
    from .context import Context

__all__ = ["metadata", "device_label", "csv_header", "fmt", "write_csv", "read_csv", "write_metadata", "num",
           "error_note"]


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
            "cupy": package_version("cupy-cuda13x") or package_version("cupy-cuda12x") or package_version("cupy"),
            "torch": torch_version() if ctx.gpu else package_version("torch"),
            "matplotlib": package_version("matplotlib"),
            "cuda-bindings": package_version("cuda-bindings"),
        },
        "platform": platform.platform(),
        "timing_cpu": timing_cpu() if ctx.gpu else None,  # the CPU every timing ran on (timing.pinned)
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
    if meta.get("timing_cpu") is not None:
        head["timing_cpu"] = str(meta["timing_cpu"])
    for k, v in (meta.get("csv_header") or {}).items():
        head[k] = str(v)
    return head


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


def error_note(e: BaseException) -> str:
    """The CSV note of a failed measurement: the exception's type and first line."""
    first = str(e).splitlines()[0] if str(e) else ""
    return f"error: {type(e).__name__}: {first}"
