"""torch.compile's first-axis sum kernel, replicated in Triton, timed per launch configuration beside tcreduce.

    python3 benchmarks/inductor_replica.py [--out DIR] [--turns 200] [--cases float32:128,float16:128]

The segment study's torch.compile read fp32 first-axis sums of 128 rows ([128, 2^20], 512 MiB) at 4,579 GB/s with the
configuration its autotuner kept in that process (XBLOCK 64, R0_BLOCK 4, 8 warps), 4.9% above `shuffle`; in
regimes.py's process the autotuner kept XBLOCK 256, R0_BLOCK 2, 4 warps and read 4,206, 3.6% below `shuffle`
(session 43). Which configuration is fast, and why? Per case (dtype:rows, 512 MiB, columns = the rest), this script:

- compiles ``triton_red_fused_sum_0`` as inductor writes it for ``torch.sum(x, 0, dtype=float32)`` with static
  shapes (``replica_kernel``: an [XBLOCK, R0_BLOCK] tile of columns x rows, rows walked R0_BLOCK at a time with
  evict-first loads into a tile accumulator, summed over the rows at the end) at each configuration of ``CONFIGS``,
  checks each against a float64 sum, and writes the TTGIR, PTX and cubin of the first ``DUMPED`` configurations to
  DIR/<case>_<config>.* (their layout and loads: disassemble the cubin with ``nvdisasm``);
- takes ``--turns`` interleaved turns (:func:`experiments.timing.interleaved_samples`: one call of every label per
  turn, in a new random order, each sample after a read of twice the L2's size unless ``--no-scrub``) of
  tcreduce's ``shuffle`` and ``tensorcore``, torch.compile's sum (its kept configuration printed) and every replica
  configuration, all on the same input, and prints GB/s (bytes read / time) at p10 / p50 / p90 per label, then the
  replicas' registers and spills.

Writes inductor_replica.csv (one row per case and label, with the metadata line) and the inductor source files found
in its cache (DIR/inductor_src/).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_floor import within_fp32_bound  # noqa: E402
from read_probe import _write  # noqa: E402

TOTAL_BYTES = 1 << 29
# (XBLOCK, R0_BLOCK, num_warps): the two that inductor's autotuner kept for fp32 [128, 2^20] in two processes first,
# then neighbours of the first
CONFIGS = ((64, 4, 8), (256, 2, 4), (64, 4, 4), (32, 8, 8), (128, 4, 8), (64, 8, 8), (128, 2, 4), (64, 2, 2),
           (32, 4, 4), (16, 16, 8))
DUMPED = 2  # the first configurations of CONFIGS whose TTGIR, PTX and cubin are written (the device tool returns few
# files)


def replica_kernel():
    """inductor's reduction template for a sum over the first axis of a contiguous [RNUMEL, XNUMEL] tensor (static
    shapes: both sizes are compile-time constants, as inductor bakes them), fp32 accumulation, one output per
    column."""
    import triton
    import triton.language as tl

    @triton.jit
    def replica(in_ptr0, out_ptr0, XNUMEL: tl.constexpr, RNUMEL: tl.constexpr, XBLOCK: tl.constexpr,
                R0_BLOCK: tl.constexpr):
        xoffset = tl.program_id(0) * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
        r0_base = tl.arange(0, R0_BLOCK)[None, :]
        acc = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
        for r0_offset in range(0, RNUMEL, R0_BLOCK):
            r0_index = r0_offset + r0_base
            r0_mask = r0_index < RNUMEL
            tmp0 = tl.load(in_ptr0 + (xindex + XNUMEL * r0_index), r0_mask, eviction_policy="evict_first",
                           other=0.0).to(tl.float32)
            tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
            acc = tl.where(r0_mask, acc + tmp1, acc)
        tmp2 = tl.sum(acc, 1)[:, None]
        tl.store(out_ptr0 + xindex, tmp2, None)

    return replica


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--cases", default="float32:128,float16:128")
    ap.add_argument("--no-scrub", action="store_true", help="no read of twice the L2 before each sample "
                    "(experiments.ceiling.l2_scrubber), as session 43 first ran it")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import cupy
    import numpy as np
    import torch

    import tcreduce
    from experiments.competitors import CompiledSum, torch_stream_guard
    from experiments.env import command_line, device_info, git_info
    from experiments.ceiling import l2_scrubber
    from experiments.timing import Timed, interleaved_samples

    kernel = replica_kernel()
    scrub = None if args.no_scrub else l2_scrubber()
    rows_out, regs = [], []
    for case in args.cases.split(","):
        dtype, r = case.split(":")
        r = int(r)
        itemsize = np.dtype(getattr(cupy, dtype)).itemsize
        n = TOTAL_BYTES // itemsize // r
        x = cupy.random.default_rng(43).standard_normal((r, n), dtype=cupy.float32).astype(dtype)
        t = torch.from_dlpack(x)

        def replica_call(cfg, t=t, n=n, r=r):
            xb, rb, w = cfg
            o = torch.empty(n, dtype=torch.float32, device=t.device)
            return o, kernel[(n // xb,)](t, o, XNUMEL=n, RNUMEL=r, XBLOCK=xb, R0_BLOCK=rb, num_warps=w, num_stages=1)

        methods = {}
        for cfg in CONFIGS:
            with torch_stream_guard():
                o, compiled = replica_call(cfg)
            if not within_fp32_bound(cupy.from_dlpack(o), x, 0):
                raise AssertionError(f"{case} replica {cfg}: a column sum outside n 2^-23 sum|x| of the float64 sum")
            stem = f"{dtype}_{r}_x{cfg[0]}_r{cfg[1]}_w{cfg[2]}"
            if cfg in CONFIGS[:DUMPED]:
                for kind in ("ttgir", "ptx"):
                    (out / f"{stem}.{kind}").write_text(compiled.asm[kind])
                (out / f"{stem}.cubin").write_bytes(compiled.asm["cubin"])
            regs.append(f"{stem}: {compiled.n_regs} registers, {compiled.n_spills} spills")
            methods[f"replica {cfg[0]}x{cfg[1]} w{cfg[2]}"] = lambda _x, cfg=cfg: replica_call(cfg)[0]
        for m in ("shuffle", "tensorcore"):
            methods[m] = lambda xx, m=m: tcreduce.sum(xx, axis=0, method=m)
        compiled_sum = CompiledSum(0)
        with torch_stream_guard():
            compiled_sum.prepare(t)
        print(f"{case} torch.compile kept: {compiled_sum.describe(t)}", flush=True)
        timed = {name: Timed(fn, [x]) for name, fn in methods.items()}
        timed["torch.compile"] = Timed(lambda _x, t=t: compiled_sum(t), [x], torch_stream_guard)
        for name in methods:  # warm-up: every label once, outside the samples
            with timed[name].context():
                timed[name].fn(x)
        series = interleaved_samples(timed, args.turns, before=scrub)
        for name, times in series.items():
            p10, p50, p90 = np.percentile(times, [10, 50, 90])
            gbs = [x.nbytes / s / 1e9 for s in (p10, p50, p90)]
            print(f"{case:12s} {name:22s} GB/s p10 {gbs[0]:7.1f}  p50 {gbs[1]:7.1f}  p90 {gbs[2]:7.1f}", flush=True)
            rows_out.append({"case": case, "label": name, "gbs_p50": round(gbs[1], 1), "gbs_p10": round(gbs[0], 1),
                             "gbs_p90": round(gbs[2], 1), "note": compiled_sum.describe(t) if
                             name == "torch.compile" else ""})
        del x, t
        cupy.get_default_memory_pool().free_all_blocks()
        torch.cuda.empty_cache()
    print("\n".join(regs))
    src = out / "inductor_src"
    for f in Path(tempfile.gettempdir()).glob("torchinductor_*/**/*.py"):
        if "triton_red_fused_sum" in f.read_text(errors="ignore"):
            src.mkdir(exist_ok=True)
            shutil.copy(f, src / f.name)
    _write(out / "inductor_replica.csv", rows_out, {**device_info(), **git_info(), "command": command_line()})


if __name__ == "__main__":
    main()
