"""The launch path of tcreduce._launch: kernels launched through libcuda's ``cuLaunchKernel`` (``DriverStep``) with
the same arguments CuPy's launch passes, the fallback to CuPy when a driver launch fails, and, on a GPU, both paths
giving the same bits (``pytest -m gpu``)."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest

from tcreduce import _launch


class _FakeDriver:
    """A stand-in for cuLaunchKernel: records each launch's function, geometry, stream and the 8-byte parameters
    read back through the parameter array, and returns ``codes`` in turn (0: success)."""

    def __init__(self, codes=()):
        self.calls: list[tuple] = []
        self.codes = list(codes)

    def __call__(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        n = len(params)
        values = tuple(ctypes.cast(params[i], ctypes.POINTER(ctypes.c_uint64)).contents.value for i in range(n))
        self.calls.append((fn.value, (gx.value, gy.value, gz.value), (bx.value, by.value, bz.value), shared.value,
                           stream, values, extra))
        return self.codes.pop(0) if self.codes else 0


class _FakeFunction:
    def __init__(self, ptr: int, log: list):
        self.ptr, self.log = ptr, log

    def __call__(self, grid, block, args, shared, stream, coop):
        self.log.append((self.ptr, tuple(int(a) for a in args), stream.ptr))


@pytest.fixture(autouse=True)
def _readable_arguments(monkeypatch):
    """CuPy-path arguments as plain integers (CuPy's CIntptr cannot be read back on the host)."""
    monkeypatch.setattr(_launch, "kernel_arg", int)


def _launcher(log: list, template2=(("x", 0), 5, ("out", 0), ("counters", 8))):
    steps = [(_FakeFunction(0xA000, log), (7, 2, 1), (256, 1, 1), 0, False,
              (("x", 0), -3, ("out", 0), ("ws", 4), ("counters", 0), 1 << 40)),
             (_FakeFunction(0xB000, log), (1, 1, 1), (128, 1, 1), 64, False, template2)]
    return SimpleNamespace(steps=steps)


def test_driver_steps_pass_the_same_arguments_as_cupy(monkeypatch):
    drv = _FakeDriver()
    monkeypatch.setattr(_launch, "driver_launch", lambda: drv)
    monkeypatch.setattr(_launch, "_is_cupy_function", lambda fn: isinstance(fn, _FakeFunction))
    log: list = []
    b = _launch.BoundLaunch(_launcher(log), workspace_ptr=0x10000, counters_ptr=0x20000)
    assert len(b.direct) == 2
    stream = SimpleNamespace(ptr=0x77)
    b(0x1230, 0x4560, stream)
    assert log == []  # nothing went through CuPy
    assert drv.calls == [
        (0xA000, (7, 2, 1), (256, 1, 1), 0, 0x77, (0x1230, (1 << 64) - 3, 0x4560, 0x10004, 0x20000, 1 << 40), None),
        (0xB000, (1, 1, 1), (128, 1, 1), 64, 0x77, (0x1230, 5, 0x4560, 0x20008), None)]
    b(0x9990, 0x8880, stream)  # the next call rewrites both addresses, nothing else
    assert drv.calls[2][5] == (0x9990, (1 << 64) - 3, 0x8880, 0x10004, 0x20000, 1 << 40)
    # the CuPy path of the same binding passes the same values (as signed 64-bit integers)
    b._launch_cupy(0x1230, 0x4560, stream, 0)
    assert [(p, tuple(v & ((1 << 64) - 1) for v in a)) for p, a, _ in log] == [(c[0], c[5]) for c in drv.calls[:2]]


def test_a_failed_driver_launch_falls_back_to_cupy_from_that_step(monkeypatch):
    drv = _FakeDriver(codes=[0, 201])  # the second launch fails (e.g. CUDA_ERROR_INVALID_CONTEXT)
    monkeypatch.setattr(_launch, "driver_launch", lambda: drv)
    monkeypatch.setattr(_launch, "_is_cupy_function", lambda fn: isinstance(fn, _FakeFunction))
    log: list = []
    b = _launch.BoundLaunch(_launcher(log), workspace_ptr=0x10000, counters_ptr=0x20000)
    b(0x1230, 0x4560, SimpleNamespace(ptr=0x77))
    assert [c[0] for c in drv.calls] == [0xA000, 0xB000]
    assert [(p, a) for p, a, _ in log] == [(0xB000, (0x1230, 5, 0x4560, 0x20008))]  # only the failed step again


def test_without_a_driver_or_for_other_functions_cupy_launches(monkeypatch):
    log: list = []
    monkeypatch.setattr(_launch, "driver_launch", lambda: None)
    b = _launch.BoundLaunch(_launcher(log), 0x10000, 0x20000)
    assert b.direct == ()
    b(1, 2, SimpleNamespace(ptr=0))
    assert [p for p, _, _ in log] == [0xA000, 0xB000]
    # a driver, but a function that is not CuPy's (e.g. the fake GPU's): every step through CuPy, none mixed
    monkeypatch.setattr(_launch, "driver_launch", lambda: _FakeDriver())
    assert _launch.BoundLaunch(_launcher(log), 0x10000, 0x20000).direct == ()


def test_fake_gpu_never_reaches_the_driver():
    from tcreduce.fake_gpu import fake_gpu

    with fake_gpu():
        assert _launch.driver_launch() is None


# ------------------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("shape,axis,dtype", [((1 << 20) + 3, None, "float16"), ((37, 5000), -1, "float32"),
                                              ((3, 1 << 18), -1, "float16"), ((4099, 40), 0, "float32")])
def test_gpu_driver_and_cupy_launches_agree(shape, axis, dtype, rng):
    """Both launch paths of one binding, on the same input, give the same bits, and each writes every output."""
    import cupy

    import tcreduce
    from tcreduce._api import _PREPARED
    from tcreduce.testing import check_sum, poisoned, random_input, same_bits

    if _launch.driver_launch() is None:
        pytest.fail("libcuda's cuLaunchKernel could not be loaded on a machine with a GPU")
    xh = random_input(rng, shape, dtype)
    x = cupy.asarray(xh)
    want = tcreduce.sum(x, axis=axis, method="tensorcore")
    prep = next(p for k, p in _PREPARED.items() if k[1] == x.shape and k[7] == "tensorcore" and p.fast)
    stream = cupy.cuda.get_current_stream()
    bound = prep.launcher.bound_for(stream.ptr)
    assert bound.direct, "the driver path was not taken"
    outs = []
    for launch in (lambda o: bound(x.data.ptr + prep.byte_offset, o.data.ptr, stream),
                   lambda o: bound._launch_cupy(x.data.ptr + prep.byte_offset, o.data.ptr, stream, 0)):
        o = poisoned(np.shape(want), "float32")
        launch(o)
        outs.append(o)
    assert same_bits(outs[0], outs[1])
    assert same_bits(outs[0], want)
    check_sum(outs[0], xh, axis, method="tensorcore")
