"""Device descriptions: the current CUDA device (through CuPy), or a named GPU for the emulator and CPU planning."""

from __future__ import annotations

import functools

from ._plan import DeviceSpec

__all__ = ["KNOWN_GPUS", "gpu_family", "named_device", "current_device", "gpu_available"]

# Multiprocessor counts and compute capabilities of the GPUs the emulator models (SXM parts).
KNOWN_GPUS: dict[str, DeviceSpec] = {
    "H100": DeviceSpec("H100", 132, (9, 0)),
    "H200": DeviceSpec("H200", 132, (9, 0)),
    "A100": DeviceSpec("A100", 108, (8, 0)),
    "V100": DeviceSpec("V100", 80, (7, 0)),
}


def gpu_family(name: str) -> str | None:
    """The :data:`KNOWN_GPUS` key a device name belongs to ("NVIDIA H200", "H200 NVL" -> "H200"), or None."""
    key = name.upper().replace("NVIDIA ", "").split()[0] if name.strip() else ""
    return next((gpu for gpu in KNOWN_GPUS if key.startswith(gpu)), None)


def named_device(name: str | DeviceSpec) -> DeviceSpec:
    if isinstance(name, DeviceSpec):
        return name
    family = gpu_family(name or "")
    if family is None:
        raise ValueError(f"unknown GPU {name!r}; known: {', '.join(KNOWN_GPUS)}")
    return KNOWN_GPUS[family]


@functools.lru_cache(maxsize=None)
def _device_spec(device_id: int) -> DeviceSpec:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(device_id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return DeviceSpec(name, int(props["multiProcessorCount"]), (int(props["major"]), int(props["minor"])))


def current_device() -> tuple[int, DeviceSpec]:
    """(device id, spec) of CuPy's current device."""
    import cupy

    dev = cupy.cuda.Device()
    return dev.id, _device_spec(dev.id)


@functools.lru_cache(maxsize=1)
def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False
