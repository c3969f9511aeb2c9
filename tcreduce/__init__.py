"""tcreduce: sums of fp16 and fp32 arrays on NVIDIA GPUs with tensor cores, their CUDA-core baselines, a bit-faithful
CPU emulator and error bounds.

>>> import cupy, tcreduce
>>> x = cupy.random.rand(1 << 20, dtype=cupy.float32).astype(cupy.float16)
>>> s = tcreduce.sum(x, method="tensorcore")        # 0-d float32 cupy array, fp32 accumulation
>>> r = tcreduce.reducer(like=x); s = r(x)          # built once, called many times (and CUDA-graph capturable)

``import tcreduce`` needs no GPU; only launching kernels does. ``tcreduce.emulate`` reproduces on the CPU, bit for
bit, what each method returns on a given GPU, ``tcreduce.bounds`` gives a-priori error bounds, ``tcreduce.exact``
the mergeable states of exact sums (``method="exact"``), and ``tcreduce.distributed.sum`` sums arrays sharded across
GPUs through torch.distributed, deterministically.
"""

from ._api import max, mean, methods, min, sum  # noqa: A004 (shadowing the builtins is the API)
from ._reducer import Reducer, reducer

__version__ = "0.1.0"

__all__ = ["sum", "max", "min", "mean", "methods", "reducer", "Reducer", "emulate", "bounds", "reference",
           "exact", "distributed", "__version__"]


def __getattr__(name: str):
    if name in ("emulate", "bounds", "reference", "exact", "distributed"):  # distributed imports torch when called
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tcreduce' has no attribute {name!r}")
