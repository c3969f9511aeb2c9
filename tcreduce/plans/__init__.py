"""Every registered reduction method, one module each (its kernel: ``kernels/<module>.cu``; its emulator twin:
``tcreduce/emulate/<module>.py``; its tests: ``tests/test_<module>.py``). Importing this package registers them."""

from . import cub, ladder, minmax, shuffle, tensorcore, tensorcore_tf32, wmma  # noqa: F401
