"""``tcreduce.emulate.sum``: what ``tcreduce.sum`` returns on a given GPU, computed on the CPU, bit for bit.

Validation, the canonical problem and the launch plan are the GPU path's own (tcreduce._api.validate,
tcreduce._layout, the method's planner with the named GPU's SM count), so the emulator knows the exact order of
additions; each method's emulator twin (``tcreduce/emulate/<method>.py``) replays it.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .._arrays import canonical_nan
from .._api import get_plan, validate
from .._device import named_device
from .._layout import host_layout, host_problem_data
from .._plan import DeviceSpec, Plan

__all__ = ["sum", "EMULATORS", "FINAL", "emulated_methods", "canonical_nan"]

# method name -> fn(plan, problem data, model name) -> fp32 outputs (flattened), rounded once to the output dtype by
# sum() as from_float<OutT> does; the twins in FINAL return their outputs in the plan's output dtype already (exact:
# its one rounding goes straight from the exact sum to the output format).
EMULATORS: dict[str, Callable[[Plan, np.ndarray, str], np.ndarray]] = {}
FINAL: set[str] = set()


def _register_defaults() -> None:
    if EMULATORS:
        return
    from .tensorcore import emulate_tensorcore

    EMULATORS["tensorcore"] = emulate_tensorcore
    EMULATORS["tensorcore_chained"] = emulate_tensorcore
    ladder_rungs = ("ladder_interleaved_divergent", "ladder_interleaved", "ladder_sequential", "ladder_first_add",
                    "ladder_unroll_last_warp", "ladder_unroll_complete", "ladder_multi_element",
                    "ladder_warp_shuffle", "ladder_float4", "ladder_last_block", "ladder_grid_sync", "ladder_cluster")
    # ladder: the deterministic rungs only (ladder_atomic and ladder_atomic_per_block add in the atomics' order)
    from .tensorcore_tf32 import emulate_tensorcore_tf32

    EMULATORS["tensorcore_tf32"] = emulate_tensorcore_tf32
    for module, names in (("shuffle", ("shuffle",)), ("wmma", ("wmma",)), ("ladder", ladder_rungs),
                          ("exact", ("exact",)), ("kahan", ("kahan", "tensorcore_kahan"))):
        try:
            mod = __import__(f"tcreduce.emulate.{module}", fromlist=["emulate"])
        except ModuleNotFoundError as e:
            if e.name != f"tcreduce.emulate.{module}":
                raise
            continue
        for name in names:
            EMULATORS[name] = mod.emulate
    FINAL.add("exact")


def emulated_methods() -> list[str]:
    _register_defaults()
    return sorted(EMULATORS)


def sum(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *, method: str = "tensorcore",
        gpu: str | DeviceSpec = "H100") -> np.ndarray:
    """Bit-exact CPU emulation of ``tcreduce.sum(x, axis, dtype, keepdims, method=method)`` on ``gpu``.

    x: a NumPy array (float16 or float32), any view (the alignment of a view is taken relative to its owning array,
    as a fresh GPU allocation is aligned). gpu: "H100", "H200" (132 SMs), "A100" (108) or a DeviceSpec; it fixes
    the launch plan and the tensor-core model. Returns a NumPy array (0-d for a full sum) of the result dtype.
    Raises the same TypeError/ValueError as the GPU API for bad arguments, and ValueError for methods without an
    emulator twin (see :func:`emulated_methods`)."""
    _register_defaults()
    if type(x).__module__.split(".")[0] == "cupy" or hasattr(x, "__cuda_array_interface__"):
        raise TypeError("tcreduce.emulate.sum takes NumPy arrays; use x.get() (CuPy) or x.cpu().numpy() (torch)")
    x = np.asarray(x)
    device = named_device(gpu)
    call = validate("sum", x.shape, x.dtype, axis, dtype, method)
    if method == "auto":
        from .._auto import choose_method

        method = choose_method("sum", x, call.axes, call.in_dtype, device)
    if method not in EMULATORS:
        from ..registry import get

        m = get(method)
        why = (" (not deterministic: the order of its additions changes run to run)" if not m.deterministic else
               " (it delegates to a library whose order of additions is the library's)" if m.runner else "")
        raise ValueError(f"method {method!r} has no emulator{why}; emulated methods: "
                         f"{', '.join(emulated_methods())}")
    if math.prod(x.shape[i] for i in call.axes) == 0 or math.prod(call.out_shape) == 0:
        res = np.zeros(call.out_shape, call.out_dtype)
    else:
        layout, _ = host_layout(x, call.axes)
        plan = get_plan(method, layout.problem, call.in_dtype, call.out_dtype, device)
        model = named_device(device.name).name  # the tensor-core model of the GPU family (ValueError if unknown)
        data = host_problem_data(x, layout)
        res = EMULATORS[method](plan, data, model)
        if method in FINAL:
            res = np.asarray(res).astype(call.out_dtype, copy=False).reshape(call.out_shape)
        else:  # from_float<OutT>: one round-to-nearest conversion (or exact to float64)
            res = np.asarray(res, np.float32).reshape(call.out_shape).astype(call.out_dtype)
    res = canonical_nan(res)
    return res.reshape(call.keep_shape) if keepdims else res
