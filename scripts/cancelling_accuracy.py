"""Why tensorcore's error on cancelling fp16 data is 1.5-2x shuffle's (issue 11; notes/accuracy.md), on the CPU.

Data (as in /work/shared/reference/h200-measurements-2026-11-23.md): half the values uniform in [0, 1000), the other
half -0.999 times them, fp16, shuffled. The emulator reproduces the GPU's bits (tcreduce.emulate.sum), so the errors
below are the H100's. For tensorcore the error splits exactly into

    blocks: sum over the mma rows (16 values each, one fused block) of (block result - exact block sum), and
    chains: everything after the blocks (the round-to-nearest flush chains, lo + hi, the folds), itself split into
            the flush chains (each lane-row accumulator against the exact sum of the block results it added) and
            the combination (lo + hi, the warp, block and grid folds);

and the block errors are measured again with the tensor-core model's final rounding replaced by round to nearest
(the same alignment and truncation): what a round-to-nearest tensor core would leave.

    python3 scripts/cancelling_accuracy.py [--n 26] [--seeds 12]

Prints per method the median and max relative error over the seeds, and the decompositions (shuffle likewise:
its per-thread chains, then its combination).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def cancelling(rng: np.random.Generator, n: int) -> np.ndarray:
    a = rng.uniform(0, 1000, n // 2)
    x = np.concatenate([a, -0.999 * a])
    rng.shuffle(x)
    return x.astype(np.float16)


def block_errors(x: np.ndarray, model: str) -> tuple[float, float, float]:
    """(sum of the tc_flat blocks' errors, the same with round-to-nearest blocks, sum of |block sums|) for an aligned
    x whose length is a multiple of 256: every mma row of tc_flat is 16 fixed elements (4 consecutive 16-byte
    vectors)."""
    from tcreduce.emulate.mma_model import fused_rowsum
    from tcreduce.emulate.tensorcore import _fragment_rows

    rows = _fragment_rows(x.reshape(-1, 32, 8)).reshape(-1, 16)  # every block of the array, in some order
    exact = rows.astype(np.float64).sum(axis=1)  # 16 fp16 values: exact in float64
    tc = fused_rowsum(rows, np.float32(0), model=model).astype(np.float64)
    rn = exact.astype(np.float32).astype(np.float64)  # one round-to-nearest rounding of the exact block sum
    return float((tc - exact).sum()), float((rn - exact).sum()), float(np.abs(exact).sum())


def chain_errors(x: np.ndarray, method: str, gpu: str) -> float:
    """The summed error of the per-thread (shuffle) or per-lane-row (tensorcore: the flush chains of the block
    results) round-to-nearest chains alone: sum over chains of (fp32 chain result - exact sum of what it added), for
    an aligned x of a multiple of 256 elements (no head, no tail). Replays the twins' orders (emulate/shuffle.py,
    emulate/tensorcore.py)."""
    from tcreduce._api import get_plan
    from tcreduce._device import named_device
    from tcreduce._layout import Flat
    from tcreduce._plan import param_dict
    from tcreduce.emulate.mma_model import fused_rowsum
    from tcreduce.emulate.tensorcore import _fragment_rows

    n = x.shape[0]
    plan = get_plan(method, Flat(n, 0), "float16", "float32", named_device(gpu))
    p = param_dict(plan)
    threads = p["grid"] * p["block"]
    if method == "shuffle":
        vec, nv = p["vec"], p["nv"]
        rounds = -(-nv // threads)
        ch = np.zeros((rounds * threads, vec), np.float32)
        ch[:nv] = x.reshape(nv, vec)
        ch = ch.reshape(rounds, threads, vec)
        acc = np.zeros(threads, np.float32)
        ref = np.zeros(threads, np.float64)
        for t in range(rounds):
            for e in range(vec):
                acc = acc + ch[t, :, e]
                ref = ref + ch[t, :, e].astype(np.float64)
        return float((acc.astype(np.float64) - ref).sum())
    nvec, unroll = p["nvec"], p["unroll"]
    warps = threads // 32
    step = threads * unroll
    w = np.arange(warps)
    iters = np.where(32 * w < nvec, -(-(nvec - 32 * w) // step), 0)
    body = np.concatenate([x.reshape(nvec, 8), np.zeros((1, 8), np.float16)])
    lane = np.arange(32)
    acc = np.zeros((warps, 16), np.float32)
    ref = np.zeros((warps, 16), np.float64)
    for m in range(int(iters.max(initial=0)) * unroll):
        it, u = divmod(m, unroll)
        idx = it * step + u * threads + 32 * w[:, None] + lane
        idx = np.where(idx < nvec, idx, nvec)
        c = fused_rowsum(_fragment_rows(body[idx]), np.float32(0), model=gpu)
        active = (m < iters * unroll)[:, None]
        acc = np.where(active, acc + c, acc)
        ref = np.where(active, ref + c.astype(np.float64), ref)
    return float((acc.astype(np.float64) - ref).sum())


def main() -> None:
    import tcreduce
    from tcreduce.reference import exact_sum

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=26, help="log2 of the length")
    ap.add_argument("--seeds", type=int, default=12)
    ap.add_argument("--gpu", default="H100")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="tensorcore, shuffle and kahan only, no decomposition")
    args = ap.parse_args()
    n = 1 << args.n
    methods = ("tensorcore", "shuffle", "kahan") if args.quick else ("tensorcore", "shuffle", "kahan",
                                                                      "tensorcore_kahan")
    errs = {m: [] for m in methods}
    parts = []
    ulps = {m: [] for m in methods}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        x = cancelling(np.random.default_rng(seed), n)
        exact = float(exact_sum(x))
        for m in methods:
            r = float(tcreduce.emulate.sum(x, method=m, gpu=args.gpu))
            errs[m].append((r - exact) / abs(exact))
            ulps[m].append(abs(r - exact) / float(np.spacing(np.float32(abs(exact)))))
        if args.quick:
            print(f"seed {seed}: " + ", ".join(f"{m} {errs[m][-1]:+.2e} ({ulps[m][-1]:.2f} ulp)" for m in methods),
                  flush=True)
            continue
        blk, blk_rn, abs_blocks = block_errors(x, args.gpu)
        total_tc = errs["tensorcore"][-1] * abs(exact)
        total_sh = errs["shuffle"][-1] * abs(exact)
        tc_chain, sh_chain = chain_errors(x, "tensorcore", args.gpu), chain_errors(x, "shuffle", args.gpu)
        parts.append((blk / abs(exact), (total_tc - blk) / abs(exact), blk_rn / abs(exact), abs_blocks,
                      tc_chain / abs(exact), (total_tc - blk - tc_chain) / abs(exact), sh_chain / abs(exact),
                      (total_sh - sh_chain) / abs(exact)))
        print(f"seed {seed}: " + ", ".join(f"{m} {errs[m][-1]:+.2e}" for m in methods)
              + f" | tensorcore = blocks {parts[-1][0]:+.2e} + flush chains {parts[-1][4]:+.2e} + combination "
              f"{parts[-1][5]:+.2e}; RN blocks would leave {parts[-1][2]:+.2e} | shuffle = thread chains "
              f"{parts[-1][6]:+.2e} + combination {parts[-1][7]:+.2e}", flush=True)
    print(f"\nN = 2^{args.n}, {args.seeds} seeds, relative error |computed - exact| / |exact| (median / max):")
    for m in methods:
        a = np.abs(errs[m])
        print(f"  {m:18} {np.median(a):.3g} / {a.max():.3g}")
    for m in methods:
        u = np.array(ulps[m])
        print(f"  {m:18} error in fp32 ulps of the sum: median {np.median(u):.2f}, > 0.5 ulp (not the correctly "
              f"rounded result) in {int((u > 0.5).sum())} of {len(u)}")
    if args.quick:
        return
    p = np.array(parts)
    print(f"  tensorcore blocks  {np.median(np.abs(p[:, 0])):.3g} / {np.abs(p[:, 0]).max():.3g}  (the fused blocks' "
          "truncation and round-toward-zero)")
    print(f"  tensorcore chains  {np.median(np.abs(p[:, 1])):.3g} / {np.abs(p[:, 1]).max():.3g}  (round-to-nearest "
          "flushes and folds)")
    print(f"  RN blocks instead  {np.median(np.abs(p[:, 2])):.3g} / {np.abs(p[:, 2]).max():.3g}")
    for i, what in ((4, "tensorcore flush chains"), (5, "tensorcore combination"), (6, "shuffle thread chains"),
                    (7, "shuffle combination")):
        print(f"  {what:26} {np.median(np.abs(p[:, i])):.3g} / {np.abs(p[:, i]).max():.3g}")


if __name__ == "__main__":
    main()
