"""The tcreduce methods a study measures: the registered sum methods (the ladder rungs in the seeds' order) and
method settings (a planner's keyword arguments) for the trade-off study."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .context import Context

__all__ = ["LADDER_ORDER", "sum_methods", "MethodSetting", "run_setting"]

# Methods that compute full sums only (axis=None): kept out of the per-axis studies (segments).
FULL_SUM_ONLY = ("tensorcore_kahan",)
# The ladder rungs in the order of the seeds' walk (issue 5); unknown rungs follow in registration order.
LADDER_ORDER = (
    "ladder_atomic", "ladder_interleaved_divergent", "ladder_interleaved", "ladder_sequential", "ladder_first_add",
    "ladder_unroll_last_warp", "ladder_unroll_complete", "ladder_multi_element", "ladder_warp_shuffle",
    "ladder_float4", "ladder_atomic_per_block", "ladder_last_block", "ladder_grid_sync", "ladder_cluster",
)


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
