"""The pure-Python half of :mod:`tcreduce.distributed`: the metadata row every rank all_gathers before any data
moves, the check every rank runs on the gathered table, and the rank-order fold. No torch, no GPU.

Agreement protocol. Each rank validates its own call and computes its local partial, catching any exception, then
describes the call in one fixed-size int64 row (:func:`encode_row`): its error (class code and up to
``MSG_BYTES`` bytes of message) or, when it has none, its dtypes, method, axes, shard axis, keepdims and shape.
All ranks all_gather the rows and run :func:`agree` on the same table, so they all raise the same exception with
the same message (a local error of the lowest failing rank first, then the first disagreement across ranks) or all
go on to the data collective with the same shapes. A rank that fails locally thus never leaves the others waiting
in a collective, and the table decides, on every rank alike, which ranks hold data (``active``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from ._arrays import canonical_nan

__all__ = ["META_LEN", "MAX_NDIM", "MSG_BYTES", "encode_row", "agree", "Agreement", "fold_ranks",
           "error_from_row", "IN_DTYPES", "OUT_DTYPES"]

MAGIC = 0x7463_7264_0001  # "tcrd", protocol version 1
MAX_NDIM = 32
IN_DTYPES = ("float16", "float32")
OUT_DTYPES = ("float16", "float32", "float64")
METHOD_BYTES = 32

# Row layout (int64 words).
_MAGIC, _ERR, _NDIM, _IN, _OUT, _AXES, _SHARD_AXIS, _KEEPDIMS, _LIMBS, _RANK = range(10)
_METHOD = 10                                  # METHOD_BYTES bytes of the method name
_SHAPE = _METHOD + METHOD_BYTES // 8          # MAX_NDIM words
_MSG_LEN = _SHAPE + MAX_NDIM                  # byte length of the error message
_MSG = _MSG_LEN + 1                           # MSG_BYTES bytes of UTF-8 message
MSG_BYTES = 8 * 64
META_LEN = _MSG + MSG_BYTES // 8              # 140 words: 1,120 bytes a rank

# Error classes that travel (code -> class); anything else travels as RuntimeError naming its class.
_ERROR_CLASSES: tuple[type, ...] = ()


def _error_classes() -> tuple[type, ...]:
    global _ERROR_CLASSES
    if not _ERROR_CLASSES:
        from numpy.exceptions import AxisError

        # most specific first: AxisError is a ValueError, UnsupportedDtype a TypeError
        _ERROR_CLASSES = (AxisError, TypeError, ValueError, ImportError, NotImplementedError, RuntimeError)
    return _ERROR_CLASSES


def _error_code(exc: BaseException) -> tuple[int, str]:
    """(code >= 1, message) of a local exception."""
    for i, cls in enumerate(_error_classes()):
        if isinstance(exc, cls):
            return i + 1, str(exc)
    return len(_error_classes()), f"{type(exc).__name__}: {exc}"  # RuntimeError


def _pack_bytes(data: bytes, words: int) -> np.ndarray:
    buf = data[:8 * words].ljust(8 * words, b"\0")
    return np.frombuffer(buf, dtype="<i8").astype(np.int64)


def _unpack_bytes(words: np.ndarray, length: Optional[int] = None) -> bytes:
    raw = np.ascontiguousarray(words, dtype=np.int64).astype("<i8").tobytes()
    return raw[:length] if length is not None else raw.rstrip(b"\0")


def _truncate_utf8(msg: str, limit: int) -> bytes:
    data = msg.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return data
    data = data[:limit - 3]
    return data.decode("utf-8", errors="ignore").encode("utf-8") + b"..."


def _method_bytes(method: str) -> bytes:
    data = method.encode("utf-8", errors="replace")
    if len(data) > METHOD_BYTES:  # (no registered name is this long) compare by digest
        data = hashlib.blake2b(data, digest_size=METHOD_BYTES).digest()
    return data


def encode_row(*, rank: int, error: Optional[BaseException] = None, in_dtype: str = "", out_dtype: str = "",
               method: str = "", axes: Sequence[int] = (), shard_axis: int = -1, keepdims: bool = False,
               shape: Sequence[int] = (), limbs: int = 0) -> np.ndarray:
    """One rank's metadata row (int64, ``META_LEN`` words). With ``error`` set, only the error travels."""
    row = np.zeros(META_LEN, np.int64)
    row[_MAGIC] = MAGIC
    row[_RANK] = rank
    if error is not None:
        code, msg = _error_code(error)
        data = _truncate_utf8(msg, MSG_BYTES)
        row[_ERR] = code
        row[_MSG_LEN] = len(data)
        row[_MSG:] = _pack_bytes(data, MSG_BYTES // 8)
        return row
    if len(shape) > MAX_NDIM:
        raise ValueError(f"at most {MAX_NDIM} dimensions travel in the metadata row, got {len(shape)}")
    row[_NDIM] = len(shape)
    row[_IN] = IN_DTYPES.index(in_dtype) + 1
    row[_OUT] = OUT_DTYPES.index(out_dtype) + 1
    row[_AXES] = sum(1 << int(a) for a in axes)
    row[_SHARD_AXIS] = shard_axis
    row[_KEEPDIMS] = int(bool(keepdims))
    row[_LIMBS] = limbs
    row[_METHOD:_SHAPE] = _pack_bytes(_method_bytes(method), METHOD_BYTES // 8)
    row[_SHAPE:_SHAPE + len(shape)] = np.asarray(shape, np.int64)
    return row


def error_from_row(row: np.ndarray) -> tuple[type, str]:
    """(exception class, message) carried by a row whose error code is set."""
    classes = _error_classes()
    code = int(row[_ERR])
    cls = classes[code - 1] if 1 <= code <= len(classes) else RuntimeError
    msg = _unpack_bytes(row[_MSG:], int(row[_MSG_LEN])).decode("utf-8", errors="replace")
    return cls, msg


@dataclass(frozen=True)
class Agreement:
    """What every rank concluded from the table: the common call and which ranks hold data.

    shard_lengths: each rank's length along ``shard_axis``, in group-rank order. reduced: whether ``shard_axis`` is
    among ``axes`` (then the partials travel). active: when reduced, the ranks whose shard holds at least one element
    of the reduction, in rank order (the ones the fold reads). out_shape: the result's shape without keepdims (-1 at
    the shard axis when it is not reduced: each rank's own length).
    """

    world: int
    ndim: int
    in_dtype: str
    out_dtype: str
    method: str
    axes: tuple[int, ...]
    shard_axis: int
    keepdims: bool
    limbs: int
    shard_lengths: tuple[int, ...]
    off_shape: tuple[int, ...]  # the shape with the shard axis's length set to 0
    reduced: bool
    active: tuple[int, ...]
    out_shape: tuple[int, ...]

    def global_shape(self) -> tuple[int, ...]:
        shape = list(self.off_shape)
        shape[self.shard_axis] = sum(self.shard_lengths)
        return tuple(shape)


def _by_value(values: Sequence[Any], show=str) -> str:
    """'float16 on ranks 0, 2; float32 on rank 1'."""
    groups: dict[Any, list[int]] = {}
    for r, v in enumerate(values):
        groups.setdefault(v, []).append(r)
    parts = []
    for v, ranks in groups.items():
        word = "rank" if len(ranks) == 1 else "ranks"
        shown = ", ".join(map(str, ranks[:8])) + (", ..." if len(ranks) > 8 else "")
        parts.append(f"{show(v)} on {word} {shown}")
    return "; ".join(parts)


def _axes_of(mask: int) -> tuple[int, ...]:
    return tuple(i for i in range(MAX_NDIM) if mask >> i & 1)


def agree(table: np.ndarray) -> Agreement:
    """Check the gathered rows (R, META_LEN), identically on every rank: raise the error the table describes
    (the same class and message on every rank) or return the :class:`Agreement`."""
    table = np.asarray(table, np.int64)
    if table.ndim != 2 or table.shape[1] != META_LEN or table.shape[0] < 1:
        raise RuntimeError(f"tcreduce.distributed: metadata table of shape {table.shape}, expected (R, {META_LEN})")
    world = table.shape[0]
    prefix = "tcreduce.distributed.sum"
    if np.any(table[:, _MAGIC] != MAGIC):
        bad = [r for r in range(world) if table[r, _MAGIC] != MAGIC]
        raise RuntimeError(f"{prefix}: ranks {bad} sent no tcreduce metadata (another tcreduce version, or another "
                           "collective issued on the group at the same time)")
    for r in range(world):
        if table[r, _ERR]:
            cls, msg = error_from_row(table[r])
            raise cls(f"{prefix} failed on rank {r} of {world}: {msg}")

    def same(col: int, what: str, show=str) -> int:
        vals = [int(v) for v in table[:, col]]
        if len(set(vals)) > 1:
            raise ValueError(f"{prefix}: the ranks disagree on {what}: {_by_value(vals, show)}")
        return vals[0]

    ndim = same(_NDIM, "the number of dimensions of their shards")
    shard_axis = same(_SHARD_AXIS, "shard_axis")
    in_dtype = IN_DTYPES[same(_IN, "the dtype of their shards", lambda c: IN_DTYPES[c - 1]) - 1]
    off = table[:, _SHAPE:_SHAPE + ndim].copy()
    lengths = tuple(int(v) for v in off[:, shard_axis])
    off[:, shard_axis] = 0
    shapes = [tuple(int(v) for v in row) for row in off]
    if len(set(shapes)) > 1:
        show = lambda s: "(" + ", ".join("*" if i == shard_axis else str(d) for i, d in enumerate(s)) + ")"  # noqa
        raise ValueError(f"{prefix}: the shards' shapes disagree off shard_axis={shard_axis} (the concatenation "
                         f"axis, '*' below): {_by_value(shapes, show)}")
    axes = _axes_of(same(_AXES, "axis", lambda m: str(_axes_of(m))))
    keepdims = bool(same(_KEEPDIMS, "keepdims", lambda k: str(bool(k))))
    out_dtype = OUT_DTYPES[same(_OUT, "dtype (the result's)", lambda c: OUT_DTYPES[c - 1]) - 1]
    methods = [_unpack_bytes(table[r, _METHOD:_SHAPE]) for r in range(world)]
    if len(set(methods)) > 1:
        raise ValueError(f"{prefix}: the ranks disagree on method: "
                         f"{_by_value(methods, lambda b: repr(b.decode('utf-8', errors='replace')))}")
    method = methods[0].decode("utf-8", errors="replace")
    limbs = same(_LIMBS, "the exact state's limb count")
    off_shape = shapes[0]
    reduced = shard_axis in axes
    other = 1
    for a in axes:
        if a != shard_axis:
            other *= off_shape[a]
    active = tuple(r for r in range(world) if lengths[r] * other > 0) if reduced else ()
    out_shape = tuple(-1 if i == shard_axis else d for i, d in enumerate(off_shape) if i not in axes)
    return Agreement(world, ndim, in_dtype, out_dtype, method, axes, shard_axis, keepdims, limbs, lengths,
                     off_shape, reduced, active, out_shape)


def fold_ranks(partials: Sequence[Any], out_dtype: Any = None) -> Any:
    """The documented cross-rank combination: ``((p[0] + p[1]) + p[2]) + ...`` elementwise, left to right in rank
    order, in the partials' own arithmetic (fp32 round to nearest for fp32 NumPy or CuPy arrays), then rounded once to
    ``out_dtype`` (None: kept), every NaN the canonical quiet NaN of that dtype (as a single-GPU sum writes it, whatever
    NaN ``inf + -inf`` made on this processor). Starts from ``p[0]`` itself (not from 0.0, which would turn a -0.0
    partial into +0.0). Returns a new array."""
    if len(partials) == 0:
        raise ValueError("fold_ranks needs at least one partial")
    acc = partials[0].copy()
    for p in partials[1:]:
        acc = acc + p
    if out_dtype is not None:
        acc = acc.astype(out_dtype, copy=False)
    return canonical_nan(acc)
