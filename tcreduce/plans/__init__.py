"""Every registered reduction method, one module each (its kernel: ``kernels/<module>.cu``; its emulator twin:
``tcreduce/emulate/<module>.py``; its tests: ``tests/test_<module>.py``). Importing this package registers them."""

from . import tensorcore  # noqa: F401

# DEVELOPMENT: modules written in parallel; replaced by plain imports once all exist.
import importlib as _importlib

for _name in ("shuffle", "wmma", "cub", "ladder", "minmax"):
    try:
        _importlib.import_module(f".{_name}", __name__)
    except ModuleNotFoundError as _e:
        if _e.name != f"{__name__}.{_name}":
            raise
