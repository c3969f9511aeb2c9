"""The floating-point input formats tcreduce sums, described once for the API, the planners, the emulator and tests.

| name | bits | exponent / fraction bits | bias | inf | NumPy dtype | GPU storage |
|---|---|---|---|---|---|---|
| float16 | 16 | 5 / 10 | 15 | yes | numpy.float16 | float16 |
| bfloat16 | 16 | 8 / 7 | 127 | yes | ml_dtypes.bfloat16 | uint16 (raw bits) |
| float8_e4m3fn | 8 | 4 / 3 | 7 | no (S.1111.111 is NaN) | ml_dtypes.float8_e4m3fn | uint8 (raw bits) |
| float8_e5m2 | 8 | 5 / 2 | 15 | yes | ml_dtypes.float8_e5m2 | uint8 (raw bits) |
| float32 | 32 | 8 / 23 | 127 | yes | numpy.float32 | float32 |

CuPy has no bfloat16 or fp8 dtype: on the GPU such data travels as its raw bits (a uint16 or uint8 CuPy array, for
example ``x.view(cupy.uint16)``) with the format named by ``tcreduce.sum(..., format="bfloat16")``; torch tensors of
those dtypes are recognised without it. On the CPU, NumPy arrays of the ``ml_dtypes`` dtypes carry the format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

__all__ = ["Format", "FORMATS", "get_format", "format_of_dtype", "INPUT_FORMATS", "numpy_dtype"]


@dataclass(frozen=True)
class Format:
    """One floating-point format: ``name``, total ``bits``, exponent bits ``ebits``, fraction bits ``mbits``,
    exponent ``bias``, whether it has infinities, and the unsigned integer dtype that holds its raw bits."""

    name: str
    bits: int
    ebits: int
    mbits: int
    bias: int
    has_inf: bool

    @property
    def raw_dtype(self) -> np.dtype:
        return np.dtype({8: np.uint8, 16: np.uint16, 32: np.uint32}[self.bits])

    @property
    def itemsize(self) -> int:
        return self.bits // 8

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number (subnormals share it)."""
        return 1 - self.bias

    @property
    def max_field(self) -> int:
        """Largest exponent field of a finite value."""
        return (1 << self.ebits) - (2 if self.has_inf else 1)

    @property
    def ulp_min_exp(self) -> int:
        """Exponent of the smallest subnormal: every value is an integer multiple of 2^ulp_min_exp."""
        return self.emin - self.mbits


FORMATS: dict[str, Format] = {
    "float16": Format("float16", 16, 5, 10, 15, True),
    "bfloat16": Format("bfloat16", 16, 8, 7, 127, True),
    "float8_e4m3fn": Format("float8_e4m3fn", 8, 4, 3, 7, False),
    "float8_e5m2": Format("float8_e5m2", 8, 5, 2, 15, True),
    "float32": Format("float32", 32, 8, 23, 127, True),
}
INPUT_FORMATS: tuple[str, ...] = tuple(FORMATS)
_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "single": "float32",
            "e4m3": "float8_e4m3fn", "float8_e4m3": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn",
            "e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2"}


def get_format(name: Any) -> Format:
    """The :class:`Format` called ``name`` (a name, an alias such as "bf16" or "e4m3", or a dtype)."""
    if isinstance(name, Format):
        return name
    if isinstance(name, str):
        key = _ALIASES.get(name.lower(), name.lower())
        if key in FORMATS:
            return FORMATS[key]
    found = format_of_dtype(name)
    if found is not None:
        return found
    raise ValueError(f"unknown input format {name!r}; supported: {', '.join(INPUT_FORMATS)}")


def format_of_dtype(dtype: Any) -> Optional[Format]:
    """The format of a NumPy / ml_dtypes / torch dtype, or None when it is none of :data:`INPUT_FORMATS`."""
    text = str(dtype).replace("torch.", "")
    if text in FORMATS:
        return FORMATS[text]
    try:
        return FORMATS.get(np.dtype(dtype).name)
    except TypeError:
        return None


def numpy_dtype(fmt: str | Format) -> np.dtype:
    """The NumPy dtype of a format (the ml_dtypes types for bfloat16 and fp8; ml_dtypes is a dependency)."""
    f = get_format(fmt)
    if f.name in ("float16", "float32"):
        return np.dtype(f.name)
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, f.name))
