"""The registry of reduction methods: one :class:`Method` per name, registered by the modules in
:mod:`tcreduce.plans` (one module per method, named after it, with its kernel in ``kernels/<name>.cu`` and its
emulator twin in ``tcreduce/emulate/<name>.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from ._layout import Problem
from ._plan import DeviceSpec, Plan

__all__ = ["Method", "register", "get", "names", "methods", "UnsupportedDtype"]

Planner = Callable[[Problem, str, str, DeviceSpec], Plan]
FP8_CC = (8, 9)  # cvt.rn.f16x2.e4m3x2 / e5m2x2 and fp8 mma.sync: Ada (sm_89) and Hopper


class UnsupportedDtype(NotImplementedError, TypeError):
    """A method does not take an input dtype that other methods take (fp8 on the wmma method, say).
    Both a NotImplementedError and a TypeError; the message names the methods that do take it."""


@dataclass(frozen=True)
class Method:
    """A registered reduction method.

    name: what ``tcreduce.sum(..., method=name)`` takes. description: one line. dtypes: input dtypes it sums.
    reference: the paper or seed it follows. planner: ``(problem, in_dtype, out_dtype, device) -> Plan``.
    deterministic: bitwise identical results run to run. deterministic_note: what ``kinds`` it runs on.
    emulated (derived): whether :mod:`tcreduce.emulate` has its bit-exact twin. requires_cc: minimum compute
    capability.
    kind: the reduction it computes ("sum", "max", "min"). runner: for methods that delegate to a library instead of
    launching plan kernels, ``runner(x, axes, out_dtype) -> cupy.ndarray`` (no keepdims).
    """

    name: str
    description: str
    dtypes: tuple[str, ...]
    reference: str
    planner: Planner
    deterministic: bool = True
    requires_cc: tuple[int, int] = (8, 0)
    kind: str = "sum"
    runner: Optional[Callable] = None


    @property
    def emulated(self) -> bool:
        """True when tcreduce.emulate has this method's twin (tcreduce/emulate/<method>.py)."""
        from .emulate.api import emulated_methods

        return self.kind == "sum" and self.name in emulated_methods()

    def check_dtype(self, in_dtype: str) -> None:
        """Raise :class:`UnsupportedDtype` (a TypeError) naming the methods that take ``in_dtype``."""
        if in_dtype not in self.dtypes:
            others = [m.name for m in methods(self.kind) if in_dtype in m.dtypes]
            raise UnsupportedDtype(
                f"{self.kind} method {self.name!r} takes {', '.join(self.dtypes)} input, not {in_dtype}; "
                + (f"methods that take {in_dtype}: {', '.join(others)}" if others
                   else f"no tcreduce method takes {in_dtype} (supported input dtypes: "
                        f"{', '.join(sorted({d for m in methods(self.kind) for d in m.dtypes}))})"))

    def plan(self, problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
        self.check_dtype(in_dtype)
        if in_dtype.startswith("float8") and device.cc < FP8_CC:
            raise ValueError(f"{in_dtype} input needs compute capability {FP8_CC[0]}.{FP8_CC[1]} or newer (the fp8 "
                             f"conversion instructions of Ada and Hopper); {device.name} is {device.cc[0]}."
                             f"{device.cc[1]}, where no tcreduce method takes fp8: convert to float16 first "
                             "(exact for both fp8 formats)")
        if device.cc < self.requires_cc:
            need = f"{self.requires_cc[0]}.{self.requires_cc[1]}"
            raise ValueError(f"method {self.name!r} needs compute capability {need}"
                             f" or newer; {device.name} is {device.cc[0]}.{device.cc[1]}")
        return self.planner(problem, in_dtype, out_dtype, device)


_REGISTRY: dict[tuple[str, str], Method] = {}  # (kind, name) -> method


def register(method: Method) -> Method:
    key = (method.kind, method.name)
    if key in _REGISTRY:
        raise ValueError(f"{method.kind} method {method.name!r} registered twice")
    _REGISTRY[key] = method
    return method


def _load() -> None:
    from . import plans  # noqa: F401  (importing it registers every method)


def get(name: str, kind: str = "sum") -> Method:
    _load()
    m = _REGISTRY.get((kind, name)) if isinstance(name, str) else None
    if m is None:
        raise ValueError(f"unknown {kind} method {name!r}; methods: {', '.join(['auto'] + names(kind))}")
    return m


def names(kind: str = "sum") -> list[str]:
    _load()
    return [n for (k, n) in _REGISTRY if k == kind]


def methods(kind: Optional[str] = "sum") -> list[Method]:
    _load()
    return [m for m in _REGISTRY.values() if kind is None or m.kind == kind]
