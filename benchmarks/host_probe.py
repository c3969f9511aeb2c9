"""Where the host time of small calls comes from: back-to-back time per call of ``tcreduce.sum`` on a 2^12 fp16
array (host-bound: the GPU's part is about 1.5 us) in many short rounds, run once per CPU placement of the process
(all CPUs, then each NUMA node's CPUs, then the GPU's local CPUs from sysfs), each in a child process pinned with
``os.sched_setaffinity``. Prints the machine's NUMA layout and, per placement, the rounds' median, lowest and highest
time per call and how many rounds were slower than 1.25x the lowest: a bimodal host shows as many slow rounds.

    python3 benchmarks/host_probe.py [--rounds 40] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(rounds: int) -> None:
    sys.path.insert(0, str(ROOT))
    import cupy
    import numpy as np

    import tcreduce
    from experiments.timing import TimingConfig, time_gpu

    x = [cupy.random.default_rng(1).random(1 << 12, dtype=cupy.float32).astype(cupy.float16) + 0.25 for _ in range(8)]
    cfg = TimingConfig(target_s=0.02)
    times = [time_gpu(lambda v: tcreduce.sum(v, method="tensorcore"), x, cfg).median_s * 1e6 for _ in range(rounds)]
    t = np.array(times)
    print(json.dumps(dict(cpus=sorted(os.sched_getaffinity(0)), median=float(np.median(t)), low=float(t.min()),
                          high=float(t.max()), slow_rounds=int((t > 1.25 * t.min()).sum()), rounds=rounds,
                          times=[round(v, 2) for v in times])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.child:
        child(args.rounds)
        return
    sys.path.insert(0, str(ROOT))
    from experiments.env import cpu_list, gpu_local_cpus

    nodes = {p.name: (p / "cpulist").read_text().strip()
             for p in sorted(Path("/sys/devices/system/node").glob("node[0-9]*"))}
    local = gpu_local_cpus()
    print(f"NUMA nodes: {nodes}; the GPU's local CPUs: {local}; this process may run on "
          f"{len(os.sched_getaffinity(0))} CPUs", flush=True)
    placements = {"all": sorted(os.sched_getaffinity(0))}
    placements.update({name: cpu_list(cpus) for name, cpus in nodes.items()})
    if local:
        placements["gpu local"] = local
        placements["one local cpu"] = local[-1:]
    results = {}
    for name, cpus in placements.items():
        cmd = [sys.executable, __file__, "--child", "--rounds", str(args.rounds)]
        proc = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=lambda c=cpus: os.sched_setaffinity(0, c))
        line = proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 else proc.stderr[-800:]
        results[name] = line
        print(f"{name}: {line}", flush=True)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "host_probe.json").write_text(json.dumps(dict(nodes=nodes, local=local, results=results)))


if __name__ == "__main__":
    main()
