"""Clock/power transients: shuffle fp32 cols128 timed after tensorcore (heavy), after a pause, and steady."""
import sys, time
sys.path.insert(0, ".")
import cupy, numpy as np
import tcreduce
from experiments.timing import time_gpu, TimingConfig

cfg = TimingConfig(target_s=0.05)
n = (1 << 29) // 4 // 128
x = cupy.random.default_rng(1).random((128, n), dtype=cupy.float32)
f = {m: (lambda a, m=m: tcreduce.sum(a, axis=0, method=m)) for m in ("shuffle", "tensorcore")}
def t(m, tag):
    g = x.nbytes / time_gpu(f[m], [x], cfg).median_s / 1e9
    print(f"{time.time():.3f} {tag:28s} {m:10s} {g:7.0f}", flush=True)
for m in f: f[m](x)
for rep in range(2):
    for k in range(6): t("shuffle", "steady")
    for k in range(6): t("tensorcore", "heavy")
    for k in range(6): t("shuffle", "after heavy")
    time.sleep(1.0)
    for k in range(4): t("shuffle", "after 1 s pause")
    time.sleep(0.2)
    for k in range(4): t("shuffle", "after 0.2 s pause")
