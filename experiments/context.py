"""What a study is told about its run (:class:`Context`), its progress bar, and the two ways it stops early
(:class:`StudySkipped`, :class:`MissingInterface`)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from .env import command_line

__all__ = ["MissingInterface", "StudySkipped", "Progress", "Context", "require"]


class MissingInterface(RuntimeError):
    """A tcreduce interface a study needs is not in this checkout (written in parallel): the message names it."""


class StudySkipped(Exception):
    """Raised by a study that cannot run here; the message says why (printed as 'skipped <study>: <why>')."""


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
