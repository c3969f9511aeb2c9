"""CPU tests of axis normalisation and of the canonical problems chosen for every kind of view."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.exceptions import AxisError

from tcreduce._layout import Cols, Flat, Rows, host_layout, normalize_axes, plan_layout


def test_normalize_axes():
    assert normalize_axes(None, 3) == (0, 1, 2)
    assert normalize_axes(-1, 3) == (2,)
    assert normalize_axes((2, 0), 3) == (0, 2)
    assert normalize_axes(np.int64(1), 3) == (1,)
    assert normalize_axes((), 3) == ()
    with pytest.raises(AxisError):
        normalize_axes(3, 3)
    with pytest.raises(AxisError):
        normalize_axes(-4, 3)
    with pytest.raises(ValueError, match="duplicate"):
        normalize_axes((0, -3), 3)
    with pytest.raises(TypeError):
        normalize_axes(1.5, 3)
    with pytest.raises(TypeError):
        normalize_axes(True, 3)


def _layout(x: np.ndarray, axis):
    layout, _ = host_layout(x, axis)
    return layout


def _replay(x: np.ndarray, axis) -> np.ndarray:
    """Sum through the chosen canonical problem, reading memory the way a kernel would (float64, exact enough)."""
    layout, axes = host_layout(x, axis)
    if layout.copy_order is not None:
        base = np.ascontiguousarray(x.transpose(layout.copy_order)).reshape(-1)
        start = 0
    else:
        owner = x
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        base = np.frombuffer(owner.tobytes(order="A"), dtype=x.dtype)  # the owner's memory, in memory order
        start = (x.__array_interface__["data"][0] - owner.__array_interface__["data"][0]) // x.itemsize
        start += layout.base_offset
    p = layout.problem
    b = base.astype(np.float64)
    if isinstance(p, Flat):
        out = np.array(b[start:start + p.n].sum())
    elif isinstance(p, Rows):
        out = np.array([b[start + i * p.ld: start + i * p.ld + p.k].sum() for i in range(p.m)])
    else:
        out = np.array([[sum(b[start + i * p.sa + j * p.sr + l] for j in range(p.r)) for l in range(p.b)]
                        for i in range(p.a)])
    return out.reshape(layout.out_shape)


VIEWS = [
    (lambda a: a, None), (lambda a: a, 0), (lambda a: a, 1), (lambda a: a, 2), (lambda a: a, (0, 2)),
    (lambda a: a, (1, 2)), (lambda a: a, (0, 1)), (lambda a: a[:, 1:, :], 2), (lambda a: a[:, :, 1:], None),
    (lambda a: a[::-1], 0), (lambda a: a[:, ::-1], 1), (lambda a: a.transpose(2, 0, 1), 0),
    (lambda a: a.transpose(2, 0, 1), (1, 2)), (lambda a: a[:, ::2], 2), (lambda a: a[1:], None),
    (lambda a: np.asfortranarray(a), None), (lambda a: np.asfortranarray(a), 0), (lambda a: a[:, :1, :], 1),
]


@pytest.mark.parametrize("i", range(len(VIEWS)))
def test_layout_reads_exactly_the_view(i):
    base = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)
    view, axis = VIEWS[i]
    x = view(base)
    np.testing.assert_array_equal(_replay(x, axis), x.astype(np.float64).sum(axis=axis))


def test_forms():
    x = np.zeros((8, 16), np.float16)
    assert _layout(x, None).problem == Flat(128, 0)
    assert _layout(x, 1).problem == Rows(8, 16, 16, 0)
    assert _layout(x, 0).problem == Cols(1, 8, 16, 0, 16, 0)
    assert _layout(x[:, 1:], 1).problem == Rows(8, 15, 16, 2)
    assert _layout(x[1:], None).problem == Flat(112, 0)  # 32 bytes in: still 16-byte aligned
    assert _layout(x.reshape(-1)[1:], None).problem == Flat(127, 2)
    y = np.zeros((3, 4, 5), np.float32)
    assert _layout(y, 1).problem == Cols(3, 4, 5, 20, 5, 0)
    assert _layout(y, (1, 2)).problem == Rows(3, 20, 20, 0)
    assert _layout(y.T, None).problem == Flat(60, 0)  # order-free: a transposed full sum is flat
    assert _layout(y[:, ::2], 2).problem == Rows(6, 5, 10, 0)  # kept axes (3, 2) merge: stride 20 = 2 * 10
    lay = _layout(y[::2, ::2], 2)  # kept axes do not merge into one stride -> contiguous copy
    assert lay.copy_order == (0, 1, 2) and lay.problem == Rows(4, 5, 5, 0)


def test_negative_strides_are_flipped():
    x = np.zeros(10, np.float32)[::-1]
    lay = _layout(x, None)
    assert lay.problem == Flat(10, 0) and lay.base_offset == -9


def test_plan_layout_broadcast_copies():
    lay = plan_layout((4, 5), (0, 1), (0,), 4, 0)
    assert lay.copy_order is not None


def test_emulator_reads_views_of_memory_no_numpy_array_owns():
    """A strided view whose memory belongs to another library (torch.from_numpy(a)[:, 1:].numpy(), say) has no
    NumPy owner: the emulator must read the view's own span, not a contiguous copy of it."""
    import tcreduce

    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (64, 257)).astype(np.float16)

    def foreign(v):
        class Foreign:
            pass

        o = Foreign()
        o.keep, o.__array_interface__ = v, dict(v.__array_interface__)
        return np.asarray(o)

    for view, axis in [(lambda z: z[:, 1:], 0), (lambda z: z[:, 1:], 1), (lambda z: z[::-1, 3:], 0),
                       (lambda z: z.T[1:], 1), (lambda z: z[:, ::2], None)]:
        v = view(a)
        fv = foreign(v)
        assert not isinstance(fv.base, np.ndarray) and fv.strides == v.strides
        want = tcreduce.emulate.sum(v, axis=axis, method="shuffle")
        got = tcreduce.emulate.sum(fv, axis=axis, method="shuffle")
        assert np.array_equal(want.view(np.uint32), got.view(np.uint32))
