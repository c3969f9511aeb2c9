"""Which term keeps each a-priori bound loose (issue 11; notes/accuracy.md), on the CPU through the emulator.

For every method and n, over tcreduce.testing.adversarial_inputs (the family tests/test_bounds.py uses), prints the
worst error, the bound there, their ratio, and the bound's terms: the fused tensor-core blocks (d_mma * u_mma) and
the round-to-nearest additions (d_rn * u), split into the per-thread (per-lane) chains and the folds / grid
combination where the plan records them.

    python3 scripts/bound_tightness.py [--n 24] [--methods tensorcore,shuffle,wmma,kahan,tensorcore_kahan,exact]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    import tcreduce
    from tcreduce import bounds
    from tcreduce._api import get_plan
    from tcreduce._device import named_device
    from tcreduce._layout import Flat
    from tcreduce.reference import exact_sum
    from tcreduce.testing import adversarial_inputs

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=24, help="log2 of the length")
    ap.add_argument("--methods", default="tensorcore,tensorcore_chained,shuffle,wmma,kahan,tensorcore_kahan,exact")
    args = ap.parse_args()
    n = 1 << args.n
    methods = args.methods.split(",")
    worst = {m: (0.0, 0.0, "") for m in methods}
    for name, x in adversarial_inputs(np.random.default_rng(1), n).items():
        exact = float(exact_sum(x))
        for m in methods:
            err = abs(float(tcreduce.emulate.sum(x, method=m)) - exact)
            if err > worst[m][0]:
                worst[m] = (err, float(bounds.error_bound(x, method=m)), name)
    u = bounds.U_RN
    for m in methods:
        err, b, name = worst[m]
        line = f"{m:20} worst error {err:.3e} ({name}), bound {b:.3e}, bound / error {b / err if err else np.inf:6.1f}"
        if m in bounds.STRUCTURES:
            plan = get_plan(m, Flat(n, 0), "float16", "float32", named_device("H100"))
            d = bounds.STRUCTURES[m](plan)
            u_mma = bounds.mma_unit_roundoff("H100")
            line += (f" | terms: {d.mma} fused blocks x u_mma = {d.mma * u_mma / u:.1f} u, {d.rn} RN additions = "
                     f"{d.rn} u")
        elif m in bounds.FACTORS:
            from tcreduce.plans.kahan import chain_lengths

            plan = get_plan(m, Flat(n, 0), "float16", "float32", named_device("H100"))
            ch = chain_lengths(plan)
            line += f" | c = {bounds.FACTORS[m](plan, None) / u:.2f} u (n = {ch['n']}, L = {ch['levels']})"
        print(line, flush=True)


if __name__ == "__main__":
    main()
