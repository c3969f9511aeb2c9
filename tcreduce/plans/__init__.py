"""Every registered reduction method, one module each (its kernel: ``kernels/<module>.cu``; its emulator twin:
``tcreduce/emulate/<module>.py``; its tests: ``tests/test_<module>.py``). Importing this package registers them."""

from . import cub, exact, ladder, minmax, shuffle, tensorcore, tensorcore_tf32, wmma  # noqa: F401
from . import kahan  # noqa: F401  (after shuffle and tensorcore, whose tunings it reuses)
