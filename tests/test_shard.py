"""conftest's ``--shard K/N``: N runs with K = 1..N select disjoint parts of the collected tests whose union is all of
them, the same parts on every run (the GPU suite split over several device calls: scripts/gpu_check.sh SHARD=K/N)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import in_shard, parse_shard

TESTS = Path(__file__).resolve().parent


def _collected(*args: str) -> list[str]:
    """Node ids that ``pytest --collect-only`` selects in this file's sibling test_auto.py."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args,
                          str(TESTS / "test_auto.py")], capture_output=True, text=True, cwd=TESTS.parent, check=True)
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_three_shards_partition_the_collected_tests():
    everything = _collected()
    parts = [_collected("--shard", f"{k}/3") for k in (1, 2, 3)]
    assert len(everything) > 10 and all(parts)
    assert sorted(sum(parts, [])) == sorted(everything)  # every test once
    assert parts[0] == _collected("--shard", "1/3")  # the same part on every run


def test_in_shard_takes_each_id_once():
    ids = [f"tests/test_x.py::test_{i}[float16-{i * 7}]" for i in range(500)]
    owners = [[k for k in range(1, 5) if in_shard(nodeid, k, 4)] for nodeid in ids]
    assert all(len(owner) == 1 for owner in owners)
    assert {owner[0] for owner in owners} == {1, 2, 3, 4}


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/2/3", ""])
def test_bad_shard_is_a_value_error(text):
    with pytest.raises(ValueError, match="K/N"):
        parse_shard(text)
