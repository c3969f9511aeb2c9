"""Which memory walk and which load hints read fastest on this GPU, beside torch.compile's and our kernels' reads.

    python3 benchmarks/read_probe.py [--out DIR] [--reps 20] [--no-compile] [--skip-walks] [--col-walks]
                                     [--tall-col-walks] [--inductor-walks] [--shapes default|cols|walks]

Parts, one CSV each (with a metadata line), plus the torch.compile sources; every timing is ``perf_floor.timed``,
the studies' own (``experiments.timing.time_gpu``: calls back to back, no synchronisation between samples, so
neither a launch's latency nor a Python launch path counts). Timing each sample from an idle GPU instead, as this
probe did before session 15, charged torch.compile's heavier launch path 6-8% at 512 MiB on an H200
(notes/data/2026-11-27-h200-s15/harness_ab_130b71e.log).

1. ``read_probe.csv``: the read-only kernels of benchmarks/read_probe.cu (grid-stride, block-contiguous,
   warp-contiguous walks; five load flavours) over 512 MiB and 2 GiB, GB/s = bytes read / median time (one buffer
   larger than L2). 1b (``--col-walks``, ``read_probe_cols.csv``): first-axis walks by strip width, loads in flight
   and blocks per SM. 1c (``--inductor-walks``, ``read_probe_inductor_walks.csv``): inductor's own first-axis walk
   (XBLOCK x R0_BLOCK programs, 4-16-byte loads, evict-first hints), its long-row walk, and whole fp16 first-axis
   sums in the first-axis walk's shape (``inductor_col_sum``, checked against float64). 1d (``--tall-col-walks``,
   ``read_probe_tall_cols.csv``): first-axis walks of tall matrices (32768-2^20 rows) with row splits, against the
   grid-stride read of the same buffer.
2. ``read_probe_shapes.csv``: tcreduce's methods, torch.sum and torch.compile'd torch.sum on the shapes where
   torch.compile led the committed sweep (long rows, few long float32 columns, the full sum; ``--shapes cols``: the
   first-axis sums of few rows; ``--shapes walks``: those and long rows, part 1c's shapes).
3. ``inductor/``: the Triton sources (``*.triton.txt``) torch.compile generated for those shapes and the launch
   configuration its autotuner kept (``inductor_configs.json``), to read the loads and block shapes it chose.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perf_floor import timed, within_fp32_bound  # noqa: E402

MODES = {0: "plain", 1: "ldg.nc", 2: "cs (evict-first)", 3: "nc.L1::no_allocate.L2::256B", 4: "L2 evict_first policy"}
SHAPES = [  # (label, shape, axis, dtype)
    ("rows [2^17, 2048]", (1 << 17, 2048), 1, "float16"),
    ("rows [2^14, 16384]", (1 << 14, 16384), 1, "float16"),
    ("rows [2^16, 1024] fp32", (1 << 17, 1024), 1, "float32"),
    ("cols [2^20, 128] fp32", (1 << 20, 128), 0, "float32"),
    ("cols [2^18, 1024]", (1 << 18, 1024), 0, "float16"),
    ("full 2^28", (1 << 28,), None, "float16"),
]
# first-axis sums over few rows, where torch.compile read 2-5% above shuffle_cols in the H100 and H200 segment runs
COLS_SHAPES = [
    ("cols [64, 2^22]", (64, 1 << 22), 0, "float16"),
    ("cols [128, 2^21]", (128, 1 << 21), 0, "float16"),
    ("cols [256, 2^20]", (256, 1 << 20), 0, "float16"),
    ("cols [1024, 2^18]", (1024, 1 << 18), 0, "float16"),
    ("cols [128, 2^20] fp32", (128, 1 << 20), 0, "float32"),
]
# long rows, where torch.compile read 2% above tc_rows_stream in the H200 segment run (part 1c's row walks)
LONG_ROW_SHAPES = [
    ("rows [2^13, 32768]", (1 << 13, 32768), 1, "float16"),
    ("rows [2^14, 16384]", (1 << 14, 16384), 1, "float16"),
    ("rows [2^15, 8192]", (1 << 15, 8192), 1, "float16"),
]
SHAPE_SETS = {"default": SHAPES, "cols": COLS_SHAPES, "walks": COLS_SHAPES + LONG_ROW_SHAPES}


def probe_walks(reps: int, sms: int) -> list[dict]:
    import cupy

    specs = []
    for mode in MODES:
        for u in (4, 8):
            for bps in (2, 4, 8):
                specs.append(("grid_stride", u, mode, ("bps", bps)))
        for u in (2, 4, 8):
            for iters in (1, 4, 16):
                specs.append(("block_chunk", u, mode, ("iters", iters)))
            specs.append(("block_chunk", u, mode, ("bps", 4)))
        if mode in (0, 2, 3, 4):
            for u in (4, 8):
                for iters in (1, 4, 16):
                    specs.append(("warp_chunk", u, mode, ("iters", iters)))
    width = {"block_chunk": 256, "warp_chunk": 32}
    kernel = {k: f"probe::chunk_walk<{{}}, {{}}, {w}>" for k, w in width.items()}
    kernel["grid_stride"] = "probe::grid_stride<{}, {}>"
    names = sorted({kernel[k].format(u, m) for k, u, m, _ in specs})
    mod, sink = walk_module(names)
    rows = []
    for nbytes in (512 << 20, 2 << 30):
        buf = cupy.random.default_rng(7).integers(0, 2**31, nbytes // 4, dtype=cupy.int32)
        n16 = nbytes // 16
        for kind, u, mode, (what, val) in specs:
            fn = mod.get_function(kernel[kind].format(u, mode))
            if kind == "grid_stride":
                grid = sms * val
                args = (buf, cupy.int64(n16), sink)
            else:
                words = width[kind]
                if what == "bps":
                    grid = sms * val
                    per = -(-n16 // grid)
                    per = -(-per // (words * u)) * words * u
                    grid = -(-n16 // per)
                else:
                    per = words * u * val
                    grid = -(-n16 // per) if kind == "block_chunk" else -(-n16 // (8 * per))
                args = (buf, cupy.int64(n16), cupy.int64(per), sink)
            t = timed(lambda: fn((grid,), (256,), args), reps)
            rows.append({"bytes": nbytes, "walk": kind, "unroll": u, "load": MODES[mode], what: val, "grid": grid,
                         "GBps": round(nbytes / t / 1e9, 1)})
            print(f"{nbytes >> 20:5d} MiB {kind:12s} U={u} {what}={val:<3d} grid={grid:<8d} {MODES[mode]:28s} "
                  f"{rows[-1]['GBps']:8.1f} GB/s", flush=True)
        del buf
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


# blocks per SM for the first-axis walks, forced by dynamic shared memory (KiB per block; 0: as many as fit)
COL_WALK_SMEM_KIB = {2: 100, 3: 66, 4: 50, 0: 0}


def walk_module(names: list[str]) -> tuple:
    """The module of read_probe.cu kernels ``names`` and a sink word for them."""
    import cupy

    src = (Path(__file__).parent / "read_probe.cu").read_text()
    mod = cupy.RawModule(code=src, options=("-std=c++17",), name_expressions=names)
    return mod, cupy.zeros(1, dtype=cupy.uint32)


def _walk_setup(names: list[str]) -> tuple:
    """The first-axis walks' (parts 1b and 1c) module of read_probe.cu kernels ``names``, sink word and one 512 MiB
    buffer of random words."""
    import cupy

    mod, sink = walk_module(names)
    buf = cupy.random.default_rng(7).integers(0, 2**31, (512 << 20) // 4, dtype=cupy.int32)
    return mod, sink, buf


def probe_col_walks(reps: int) -> list[dict]:
    """Part 1b: col_walk (read_probe.cu) over the fp16 shapes of COLS_SHAPES, one 512 MiB buffer: strip width W (16-byte
    words per block), loads in flight U, load flavour and blocks per SM. Which walk a first-axis sum of few rows should
    take, apart from its additions."""
    import cupy

    specs = [(w, u, mode) for w in (256, 128, 64, 32, 16, 8) for u in (2, 4, 8) for mode in (1, 3, 4)]
    mod, sink, buf = _walk_setup(sorted({f"probe::col_walk<{u}, {m}, {w}>" for w, u, m in specs}))
    nbytes = buf.nbytes
    rows = []
    for label, shape, _, dtype in COLS_SHAPES:
        if dtype != "float16":
            continue
        nrows, words = shape[0], shape[1] * 2 // 16
        args = (buf, cupy.int64(nrows), cupy.int64(words), cupy.int64(nrows), sink)
        for w, u, mode in specs:
            if u > nrows // (256 // w):
                continue  # fewer rows per thread than loads in flight
            fn = mod.get_function(f"probe::col_walk<{u}, {mode}, {w}>")
            fn.max_dynamic_shared_size_bytes = max(COL_WALK_SMEM_KIB.values()) << 10  # a RawKernel
            grid = -(-words // w)
            for bps, kib in COL_WALK_SMEM_KIB.items():
                t = timed(lambda: fn((grid,), (256,), args, shared_mem=kib << 10), reps)
                rows.append({"case": label, "W": w, "unroll": u, "load": MODES[mode], "bps": bps or "max",
                             "grid": grid, "GBps": round(nbytes / t / 1e9, 1)})
                print(f"{label:18s} W={w:<3d} U={u} bps={bps or 'max':<3} {MODES[mode]:28s} "
                      f"{rows[-1]['GBps']:8.1f} GB/s", flush=True)
    del buf
    cupy.get_default_memory_pool().free_all_blocks()
    return rows


# part 1d: first-axis walks of tall matrices (512 MiB of fp16, the segment sweep's first-axis shapes of 32768 rows and
# more, where `auto`, `shuffle` and torch.compile all read 0.92-0.95 of the read ceiling since session 43): col_walk
# with row splits, by strip width W (16-byte words per block), loads in flight, splits per strip and load flavour
TALL_COLS_SHAPES = [(1 << 15, 1 << 13), (1 << 17, 1 << 11), (1 << 20, 1 << 8)]  # [rows, fp16 columns]


def probe_tall_col_walks(reps: int) -> list[dict]:
    """Part 1d: col_walk with row splits (read_probe.cu) over TALL_COLS_SHAPES, one 512 MiB buffer, with the grid
    stride read kernel's reading of the same buffer in the same call as its yardstick: whether a pure first-axis read
    of tall matrices reaches the ceiling (then the sums' plans lose the rest) or stops near 0.93-0.95 of it (then the
    walk itself does)."""
    import cupy

    specs = [(w, u, mode) for w in (256, 64, 32, 8) for u in (4, 8) for mode in (1, 4)]
    names = sorted({f"probe::col_walk<{u}, {m}, {w}>" for w, u, m in specs} | {"probe::grid_stride<4, 1>"})
    mod, sink, buf = _walk_setup(names)
    nbytes = buf.nbytes
    sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    ref = mod.get_function("probe::grid_stride<4, 1>")
    ref_args = (buf, cupy.int64(nbytes // 16), sink)
    t_ref = timed(lambda: ref((sms * 8,), (256,), ref_args), reps)
    rows = [{"case": "grid_stride<4, nc>", "W": 0, "unroll": 4, "load": MODES[1], "splits": 0, "grid": sms * 8,
             "GBps": round(nbytes / t_ref / 1e9, 1), "of_read": 1.0}]
    print(f"grid_stride (the yardstick) {rows[0]['GBps']:8.1f} GB/s", flush=True)
    for nrows, cols in TALL_COLS_SHAPES:
        label = f"cols [{nrows}, {cols}]"
        words = cols * 2 // 16
        for w, u, mode in specs:
            grid_x = -(-words // w)
            fn = mod.get_function(f"probe::col_walk<{u}, {mode}, {w}>")
            for waves in (1, 4, 16):  # splits for about this many waves of 8 blocks per SM
                splits = max(1, min(nrows // (256 // w * u), -(-waves * sms * 8 // grid_x)))
                rps = -(-nrows // splits)
                args = (buf, cupy.int64(nrows), cupy.int64(words), cupy.int64(rps), sink)
                t = timed(lambda: fn((grid_x, splits), (256,), args), reps)
                rows.append({"case": label, "W": w, "unroll": u, "load": MODES[mode], "splits": splits,
                             "grid": grid_x * splits, "GBps": round(nbytes / t / 1e9, 1),
                             "of_read": round(t_ref / t, 3)})
                print(f"{label:20s} W={w:<3d} U={u} splits={splits:<5d} {MODES[mode]:28s} "
                      f"{rows[-1]['GBps']:8.1f} GB/s {rows[-1]['of_read']:.3f}", flush=True)
    del buf
    cupy.get_default_memory_pool().free_all_blocks()
    return rows


# part 1c: inductor's first-axis walk (benchmarks/read_probe.cu inductor_col_walk), (bytes per load, words per row
# strip XW, rows per iteration RB) by the dtype of the shape it stands for: fp16 [128, 2^21]'s pick (XBLOCK 256 x
# R0_BLOCK 2 on 4 warps: 4 halves per thread), then narrower and wider loads and more rows per iteration; fp32 [128,
# 2^20]'s (XBLOCK 64 x R0_BLOCK 4 on 8 warps: a float per thread), then 8 and 16 bytes
INDUCTOR_WALKS = {"float16": ((8, 64, 2), (8, 64, 4), (8, 32, 4), (16, 32, 4), (16, 16, 8), (4, 64, 2)),
                  "float32": ((4, 64, 4), (8, 32, 8), (16, 16, 8), (8, 64, 2))}
# and its row walk over LONG_ROW_SHAPES (inductor_row_walk): (bytes per load, threads per row); inductor's pick at
# [2^14, 16384] fp16 is R0_BLOCK 2048 on 16 warps, 8 bytes per thread
INDUCTOR_ROW_WALKS = ((8, 512), (16, 512), (16, 256), (8, 256), (16, 128), (8, 1024), (4, 512))
# and whole fp16 first-axis sums in the first-axis walk's shape (inductor_col_sum): (load MODE, XW, RB)
INDUCTOR_COL_SUMS = tuple((m, xw, rb) for m in (0, 1, 4) for xw, rb in ((64, 2), (64, 4), (32, 4), (128, 2), (64, 1)))


def probe_inductor_walks(reps: int) -> list[dict]:
    """Part 1c: inductor_col_walk over COLS_SHAPES and inductor_row_walk over LONG_ROW_SHAPES (one 512 MiB buffer):
    torch.compile's first-axis and long-row walks without their additions, by load width, strip and rows per
    iteration (threads per row), plain, streaming (evict-first) and L2 evict-first policy loads. Where its kernels
    read 2-4% above shuffle_cols and tc_rows_stream, this says whether the walk alone does."""
    import cupy

    specs = [(dt, b, xw, rb, mode) for dt, walks in INDUCTOR_WALKS.items() for b, xw, rb in walks for mode in (0, 2, 4)]
    row_specs = [(b, t, mode) for b, t in INDUCTOR_ROW_WALKS for mode in (0, 2, 4)]
    names = sorted({f"probe::inductor_col_walk<{b}, {m}, {xw}, {rb}>" for _, b, xw, rb, m in specs}
                   | {f"probe::inductor_row_walk<{b}, {m}, {t}>" for b, t, m in row_specs}
                   | {f"probe::inductor_col_sum<{m}, {xw}, {rb}>" for m, xw, rb in INDUCTOR_COL_SUMS})
    mod, sink, buf = _walk_setup(names)
    nbytes = buf.nbytes
    rows = []
    for label, shape, _, dtype in COLS_SHAPES:
        nrows, row_bytes = shape[0], nbytes // shape[0]
        args = (buf, cupy.int64(nrows), cupy.int64(row_bytes), sink)
        for dt, b, xw, rb, mode in specs:
            if dt != dtype:
                continue
            fn = mod.get_function(f"probe::inductor_col_walk<{b}, {mode}, {xw}, {rb}>")
            grid = -(-row_bytes // (b * xw))
            t = timed(lambda: fn((grid,), (xw * rb,), args), reps)
            rows.append({"case": label, "bytes_per_load": b, "XW": xw, "RB": rb, "threads": xw * rb,
                         "load": MODES[mode], "grid": grid, "GBps": round(nbytes / t / 1e9, 1)})
            print(f"{label:22s} B={b:<2d} XW={xw:<3d} RB={rb} {MODES[mode]:28s} {rows[-1]['GBps']:8.1f} GB/s",
                  flush=True)
    rows += _inductor_col_sums(mod, reps)
    for label, shape, _, _ in LONG_ROW_SHAPES:
        nrows, row_bytes = shape[0], nbytes // shape[0]
        for b, threads, mode in row_specs:
            fn = mod.get_function(f"probe::inductor_row_walk<{b}, {mode}, {threads}>")
            args = (buf, cupy.int64(row_bytes), sink)
            t = timed(lambda: fn((nrows,), (threads,), args), reps)
            rows.append({"case": label, "bytes_per_load": b, "threads": threads, "load": MODES[mode], "grid": nrows,
                         "GBps": round(nbytes / t / 1e9, 1)})
            print(f"{label:22s} B={b:<2d} T={threads:<4d} {MODES[mode]:28s} {rows[-1]['GBps']:8.1f} GB/s", flush=True)
    del buf
    cupy.get_default_memory_pool().free_all_blocks()
    return rows


def _inductor_col_sums(mod, reps: int) -> list[dict]:
    """Part 1c's whole sums: inductor_col_sum (read_probe.cu) over the fp16 COLS_SHAPES, each result checked against
    a float64 sum (recursive summation's bound, n 2^-23 sum|x|) and every output written (poisoned first)."""
    import cupy

    rows = []
    for label, shape, _, dtype in COLS_SHAPES:
        if dtype != "float16":
            continue
        nrows, ncols = shape
        x = cupy.random.default_rng(5).uniform(-0.25, 0.75, shape, dtype=cupy.float32).astype(cupy.float16)
        out = cupy.empty(ncols, dtype=cupy.float32)
        for mode, xw, rb in INDUCTOR_COL_SUMS:
            fn = mod.get_function(f"probe::inductor_col_sum<{mode}, {xw}, {rb}>")
            grid = -(-ncols // (4 * xw))
            args = (x, cupy.int64(nrows), cupy.int64(ncols), out)
            out.fill(cupy.nan)
            fn((grid,), (xw * rb,), args)
            if not within_fp32_bound(out, x, 0):  # NaN (an output left unwritten) fails too
                raise RuntimeError(f"inductor_col_sum<{mode}, {xw}, {rb}> is wrong at {label}")
            t = timed(lambda: fn((grid,), (xw * rb,), args), reps)
            rows.append({"case": label, "kernel": "inductor_col_sum", "bytes_per_load": 8, "XW": xw, "RB": rb,
                         "threads": xw * rb, "load": MODES[mode], "grid": grid, "GBps": round(x.nbytes / t / 1e9, 1)})
            print(f"{label:22s} sum XW={xw:<3d} RB={rb} {MODES[mode]:28s} {rows[-1]['GBps']:8.1f} GB/s", flush=True)
        del x
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


def _inductor_configs() -> list[dict]:
    """The launch configuration each of inductor's autotuned kernels kept."""
    from experiments.competitors import describe_autotuner, inductor_autotuners

    return [{"kept": describe_autotuner(a), "all": [str(c) for c in getattr(a, "configs", None) or []]}
            for a in inductor_autotuners()]  # "all": None once compiled


def probe_shapes(reps: int, out: Path, compile_too: bool, shapes: list = SHAPES) -> list[dict]:
    import cupy
    import torch

    import tcreduce

    rows = []
    ind = out / "inductor"
    ind.mkdir(parents=True, exist_ok=True)
    for label, shape, axis, dtype in shapes:
        x = cupy.random.default_rng(3).uniform(0.0, 1.0, shape, dtype=cupy.float32).astype(dtype)
        t = torch.as_tensor(x, device="cuda")
        nbytes = x.nbytes
        cases = {m: (lambda m=m: tcreduce.sum(x, axis=axis, method=m)) for m in ("tensorcore", "shuffle", "auto")}
        dims = [] if axis is None else [axis]
        cases["torch.sum"] = lambda: torch.sum(t, dim=dims, dtype=torch.float32)
        if compile_too:
            from torch._inductor.utils import run_and_get_code

            f = torch.compile(lambda a: torch.sum(a, dim=dims, dtype=torch.float32), dynamic=False)
            _, code = run_and_get_code(f, t)
            stem = label.replace(" ", "_").replace("[", "").replace("]", "").replace(",", "")
            (ind / f"{stem}.triton.txt").write_text("\n\n# ----\n".join(code))
            cases["torch.compile"] = lambda: f(t)
        for name, fn in cases.items():
            sec = timed(fn, reps)
            rows.append({"case": label, "method": name, "GBps": round(nbytes / sec / 1e9, 1),
                         "us": round(sec * 1e6, 2)})
            print(f"{label:24s} {name:14s} {rows[-1]['GBps']:8.1f} GB/s", flush=True)
        x = t = None  # free the input before the next shape
        cupy.get_default_memory_pool().free_all_blocks()
        torch.cuda.empty_cache()
    (ind / "inductor_configs.json").write_text(json.dumps(_inductor_configs(), indent=1))
    return rows


def _write(path: Path, rows: list[dict], meta: dict) -> None:
    keys = sorted({k for r in rows for k in r}, key=lambda k: list(rows[0]).index(k) if k in rows[0] else 99)
    with path.open("w", newline="") as fh:
        fh.write("# " + json.dumps(meta) + "\n")
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--reps", type=int, default=20, help="samples per timing")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (part 3 and its timings)")
    ap.add_argument("--skip-walks", action="store_true")
    ap.add_argument("--col-walks", action="store_true", help="also part 1b, the first-axis walks (read_probe_cols.csv)")
    ap.add_argument("--tall-col-walks", action="store_true",
                    help="also part 1d, first-axis walks of tall matrices with row splits (read_probe_tall_cols.csv)")
    ap.add_argument("--inductor-walks", action="store_true",
                    help="also part 1c, inductor's first-axis walk (read_probe_inductor_walks.csv)")
    ap.add_argument("--shapes", choices=sorted(SHAPE_SETS), default="default",
                    help="part 2's shapes: the default set, first-axis sums over few rows (cols), or those and long rows "
                         "(walks: part 1c's shapes)")
    args = ap.parse_args()
    import cupy

    from experiments.env import command_line, device_info, git_info

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {**device_info(), **git_info(), "command": command_line()}
    sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    if not args.skip_walks:
        _write(out / "read_probe.csv", probe_walks(args.reps, sms), meta)
    if args.col_walks:
        _write(out / "read_probe_cols.csv", probe_col_walks(args.reps), meta)
    if args.tall_col_walks:
        _write(out / "read_probe_tall_cols.csv", probe_tall_col_walks(args.reps), meta)
    if args.inductor_walks:
        _write(out / "read_probe_inductor_walks.csv", probe_inductor_walks(args.reps), meta)
    shapes = probe_shapes(args.reps, out, not args.no_compile, SHAPE_SETS[args.shapes])
    _write(out / "read_probe_shapes.csv", shapes, meta)


if __name__ == "__main__":
    main()
