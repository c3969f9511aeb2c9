"""CPU tests of benchmarks/tune_plans.py (no GPU): every sweep's first setting is the committed default of the planner
constants it patches (the script's contract: the first line of each sweep is what the library launches today), every
setting names a constant that exists, and patching restores the planner afterwards."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import tune_plans  # noqa: E402


@pytest.mark.parametrize("name", sorted(tune_plans.SWEEPS))
def test_first_setting_is_the_committed_default(name):
    module, settings = tune_plans.SWEEPS[name][:2]
    for key, value in settings[0].items():
        assert getattr(module, key) == value, (name, key, value, getattr(module, key))
    for setting in settings:
        assert all(hasattr(module, key) for key in setting), (name, setting)


def test_patched_restores_the_planner_constants():
    module, settings = tune_plans.SWEEPS["rows16"][:2]
    before = {k: getattr(module, k) for k in settings[-1]}
    with tune_plans.patched(module, settings[-1]):
        assert {k: getattr(module, k) for k in settings[-1]} == settings[-1] != before
    assert {k: getattr(module, k) for k in settings[-1]} == before


def test_patched_settings_win_over_a_family_tuning_and_are_restored():
    import tcreduce.plans.tensorcore as tc_plan
    from tcreduce._device import named_device
    from tcreduce.plans._common import tuned

    h200 = named_device("H200")
    own = tc_plan.FAMILY_TUNING["H200"]["STREAM_UNROLL"]
    assert tuned(tc_plan, "STREAM_UNROLL", h200) == own != tc_plan.STREAM_UNROLL
    with tune_plans.patched(tc_plan, dict(STREAM_UNROLL=16)):
        assert tuned(tc_plan, "STREAM_UNROLL", h200) == 16
        assert tuned(tc_plan, "STREAM_BLOCKS_PER_SM", h200) == tc_plan.FAMILY_TUNING["H200"]["STREAM_BLOCKS_PER_SM"]
    assert tuned(tc_plan, "STREAM_UNROLL", h200) == own


def test_only_takes_names_and_patterns_in_sweep_order():
    loops = tune_plans.select("*_few_loop")
    assert loops and all(n.endswith("_few_loop") for n in loops)
    assert tune_plans.select("rows16,fp32_flat") == [n for n in tune_plans.SWEEPS if n in ("rows16", "fp32_flat")]
    assert tune_plans.select("") == list(tune_plans.SWEEPS)
    with pytest.raises(SystemExit, match="no_such_sweep"):
        tune_plans.select("rows16,no_such_sweep")
