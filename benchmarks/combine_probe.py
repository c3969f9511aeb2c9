"""What the end of a one-pass full sum costs: tc_flat's one-pass walk without its arithmetic, ended six ways.

    python3 benchmarks/combine_probe.py [--out DIR] [--reps 30]

Every kernel walks the same one-pass grid as ``tc_flat<..., ROUNDS>`` on an H200 (blocks of 256 threads, 2 16-byte
cache-streaming loads in flight per thread, 32 rounds: 256 KiB per block, 5 blocks per SM), XOR-folds the words it
loads (no floating point, so the walk is all that differs from the read kernel) and folds a block value through
shared memory as tc_flat's epilogue does; then

    MODE 0  thread 0 stores the block's value (no combination: the walk and the epilogue alone)
    MODE 1  the block values in ws, in groups of 256, then the groups' totals, each level behind every block's fence
            and a counter (what tc_flat's one-pass grid did before session 24)
    MODE 2  the same in one level: the last block adds every block value
    MODE 3  no block value at all: the walk alone, storing only if the fold hits a magic word (the read kernel's end)
    MODE 4  MODE 1's order of additions through tcr::combine_grid_slots<256, true> (kernels/common.cuh, what tc_flat
            does now): each block value travels with a flag in one 64-bit relaxed store into a slot of the zeroed
            counters pool, the last block of a level (found by a relaxed atomic) waits for each flag and zeroes the slot
    MODE 5  MODE 2's order through combine_grid_slots<256, false>

beside ``tcreduce.sum(x, method="tensorcore")`` and the experiments' read kernel (best configuration) on the same
buffer. The difference MODE 1 - MODE 0 is what the two-level combination adds to a call's time; MODE 0 - MODE 3 what
the per-block epilogue adds. Timing: ``perf_floor.timed`` (the studies' back-to-back CUDA-event timing). Writes
``combine_probe.csv`` with a metadata line.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perf_floor import metadata, timed  # noqa: E402

PROBE = r"""
// MODES 1 and 2: the combination tc_flat and shuffle_flat used before combine_grid_slots (kernels/common.cuh, the
// same order of additions): block b stores its value in ws[b] and every block fences before its counter ticket
// (tcr::arrive_last), the last block of a level reads the values with __ldcg.
template <int BLOCK, bool TWO_LEVEL>
__device__ __forceinline__ bool fenced_combine(float* ws, unsigned* counters, float* smem, float* total) {
    if constexpr (!TWO_LEVEL) {
        if (!tcr::arrive_last(counters, gridDim.x)) return false;
        *total = tcr::combine_partials<BLOCK>(ws, gridDim.x, 1, smem);
        return true;
    } else {
        const unsigned group = blockIdx.x / BLOCK, groups = (gridDim.x + BLOCK - 1) / BLOCK;
        const unsigned members = min((unsigned)BLOCK, gridDim.x - group * BLOCK);
        if (!tcr::arrive_last(counters + group, members)) return false;
        const float group_total = tcr::combine_partials<BLOCK>(ws + (long long)group * BLOCK, members, 1, smem);
        if (threadIdx.x == 0) ws[gridDim.x + group] = group_total;
        if (!tcr::arrive_last(counters + groups, groups)) return false;
        *total = tcr::combine_partials<BLOCK>(ws + gridDim.x, groups, 1, smem);
        return true;
    }
}

template <int U, int ROUNDS, int MODE>
__global__ void __launch_bounds__(256, 5)
walk_combine(const uint4* __restrict__ x, long long n16, float* ws, unsigned* counters, float* out) {
    __shared__ float smem[32];
    constexpr long long PER = 256LL * U * ROUNDS;
    const long long first = (long long)blockIdx.x * PER, end = first + PER < n16 ? first + PER : n16;
    unsigned acc = 0u;
    for (long long i = first + threadIdx.x; i - threadIdx.x < end; i += 256LL * U) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = i + 256LL * u < end ? __ldcs(x + i + 256LL * u) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (MODE == 3) {
        if (acc == 0x9E3779B9u) out[1] = (float)acc;
        return;
    }
    const float value = tcr::block_fold<256>((float)(acc & 0xFFu), smem);
    float total;
    if (MODE >= 4) {  // counters: the counters pool's layout (plans/_common.py flagged_counters)
        if (tcr::combine_grid_slots<256, MODE == 4>(value, counters, smem, &total) && threadIdx.x == 0) out[0] = total;
        return;
    }
    if (threadIdx.x == 0) ws[blockIdx.x] = value;
    if (MODE == 0) return;
    if (fenced_combine<256, MODE == 1>(ws, counters, smem, &total) && threadIdx.x == 0) out[0] = total;
}
"""
MODES = {0: "store block values", 1: "two-level, fenced", 2: "one-level, fenced", 3: "walk alone",
         4: "two-level, flagged slots", 5: "one-level, flagged slots"}
U, ROUNDS = 2, 32


def main() -> None:
    import cupy
    import numpy as np

    import tcreduce
    from experiments.ceiling import time_read_kernel
    from experiments.timing import TimingConfig
    from tcreduce._compile import load_source
    from tcreduce.plans._common import flagged_counters, grid_groups

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    names = [f"walk_combine<{U}, {ROUNDS}, {m}>" for m in MODES]
    src = load_source("common.cuh") + PROBE
    mod = cupy.RawModule(code=src, options=("-std=c++17",), name_expressions=names)
    rows = []
    for nbytes in (512 << 20, 2 << 30):
        x = cupy.random.default_rng(7).standard_normal(nbytes // 2, dtype=cupy.float32).astype(cupy.float16)
        n16 = nbytes // 16
        grid = -(-n16 // (256 * U * ROUNDS))
        ws = cupy.zeros(grid + 256, dtype=cupy.float32)
        groups = grid_groups(grid, 256)
        counters = cupy.zeros(flagged_counters(grid, groups), dtype=cupy.uint32)  # zero between launches
        out = cupy.zeros(2, dtype=cupy.float32)

        def launch(m: int) -> None:
            mod.get_function(names[m])((grid,), (256,), (x, np.int64(n16), ws, counters, out))

        totals = {}
        for m in (1, 2, 4, 5):  # the same block values: modes 1 and 4, 2 and 5 add them in the same order
            out.fill(np.nan)
            launch(m)
            totals[m] = float(out[0])
            assert not counters.any(), f"MODE {m} left the counters pool nonzero"
        assert totals[1] == totals[4] and totals[2] == totals[5], totals
        cases = {f"MODE {m}: {label}": (lambda m=m: launch(m)) for m, label in MODES.items()}
        res = cupy.empty((), dtype=cupy.float32)
        cases["tcreduce.sum tensorcore"] = lambda: tcreduce.sum(x, method="tensorcore", out=res)
        for label, fn in cases.items():
            t = timed(fn, args.reps)
            rows.append(dict(bytes=nbytes, case=label, us=round(t * 1e6, 2), GBps=round(nbytes / t / 1e9, 1)))
            print(f"{nbytes >> 20:5d} MiB  {label:34s} {t * 1e6:8.2f} us {nbytes / t / 1e9:8.1f} GB/s", flush=True)
        t, config = time_read_kernel([x], TimingConfig(warmup=3, min_reps=args.reps, max_reps=args.reps, max_batch=10))
        rows.append(dict(bytes=nbytes, case=f"read kernel {config}", us=round(t.median_s * 1e6, 2),
                         GBps=round(nbytes / t.median_s / 1e9, 1)))
        print(f"{nbytes >> 20:5d} MiB  {rows[-1]['case']:34s} {rows[-1]['us']:8.2f} us {rows[-1]['GBps']:8.1f} GB/s")
        x = ws = counters = None  # free the buffers before the next size
        cupy.get_default_memory_pool().free_all_blocks()
    path = Path(args.out) / "combine_probe.csv"
    with path.open("w", newline="") as f:
        f.write("# " + json.dumps(metadata()) + "\n")
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("wrote", path)


if __name__ == "__main__":
    main()
