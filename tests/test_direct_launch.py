"""Launches through the driver's cuLaunchKernel (tcreduce._direct_launch) instead of CuPy's kernel call.

CPU: a DirectStep hands the driver the function, grid, block, shared memory, stream and an argument array whose slots
hold the plan's arguments with the call's addresses (a recording stand-in for libcuda); a bound launch falls back to
CuPy's call for a step the driver refuses, and never builds direct steps for functions that are not CuPy's.
GPU (``pytest -m gpu``): the same plans launched both ways give the same bits, write every output and stay within the
bound; a thread that has made no CUDA call yet still gets its sum."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import tcreduce
from tcreduce import _direct_launch
from tcreduce.fake_gpu import fake_gpu


class _RecordingDriver:
    """Stands in for libcuda: cuLaunchKernel records its arguments with the 8-byte values its params point at."""

    def __init__(self, code: int = 0):
        self.calls: list[tuple] = []
        self.code = code
        self.cuLaunchKernel = self._launch

    def _launch(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        n = len(params)
        values = tuple(ctypes.c_uint64.from_address(params[i]).value for i in range(n))
        self.calls.append((fn, (gx, gy, gz), (bx, by, bz), shared, stream, values, extra))
        return self.code


def test_direct_step_passes_the_plans_arguments_with_the_calls_addresses():
    lib = _RecordingDriver()
    args = [0, 7, (1 << 40) + 3, -1, 0, 12]
    step = _direct_launch.DirectStep(lib, 0xABC, (5, 2), (256,), 48, args, xs=(0,), outs=(4,))
    assert step(0x7F00_0000_1000, 0x7F00_0000_2000, 0x55) == 0
    assert step(0x7F00_0000_3000, 0x7F00_0000_4000, 0) == 0
    want = [0x7F00_0000_1000, 7, (1 << 40) + 3, (1 << 64) - 1, 0x7F00_0000_2000, 12]
    assert lib.calls[0] == (0xABC, (5, 2, 1), (256, 1, 1), 48, 0x55, tuple(want), None)
    want[0], want[4] = 0x7F00_0000_3000, 0x7F00_0000_4000
    assert lib.calls[1] == (0xABC, (5, 2, 1), (256, 1, 1), 48, 0, tuple(want), None)


def test_direct_steps_only_for_cupys_functions_and_only_when_enabled(monkeypatch):
    from tcreduce._launch import BoundLaunch

    class NotCupys:
        ptr = 0x1234

    monkeypatch.setattr(_direct_launch, "driver", lambda: _RecordingDriver())
    assert _direct_launch.direct_step(NotCupys(), (1,), (32,), 0, [1, 2], (0,), (1,)) is None
    with fake_gpu() as gpu:  # the fake GPU's kernels are not CuPy functions: every step launches through them
        x = gpu.array((1 << 16,), "float16")
        r = tcreduce.reducer(like=x)
        assert isinstance(r._launch, BoundLaunch) and r._launch.direct == (None,) * len(r._launch.steps)
    monkeypatch.setattr(_direct_launch, "ENABLED", False)
    assert _direct_launch.graph_launch_direct(0x1, 0x2) == -1


@pytest.mark.parametrize("code,via_cupy", [(0, 0), (201, 1)])
def test_a_step_the_driver_refuses_launches_through_cupy(code, via_cupy):
    """Error code 0: the direct launch stands and CuPy's call is not made; any other code (201: no current context):
    that step goes through CuPy's call with the same arguments."""
    with fake_gpu() as gpu:
        x = gpu.array((1 << 16,), "float16")
        out = gpu.array((), "float32")
        r = tcreduce.reducer(like=x)
        bound = r._launch
        bound.graphs = None  # the launches themselves, no graph replay
        calls = []

        def step(x_ptr, out_ptr, stream_ptr):
            calls.append((x_ptr, out_ptr, stream_ptr))
            return code

        bound.direct = (step,) * len(bound.steps)
        start = len(gpu.launches)
        r(x, out=out)
        assert calls[0] == (x.data.ptr, out.data.ptr, gpu.stream_ptr)
        assert len(calls) == len(bound.steps)
        assert len(gpu.launches) - start == via_cupy * len(bound.steps)


# ------------------------------------------------------------------------------------------------------- GPU
def _cupy():
    import cupy

    return cupy


@pytest.mark.gpu
@pytest.mark.parametrize("shape,axis,method", [
    ((1 << 16,), None, "auto"), ((1 << 22) + 5, None, "tensorcore"), ((1 << 22) + 5, None, "shuffle"),
    ((4096, 300), -1, "auto"), ((300, 1 << 14), -1, "tensorcore"), ((1 << 14, 300), 0, "shuffle"),
    ((16, 1 << 18), 0, "tensorcore"), ((1 << 20,), None, "ladder_last_block"), ((1 << 22) + 5, None, "exact"),
    ((300, 1 << 14), -1, "exact"), ((1 << 14, 300), 0, "kahan"), ((1, 1), 0, "auto")])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_gpu_direct_and_cupy_launches_agree(shape, axis, method, dtype, rng):
    from tcreduce.testing import check_sum, poisoned, random_input, to_numpy

    cupy = _cupy()
    if method != "auto" and dtype not in tcreduce._api.registry.get(method).dtypes:
        pytest.skip(f"{method} takes no {dtype}")
    xh = random_input(rng, shape, dtype)
    x = cupy.asarray(xh)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        direct = tcreduce.reducer(like=x, axis=axis, method=method)
        if direct.plan is None or direct._copy_buf is not None:
            pytest.skip("no launch plan of its own for this problem")
        if _direct_launch.driver() is not None:
            assert any(d is not None for d in direct._launch.direct), "no step went to the driver"
        via_cupy = tcreduce.reducer(like=x, axis=axis, method=method)
        via_cupy._launch.direct = (None,) * len(via_cupy._launch.steps)
        outs = []
        for r in (direct, via_cupy, direct):  # the direct one twice: deterministic run to run
            r._launch.graphs = None
            out = poisoned(r.result_shape, "float32")
            r(x, out=out)
            outs.append(out)
        s.synchronize()
    bits = [to_numpy(o).view(np.uint32) for o in outs]
    assert np.array_equal(bits[0], bits[1]) and np.array_equal(bits[0], bits[2])
    check_sum(outs[0], xh, axis, method=direct.method)


@pytest.mark.gpu
def test_gpu_direct_launch_from_a_new_thread(rng):
    """A thread whose first CUDA work is tcreduce's launch (the driver may have no current context there: the step
    then goes through CuPy, which makes one current) gets the same bits as the main thread."""
    from tcreduce.testing import random_input, to_numpy

    cupy = _cupy()
    xh = random_input(rng, (1 << 16,), "float16")
    x = cupy.asarray(xh)
    r = tcreduce.reducer(like=x)
    out = cupy.full((), np.nan, dtype=np.float32)
    want = to_numpy(tcreduce.sum(x))
    got: list = []

    def work():
        try:
            r(x, out=out)
            cupy.cuda.get_current_stream().synchronize()
            got.append(to_numpy(out))
        except Exception as e:  # reported by the assertion below
            got.append(e)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert len(got) == 1 and not isinstance(got[0], Exception), got
    assert np.array_equal(got[0].view(np.uint32), want.view(np.uint32))
