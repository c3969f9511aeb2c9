"""A literal, lane-by-lane replay of the float32 tensor-core kernels (kernels/tensorcore_f32.cuh with the formats of
kernels/tensorcore_fp32.cu and kernels/tensorcore_tf32.cu), written from the kernel source independently of the
vectorised emulator twins (tcreduce/emulate/tensorcore_fp32.py, tensorcore_tf32.py) so that tests can hold one
against the other. Scalars are NumPy float32 (IEEE round to nearest); every mma.sync goes through the full
tcreduce.emulate.mma_model.mma with its A fragment assembled from the 32 lanes' registers by the PTX layout and an
all-ones B. Slow (Python loops over lanes): small problems only. Not a test module (helpers for
test_tensorcore_fp32.py and test_tensorcore_tf32.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from tcreduce._api import get_plan
from tcreduce._device import KNOWN_GPUS
from tcreduce._layout import Cols, Flat, Rows, host_layout, host_problem_data
from tcreduce._plan import DeviceSpec, Plan, param_dict
from tcreduce.emulate.mma_model import mma

F32 = np.float32
BF16_ONES = np.ones((16, 8), ml_dtypes.bfloat16)
TF32_ONES = np.ones((8, 8), np.float32)


def f(x) -> np.float32:
    return np.float32(x)


def bits(x) -> int:
    return int(np.array(x, F32).view(np.uint32))


def from_bits(b: int) -> np.float32:
    return np.array(b & 0xFFFFFFFF, np.uint32).view(F32)[()]


def two_sum(a, b):
    with np.errstate(all="ignore"):
        s = f(a + b)
        bb = f(s - a)
        return s, f(f(a - f(s - bb)) + f(b - bb))


def add2(x, y):
    s, t = two_sum(x[0], y[0])
    with np.errstate(all="ignore"):
        return s, f(f(x[1] + y[1]) + t)


def value2(x) -> np.float32:
    with np.errstate(all="ignore"):
        return x[0] if np.isinf(x[0]) else f(x[0] + x[1])


def butterfly(vals: list, offsets) -> list:
    """Lane l: v = add2(v[l], v[l ^ off]) for each offset in turn (own value first)."""
    for off in offsets:
        vals = [add2(vals[lane], vals[lane ^ off]) for lane in range(32)]
    return vals


def upper_halves(a, b) -> int:
    return ((bits(b) >> 16) << 16) | (bits(a) >> 16)


# ------------------------------------------------------------------------------------------------ formats
def _bf16_a(regs) -> np.ndarray:
    """A [16, 16] bfloat16 from regs[lane][j] (j = 0..3, two bf16 per register, element e in bits 16e..16e+15):
    A[g + 8 (j & 1)][2t + e + 8 (j >> 1)]."""
    a = np.zeros((16, 16), np.uint16)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for j in range(4):
            for e in range(2):
                a[g + 8 * (j & 1), 2 * t + e + 8 * (j >> 1)] = (regs[lane][j] >> (16 * e)) & 0xFFFF
    return a.view(ml_dtypes.bfloat16)


def _tf32_a(regs) -> np.ndarray:
    """A [16, 8] of fp32 registers: A[g + 8 (j & 1)][t + 4 (j >> 1)] = regs[lane][j]."""
    a = np.zeros((16, 8), np.uint32)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for j in range(4):
            a[g + 8 * (j & 1), t + 4 * (j >> 1)] = regs[lane][j]
    return a.view(F32)


def _lane_c(d: np.ndarray, lane: int) -> tuple:
    """c[0], c[2] of a lane from D [16, 8]: D[g][2t], D[g + 8][2t]."""
    g, t = lane >> 2, lane & 3
    return d[g, 2 * t], d[g + 8, 2 * t]


class LiteralSplit:
    """tcr32::Split for one warp, register by register."""

    def __init__(self, model: str = "H100"):
        self.lo = [(f(0), f(0))] * 32
        self.hi = [(f(0), f(0))] * 32
        self.rho_lo = [f(0)] * 32
        self.rho_hi = [f(0)] * 32
        self.model = model

    @staticmethod
    def _split_common(x0, x1, s2):
        """The kernel's cut: t = (s2 + x) - s2, r2 = x - t, hi' = t truncated to bf16, mid' = t - hi' (the twin cuts
        hi and mid on two grids instead; the blocks' sums and the remainders are the same)."""
        with np.errstate(all="ignore"):
            t0, t1 = f(f(s2 + x0) - s2), f(f(s2 + x1) - s2)
            m0 = f(t0 - from_bits(bits(t0) & 0xFFFF0000))
            m1 = f(t1 - from_bits(bits(t1) & 0xFFFF0000))
            return upper_halves(t0, t1), upper_halves(m0, m1), f(x0 - t0), f(x1 - t1)

    @staticmethod
    def _split_own(x0, x1):
        rz = lambda x: 0x7FFF if np.isnan(x) else bits(x) >> 16  # noqa: E731  cvt.rz.bf16: truncation
        h = (rz(x1) << 16) | rz(x0)
        with np.errstate(all="ignore"):
            r0, r1 = f(x0 - from_bits((h & 0xFFFF) << 16)), f(x1 - from_bits(h & 0xFFFF0000))
            m = upper_halves(r0, r1)
            l0, l1 = f(r0 - from_bits(bits(r0) & 0xFFFF0000)), f(r1 - from_bits(bits(r1) & 0xFFFF0000))
        return h, m, upper_halves(l0, l1)

    def step(self, v) -> None:
        """v: [32][8] float32 (each lane's v0..v7)."""
        eb = {}  # (lane, row 0 = g / 1 = g + 8) -> the row maximum's exponent field, after the quad shuffles
        for row, slots in ((0, (0, 1, 4, 5)), (1, (2, 3, 6, 7))):
            mx = []
            for lane in range(32):
                m = abs(f(v[lane][slots[0]]))
                for i in slots[1:]:
                    m = np.fmax(m, abs(f(v[lane][i])))
                mx.append(f(m))
            for off in (1, 2):
                mx = [f(np.fmax(mx[lane], mx[lane ^ off])) for lane in range(32)]
            for lane in range(32):
                eb[lane, row] = bits(mx[lane]) >> 23
        zero = np.zeros((16, 8), F32)
        if any(e > 238 for e in eb.values()):
            regs = [[self._split_own(v[lane][2 * p], v[lane][2 * p + 1]) for p in range(4)] for lane in range(32)]
            h = [[r[p][0] for p in range(4)] for r in regs]
            m = [[r[p][1] for p in range(4)] for r in regs]
            lo = [[r[p][2] for p in range(4)] for r in regs]
            d1 = mma(_bf16_a(h), BF16_ONES, zero, model=self.model)
            d3 = mma(_bf16_a(lo), BF16_ONES, mma(_bf16_a(m), BF16_ONES, zero, model=self.model), model=self.model)
        else:
            h, m = [], []
            for lane in range(32):
                sig = {}
                for row in (0, 1):
                    sig[row] = from_bits(((max(eb[lane, row], 17) + 8) << 23) | 0x400000)  # sigma2
                hl, ml, r = [], [], []
                for p in range(4):  # pairs 0, 2 belong to row g, pairs 1, 3 to row g + 8
                    hp, mp, r0, r1 = self._split_common(f(v[lane][2 * p]), f(v[lane][2 * p + 1]), sig[p & 1])
                    hl.append(hp), ml.append(mp), r.extend([r0, r1])
                h.append(hl), m.append(ml)
                with np.errstate(all="ignore"):
                    self.rho_lo[lane] = f(f(f(f(self.rho_lo[lane] + r[0]) + r[1]) + r[4]) + r[5])
                    self.rho_hi[lane] = f(f(f(f(self.rho_hi[lane] + r[2]) + r[3]) + r[6]) + r[7])
            d1 = mma(_bf16_a(m), BF16_ONES, mma(_bf16_a(h), BF16_ONES, zero, model=self.model), model=self.model)
            d3 = np.full((16, 8), -0.0, F32)
        for lane in range(32):
            c1, c3 = _lane_c(d1, lane), _lane_c(d3, lane)
            self.lo[lane] = add2(self.lo[lane], (c1[0], c3[0]))
            self.hi[lane] = add2(self.hi[lane], (c1[1], c3[1]))

    @staticmethod
    def _quad_sum(r: list) -> list:
        with np.errstate(all="ignore"):
            r = [f(r[lane] + r[lane ^ 1]) for lane in range(32)]
            return [f(r[lane] + r[lane ^ 2]) for lane in range(32)]

    def rows(self) -> tuple[list, list]:
        """(row_lo, row_hi) pairs per lane."""
        ql, qh = self._quad_sum(self.rho_lo), self._quad_sum(self.rho_hi)
        with np.errstate(all="ignore"):
            return ([(self.lo[lane][0], f(self.lo[lane][1] + ql[lane])) for lane in range(32)],
                    [(self.hi[lane][0], f(self.hi[lane][1] + qh[lane])) for lane in range(32)])


def round_tf32_bits(x) -> int:
    """round_tf32 of kernels/tensorcore_tf32.cu on one value (unmasked register bits)."""
    u = bits(x)
    ax = abs(f(x))
    if ax < from_bits(0x7F7FF000):
        return (u + 0x1000) & 0xFFFFFFFF
    if not ax <= from_bits(0x7F800000):
        return u | 0x00400000
    return u


class LiteralTf32:
    """tcr32::Tf32 for one warp, register by register (the tensor core reads the top 19 bits of each register:
    mma_model.mma with float32 operands does that itself)."""

    def __init__(self, model: str = "H100"):
        self.lo = [f(0)] * 32
        self.hi = [f(0)] * 32
        self.model = model

    def step(self, v) -> None:
        t = [[round_tf32_bits(v[lane][i]) for i in range(8)] for lane in range(32)]
        zero = np.zeros((16, 8), F32)
        d0 = mma(_tf32_a([[t[lane][0], t[lane][2], t[lane][1], t[lane][3]] for lane in range(32)]), TF32_ONES, zero,
                 model=self.model)
        d1 = mma(_tf32_a([[t[lane][4], t[lane][6], t[lane][5], t[lane][7]] for lane in range(32)]), TF32_ONES, zero,
                 model=self.model)
        with np.errstate(all="ignore"):
            for lane in range(32):
                c0, c1 = _lane_c(d0, lane), _lane_c(d1, lane)
                self.lo[lane] = f(f(self.lo[lane] + c0[0]) + c1[0])
                self.hi[lane] = f(f(self.hi[lane] + c0[1]) + c1[1])

    def rows(self) -> tuple[list, list]:
        return [(x, f(0)) for x in self.lo], [(x, f(0)) for x in self.hi]


# ------------------------------------------------------------------------------------------------ forms
def _warp_pair(fmt) -> tuple:
    """add2(row_lo, row_hi) per lane, warp_fold_rows2; every lane must end with the same pair."""
    lo, hi = fmt.rows()
    vals = butterfly([add2(lo[lane], hi[lane]) for lane in range(32)], (16, 8, 4))
    assert all(bits(v[0]) == bits(vals[0][0]) and bits(v[1]) == bits(vals[0][1]) for v in vals
               if not np.isnan(v[0])), "lanes disagree after warp_fold_rows2"
    return vals[0]


def _block_combine2(warp_totals: list) -> tuple:
    vals = [warp_totals[lane] if lane < len(warp_totals) else (f(0), f(0)) for lane in range(32)]
    return butterfly(vals, (16, 8, 4, 2, 1))[0]


def flat(plan: Plan, memory: np.ndarray, start: int, new_format) -> np.float32:
    """tc32_flat on memory[start : start + n] (a float32 array whose element 0 is 16-byte aligned, so that the
    problem's alignment is (4 * start) % 16); a plan with rounds walks its one-pass grid (block b: vectors [b P,
    (b + 1) P), P = BLOCK UNROLL ROUNDS) and combines the block pairs in two levels."""
    p = param_dict(plan)
    n, block, grid, unroll, rounds = plan.problem.n, p["block"], p["grid"], p["unroll"], p.get("rounds", 0)
    misalign = (4 * start) % 16
    head = min(((16 - misalign) % 16) // 4, n)
    nvec = (n - head) // 4
    tail = n - head - 4 * nvec
    x = memory[start:start + n]
    threads = grid * block
    stride = block if rounds else threads  # between a thread's unroll slots
    block_totals = []
    for b in range(grid):
        end = min((b + 1) * block * unroll * rounds, nvec) if rounds else nvec
        vec = lambda i: list(x[head + 4 * i: head + 4 * i + 4]) if i < end else [f(0)] * 4  # noqa: E731
        warp_totals = []
        for w in range(block // 32):
            fmt = new_format()
            if b == 0 and w == 0 and head + tail > 0:
                extras = list(x[:head]) + list(x[n - tail:]) if tail else list(x[:head])
                fmt.step([[extras[8 * lane + i] if 8 * lane + i < len(extras) else f(0) for i in range(8)]
                          for lane in range(32)])
            base = (b * block * unroll * rounds if rounds else b * block) + 32 * w
            while base < end:  # whole iterations and the last partial one run the same steps
                q = [[vec(base + lane + u * stride) for lane in range(32)] for u in range(unroll)]
                for s in range(unroll // 2):
                    fmt.step([q[2 * s][lane] + q[2 * s + 1][lane] for lane in range(32)])
                base += stride * unroll
            warp_totals.append(_warp_pair(fmt))
        block_totals.append(_block_combine2(warp_totals))
    if grid == 1:
        return value2(block_totals[0])
    if rounds:  # each group of `block` consecutive pairs, then the groups' totals
        block_totals = [_combine_partials2(block_totals[g0:g0 + block], block) for g0 in range(0, grid, block)]
    return value2(_combine_partials2(block_totals, block))


def _combine_partials2(pairs: list, block: int) -> tuple:
    """combine_grid2's combination (tcr::combine_slots on pairs): thread i add2s pairs i, i + block, ... to (0, 0) in
    order, warp_fold2, block_combine2."""
    threads_acc = []
    for i in range(block):
        acc = (f(0), f(0))
        for j in range(i, len(pairs), block):
            acc = add2(acc, pairs[j])
        threads_acc.append(acc)
    warps = [butterfly(threads_acc[32 * w:32 * w + 32], (16, 8, 4, 2, 1))[0] for w in range(block // 32)]
    return _block_combine2(warps)


def _split_range(length: int, chunk: int, splits: int, split: int) -> tuple[int, int, int]:
    per_split = -(-(-(-length // chunk)) // splits)
    begin = split * per_split * chunk
    end = min(length, begin + per_split * chunk)
    return begin, end, (-(-(end - begin) // chunk) if end > begin else 0)


def _combine(pairs_by_split: list[list]) -> np.float32:
    """pairs_by_split[s][q]: per split the group's warp pairs; add2 in q order from (0, 0) (one warp: its pair), then
    the splits likewise; value2."""
    per_split = []
    for pairs in pairs_by_split:
        if len(pairs) == 1:
            per_split.append(pairs[0])
        else:
            acc = (f(0), f(0))
            for pr in pairs:
                acc = add2(acc, pr)
            per_split.append(acc)
    if len(per_split) == 1:
        return value2(per_split[0])
    acc = (f(0), f(0))
    for pr in per_split:
        acc = add2(acc, pr)
    return value2(acc)


def tiles(plan: Plan, segments: list, new_format) -> list:
    """tc32_rows / tc32_cols: ``segments`` is a list of tiles, each a list of 16 segments (a 1-D float32 array, or
    None where the segment does not exist); returns per tile the 16 segment sums (None for missing segments)."""
    p = param_dict(plan)
    splits, wpt = p["splits"], p["wpt"]
    length = max(len(s) for t in segments for s in t if s is not None)
    out = []
    for tile in segments:
        per_split = []
        for split in range(splits):
            e_begin, e_end, nchunks = _split_range(length, 16, splits, split)
            pairs = []
            for q in range(wpt):
                fmt = new_format()
                for ch in range(q, nchunks, wpt):
                    e0 = e_begin + ch * 16
                    v = []
                    for lane in range(32):
                        g, t = lane >> 2, lane & 3
                        get = lambda sg, e: (tile[sg][e] if tile[sg] is not None and e < e_end else f(0))  # noqa
                        lo = [get(g, e0 + 4 * t + i) for i in range(4)]
                        hi = [get(g + 8, e0 + 4 * t + i) for i in range(4)]
                        v.append([lo[0], lo[1], hi[0], hi[1], lo[2], lo[3], hi[2], hi[3]])
                    fmt.step(v)
                lo, hi = fmt.rows()
                for lane in range(32):  # the quad's lanes must agree
                    assert bits(lo[lane][0]) == bits(lo[lane & ~3][0]) and bits(hi[lane][1]) == bits(hi[lane & ~3][1])
                pairs.append([lo[4 * r] if r < 8 else hi[4 * (r - 8)] for r in range(16)])
            per_split.append(pairs)
        out.append([_combine([[pairs[q][r] for q in range(wpt)] for pairs in per_split])
                    if tile[r] is not None else None for r in range(16)])
    return out


def stream(plan: Plan, rows: np.ndarray, new_format) -> list:
    """tc32_rows_stream on rows [m, k] (float32)."""
    p = param_dict(plan)
    splits, wpt = p["splits"], p["wpt"]
    m, k = rows.shape
    out = []
    for row in range(m):
        per_split = []
        for split in range(splits):
            c_begin, c_end, nchunks = _split_range(k, 256, splits, split)
            pairs = []
            for q in range(wpt):
                fmt = new_format()
                for ch in range(q, nchunks, wpt):
                    col = c_begin + ch * 256
                    get = lambda c: rows[row, c] if c < c_end else f(0)  # noqa: E731
                    fmt.step([[get(col + 4 * lane + i) for i in range(4)] + [get(col + 128 + 4 * lane + i)
                                                                              for i in range(4)]
                              for lane in range(32)])
                pairs.append(_warp_pair(fmt))
            per_split.append(pairs)
        out.append(_combine(per_split))
    return out


def rows4(rows: np.ndarray, new_format) -> list:
    """tc32_rows4 on rows [m, k] (float32): a warp per 4 rows, chunks of 64, lane (g, t) holding elements
    64c + 16(g & 3) + 4t .. +3 of rows 4T + (g >> 2) (lo) and 4T + 2 + (g >> 2) (hi); per row the butterfly over
    xor 4 and xor 8 of its 4 mma rows' pairs (lane 0: rows 4T, 4T + 2; lane 16: 4T + 1, 4T + 3)."""
    m, k = rows.shape
    out = [None] * m
    for tile in range(-(-m // 4)):
        fmt = new_format()
        get = lambda r, e: rows[r, e] if r < m and e < k else f(0)  # noqa: E731
        for c in range(-(-k // 64)):
            v = []
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                e0 = 64 * c + 16 * (g & 3) + 4 * t
                lo = [get(4 * tile + (g >> 2), e0 + i) for i in range(4)]
                hi = [get(4 * tile + 2 + (g >> 2), e0 + i) for i in range(4)]
                v.append([lo[0], lo[1], hi[0], hi[1], lo[2], lo[3], hi[2], hi[3]])
            fmt.step(v)
        lo, hi = fmt.rows()
        a, b = butterfly(lo, (4, 8)), butterfly(hi, (4, 8))
        for lane, (row_a, row_b) in ((0, (4 * tile, 4 * tile + 2)), (16, (4 * tile + 1, 4 * tile + 3))):
            for row, pair in ((row_a, a[lane]), (row_b, b[lane])):
                if row < m:
                    out[row] = value2(pair)
    return out


def run(plan: Plan, data: np.ndarray, new_format, memory: np.ndarray | None = None, start: int = 0) -> np.ndarray:
    """The literal replay of ``plan`` on its problem data (as tcreduce._layout.host_problem_data gives it; Flat also
    needs the owning ``memory`` and ``start`` for the alignment). Returns float32 outputs, flattened."""
    prob = plan.problem
    if isinstance(prob, Flat):
        return np.array([flat(plan, memory if memory is not None else np.asarray(data, F32), start, new_format)], F32)
    if isinstance(prob, Rows):
        if param_dict(plan)["form"] == "stream":
            return np.array(stream(plan, np.asarray(data, F32), new_format), F32)
        if param_dict(plan)["form"] == "rows4":
            return np.array(rows4(np.asarray(data, F32), new_format), F32)
        m = data.shape[0]
        segs = [[np.asarray(data[16 * t + r], F32) if 16 * t + r < m else None for r in range(16)]
                for t in range(-(-m // 16))]
        return np.array([v for t in tiles(plan, segs, new_format) for v in t if v is not None], F32)
    assert isinstance(prob, Cols)
    # tc32_cols: a warp's strip is 32 columns; step h (0, 1) of a chunk puts column 4g + 2h of the strip in mma row g
    # and column 4g + 2h + 1 in row g + 8, the lanes holding each column's chunk elements as tc32_rows holds a row's
    a, r, b = data.shape
    out = np.full((a, b), np.nan, F32)
    keys, segs = [], []
    for i in range(a):
        for l0 in range(0, b, 32):
            for h in range(2):
                cols = [l0 + 4 * (s % 8) + 2 * h + s // 8 for s in range(16)]
                keys.append((i, cols))
                segs.append([np.asarray(data[i, :, c], F32) if c < b else None for c in cols])
    for (i, cols), sums in zip(keys, tiles(plan, segs, new_format)):
        for c, v in zip(cols, sums):
            if v is not None:
                out[i, c] = v
    return out.reshape(-1)


# ------------------------------------------------------------------------------------------------ test helpers
# A 1-SM GPU (32 resident warps) puts small problems into the multi-block, warp-group and split paths an H100 keeps
# for large ones, so that the literal replay stays fast. The order of additions does not depend on the GPU.
ONE_SM = DeviceSpec("one-SM test GPU", 1, (9, 0))
H100 = KNOWN_GPUS["H100"]


FULL_SIZES = [1, 2, 3, 4, 5, 15, 16, 17, 255, 256, 257, 1023, 1025, 4095, 4097, 65535, 65537]
ROW_LENGTHS = [1, 3, 15, 16, 17, 33, 255, 256, 257, 1023, 1024, 1025, 1032]
# (shape, axis, view or None): every form on awkward sizes, misaligned, reversed, transposed and strided views, empties
AWKWARD_CASES = ([((n,), None, None) for n in FULL_SIZES] + [((33, k), -1, None) for k in ROW_LENGTHS]
                 + [((k, 40), 0, None) for k in ROW_LENGTHS]
                 + [((33, 1040), -1, lambda x: x[:, 1:]), ((1000,), None, lambda x: x[3:]),
                    ((1000,), None, lambda x: x[::-1]), ((40, 300), 0, lambda x: x.T), ((5, 17, 40), 1, None),
                    ((7, 3, 5), (0, 2), None), ((96, 80), -1, lambda x: x[:, ::2]), ((20, 64), None, lambda x: x.T),
                    ((4, 2048), -1, lambda x: x[:, :1500]), ((0, 16), -1, None), ((16, 0), -1, None),
                    ((0,), None, None)])


def values(rng: np.random.Generator, shape, spread: int = 5) -> np.ndarray:
    """Signed values over 2 * spread decades (never all zero)."""
    return (rng.standard_normal(shape) * 10.0 ** rng.integers(-spread, spread, shape)).astype(F32)


def random_bits(rng: np.random.Generator, shape) -> np.ndarray:
    """fp32 values with every finite exponent field 0..254 (subnormals and zeros included), random signs and
    fractions."""
    field = rng.integers(0, 255, shape).astype(np.uint32)
    frac = rng.integers(0, 1 << 23, shape).astype(np.uint32)
    sign = rng.integers(0, 2, shape).astype(np.uint32) << np.uint32(31)
    return (sign | (field << np.uint32(23)) | frac).view(F32)


# (shape, axis, view, device): one of each form and work split
REPLAY_CASES = {
    "flat, one block, aligned": ((1000,), None, None, ONE_SM),
    "flat, head and tail": ((1003,), None, lambda x: x[3:], ONE_SM),
    "flat, tiny: only the head/tail step": ((9,), None, lambda x: x[1:], ONE_SM),
    "flat, 4 blocks, partial last iteration": ((40001,), None, lambda x: x[1:], ONE_SM),
    "rows short, 16-byte loads": ((40, 16), -1, None, ONE_SM),
    "rows short, scalar loads": ((40, 5), -1, None, ONE_SM),
    "rows, a group of 4 warps, scalar loads": ((40, 37), -1, None, ONE_SM),
    "rows, a group of 8 warps, 16-byte loads": ((3, 300), -1, None, ONE_SM),
    "rows, splits (misaligned rows)": ((2, 999), -1, None, H100),
    "rows, misaligned view": ((33, 1040), -1, lambda x: x[:, 1:], ONE_SM),
    "stream, one warp per row": ((40, 1024), -1, None, ONE_SM),
    "stream, a group per row": ((3, 2100), -1, None, ONE_SM),
    "stream, splits": ((2, 40000), -1, None, H100),
    "cols short": ((16, 40), 0, None, ONE_SM),
    "cols, a group of 8 warps": ((100, 20), 0, None, ONE_SM),
    "cols, 3-d, short": ((3, 7, 5), 1, None, ONE_SM),
    "cols, splits": ((3000, 3), 0, None, H100),
    "cols, strided view": ((40, 50), 0, lambda x: x[1:, 1:], ONE_SM),
    "cols, 16-byte loads, a partial last strip": ((40, 72), 0, None, ONE_SM),
    "cols, 16-byte loads, splits": ((1000, 36), 0, None, H100),
}


def replay_case(method: str, new_format, twin, case, rng, data=None):
    shape, axis, view, device = REPLAY_CASES[case]
    x = values(rng, shape) if data is None else data(shape)
    xv = view(x) if view else x
    layout, _ = host_layout(xv, axis)
    plan = get_plan(method, layout.problem, "float32", "float32", device)
    d = host_problem_data(xv, layout)
    if isinstance(plan.problem, Flat):
        memory = x.reshape(-1)
        start = (xv.__array_interface__["data"][0] - x.__array_interface__["data"][0]) // 4
        want = run(plan, d, new_format, memory=memory, start=start)
    else:
        want = run(plan, d, new_format)
    got = np.asarray(twin(plan, d, "H100"), F32).reshape(-1)
    return plan, got, want


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Bitwise equal, except that any NaN matches any NaN (NaN payloads are not part of the contract)."""
    got, want = np.asarray(got, F32), np.asarray(want, F32)
    nan = np.isnan(got)
    return bool(np.array_equal(nan, np.isnan(want)) and np.array_equal(got[~nan].view(np.uint32),
                                                                       want[~nan].view(np.uint32)))


# ------------------------------------------------------------------------------------------- GPU == twin
_ALL32 = ("tensorcore", "tensorcore_tf32")
# The paths of tc32_cols and tc32_rows that an H200 takes by default (its FAMILY_TUNING) and the module-level (H100)
# plans leave off: name -> (the plan parameters that show it taken, the methods that take it, cases (in GPU_CASES, so
# the GPU test on an H200 covers them)): first-axis sums of 2 chunks per strip with a warp each, whole chunks of 16-byte
# rows, a partial chunk of rows that are not, strips across i; 3-4 chunks with two warps; rows 8-byte aligned but not 16
# (the split); strips of more than 4 chunks off TMA in trips (tf32: inputs under 16 MiB, rows not 16-byte aligned); rows
# of 17-112 in the short path (the split's rows not 16-byte aligned: 17-96), the split's rows of 128-320 but 256 and
# tf32's of 129-223 on the tile loop (not tc32_rows4), 4 chunks in flight in its tc32_rows4 and its rows of 1024-4096
# there (not streamed)
H200_PATHS = {
    "few-chunk path": (dict(few=2, wpt=1), _ALL32, [((32, 204800), 0), ((17, 204803), 0), ((3, 20, 70001), 1)]),
    "two warps per strip": (dict(few=2, wpt=2), _ALL32, [((64, 102400), 0), ((50, 102400), 0), ((3, 40, 40001), 1)]),
    "8-byte loads": (dict(aligned8=True), ("tensorcore",),
                     [((16, 4098), 0), ((32, 204802), 0), ((48, 102402), 0), ((300, 1026), 0)]),
    "few path in trips": (dict(few_loop=True), ("tensorcore_tf32",),
                          [((128, 2000), 0), ((100, 2003), 0), ((3, 200, 2001), 1), ((100, 70002), 0)]),
    "rows of 2 chunks in the short path": (dict(short=True, chunks=2), _ALL32,
                                           [((70001, 32), -1), ((70001, 17), -1), ((70000, 30), -1)]),
    "rows of 3-4 chunks in the short path": (
        dict(short=True), _ALL32, [((70001, 64), -1), ((70001, 33), -1), ((70000, 48), -1), ((70003, 60), -1)]),
    "rows of 5-6 chunks in the short path": (dict(short=True), _ALL32,
                                             [((70001, 80), -1), ((70003, 96), -1), ((70001, 65), -1)]),
    "rows of 7 chunks in the short path": (dict(short=True, chunks=7), _ALL32,
                                           [((70001, 112), -1), ((70003, 100), -1)]),
    "rows of 7 chunks in the short path, scalar loads": (dict(short=True, chunks=7, vector=False), ("tensorcore_tf32",),
                                                         [((70001, 101), -1), ((70003, 110), -1)]),
    "rows of 128-255 on the tile loop": (dict(form="rows", short=False), ("tensorcore",),
                                         [((70000, 128), -1), ((70000, 252), -1)]),
    "rows of 129-223 on the tile loop": (dict(form="rows", short=False), _ALL32,
                                         [((70001, 160), -1), ((70000, 200), -1)]),
    "rows of 257-288 on the tile loop": (dict(form="rows", short=False), _ALL32,
                                         [((70000, 260), -1), ((70000, 288), -1)]),
    "rows of 289-352 on the tile loop": (dict(form="rows", short=False), ("tensorcore",),
                                         [((70001, 320), -1), ((70001, 352), -1)]),
    "tc32_rows4, 4 chunks in flight": (dict(form="rows4", unroll=4), ("tensorcore",),
                                       [((70000, 256), -1), ((70000, 388), -1), ((70001, 500), -1)]),
    "tc32_rows4 on rows of 1024-4096": (dict(form="rows4"), ("tensorcore",),
                                        [((17000, 1024), -1), ((16900, 2052), -1)]),
    "tc32_rows4 on rows of 8192-16384, 8 chunks in flight": (dict(form="rows4", unroll=8), ("tensorcore",),
                                                             [((7700, 8196), -1), ((7650, 10000), -1)]),
    "tc32_rows4 on rows of 512-1023": (dict(form="rows4"), ("tensorcore_tf32",),
                                       [((17000, 768), -1), ((17001, 1020), -1)]),
}
GPU_CASES_COMMON = [
    ((1,), None), ((17,), None), ((1000,), None), ((4097,), None), (((1 << 20) + 3,), None), (((1 << 22) + 1,), None),
    ((64, 16), -1), ((100, 17), -1), ((33, 255), -1), ((1000, 64), -1), ((16, 4097), -1), ((3, 100_001), -1),
    ((256, 1 << 14), -1), ((1 << 16, 16), -1), ((2000, 1025), -1), ((5000, 1024), -1), ((5, 1 << 16), -1),
    ((16, 1000), 0), ((1000, 40), 0), ((5, 17, 40), 1), ((3, 1 << 16, 8), 1), ((1 << 15, 64), 0), ((7, 3, 5), (0, 2)),
    ((1 << 18, 36), 0), ((48, 1 << 14), 0), ((17000, 128), -1), ((16901, 300), -1),
    ((12700, 600), -1),
    ((80, 52432), 0),  # 16 MiB: tc32_cols_tma on an H100 (COLS_TMA_MIN_BYTES)
    # the short paths' whole trips and the rest: rows of 16 past whole trips; columns of 16 rows whose adjacent strips
    # span two i (80 columns) or not (128)
    ((65537, 16), -1), ((3, 16, 80), 1), ((4, 16, 128), 1),
]
# ... and the paths an H200 takes that an H100 does not, a group each (the GPU test's parameter: they run side by side)
GPU_CASE_GROUPS = {"common": GPU_CASES_COMMON} | {f"h200: {name}": cases for name, (_, _, cases) in H200_PATHS.items()}
GPU_CASES = [case for group in GPU_CASE_GROUPS.values() for case in group]


def case_group_id(name: str) -> str:
    """A :data:`GPU_CASE_GROUPS` name as a pytest id ("h200-rows_of_2_chunks_in_the_short_path": no spaces)."""
    return name.replace(": ", "-").replace(", ", "-").replace(" ", "_")


# Variants turned on for both methods whatever the GPU (the H200_PATHS, and the short path for rows of 65-128 at the
# module-level 2 blocks per SM, off on every GPU): name -> (the planner constants that turn it on, the plan parameter
# that shows it taken, cases that take it with them on an H200 (tf32's strips kept off TMA)). The GPU test holds each
# against the twin with its setting patched in, as tune_plans does
PREPARED = {
    "rows of 2 chunks in the short path": (dict(TILE_SHORT_MAX_CHUNKS=dict.fromkeys(_ALL32, 2)), ("short", True),
                                           H200_PATHS["rows of 2 chunks in the short path"][2]),
    "two warps per strip": (dict(COLS_FEW_PATH_MAX_CHUNKS=dict.fromkeys(_ALL32, 4)), ("wpt", 2),
                            H200_PATHS["two warps per strip"][2]),
    "8-byte loads": (dict(COLS_LOAD8=dict.fromkeys(_ALL32, True)), ("aligned8", True), H200_PATHS["8-byte loads"][2]),
    "few path in trips": (dict(COLS_FEW_LOOP=dict.fromkeys(_ALL32, True)), ("few_loop", True),
                          [((128, 2000), 0), ((100, 2003), 0), ((128, 35000), 0), ((3, 200, 2001), 1)]),
    "in trips, 8-byte loads": (dict(COLS_FEW_LOOP=dict.fromkeys(_ALL32, True), COLS_LOAD8=dict.fromkeys(_ALL32, True)),
                               ("aligned8", True), [((100, 70002), 0)]),
    "rows of 3-4 chunks in the short path": (
        dict(TILE_SHORT_MAX_CHUNKS=dict.fromkeys(_ALL32, 4)), ("short", True),
        H200_PATHS["rows of 3-4 chunks in the short path"][2]),
    "rows of 5-8 chunks in the short path": (
        dict(TILE_SHORT_MAX_CHUNKS=dict.fromkeys(_ALL32, 8), TILE_SHORT_MAX_CHUNKS_SCALAR=dict.fromkeys(_ALL32, 8),
             TILE_SHORT8_BLOCKS_PER_SM=2, ROWS4_K=dict.fromkeys(_ALL32, ((129, 512),))), ("short", True),
        [((70001, 80), -1), ((70001, 127), -1), ((70003, 100), -1), ((70000, 128), -1)]),
}
NO_TMA = dict(COLS_TMA_MIN_CHUNKS=dict.fromkeys(_ALL32, 1 << 30))


def cases_plan_their_paths(method: str) -> None:
    """On the CPU: for a method a :data:`H200_PATHS` entry lists, an H200 plans its cases through its path and an
    H100 none of them (for another method both plan them alike); with its setting patched in, an H200 plans every
    :data:`PREPARED` case through its variant. So the GPU tests keep covering them."""
    from tcreduce.plans import tensorcore_fp32 as plan
    from tcreduce.testing import patched_plans

    for name, (params, methods, cases) in H200_PATHS.items():
        for shape, axis in cases:
            layout, _ = host_layout(np.empty(shape, F32), axis)
            taken = {gpu: all(param_dict(get_plan(method, layout.problem, "float32", "float32", KNOWN_GPUS[gpu]))[k]
                              == v for k, v in params.items()) for gpu in ("H200", "H100")}
            expected = {"H200": True, "H100": False} if method in methods else dict.fromkeys(taken, taken["H100"])
            assert taken == expected, (name, shape, axis, taken)
    for name, (setting, (param, value), cases) in PREPARED.items():
        with patched_plans(plan, dict(setting, **NO_TMA)):
            for shape, axis in cases:
                layout, _ = host_layout(np.empty(shape, F32), axis)
                p = get_plan(method, layout.problem, "float32", "float32", KNOWN_GPUS["H200"])
                assert param_dict(p)[param] == value, (name, shape, axis, p.launches[0].kernel)


def gpu_prepared_equal_twin(method: str, dists) -> None:
    """On the current GPU, with each :data:`PREPARED` setting patched in, ``tcreduce.sum`` (poisoned ``out``)
    and ``tcreduce.emulate.sum`` give the same bits on its cases, every input of ``dists(shape)`` and a view one
    element in; asserts no mismatch."""
    import cupy

    import tcreduce
    from tcreduce._device import current_device
    from tcreduce.plans import tensorcore_fp32 as plan
    from tcreduce.testing import patched_plans, poisoned, to_numpy

    device = current_device()[1]
    mismatches, count = [], 0
    for name, (setting, _, cases) in PREPARED.items():
        with patched_plans(plan, dict(setting, **NO_TMA)):
            for shape, axis in cases:
                for dist, xh in dists(shape).items():
                    xd = cupy.asarray(xh)
                    for xv, xdv in ((xh, xd), (xh[..., 1:], xd[..., 1:])):
                        want = tcreduce.emulate.sum(xv, axis=axis, method=method, gpu=device)
                        got = to_numpy(tcreduce.sum(xdv, axis=axis, method=method,
                                                    out=poisoned(np.shape(want), "float32")))
                        count += 1
                        if not same_bits(got, want):
                            mismatches.append((name, shape, axis, dist, xv.shape))
    print(f"\nGPU == emulator, prepared variants ({method}): {count - len(mismatches)}/{count}")
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:5]}"


def gpu_equals_twin(method: str, dists, cases: list = GPU_CASES) -> None:
    """On the current GPU, ``tcreduce.sum`` (poisoned ``out``) and ``tcreduce.emulate.sum`` give the same bits for
    ``method`` on every case of ``cases`` (default :data:`GPU_CASES`), every input ``dists(shape)`` returns (name ->
    float32 array) and its misaligned view; prints the count, asserts no mismatch."""
    import cupy

    import tcreduce
    from tcreduce._device import current_device
    from tcreduce.testing import poisoned, to_numpy

    device = current_device()[1]
    mismatches, count = [], 0
    for shape, axis in cases:
        for dist, xh in dists(shape).items():
            xd = cupy.asarray(xh)
            views = [(xh, xd)]
            if xh.size > 1:
                views.append((xh.reshape(-1)[1:], xd.reshape(-1)[1:]) if axis is None else (xh[..., 1:], xd[..., 1:]))
            for xv, xdv in views:
                want = tcreduce.emulate.sum(xv, axis=axis, method=method, gpu=device)
                got = to_numpy(tcreduce.sum(xdv, axis=axis, method=method, out=poisoned(np.shape(want), "float32")))
                count += 1
                if not same_bits(got, want):
                    mismatches.append((shape, axis, dist, xv.shape, got.reshape(-1)[:3], want.reshape(-1)[:3]))
    print(f"\nGPU == emulator ({method}): {count - len(mismatches)}/{count}")
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:5]}"


def assert_deterministic_and_untouched(method: str, rng: np.random.Generator) -> None:
    """On the current GPU, ten calls of ``method`` give the same bits on a full sum, rows and columns, and leave the
    input as it was."""
    import cupy

    import tcreduce
    from tcreduce.testing import to_numpy

    for shape, axis in [((1 << 22) + 5, None), ((1 << 16, 64), -1), ((64, 1 << 16), 0), ((256, 1 << 14), -1)]:
        xh = values(rng, shape)
        xd = cupy.asarray(xh)
        first = to_numpy(tcreduce.sum(xd, axis=axis, method=method))
        for _ in range(9):
            again = to_numpy(tcreduce.sum(xd, axis=axis, method=method))
            assert np.array_equal(first.view(np.uint32), again.view(np.uint32)), "not bitwise reproducible"
        assert np.array_equal(xd.get(), xh), "input was modified"


def assert_bound_tight(method: str, n: int) -> None:
    """The float32 method's bound holds on the fp32 adversarial (same-sign) and mixed-sign inputs of length ``n`` and
    their misaligned views, and at the same-sign input with the largest error relative to sum|x| (the inputs differ
    in scale) it is at most 100 times that error."""
    import tcreduce
    from tcreduce.bounds import error_bound
    from tcreduce.reference import exact_sum
    from tcreduce.testing import adversarial_inputs, mixed_sign_inputs

    rng = np.random.default_rng(1)
    same_sign = adversarial_inputs(rng, n, "float32")
    inputs = {**same_sign, **mixed_sign_inputs(rng, n, "float32")}
    worst = (0.0, np.inf, "")
    for name, x in list(inputs.items()) + [(k + "[1:]", v[1:]) for k, v in inputs.items()]:
        exact = float(exact_sum(x))
        err = abs(float(tcreduce.emulate.sum(x, method=method)) - exact)
        bound = float(error_bound(x, method=method))
        assert err <= bound, (name, err, bound)
        scale = float(np.sum(np.abs(x), dtype=np.float64))
        if name.split("[")[0] in same_sign and err / scale > worst[0]:
            worst = (err / scale, bound / scale, name)
    assert worst[0] > 0 and worst[1] / worst[0] <= 100, worst


# tc32_cols_tma (first-axis sums through TMA boxes, sm_90): (shape, axis, view, output dtype, whether an H100 plans
# TMA for it: for both methods, or for the methods named). Last chunks of 13, 4, 8 and 6 rows, strips ending in 4 and
# 24 columns, 3-D arrays (a > 1: the tensor map's third dimension), views with 16-byte row strides (fewer columns than
# the stride, a row offset, an odd column count that the box's zero fill masks), few chunks per strip
# (COLS_TMA_MIN_CHUNKS), 2 blocks per SM (COLS_TMA_LONG_ROWS), few strips of 1024 rows or more, whose rows are split
# over blocks (COLS_TMA_SPLITS), and ones that fall back to the register loop (a misaligned view; few strips of fewer
# rows, split)
TMA_CASES = [
    ((77, 4100), 0, None, "float32", True), ((100, 20004), 0, None, "float32", True),
    ((64, 4100), 0, None, "float32", True), ((20, 5000), 0, None, "float32", ("tensorcore_tf32",)),
    ((1030, 13572), 0, None, "float32", True),
    ((200, 10008), 0, None, "float64", True), ((3, 300, 520), 1, None, "float32", True),
    ((5, 100, 64), 1, None, "float16", True), ((300, 1024), 0, lambda x: x[:, :1000], "float32", True),
    ((300, 1024), 0, lambda x: x[8:, :1001], "float32", True), ((300, 1024), 0, lambda x: x[:, 1:], "float32", False),
    ((1000, 132), 0, None, "float32", False), ((20003, 64), 0, None, "float32", True),
]


def marked_tma(tma, method: str) -> bool:
    """Whether a :data:`TMA_CASES` entry's mark (a bool for both methods, or the methods named) says ``method`` takes
    TMA."""
    return tma if isinstance(tma, bool) else method in tma


def tma_cases_plan_as_marked(method: str, monkeypatch) -> None:
    """On the CPU: with TMA planned for any input size, an H100 plan of every :data:`TMA_CASES` case takes
    tc32_cols_tma exactly where the case says (so the GPU test's cases keep covering what they name)."""
    from tcreduce import _api
    from tcreduce._device import KNOWN_GPUS
    from tcreduce._layout import host_layout
    from tcreduce.plans import tensorcore_fp32 as plan

    monkeypatch.setattr(plan, "COLS_TMA_MIN_BYTES", 0)
    _api.get_plan.cache_clear()
    try:
        for shape, axis, view, out_dtype, tma in TMA_CASES:
            x = np.empty(shape, np.float32)  # never written: only its shape, strides and address are planned
            layout, _ = host_layout(view(x) if view else x, axis)
            kernel = _api.get_plan(method, layout.problem, "float32", out_dtype, KNOWN_GPUS["H100"]).launches[0].kernel
            assert kernel.startswith("tc32_cols_tma<") == marked_tma(tma, method), (shape, axis, kernel)
    finally:
        _api.get_plan.cache_clear()


def specials(rng: np.random.Generator, shape) -> np.ndarray:
    """Normal float32 values with NaN (one with its payload in the low bits), +inf, -inf and 3e36 (the split's wide
    path) in random places."""
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    picks = rng.choice(flat.size, size=min(flat.size, 6), replace=False)
    flat[picks] = np.array([np.nan, np.inf, -np.inf, 3e36, np.uint32(0x7F800001).view(np.float32), np.inf],
                           dtype=np.float32)[:picks.size]
    return x


def gpu_tma_equals_twin(method: str, dists, monkeypatch) -> None:
    """With tc32_cols_tma planned for any input size (COLS_TMA_MIN_BYTES = 0), ``tcreduce.sum`` (poisoned ``out``)
    equals ``tcreduce.emulate.sum`` bit for bit on every case of :data:`TMA_CASES` and input of ``dists(shape)``, and
    the cases marked TMA encode a tensor map of their input (the others none; a map is encoded again only when an
    input address changes). The marks hold for the planner's module values (an H100's): a GPU whose family has
    its own tuning (FAMILY_TUNING) runs the cases a second time with it, bits checked, maps not. Needs an sm_90
    GPU."""
    import cupy
    import pytest

    import tcreduce
    from tcreduce import _api, _launch
    from tcreduce._device import current_device, gpu_family
    from tcreduce.plans import tensorcore_fp32 as plan
    from tcreduce.testing import poisoned, to_numpy

    device = current_device()[1]
    if device.cc < (9, 0):
        pytest.skip("TMA needs an sm_90 GPU")
    encoded: list = []
    encode = _launch.tensor_map_arg
    monkeypatch.setattr(plan, "COLS_TMA_MIN_BYTES", 0)
    monkeypatch.setattr(_launch, "tensor_map_arg", lambda spec, x_ptr: encoded.append(spec) or encode(spec, x_ptr))

    def clear_plans() -> None:  # fresh plans, and launchers whose first call encodes their map
        _api.get_plan.cache_clear()
        _api._PREPARED.clear()
        _launch._LAUNCHERS.clear()

    own = plan.FAMILY_TUNING
    tunings = [{}] + ([own] if gpu_family(device.name) in own else [])
    try:
        mismatches, count = [], 0
        for tuning in tunings:
            monkeypatch.setattr(plan, "FAMILY_TUNING", tuning)
            clear_plans()
            for shape, axis, view, out_dtype, tma in TMA_CASES:
                encoded.clear()  # a new plan per case, so a new launcher: its first call encodes a map if it takes TMA
                for dist, xh in dists(shape).items():
                    xd = cupy.asarray(xh)
                    xv, xdv = (view(xh), view(xd)) if view else (xh, xd)
                    want = tcreduce.emulate.sum(xv, axis=axis, dtype=out_dtype, method=method, gpu=device)
                    got = to_numpy(tcreduce.sum(xdv, axis=axis, dtype=out_dtype, method=method,
                                                out=poisoned(np.shape(want), out_dtype)))
                    count += 1
                    if not same_bits(got, want):
                        mismatches.append((shape, axis, dist, xv.shape, got.reshape(-1)[:3], want.reshape(-1)[:3]))
                if not tuning:
                    assert bool(encoded) == marked_tma(tma, method), (shape, axis, encoded)
        print(f"\nGPU == emulator through TMA ({method}): {count - len(mismatches)}/{count}")
        assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:5]}"
    finally:
        clear_plans()
