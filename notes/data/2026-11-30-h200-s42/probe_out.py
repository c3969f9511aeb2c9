"""Does shuffle_cols' speed depend on where its output lies? fp32/fp16 [128, n] axis 0, out= at several buffers."""
import sys
sys.path.insert(0, ".")
import cupy, numpy as np
import tcreduce
from experiments.timing import time_gpu, TimingConfig

cfg = TimingConfig()
for dtype in ("float32", "float16"):
    n = (1 << 29) // np.dtype(dtype).itemsize // 128
    x = cupy.random.default_rng(1).random((128, n), dtype=cupy.float32).astype(dtype)
    outs, gaps = [], []
    for k in range(8):
        gaps.append(cupy.empty((k * 37 + 1) * 65536 + 4096 * k, dtype=cupy.uint8))
        outs.append(cupy.empty(n, dtype=cupy.float32))
    for rnd in range(2):
        for m in ("shuffle", "tensorcore"):
            res = []
            for k, o in enumerate(outs):
                t = time_gpu(lambda a, o=o: tcreduce.sum(a, axis=0, method=m, out=o), [x], cfg).median_s
                res.append(x.nbytes / t / 1e9)
            t = time_gpu(lambda a: tcreduce.sum(a, axis=0, method=m), [x], cfg).median_s
            print(dtype, m, "round", rnd, "out bufs:", " ".join(f"{v:.0f}" for v in res),
                  f"| alloc {x.nbytes / t / 1e9:.0f}", " addrs:", " ".join(hex(o.data.ptr % (1 << 32)) for o in outs[:4]),
                  flush=True)
    del x, outs, gaps
    cupy.get_default_memory_pool().free_all_blocks()
