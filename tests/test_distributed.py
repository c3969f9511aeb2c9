"""tcreduce.distributed on the CPU: the metadata agreement every rank runs (identical errors on every rank), the
rank-order fold, the lazy import, and (where torch is installed) the protocol over a real 3-process gloo group on the
host. GPU runs: tests/test_distributed_gpu.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.exceptions import AxisError

from tcreduce import _dist
from tcreduce._dist import META_LEN, MSG_BYTES, agree, encode_row, fold_ranks

sys.path.insert(0, str(Path(__file__).parent / "distributed"))


def _row(rank, shape, **kw):
    args = dict(in_dtype="float16", out_dtype="float32", method="auto", axes=(0,), shard_axis=0, keepdims=False)
    args.update(kw)
    return encode_row(rank=rank, shape=shape, **args)


def _table(shapes, **kw):
    return np.stack([_row(r, s, **kw) for r, s in enumerate(shapes)])


def _raises_alike(table, cls, match):
    """agree() raises ``cls`` whose message contains ``match``; every rank runs agree() on the same table, so the
    check is that it depends on the table alone: two evaluations (two ranks) give the same class and message."""
    msgs = []
    for _ in range(2):
        with pytest.raises(cls) as info:
            agree(table.copy())
        assert type(info.value) is cls
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]
    assert match in msgs[0], msgs[0]
    return msgs[0]


def test_import_does_not_load_torch():
    code = ("import sys, tcreduce; import tcreduce.distributed, tcreduce._dist; tcreduce.distributed.sum; "
            "assert 'torch' not in sys.modules, 'torch imported'; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).parent.parent)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_row_is_fixed_size_int64():
    for row in (_row(0, (5, 3)), encode_row(rank=2, error=ValueError("x" * 10_000))):
        assert row.dtype == np.int64 and row.shape == (META_LEN,)


def test_agreement_uneven_and_empty_shards():
    t = _table([(5, 3), (0, 3), (7, 3)], axes=(0, 1), keepdims=True, out_dtype="float64", method="shuffle")
    ag = agree(t)
    assert ag.world == 3 and ag.ndim == 2 and ag.in_dtype == "float16" and ag.out_dtype == "float64"
    assert ag.method == "shuffle" and ag.axes == (0, 1) and ag.keepdims is True and ag.shard_axis == 0
    assert ag.shard_lengths == (5, 0, 7) and ag.reduced and ag.active == (0, 2)
    assert ag.global_shape() == (12, 3) and ag.out_shape == ()


def test_agreement_not_reduced_and_other_shard_axis():
    t = _table([(4, 2, 6), (4, 9, 6)], axes=(0, 2), shard_axis=1)
    ag = agree(t)
    assert not ag.reduced and ag.active == () and ag.shard_lengths == (2, 9)
    assert ag.out_shape == (-1,) and ag.global_shape() == (4, 11, 6)


def test_agreement_zero_length_other_axis_makes_no_rank_active():
    ag = agree(_table([(5, 0), (3, 0)], axes=(0, 1)))
    assert ag.reduced and ag.active == ()


def test_local_error_travels_with_class_and_message():
    t = _table([(5, 3), (6, 3), (7, 3)])
    t[1] = encode_row(rank=1, error=AxisError(5, 2))
    msg = _raises_alike(t, AxisError, "failed on rank 1 of 3")
    assert str(AxisError(5, 2)) in msg


def test_lowest_failing_rank_wins():
    t = _table([(5, 3), (6, 3), (7, 3)])
    t[2] = encode_row(rank=2, error=TypeError("rank two"))
    t[1] = encode_row(rank=1, error=ValueError("rank one"))
    _raises_alike(t, ValueError, "rank 1 of 3: rank one")


@pytest.mark.parametrize("exc,cls", [(TypeError("t"), TypeError), (ValueError("v"), ValueError),
                                     (ImportError("i"), ImportError), (NotImplementedError("n"), NotImplementedError),
                                     (RuntimeError("r"), RuntimeError), (KeyError("k"), RuntimeError),
                                     (MemoryError("oom"), RuntimeError)])
def test_error_classes(exc, cls):
    t = _table([(5,), (6,)], axes=(0,))
    t[0] = encode_row(rank=0, error=exc)
    msg = _raises_alike(t, cls, "failed on rank 0 of 2")
    if cls is RuntimeError and not isinstance(exc, RuntimeError):
        assert type(exc).__name__ in msg


def test_unsupported_dtype_error_stays_a_type_error():
    from tcreduce.registry import UnsupportedDtype

    t = _table([(5,), (6,)], axes=(0,))
    t[1] = encode_row(rank=1, error=UnsupportedDtype("method 'tensorcore' takes float16 input, not float32"))
    _raises_alike(t, TypeError, "takes float16")


def test_long_unicode_message_is_truncated_cleanly():
    long = "é" * MSG_BYTES  # 2 bytes each: must be cut at a character boundary
    cls, msg = _dist.error_from_row(encode_row(rank=0, error=ValueError(long)))
    assert cls is ValueError and msg.endswith("...") and len(msg.encode()) <= MSG_BYTES
    assert set(msg[:-3]) == {"é"}


@pytest.mark.parametrize("what,change,match", [
    ("shape off axis", dict(shape=(6, 4)), "shapes disagree off shard_axis=0"),
    ("ndim", dict(shape=(6, 3, 1)), "number of dimensions"),
    ("dtype", dict(in_dtype="float32"), "dtype of their shards"),
    ("axes", dict(axes=(1,)), "disagree on axis"),
    ("keepdims", dict(keepdims=True), "disagree on keepdims"),
    ("out dtype", dict(out_dtype="float16"), "disagree on dtype"),
    ("method", dict(method="tensorcore"), "disagree on method"),
    ("shard axis", dict(shard_axis=1), "disagree on shard_axis"),
])
def test_disagreement_raises_value_error(what, change, match):
    rows = [_row(0, (5, 3)), _row(1, (0, 3)), _row(2, (7, 3))]
    kw = dict(shape=(6, 3))
    kw.update(change)
    shape = kw.pop("shape")
    rows[2] = _row(2, shape, **kw)
    msg = _raises_alike(np.stack(rows), ValueError, match)
    assert "rank 2" in msg and "ranks 0, 1" in msg


def test_shape_disagreement_message_shows_the_shard_axis():
    t = _table([(5, 3, 2), (6, 4, 2)], shard_axis=1, axes=(1,))
    msg = _raises_alike(t, ValueError, "shapes disagree off shard_axis=1")
    assert "(5, *, 2) on rank 0" in msg and "(6, *, 2) on rank 1" in msg


def test_foreign_rows_are_refused():
    t = _table([(5,), (6,)], axes=(0,))
    t[1, 0] = 0
    _raises_alike(t, RuntimeError, "sent no tcreduce metadata")


def test_bad_table_shape():
    with pytest.raises(RuntimeError, match="metadata table"):
        agree(np.zeros((2, META_LEN - 1), np.int64))


def test_long_method_names_compare_by_digest():
    a, b = "x" * 40 + "a", "x" * 40 + "b"
    assert agree(_table([(5,), (6,)], axes=(0,), method=a)).method  # equal long names agree
    rows = np.stack([_row(0, (5,), axes=(0,), method=a), _row(1, (6,), axes=(0,), method=b)])
    _raises_alike(rows, ValueError, "disagree on method")


def test_too_many_dims_refused_at_encoding():
    with pytest.raises(ValueError, match="at most"):
        _row(0, (1,) * (_dist.MAX_NDIM + 1))


def test_fold_ranks_is_left_to_right_in_fp32():
    f = np.float32
    p = [np.array(2.0 ** 24, f), np.array(1.0, f), np.array(1.0, f), np.array(-(2.0 ** 24), f)]
    # ((2^24 + 1) + 1) - 2^24: each +1 rounds to even (2^24) -> 0; another order would give 2
    assert fold_ranks(p) == f(0.0)
    assert fold_ranks([p[1], p[2], p[0], p[3]]) == f(2.0)
    assert fold_ranks(p).dtype == np.float32


def test_fold_ranks_elementwise_matches_the_loop(rng):
    parts = [rng.standard_normal((3, 5)).astype(np.float32) * 10 ** k for k in range(5)]
    want = parts[0].copy()
    for q in parts[1:]:
        want = (want + q).astype(np.float32)
    got = fold_ranks(parts)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert got is not parts[0] and np.array_equal(parts[0], parts[0])  # a new array, inputs untouched


def test_prepared_partials_are_kept_for_small_results_only():
    from tcreduce import distributed as D

    big = D._CACHE_MAX_OUTPUTS
    assert D._keeps_partial((1 << 30,), (0,))  # a full sum: one output
    assert D._keeps_partial((7, big), (0,)) and not D._keeps_partial((7, big + 1), (0,))
    assert not D._keeps_partial((3, big, 2), (0,)) and D._keeps_partial((3, big, 2), (0, 2))
    assert D._keeps_partial((0, 5), (0,)) and D._keeps_partial((5, 0), (0,))


def test_fold_ranks_signed_zero_nan_inf():
    f = np.float32
    assert np.signbit(fold_ranks([np.array(-0.0, f)]))  # one partial: itself, -0.0 kept
    assert np.signbit(fold_ranks([np.array(-0.0, f), np.array(-0.0, f)]))
    with np.errstate(invalid="ignore"):  # inf + -inf
        r = fold_ranks([np.array([np.nan, np.inf, 1], f), np.array([1, -np.inf, np.inf], f)])
    assert np.isnan(r[0]) and np.isnan(r[1]) and r[2] == np.inf
    assert list(r[:2].view(np.uint32)) == [0x7FC00000] * 2  # canonical, whatever NaN inf + -inf made here
    odd = np.array([0xFFC00001, 0x7F800001], np.uint32).view(f)  # negative and signalling payloads
    with np.errstate(invalid="ignore"):
        h = fold_ranks([odd, np.array([1, -np.inf], f)], np.float16)
    assert h.dtype == np.float16 and list(h.view(np.uint16)) == [0x7E00] * 2
    with pytest.raises(ValueError):
        fold_ranks([])


def test_shard_axis_validation():
    from tcreduce.distributed import _shard_axis

    assert _shard_axis(-1, 3) == 2 and _shard_axis(np.int64(1), 3) == 1
    with pytest.raises(AxisError):
        _shard_axis(3, 3)
    with pytest.raises(TypeError):
        _shard_axis(True, 3)
    with pytest.raises(TypeError):
        _shard_axis(1.0, 3)


def test_sum_without_torch_says_how_to_install():
    try:
        import torch  # noqa: F401
    except ImportError:
        import tcreduce

        with pytest.raises(ImportError, match=r"tcreduce\[distributed\]"):
            tcreduce.distributed.sum(np.ones(3))
    else:
        pytest.skip("torch is installed here")


def test_sum_without_process_group():
    pytest.importorskip("torch")
    import torch.distributed as dist

    import tcreduce

    if dist.is_available() and dist.is_initialized():
        pytest.skip("a process group is initialised in this process")
    with pytest.raises(RuntimeError, match="init_process_group"):
        tcreduce.distributed.sum(np.ones(3, np.float16))


@pytest.mark.slow
def test_protocol_over_gloo_on_the_host(tmp_path):
    """3 real processes, gloo on the host: the metadata rows all_gather in rank order; a local error on one rank is
    raised alike on all three (no hang), then the same group carries the next exchange."""
    pytest.importorskip("torch")
    import pickle

    import dist_workers
    import host_protocol

    dist_workers.spawn_ranks(host_protocol.main, 3, (3, str(tmp_path / "store"), str(tmp_path)), deadline_s=180)
    recs = [pickle.load(open(tmp_path / f"rank{r}.pkl", "rb")) for r in range(3)]
    for r, rec in enumerate(recs):
        assert rec["order"] == [0, 1, 2], rec
        assert rec["gathered"] == [[10 * q + k for k in range(3)] for q in range(3)]
    errors = [rec["error"] for rec in recs]
    assert len(set(errors)) == 1 and errors[0][0] == "AxisError" and "failed on rank 1 of 3" in errors[0][1], errors
    assert all(rec["after"] == (3, (2, 0, 5), (0, 2)) for rec in recs), [rec["after"] for rec in recs]
    for r, rec in enumerate(recs):  # the DTensor adapter (torch.distributed.tensor), on a host mesh
        d = rec["dtensor"]
        assert d["unwrap"] == (True, 1, [0, 1, 2]), d
        assert d["reduced"] == ("DTensor", ["R"], (3,)), d
        assert d["not_reduced"] == (["S(0)"], (10,), ([4, 4, 2][r],)), d
        assert d["keepdims"] == (["S(1)"], (1, 10, 1)), d
        assert "disagrees with the DTensor's placement Shard(1)" in d["bad_shard_axis"], d
        assert "sharded on one dimension" in d["replicate"], d


@pytest.mark.slow
@pytest.mark.parametrize("world", [3, 1])
def test_whole_sum_over_gloo_on_the_host(tmp_path, world):
    """tcreduce.distributed.sum end to end in ``world`` real processes over gloo, with the CUDA side swapped for
    HostOps (tests/distributed/host_ops.py: the emulator's bits, a tcreduce.exact stand-in): every case of
    dist_workers.host_cases (uneven and empty shards, shard axis reduced or not, keepdims, dtypes, views, NaN/Inf,
    a subgroup, DTensors, exact merging, and every error path: same error on every rank, group usable afterwards)
    must give every rank the expected bits (the rank-order fold of each shard's partial; exact: the single-process
    result)."""
    pytest.importorskip("torch")
    import dist_workers
    import host_ops
    import host_protocol

    cases = dist_workers.host_cases(world)
    dist_workers.spawn_ranks(host_protocol.run_cases_main, world,
                             (world, str(tmp_path / "store"), str(tmp_path), cases), deadline_s=900)
    recs = dist_workers.load_outcomes(str(tmp_path), world)
    fails = dist_workers.check_outcomes(cases, recs, world, ops=host_ops.HostOps)
    assert not fails, f"{len(fails)} of {len(cases)} cases failed:\n" + "\n".join(fails)
