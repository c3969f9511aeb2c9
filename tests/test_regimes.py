"""CPU tests of benchmarks/regimes.py's interleaved summary (no GPU): a kernel's slow state shows as its share of
slow samples, and whether two kernels switch together shows as the correlation of their per-turn times."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import regimes  # noqa: E402


def test_interleaved_summary_tells_a_shared_state_from_a_kernels_own(capsys):
    rng = np.random.default_rng(0)
    turns = 400
    shared = np.repeat(rng.random(turns // 40) < 0.5, 40)  # a GPU state of 40 turns at a time, half of them slow
    own = np.repeat(rng.random(turns // 50) < 0.25, 50)  # one kernel's own state, a quarter of the turns
    noise = lambda: 1 + 0.001 * rng.standard_normal(turns)  # noqa: E731
    series = {"a": 120e-6 * (1 + 0.03 * shared) * noise(), "b": 121e-6 * (1 + 0.03 * shared) * noise(),
              "c": 118e-6 * (1 + 0.03 * own) * noise(), "d": 119e-6 * noise()}
    regimes._print_series("float32:cols:128", series, 1 << 29)
    lines = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()}
    assert set(lines) == set("abcd")

    def field(name: str, key: str) -> str:
        words = lines[name].split()
        return words[words.index(key) + 1]

    assert field("a", "slow") == f"{np.mean(shared):.0%}" and field("c", "slow") == f"{np.mean(own):.0%}"
    assert field("d", "slow") == "0%"
    corr = {}
    for name, line in lines.items():
        words = line.split("r: ")[1].split()
        corr[name] = dict(zip(words[::2], map(float, words[1::2])))
    assert corr["a"]["b"] > 0.95 and corr["b"]["a"] == corr["a"]["b"]
    assert abs(corr["a"]["c"]) < 0.5 and abs(corr["a"]["d"]) < 0.2
    fast, mid, slow = (float(v) for v in lines["d"].split("GB/s ")[1].split("slow")[0].split(" / "))
    assert fast > mid > slow and abs(mid / ((1 << 29) / 119e-6 / 1e9) - 1) < 0.002
