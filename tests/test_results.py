"""Recycled result buffers of small reductions (tcreduce._results).

CPU (real CuPy arrays over fake device memory, :mod:`tcreduce.fake_gpu`): a buffer is handed out again only when
nothing references it (the result, its views and slices, its MemoryPointer, pointers derived from it, its base); two
per stream and keepdims; none for large results or while a capture would have to allocate them; the handle likewise;
a loop that drops its results replays one graph. GPU: recycled results carry the right sums, poisoned buffers are
rewritten, results kept alive are never overwritten, torch results included."""

from __future__ import annotations

import numpy as np
import pytest

import tcreduce
from tcreduce._results import PER_STREAM_MAX, RESULT_SLOT_MAX_BYTES, ResultSlots
from tcreduce.fake_gpu import fake_gpu

# ------------------------------------------------------------------------------------------------------- CPU


def test_a_buffer_is_reused_only_when_nothing_references_it():
    with fake_gpu() as gpu:
        slots = ResultSlots((3,), np.dtype(np.float32))
        n_alloc = len(gpu.allocations)
        addresses = {b.data.ptr for b in slots.buffers}
        a = slots.take()
        a_ptr = a.data.ptr
        assert a.shape == (3,) and a.dtype == np.float32 and a_ptr in addresses
        del a
        b = slots.take()
        assert b.data.ptr == a_ptr  # dropped: the same buffer again
        c = slots.take()
        assert c.data.ptr != b.data.ptr and c.data.ptr in addresses
        assert slots.take() is None  # both in use
        held = {"a slice": lambda r: r[1:], "a reshaped view": lambda r: r.reshape(1, 3), "its MemoryPointer":
                lambda r: r.data, "a pointer derived from it": lambda r: r.data + 4, "its base": lambda r: r.base}
        for what, derive in held.items():
            del b, c
            b = slots.take()
            keep = derive(b)
            ptr = b.data.ptr
            del b
            c = slots.take()
            assert c is not None and c.data.ptr != ptr, what
            b = slots.take()
            assert b is None, f"{what} did not keep its buffer in use"
            del keep
            b = slots.take()
            assert b is not None and b.data.ptr == ptr, what
        assert len(gpu.allocations) == n_alloc


def test_threads_never_share_a_buffer(monkeypatch):
    """Three threads taking and dropping views, another thread run between every claim (the view) and its check
    (the counts), and while a view is held: a buffer is never handed to two at once."""
    import sys
    import threading
    import time

    from tcreduce import _results

    def claim_then_yield(buf):  # _view_and_counts with a thread switch inside (the same references at the count)
        view = buf.view()
        time.sleep(0)
        mp = buf.data
        return view, (sys.getrefcount(buf), sys.getrefcount(mp), sys.getrefcount(mp.mem))

    with fake_gpu():
        slots = ResultSlots((), np.dtype(np.float32))
        monkeypatch.setattr(_results, "_view_and_counts", claim_then_yield)
        owner: dict[int, int] = {}
        clashes, taken = [], []

        def work(me: int) -> None:
            for _ in range(500):
                v = slots.take()
                if v is None:
                    continue
                taken.append(me)
                ptr = v.data.ptr
                if owner.setdefault(ptr, me) != me:
                    clashes.append(ptr)
                time.sleep(0)  # hold it while the others run
                del owner[ptr]
                del v

        threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not clashes and set(taken) == {0, 1, 2}


def test_stream_states_are_bounded():
    from tcreduce._api import _PREPARED

    with fake_gpu() as gpu:
        x = gpu.array((1 << 16,), "float16")
        tcreduce.sum(x)
        prep = next(p for k, p in _PREPARED.items() if k[1] == x.shape and p.fast)
        for i in range(PER_STREAM_MAX + 8):
            gpu.stream_ptr = 0x9000 + 16 * i
            res = tcreduce.sum(x)
            assert res.base is not None and gpu.launches[-1][5] == gpu.stream_ptr
        assert len(prep.streams) == PER_STREAM_MAX and 0x9000 not in prep.streams


def test_sum_recycles_two_buffers_per_stream_and_keepdims():
    with fake_gpu() as gpu:
        x = gpu.array((1 << 16,), "float16")
        tcreduce.sum(x)  # plans; the stream's pools and the result buffers allocated
        n_alloc = len(gpu.allocations)
        ptrs = [tcreduce.sum(x).data.ptr for _ in range(4)]  # each result dropped: one address
        assert len(set(ptrs)) == 1
        seen = []
        for _ in range(4):  # the previous result alive while the next is made: the two buffers in turn
            s = tcreduce.sum(x)
            seen.append(s.data.ptr)
        assert seen[0] != seen[1] and seen[::2] == [seen[0]] * 2 and seen[1::2] == [seen[1]] * 2
        assert len(gpu.allocations) == n_alloc
        del s
        kept = [tcreduce.sum(x) for _ in range(5)]  # kept: two recycled, then the pool's
        assert len(gpu.allocations) == n_alloc + 3 and all(k.base is None for k in kept[2:])
        assert len({k.data.ptr for k in kept}) == 5
        kd = tcreduce.sum(x, keepdims=True)  # its own buffers, of its own shape
        assert kd.shape == (1,) and kd.base is not None and len(gpu.allocations) == n_alloc + 5
        del kept, kd
        gpu.stream_ptr = 0x7000  # another stream: buffers of its own (its pools too)
        other = tcreduce.sum(x)
        assert other.base is not None and other.data.ptr not in set(seen) | set(ptrs)


def test_results_not_recycled():
    with fake_gpu() as gpu:
        big = gpu.array((RESULT_SLOT_MAX_BYTES // 4 + 1, 64), "float16")
        r1, r2 = tcreduce.sum(big, axis=1), tcreduce.sum(big, axis=1)
        assert r1.base is None and r2.base is None and r1.data.ptr != r2.data.ptr
        x = gpu.array((1 << 16,), "float16")
        tcreduce.sum(x, out=gpu.array((), "float32"))  # planned and bound, no result buffers yet
        gpu.capturing = True  # making them now would allocate inside the capture: the pool's result instead
        n_alloc = len(gpu.allocations)
        res = tcreduce.sum(x)
        assert res.base is None and len(gpu.allocations) == n_alloc + 1
        gpu.capturing = False
        assert tcreduce.sum(x).base is not None


def test_the_handle_recycles_its_results_per_stream():
    with fake_gpu() as gpu:
        x = gpu.array((300, 1032), "float16")
        r = tcreduce.reducer(like=x, axis=-1)
        n_alloc = len(gpu.allocations)
        a = r(x)
        b = r(x)
        assert a.shape == b.shape == (300,) and a.data.ptr != b.data.ptr and len(gpu.allocations) == n_alloc
        c = r(x)
        assert c.base is None and len(gpu.allocations) == n_alloc + 1
        del a, b, c
        gpu.stream_ptr = 0x7000
        d = r(x)
        assert d.base is not None and len(gpu.allocations) == n_alloc + 3
        for i in range(PER_STREAM_MAX + 4):  # buffers for at most PER_STREAM_MAX streams are kept
            gpu.stream_ptr = 0x9000 + 16 * i
            assert r(x).base is not None
        assert len(r._results) == PER_STREAM_MAX


def test_a_loop_that_drops_its_results_replays_one_graph():
    with fake_gpu() as gpu:
        x = gpu.array((1 << 16,), "float16")
        tcreduce.sum(x)
        graphs, replays = len(gpu.graphs), gpu.graph_launches
        for _ in range(6):
            tcreduce.sum(x)
        assert len(gpu.graphs) == graphs + 1 and gpu.graph_launches > replays


# ------------------------------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("shape,axis", [((1 << 16,), None), ((4097,), None), ((300, 1032), -1), ((16, 1000), 0)])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_gpu_recycled_results_are_right_and_never_overwrite_a_kept_one(shape, axis, dtype, rng):
    import cupy

    from tcreduce.testing import check_sum, random_input, same_bits, to_numpy

    inputs = [random_input(rng, shape, dtype) for _ in range(4)]
    xs = [cupy.asarray(xh) for xh in inputs]
    r = tcreduce.reducer(like=xs[0], axis=axis)
    first = tcreduce.sum(xs[0], axis=axis)
    assert first.base is not None, "not a recycled buffer"
    first[...] = np.nan  # poison the buffer the next call takes again
    del first
    kept = [tcreduce.sum(x, axis=axis) for x in xs]  # two recycled (one of them the poisoned), two from the pool
    assert [k.base is not None for k in kept] == [True, True, False, False]
    values = [to_numpy(k) for k in kept]
    for k, xh in zip(kept, inputs):
        check_sum(k, xh, axis, method=r.method)
    for _ in range(3):  # results dropped over and over: the kept ones stay as they were
        for x in xs:
            tcreduce.sum(x, axis=axis)
    for k, v in zip(kept, values):
        assert same_bits(k, v)
    for x, v in zip(xs, values):
        assert same_bits(r(x), v)  # the handle's recycled results: the same bits


@pytest.mark.gpu
def test_gpu_recycled_results_of_torch_inputs_stay_valid(rng):
    torch = pytest.importorskip("torch")
    import cupy

    from tcreduce.testing import random_input, same_bits

    xh = [random_input(rng, (1 << 16,), "float16") for _ in range(3)]
    want = [tcreduce.sum(cupy.asarray(h), out=cupy.empty((), np.float32)) for h in xh]
    outs = [tcreduce.sum(torch.from_numpy(h).cuda()) for h in xh]  # torch tensors over CuPy results: kept in use
    assert all(type(o) is torch.Tensor for o in outs)
    for h in xh * 3:
        tcreduce.sum(torch.from_numpy(h).cuda())  # dropped
    torch.cuda.synchronize()
    for o, w in zip(outs, want):
        assert same_bits(o, w)
