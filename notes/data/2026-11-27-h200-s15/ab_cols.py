"""A/B (H200, session 15): shuffle_cols' one-item walk in 128-thread blocks (strips of 128 chunks, 4 rows in flight,
8 blocks per SM) against the committed plan, timed as the segment study times (time_gpu), 3 rounds alternating."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import cupy
import tcreduce
from tcreduce._api import get_plan
import tcreduce.plans.shuffle as sp
from experiments.inputs import random_pool, case_seed
from experiments.timing import TimingConfig, time_gpu
from tune_plans import patched

SETTINGS = {"committed": {},
            "b128 ct128 (4,8)": dict(BLOCK=128, COLS_CT_MANY=128, COLS_ONE_ITEM_TUNING={1: (4, 8), 2: (4, 8), 4: (4, 8)}),
            "b128 ct128 (2,12)": dict(BLOCK=128, COLS_CT_MANY=128, COLS_ONE_ITEM_TUNING={1: (2, 12), 2: (2, 12), 4: (2, 12)})}
total = 512 << 20
for dt in ("float16", "float32"):
    isz = 2 if dt == "float16" else 4
    pool = random_pool(dt, total // isz, seed=case_seed("segments", dt), low=-0.25, high=0.75)
    for r in (64, 128, 256, 512, 1024):
        x = pool[: total // isz].reshape(r, total // isz // r)
        res = {k: [] for k in SETTINGS}
        for rnd in range(3):
            for name, st in SETTINGS.items():
                with patched(sp, st):
                    get_plan.cache_clear()
                    fn = lambda a: tcreduce.sum(a, axis=0, method="shuffle")
                    t = time_gpu(fn, [x], TimingConfig())
                get_plan.cache_clear()
                res[name].append(total / t.median_s / 1e9)
        base = sorted(res["committed"])[1]
        print(dt, r, " ".join(f"{k}: {sorted(v)[1]:.0f} ({sorted(v)[1] / base:.3f})" for k, v in res.items()), flush=True)
    del pool
    cupy.get_default_memory_pool().free_all_blocks()
