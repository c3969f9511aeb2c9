"""tcreduce.reducer (build once, call many), the pre-bound launch arguments of tcreduce.sum, and CUDA graph capture.

CPU (through :mod:`tcreduce.fake_gpu`): every launch's arguments equal the plan's symbolic arguments resolved (input
base, output, workspace and counters with their offsets) for tcreduce.sum and the handle, over many problems and every
method; the handle's checks; the capture rules (what allocates, what refuses). GPU: the handle against tcreduce.sum
bit for bit and against exact references, and CUDA graphs replayed on new data (``pytest -m gpu``)."""

from __future__ import annotations

import numpy as np
import pytest

import tcreduce
from tcreduce._launch import CaptureError
from tcreduce._plan import Buf
from tcreduce.fake_gpu import fake_gpu

# (shape, axis, view) covering flat, rows, cols, copies, misaligned and reversed views
PROBLEMS = [
    ((1 << 16,), None, None), ((1000,), None, lambda x: x[1:]), ((1000,), None, lambda x: x[::-1]),
    ((4097,), None, lambda x: x[3:]), ((1 << 22) + 5, None, None),
    ((4096, 16), -1, None), ((300, 1032), -1, None), ((64, 257), -1, lambda x: x[:, 1:]), ((4, 1 << 18), -1, None),
    ((16, 1000), 0, None), ((65537, 8), 0, None), ((5, 17, 40), 1, None), ((96, 80), 0, lambda x: x[::-1]),
    ((40, 50), None, None),
]
COPYING = [((6, 5, 4, 3), (1, 3), None), ((32, 48, 16), 1, lambda x: x.transpose(2, 0, 1))]


def _methods(dtype: str, full: bool = True) -> list[str]:
    """auto and every registered sum method with a launch plan for ``dtype`` (the ladder rungs: full sums only)."""
    from experiments.methods import FULL_SUM_ONLY

    return ["auto"] + [m.name for m in tcreduce.methods() if dtype in m.dtypes and m.name != "cub"
                       and (full or not (m.name.startswith("ladder_") or m.name in FULL_SUM_ONLY))]


def _view(gpu, shape, dtype, view):
    x = gpu.array(shape if isinstance(shape, tuple) else (shape,), dtype)
    return view(x) if view else x


def _resolved(plan, x_ptr: int, out_ptr: int, ws_ptr: int, ctr_ptr: int) -> list[tuple]:
    """The plan's launches with their symbolic arguments resolved independently of tcreduce._launch."""
    base = {"x": x_ptr, "out": out_ptr, "ws": ws_ptr, "counters": ctr_ptr}
    out = []
    for ln in plan.launches:
        args = tuple(base[a.name] + 4 * a.offset if isinstance(a, Buf) else int(a) for a in ln.args)
        out.append((ln.kernel, tuple(ln.grid), tuple(ln.block), args, ln.shared_bytes, ln.cooperative))
    return out


def _recorded(gpu, start: int) -> list[tuple]:
    return [(n, g, b, a, s, c) for n, g, b, a, s, _, c in gpu.launches[start:]]


# ------------------------------------------------------------------------------------------------------- CPU
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("shape,axis,view", PROBLEMS, ids=[f"p{i}" for i in range(len(PROBLEMS))])
def test_launch_arguments_are_the_plans(shape, axis, view, dtype):
    from tcreduce import _api, _launch

    checked = set()
    with fake_gpu() as gpu:
        x = _view(gpu, shape, dtype, view)
        full = axis is None or x.ndim == 1
        for method in _methods(dtype, full):
            for out_dtype in (None, "float16"):
                # tcreduce.sum: the stream's pools
                start = len(gpu.launches)
                res = tcreduce.sum(x, axis=axis, dtype=out_dtype, method=method)
                prep = [p for k, p in _api._PREPARED.items() if k[1] == x.shape and k[2] == x.strides
                        and k[7] == method and k[6] == out_dtype][0]
                if prep.launcher is None or not prep.fast:
                    continue
                plan = prep.launcher.plan
                ws = _launch._WORKSPACES.get((0, gpu.stream_ptr))
                ctr = _launch._COUNTERS.get((0, gpu.stream_ptr))
                want = _resolved(plan, x.data.ptr + prep.byte_offset, res.data.ptr,
                                 ws.data.ptr if plan.workspace_floats else 0,
                                 ctr.data.ptr if plan.counters else 0)
                assert _recorded(gpu, start) == want, (method, plan.describe())
                # the handle: its own workspace and counters, the same plan
                r = tcreduce.reducer(like=x, axis=axis, dtype=out_dtype, method=method, warmup=False)
                assert r.plan == plan and r.method == plan.method
                out = gpu.array(r.result_shape, r.result_dtype)
                start = len(gpu.launches)
                assert r(x, out=out) is out
                want = _resolved(plan, x.data.ptr + prep.byte_offset, out.data.ptr,
                                 r._workspace.data.ptr if plan.workspace_floats else 0,
                                 r._counters.data.ptr if plan.counters else 0)
                assert _recorded(gpu, start) == want
                if plan.workspace_floats:
                    assert r._workspace.size >= plan.workspace_floats and r._workspace.data.ptr != ws.data.ptr
                if plan.counters:
                    assert r._counters.size >= plan.counters and r._counters.data.ptr != ctr.data.ptr
                checked.add((method, len(plan.launches), bool(plan.workspace_floats), bool(plan.counters)))
    assert checked  # at least one plan compared on this problem (every launching method is)


def test_sum_and_handle_results():
    with fake_gpu() as gpu:
        x = gpu.array((64, 100), "float16")
        for keepdims in (False, True):
            res = tcreduce.sum(x, axis=0, keepdims=keepdims)
            assert res.shape == ((1, 100) if keepdims else (100,)) and res.dtype == np.float32
            r = tcreduce.reducer(like=x, axis=0, keepdims=keepdims)
            assert r(x).shape == res.shape and r.result_shape == res.shape
        r = tcreduce.reducer(like=x, axis=1, dtype="float16")
        assert r(x).dtype == np.float16 and r.result_dtype == np.float16
        assert "float16" in repr(r) and "axes=(1,)" in repr(r)


def test_raw_formats_are_checked_once_per_dtype_and_still_refuse_what_does_not_fit():
    """tcreduce.sum(bits, format=...) remembers a (format, dtype) pair it has checked, so later calls skip the checks;
    a pair that does not fit raises every time, and the result is the plan's (the fake launch's output array)."""
    from tcreduce import _api

    with fake_gpu() as gpu:
        bits = gpu.array((1000,), "uint16")
        for _ in range(3):
            assert tcreduce.sum(bits, format="bfloat16").shape == () and ("bfloat16", bits.dtype) in _api._RAW_FORMATS
        assert tcreduce.sum(bits, format="bf16").dtype == np.float32  # an alias: its own entry, the same format
        assert _api._RAW_FORMATS["bf16", bits.dtype] == "bfloat16"
        for _ in range(2):
            for x, fmt in ((gpu.array((1000,), "uint8"), "bfloat16"), (gpu.array((1000,), "float16"), "bfloat16"),
                           (bits, "float8_e4m3fn")):
                with pytest.raises(TypeError, match="needs a"):
                    tcreduce.sum(x, format=fmt)
            with pytest.raises(TypeError, match="supported"):
                tcreduce.sum(bits, format="float4")


def test_handle_rejects_other_arrays():
    with fake_gpu() as gpu:
        x = gpu.array((1000,), "float16")
        r = tcreduce.reducer(like=x)
        r(x)
        r(gpu.array((1000,), "float16"))  # another buffer of the same layout is fine
        for other, what in [(gpu.array((999,), "float16"), "shape"), (gpu.array((1000,), "float32"), "dtype"),
                            (gpu.array((1000,), "float16", offset=2), "address modulo 16"),
                            (gpu.array((2000,), "float16")[::2], "strides")]:
            with pytest.raises(ValueError, match=what):
                r(other)
        for bad_out in (gpu.array((1,), "float32"), gpu.array((), "float16"), gpu.array((), "float64")):
            with pytest.raises(ValueError, match="out must be"):
                r(x, out=bad_out)
        with pytest.raises(TypeError, match="cupy.asarray"):
            r(np.ones(1000, np.float16))
        rows = tcreduce.reducer(like=gpu.array((10, 64), "float16"), axis=-1)
        with pytest.raises(ValueError, match="out must be"):
            rows(gpu.array((10, 64), "float16"), out=gpu.array((20,), "float32")[::2])


def test_handle_validates_at_build():
    with fake_gpu() as gpu:
        x = gpu.array((100,), "float16")
        with pytest.raises(ValueError, match="unknown sum method"):
            tcreduce.reducer(like=x, method="nope")
        with pytest.raises(TypeError, match="not supported"):
            tcreduce.reducer(like=x, dtype="int32")
        with pytest.raises(NotImplementedError):
            tcreduce.reducer(like=gpu.array((100,), "float32"), method="wmma")
        with pytest.raises(ValueError, match="kind"):
            tcreduce.reducer(like=x, kind="prod")
        with pytest.raises(ValueError, match="no identity"):
            tcreduce.reducer(like=gpu.array((0,), "float16"), kind="max")
        e = tcreduce.reducer(like=gpu.array((0, 5), "float16"), axis=0)
        assert e.plan is None and e.result_shape == (5,)
        m = tcreduce.reducer(like=gpu.array((10, 64), "float16"), axis=-1, kind="max")
        assert m.result_dtype == np.float16 and m.method == "shuffle"


def test_capture_rules_of_sum():
    with fake_gpu() as gpu:
        x = gpu.array((1 << 20,), "float16")
        gpu.capturing = True
        with pytest.raises(CaptureError, match="plans, compiles and loads"):
            tcreduce.sum(x, method="tensorcore")  # never called with these arguments
        gpu.capturing = False
        tcreduce.sum(x, method="tensorcore")  # planned, pools of the first stream allocated
        gpu.stream_ptr = 0x7000  # another stream: no pools yet
        gpu.capturing = True
        with pytest.raises(CaptureError, match="warm-up"):
            tcreduce.sum(x, method="tensorcore")
        gpu.capturing = False
        tcreduce.sum(x, method="tensorcore")  # warm-up on this stream: its pools allocated
        out = gpu.array((), "float32")
        gpu.capturing = True
        n_alloc = len(gpu.allocations)
        assert tcreduce.sum(x, method="tensorcore", out=out) is out
        # the results: the warm-up's recycled buffers while one is free (nothing allocated), then the pool's
        res = tcreduce.sum(x, method="tensorcore")
        res2 = tcreduce.sum(x, method="tensorcore")
        assert len(gpu.allocations) == n_alloc and res.base is not None and res2.base is not None
        assert res.data.ptr != res2.data.ptr
        res3 = tcreduce.sum(x, method="tensorcore")
        assert len(gpu.allocations) == n_alloc + 1 and gpu.allocations[-1] == 4 and res3.base is None
        assert res.shape == res2.shape == res3.shape == ()
        # paths that would free a temporary refuse (the eager calls plan them; on the fake GPU CuPy's own kernels
        # then fail, which is not what is tested here)
        y = gpu.array((6, 5, 4, 3), "float16")
        gpu.capturing = False
        for call in (lambda: tcreduce.sum(x, method="cub"), lambda: tcreduce.sum(y, axis=(1, 3))):
            with pytest.raises(Exception) as e:
                call()
            assert not isinstance(e.value, CaptureError)
        gpu.capturing = True
        with pytest.raises(CaptureError, match="delegates to a library"):
            tcreduce.sum(x, method="cub")
        with pytest.raises(CaptureError, match="copies a strided view"):
            tcreduce.sum(y, axis=(1, 3))
        with pytest.raises(CaptureError, match="through a temporary"):
            tcreduce.sum(x, method="tensorcore", out=gpu.array((), "float64"))


def test_capture_rules_of_the_handle():
    with fake_gpu() as gpu:
        x = gpu.array((1 << 20,), "float16")
        gpu.capturing = True
        with pytest.raises(CaptureError, match="before the CUDA graph capture"):
            tcreduce.reducer(like=x)
        gpu.capturing = False
        r = tcreduce.reducer(like=x)
        out = gpu.array((), "float32")
        gpu.capturing = True
        n_alloc, n_launch = len(gpu.allocations), len(gpu.launches)
        for _ in range(3):
            assert r(x, out=out) is out
        assert len(gpu.allocations) == n_alloc and len(gpu.launches) == n_launch + 3
        gpu.capturing = False
        cub = tcreduce.reducer(like=x, method="cub", warmup=False)
        gpu.capturing = True
        with pytest.raises(CaptureError, match="cannot be captured"):
            cub(x)


def test_handle_remembers_checked_arrays_weakly_and_rechecks_their_shape():
    """The arrays of the last checked call skip the layout checks, but not the shape check (CuPy's in-place shape
    setter), and are not kept alive by the handle."""
    import gc

    with fake_gpu() as gpu:
        x = gpu.array((64, 32), "float16")
        out = gpu.array((64,), "float32")
        r = tcreduce.reducer(like=x, axis=-1)
        start = len(gpu.launches)
        assert r(x, out=out) is out and r(x, out=out) is out
        assert [ln[3] for ln in gpu.launches[start:]] == [gpu.launches[start][3]] * 2
        x.shape = (32, 64)
        with pytest.raises(ValueError, match="shape"):
            r(x, out=out)
        x.shape = (64, 32)
        out.shape = (8, 8)
        with pytest.raises(ValueError, match="out must be"):
            r(x, out=out)
        y = gpu.array((64, 32), "float16")
        assert r(y).shape == (64,)
        assert r._x_ok[0]() is y
        del y
        gc.collect()
        assert r._x_ok[0]() is None
        with pytest.raises(ValueError, match="strides"):
            r(gpu.array((64, 64), "float16")[:, :32])


def test_small_calls_replay_one_graph_of_the_same_launches():
    """A repeated (input, output, stream) of a small plan is captured once on the private stream and replayed; every
    launch, direct or replayed, carries the plan's resolved arguments on the caller's stream."""
    from tcreduce import _launch

    with fake_gpu() as gpu:
        x = gpu.array((1 << 16,), "float16")
        out = gpu.array((), "float32")
        r = tcreduce.reducer(like=x)
        bound = r._launch
        assert bound.graphs is not None
        start, graphs0 = len(gpu.launches), len(gpu.graphs)
        for _ in range(5):
            r(x, out=out)
        assert len(gpu.graphs) == graphs0 + 1 and gpu.graph_launches == 4  # call 1 direct, call 2 captures
        want = _resolved(r.plan, x.data.ptr, out.data.ptr, bound.workspace_ptr, bound.counters_ptr)
        assert _recorded(gpu, start) == want * 5
        assert {ln[5] for ln in gpu.launches[start:]} == {gpu.stream_ptr}
        assert gpu.graphs[-1] == [w[:4] + (w[4], _launch.capture_stream(0).ptr, w[5]) for w in want]
        # another stream has its own graph; a stream that is capturing gets the kernels, never a graph launch
        gpu.stream_ptr = 0x7000
        r(x, out=out)
        r(x, out=out)
        assert len(gpu.graphs) == graphs0 + 2 and gpu.graph_launches == 5
        gpu.capturing = True
        n, start = gpu.graph_launches, len(gpu.launches)
        for _ in range(3):
            r(x, out=out)
        assert gpu.graph_launches == n and len(gpu.graphs) == graphs0 + 2
        assert _recorded(gpu, start) == want * 3
        # tcreduce.sum with out: the same replay, through the launcher bound to the stream's pools
        gpu.capturing = False
        n = gpu.graph_launches
        for _ in range(3):
            tcreduce.sum(x, out=out)
        assert gpu.graph_launches == n + 2


def test_graph_replay_limits():
    """Plans above GRAPH_MAX_BYTES and cooperative plans never capture; at most GRAPH_CACHE graphs per bound plan;
    addresses that never settle, or a capture that fails, turn graphs off and the kernels are launched directly."""
    from tcreduce import _launch

    with fake_gpu() as gpu:
        big = gpu.array((_launch.GRAPH_MAX_BYTES // 2 + 8,), "float16")
        out = gpu.array((), "float32")
        rb = tcreduce.reducer(like=big)
        assert rb._launch.graphs is None
        for _ in range(3):
            rb(big, out=out)
        assert gpu.graph_launches == 0 and not gpu.graphs
        coop = tcreduce.reducer(like=gpu.array((1 << 12,), "float16"), method="ladder_grid_sync")
        assert any(ln.cooperative for ln in coop.plan.launches) and coop._launch.graphs is None

        x = gpu.array((4096,), "float16")
        r = tcreduce.reducer(like=x)
        outs = [gpu.array((), "float32") for _ in range(_launch.GRAPH_CACHE + 2)]
        for _ in range(2):
            for o in outs:
                r(x, out=o)
        assert len(r._launch.graphs) == _launch.GRAPH_CACHE and r._launch._drops == 2
        for _ in range(_launch.GRAPH_DROPS_MAX):
            for o in outs:
                r(x, out=o)
        assert r._launch.graphs is None
        n, start = gpu.graph_launches, len(gpu.launches)
        r(x, out=outs[0])
        assert gpu.graph_launches == n and len(gpu.launches) == start + len(r.plan.launches)

        r2 = tcreduce.reducer(like=x)

        def refuse():
            raise RuntimeError("capture refused")

        _launch.capture_stream(0).begin_capture = refuse
        start = len(gpu.launches)
        r2(x, out=out)
        r2(x, out=out)
        assert r2._launch.graphs is None and len(gpu.launches) == start + 2 * len(r2.plan.launches)


def test_pools_grow_without_freeing_what_is_bound():
    from tcreduce import _launch

    with fake_gpu() as gpu:
        small = gpu.array((256, 1 << 14), "float16")
        tcreduce.sum(small, axis=0, method="shuffle")
        ws0 = _launch._WORKSPACES.get((0, gpu.stream_ptr))
        big = gpu.array((1 << 14, 1 << 12), "float16")
        for m in ("tensorcore", "shuffle", "wmma"):
            tcreduce.sum(big, axis=0, method=m)
            tcreduce.sum(big, axis=-1, method=m)
        ws1 = _launch._WORKSPACES.get((0, gpu.stream_ptr))
        if ws0 is not None and ws1 is not ws0:
            assert any(b is ws0 for b in _launch._RETIRED)  # replaced, kept alive for what was bound to it


# ------------------------------------------------------------------------------------------------------- GPU
def _cupy():
    import cupy

    return cupy


GPU_CASES = [((1,), None), ((17,), None), ((4097,), None), ((1 << 20) + 3, None), ((1 << 22) + 5, None),
             ((33, 255), -1), ((65537, 16), -1), ((300, 1032), -1), ((16, 1000), 0), ((257, 33), 0),
             ((6, 5, 4, 3), (1, 3)), ((40, 50), None)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("shape,axis", GPU_CASES, ids=[f"{s}-{a}" for s, a in GPU_CASES])
def test_gpu_handle_equals_sum(shape, axis, dtype, rng):
    from tcreduce.testing import check_sum, poisoned, random_input, same_bits

    cupy = _cupy()
    xh = random_input(rng, shape, dtype)
    for view in (None, (lambda v: v[..., 1:]) if len(np.shape(xh)) else None):
        xd = cupy.asarray(xh)
        xv_d, xv_h = (view(xd), view(xh)) if view else (xd, xh)
        if xv_h.size == 0:
            continue
        for method in _methods(dtype, axis is None) + ["cub"]:
            r = tcreduce.reducer(like=xv_d, axis=axis, method=method)
            want = tcreduce.sum(xv_d, axis=axis, method=method)
            got = r(xv_d)
            out = poisoned(r.result_shape, "float32")
            assert r(xv_d, out=out) is out
            if tcreduce._api.registry.get(r.method).deterministic:  # the atomic rungs add in arrival order
                assert same_bits(got, want), method
                assert same_bits(out, want), method
            else:  # every output written, each within the bound of any order of additions
                check_sum(out, xv_h, axis, method=r.method)
            if not method.startswith("ladder_") or method == "ladder_last_block":
                check_sum(got, xv_h, axis, method=r.method)
            # a second buffer of the same layout, different data
            x2h = random_input(rng, np.shape(xh), dtype)
            x2 = cupy.asarray(x2h)
            x2v_d, x2v_h = (view(x2), view(x2h)) if view else (x2, x2h)
            if x2v_d.data.ptr % 16 == xv_d.data.ptr % 16:
                check_sum(r(x2v_d), x2v_h, axis, method=r.method)


@pytest.mark.gpu
def test_gpu_handle_torch(rng):
    torch = pytest.importorskip("torch")
    from tcreduce.testing import check_sum, random_input

    xh = random_input(rng, (123, 77), "float16")
    xt = torch.from_numpy(xh).cuda()
    r = tcreduce.reducer(like=xt, axis=0)
    res = r(xt)
    assert isinstance(res, torch.Tensor) and res.is_cuda
    check_sum(res, xh, 0, method=r.method)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,axis,method", [
    ((1 << 16,), None, "auto"), ((1 << 22) + 5, None, "tensorcore"), ((1 << 22) + 5, None, "shuffle"),
    ((1 << 22) + 5, None, "wmma"), ((4096, 300), -1, "auto"), ((300, 1 << 14), -1, "tensorcore"),
    ((1 << 14, 300), 0, "shuffle"), ((16, 1 << 18), 0, "tensorcore"), ((1 << 20,), None, "ladder_last_block"),
    ((6, 5, 4, 3), (1, 3), "auto"), ((1 << 22) + 5, None, "exact"), ((300, 1 << 14), -1, "exact"),
    ((1 << 22) + 5, None, "kahan"), ((1 << 14, 300), 0, "kahan"), ((1 << 22) + 5, None, "tensorcore_kahan")])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_gpu_graph_replays_match_eager(shape, axis, method, dtype, rng):
    """Capture a handle call and a tcreduce.sum call, replay them several times on new data written into the same
    input buffer, and compare the bits with eager calls; plans of several blocks (last-block combination) included."""
    from tcreduce.testing import check_sum, random_input, to_numpy

    cupy = _cupy()
    if method != "auto" and dtype not in tcreduce._api.registry.get(method).dtypes:
        pytest.skip(f"{method} takes no {dtype}")
    xh = random_input(rng, shape, dtype)
    x = cupy.asarray(xh)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        r = tcreduce.reducer(like=x, axis=axis, method=method)
        plan = r.plan
        if plan is not None and np.prod(shape) > 1 << 20:
            assert max(ln.grid[0] * ln.grid[1] * ln.grid[2] for ln in plan.launches) > 1  # several blocks
        out_h = cupy.full(r.result_shape, np.nan, dtype=np.float32)
        copying = r._copy_buf is not None
        tcreduce.sum(x, axis=axis, method=method)  # warm-up of tcreduce.sum on this stream
        out_s = cupy.full(r.result_shape, np.nan, dtype=np.float32)
        s.synchronize()
        s.begin_capture()
        try:
            r(x, out=out_h)
            if not copying:
                tcreduce.sum(x, axis=axis, method=method, out=out_s)
        finally:
            graph = s.end_capture()
        for k in range(4):
            yh = random_input(rng, shape, dtype)
            x.set(yh, stream=s)  # new data, same buffer
            out_h.fill(np.nan)
            out_s.fill(np.nan)
            graph.launch(s)
            eager = tcreduce.sum(x, axis=axis, method=method)
            s.synchronize()
            e = to_numpy(eager)
            assert np.array_equal(to_numpy(out_h).view(np.uint32), e.view(np.uint32)), (k, "handle replay")
            if not copying:
                assert np.array_equal(to_numpy(out_s).view(np.uint32), e.view(np.uint32)), (k, "sum replay")
            check_sum(out_h, yh, axis, method=r.method)
    # the counters are back at zero after the replays: an eager call on the default stream agrees too
    assert np.array_equal(to_numpy(r(x)).view(np.uint32), e.view(np.uint32))


@pytest.mark.gpu
@pytest.mark.parametrize("shape,axis", [((1 << 16,), None), ((4097,), None), ((300, 1032), -1), ((16, 1000), 0),
                                        ((1 << 19) + 3, None)])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("blocking", [True, False], ids=["null-stream", "nonblocking-stream"])
def test_gpu_graph_replay_of_small_calls(shape, axis, dtype, blocking, rng):
    """Small plans replay a captured graph once their addresses repeat (tcreduce._launch): on new data in the same
    buffers, the replay equals the kernels launched directly, bit for bit, writes every output, and is within the
    bound; tcreduce.sum with the same out likewise."""
    from tcreduce.testing import check_sum, poisoned, random_input, to_numpy

    cupy = _cupy()
    s = cupy.cuda.Stream.null if blocking else cupy.cuda.Stream(non_blocking=True)
    with s:
        x = cupy.asarray(random_input(rng, shape, dtype))
        r = tcreduce.reducer(like=x, axis=axis)
        out = poisoned(r.result_shape, "float32")
        for _ in range(3):
            r(x, out=out)
        assert len(r._launch.graphs) == 1, "the repeated call was not captured"
        for k in range(3):
            yh = random_input(rng, shape, dtype)
            x.set(yh, stream=s)
            out[...] = np.nan
            n = len(r._launch.graphs)
            r(x, out=out)  # a replay
            assert len(r._launch.graphs) == n
            direct = poisoned(r.result_shape, "float32")
            r._launch.launch(x.data.ptr + r._offset, direct.data.ptr, s)
            s.synchronize()
            assert np.array_equal(to_numpy(out).view(np.uint32), to_numpy(direct).view(np.uint32)), k
            check_sum(out, yh, axis, method=r.method)
            o2 = poisoned(r.result_shape, "float32")
            for _ in range(3):
                tcreduce.sum(x, axis=axis, out=o2)
            s.synchronize()
            assert np.array_equal(to_numpy(o2).view(np.uint32), to_numpy(direct).view(np.uint32)), k


@pytest.mark.gpu
def test_gpu_sum_refuses_unsafe_capture():
    cupy = _cupy()
    x = cupy.ones((6, 5, 4, 3), dtype=cupy.float16)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        try:
            with pytest.raises(CaptureError):
                tcreduce.sum(x, axis=(1, 3))  # would copy into a temporary first
            with pytest.raises(CaptureError):
                tcreduce.sum(x.reshape(-1), method="cub")
        finally:
            s.end_capture()


