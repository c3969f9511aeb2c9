"""CPU (CI) tests: every kernel instantiation the planners produce for a wide set of problems compiles for sm_80 and
sm_90 with the compiler and options used at run time (NVRTC, tcreduce._compile.NVRTC_OPTIONS), without errors,
warnings or register spills, and tensor-core kernels contain mma/wmma instructions in their PTX."""

from __future__ import annotations

import itertools

import pytest

from tcreduce import registry
from tcreduce._compile import kernel_dir, load_source
from tcreduce._device import KNOWN_GPUS
from tcreduce._layout import Cols, Flat, Rows
from tcreduce.testing import assert_compiles_clean

pytestmark = pytest.mark.slow

TENSOR_CORE_SOURCES = {"tensorcore.cu": "mma.sync.aligned", "wmma.cu": "wmma.mma.sync", "mma_probe.cu": "mma.sync",
                       "tensorcore_fp32.cu": "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                       "tensorcore_tf32.cu": "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"}

PROBLEMS = (
    # 2^16 and 2^18: grids of 2-16 blocks, one thread-block cluster on sm_90 (fp8 on an H200: 8 vectors per thread)
    [Flat(n, a) for n in (1, 100, 1 << 16, 1 << 18, 1 << 20, 1 << 28, 1 << 31) for a in (0, 2, 4, 8)]
    + [Rows(m, k, ld, a) for (m, k, ld) in ((1, 1, 1), (1 << 24, 16, 16), (1000, 17, 17), (1 << 16, 4096, 4096),
                                             (16, 1 << 20, 1 << 20), (3, 1000, 1000), (256, 64, 72), (1 << 20, 256, 256),
                                             (200, 5000, 5000), (2000, 1025, 1032), (1 << 18, 600, 608),
                                             (1 << 19, 512, 512), (1 << 18, 1024, 1024), (3001, 40, 40),
                                             (1 << 16, 96, 96), (1000, 100, 104), (1 << 16, 128, 128),
                                             (1 << 18, 2048, 2048),  # fp8 rows of 4 chunks (SHORT_ROWS_MAX_IN_FLIGHT)
                                             # fp8 tiles of 2 chunks (ROWS_SHORT_MAX_TILES_IN_FLIGHT)
                                             (1 << 16, 48, 48))
       for a in (0, 2)]
    + [Cols(a, r, b, sa, sr, al) for (a, r, b, sa, sr) in ((1, 16, 1 << 24, 0, 1 << 24), (1, 1 << 24, 16, 0, 16),
                                                            (64, 1000, 96, 96000, 96), (3, 5, 7, 35, 7),
                                                            (1, 1024, 1 << 17, 0, 1 << 17),  # tc32_cols_tma
                                                            # an H200's tc_cols one-item walks: (2, 3), (1, 4)
                                                            (1, 64, 1 << 22, 0, 1 << 22), (1, 256, 1 << 20, 0, 1 << 20),
                                                            # the split's register loop, a warp per strip, 3 blocks
                                                            # per SM on sm_90 (an H200's 2 GiB; an H100's one strip)
                                                            (1, 128, 1 << 22, 0, 1 << 22), (1, 65, 8, 0, 8),
                                                            (1, 32, 1 << 22, 0, 1 << 22))  # tc32_cols' few path
       for al in (0, 2)]
)


OUT_DTYPES = ("float16", "float32", "float64")


def _instantiations(problems=PROBLEMS, out_dtypes=OUT_DTYPES) -> dict[tuple[str, str], list[str]]:
    """(source, name expression) -> archs, over every method, dtype pair, problem and GPU (sm_80, and sm_90 with the
    H100's and the H200's plans). scripts/scan_plan_spills.py calls it with a wider grid of problems."""
    seen: dict[tuple[str, str], set[str]] = {}
    for method in registry.methods(None):
        if method.runner is not None:
            continue
        for gpu in ("A100", "H100", "H200"):  # the H200 plans with constants of its own (FAMILY_TUNING)
            device = KNOWN_GPUS[gpu]
            if device.cc < method.requires_cc:
                continue
            for in_dt, out_dt, prob in itertools.product(method.dtypes, out_dtypes, problems):
                try:
                    plan = method.plan(prob, in_dt, out_dt, device)
                except ValueError:
                    continue  # the method does not take this form (ladder rungs: full sums only)
                for ln in plan.launches:
                    seen.setdefault((ln.source, ln.kernel), set()).add(device.arch)
    return {k: v for k, v in seen.items() for v in [sorted(v)]}


INSTANTIATIONS = _instantiations()


def test_every_kernel_file_is_used():
    files = {p.name for p in kernel_dir().glob("*.cu")}
    used = {src for src, _ in INSTANTIATIONS} | {"mma_probe.cu", "bandwidth.cu"}
    assert files <= used, f"kernel files no planner launches: {files - used}"


def test_headers_are_inlined_into_the_hashed_source():
    text = load_source("tensorcore.cu")
    assert '#include "common.cuh"' not in text and "namespace tcr" in text


@pytest.mark.parametrize("source,kernel", sorted(INSTANTIATIONS), ids=[f"{s}:{k}" for s, k in sorted(INSTANTIATIONS)])
def test_compiles_clean(source, kernel):
    for arch in INSTANTIATIONS[(source, kernel)]:
        needle = None if "transpose" in kernel else TENSOR_CORE_SOURCES.get(source)  # wmma_transpose only copies
        assert_compiles_clean(source, kernel, arch, needle=needle, use_cache=False)


# tc_rows16 at the tiles in flight tune_plans and the GPU tests patch in (an H200 plans 4 for 16-bit rows, 8 for fp8)
ROWS16 = ([f"tc_rows16<{t}, 256, {u}, {o}>" for t in ("__half", "__nv_bfloat16") for u in (2, 4, 8)
           for o in ("float", "__half")]
          + [f"tc_rows16<{t}, 256, {u}, {o}>" for t in ("__nv_fp8_e4m3", "__nv_fp8_e5m2") for u in (4, 8)
             for o in ("float", "__half")]
          # fp8's whole-row loads (ROWS16_WHOLE_ROWS: half the units in flight, so 4, and 2; 8 spill 40 bytes)
          + [f"tc_rows16<{t}, 256, {u}, {o}, true>" for t in ("__nv_fp8_e4m3", "__nv_fp8_e5m2") for u in (2, 4)
             for o in ("float", "__half")])


# tc_rows32 (fp8 rows of 17-32, half a row per lane; ROWS32_HALF_ROW_LOADS) at tc_rows' fp8 tiles in flight (4) and 2
# (8 spill 8 bytes), for tensorcore and tensorcore_chained
ROWS32 = [f"tc_rows32<{t}, 256, {u}, {chain}, {o}>" for t in ("__nv_fp8_e4m3", "__nv_fp8_e5m2") for u in (2, 4)
          for chain in (1, 1 << 30) for o in ("float", "__half")]


# tc_cols' one-item walk of fp8's 128-column strips with evict-first loads (LOAD 3: tune_plans'
# float8_e4m3fn_cols*_wide_load patches COLS_EVICT_FIRST_MIN_ROWS={1: 0} in; no GPU plans it yet) at the spill-free
# (chunks in flight, blocks per SM) it patches with them ((4, 2) spills 136 bytes there, (1, 4) 40), 1-8 warps per strip
WIDE_EVICT_FIRST = [f"tc_cols<{t}, 256, {w}, true, 1, float, 0, {u}, {m}, true, 3, 16>"
                    for t in ("__nv_fp8_e4m3", "__nv_fp8_e5m2") for w in (1, 4, 8) for u, m in ((2, 2), (1, 3))]


@pytest.mark.parametrize("kernel", ROWS16 + ROWS32 + WIDE_EVICT_FIRST)
def test_patched_in_tensorcore_kernels_compile_clean(kernel):
    """The instantiations above: settings that tune_plans and the GPU tests patch in, beyond what test_compiles_clean
    gets from the planners."""
    assert_compiles_clean("tensorcore.cu", kernel, "sm_90", needle=TENSOR_CORE_SOURCES["tensorcore.cu"],
                          use_cache=False)


# tc_flat's one-pass walk at an H100's 8 rounds and at rounds no plan launches (GPU tests and tune_plans patch them
# in; an H200 plans 32), fp8 included (an H200 plans fp8's at 16 vectors per thread, 4 rounds, since session
# 45)
ONE_PASS_FLAT = [f"tc_flat<{t}, 256, 2, 1, float, 2, 5, {r}>" for t in ("__half", "__nv_bfloat16", "__nv_fp8_e4m3")
                 for r in (1, 4, 8, 16)]
# ... and small sums as one block of 16 vectors per thread (FLAT_ONE_BLOCK: an H200 plans it for one trip; the GPU test
# patches in two)
ONE_PASS_FLAT += [f"tc_flat<{t}, 256, 16, 1, float, 2, 2>" for t in ("__half", "__nv_bfloat16", "__nv_fp8_e4m3")]


# ... and shuffle_flat's and tc32_flat's (fp32 full sums; GPU tests patch in 1-32 rounds)
ONE_PASS_FLAT_FP32 = ([("shuffle.cu", f"shuffle_flat<{t}, float, 256, {u}, {a}, {m}, {r}>", None)
                       for t, u, m in (("float", 8, 4), ("__half", 2, 8)) for a in ("true", "false")
                       for r in (1, 8, 32)]
                      + [(src, f"tc32_flat<{policy}, 256, {u}, float, 2, 4, {r}>", "mma.sync.aligned")
                         for src, policy, u in (("tensorcore_fp32.cu", "tcr32::Split", 4),
                                                ("tensorcore_tf32.cu", "tcr32::Tf32", 8)) for r in (1, 8, 32)]
                      # ... and as one block of 16 vectors per thread (tc32's FLAT_ONE_BLOCK, patched in by GPU tests)
                      + [(src, f"tc32_flat<{policy}, 256, 16, float, 2, 2>", "mma.sync.aligned")
                         for src, policy in (("tensorcore_fp32.cu", "tcr32::Split"),
                                             ("tensorcore_tf32.cu", "tcr32::Tf32"))])


# tc_cols' 128-column strips for fp8 (LE = 16; COLS_WIDE_STRIPS, empty by default: tune_plans and the GPU test patch
# it in) at the (chunks in flight, blocks per SM) they take, one warp or several per strip, every output type
WIDE_COLS = [f"tc_cols<{t}, 256, {wps}, true, 1, {o}, 0, {u}, {m}, true, 0, 16>"
             for t, o in (("__nv_fp8_e4m3", "float"), ("__nv_fp8_e5m2", "float"), ("__nv_fp8_e4m3", "__half"),
                          ("__nv_fp8_e4m3", "double"))
             for wps in (1, 4) for u, m in ((1, 3), (1, 2), (2, 2), (3, 2), (4, 2))]


# ... and their general walk (COLS_WIDE_GENERAL, empty by default: splits of the rows, 8 warps per strip as planned,
# and one; 4 chunks in flight spill, so the sweep stops at 2)
WIDE_COLS += [f"tc_cols<{t}, 256, {wps}, true, 1, {o}, 0, {u}, 2, false, 0, 16>"
              for t, o in (("__nv_fp8_e4m3", "float"), ("__nv_fp8_e5m2", "float"), ("__nv_fp8_e4m3", "__half"))
              for wps in (1, 8) for u in (1, 2)]
# ... and their short path (COLS_WIDE_SHORT, empty by default) at the (strips in flight, blocks per SM) swept
WIDE_COLS += [f"tc_cols<{t}, 256, 1, true, 1, {o}, {s}, 1, {m}, false, 0, 16>"
              for t, o in (("__nv_fp8_e4m3", "float"), ("__nv_fp8_e5m2", "float"), ("__nv_fp8_e4m3", "__half"))
              for s, m in ((1, 4), (1, 3), (2, 3), (2, 2), (4, 2))]


@pytest.mark.parametrize("kernel", WIDE_COLS)
def test_the_wide_fp8_column_strips_compile_clean(kernel):
    assert_compiles_clean("tensorcore.cu", kernel, "sm_90", needle=TENSOR_CORE_SOURCES["tensorcore.cu"],
                          use_cache=False)


@pytest.mark.parametrize("kernel", ONE_PASS_FLAT)
def test_the_one_pass_flat_walk_compiles_clean(kernel):
    assert_compiles_clean("tensorcore.cu", kernel, "sm_90", needle=TENSOR_CORE_SOURCES["tensorcore.cu"],
                          use_cache=False)


@pytest.mark.parametrize("source,kernel,needle", ONE_PASS_FLAT_FP32)
def test_the_one_pass_flat_walks_of_shuffle_and_fp32_compile_clean(source, kernel, needle):
    assert_compiles_clean(source, kernel, "sm_90", needle=needle, use_cache=False)


# tc32_cols' and tc32_rows' prepared variants, off by default (tune_plans patches them in: *_few_path, *_load8, *_few_loop): the
# few-chunk path with two warps per strip and in trips (FEW_LOOP, 3 blocks per SM, aligned and not), and 8-byte loads
# of rows 8-byte aligned but not 16 in every path that takes them
PREPARED_VARIANTS = [
    (src, f"tc32_cols<{policy}, 256, {wps}, {al}, 1, float, {short}, {minb}, {pf}, {few}, {a8}, {loop}>")
    for src, policy in (("tensorcore_fp32.cu", "tcr32::Split"), ("tensorcore_tf32.cu", "tcr32::Tf32"))
    for wps, al, short, minb, pf, few, a8, loop in (
        (2, "false", 0, 4, "false", 2, "false", "false"), (2, "false", 0, 4, "false", 2, "true", "false"),
        (1, "false", 0, 4, "false", 2, "true", "false"), (1, "false", 2, 4, "false", 0, "true", "false"),
        (8, "false", 0, 3, "false", 0, "true", "false"), (1, "false", 0, 2, "true", 0, "true", "false"),
        (1, "true", 0, 3, "false", 2, "false", "true"), (8, "true", 0, 3, "false", 2, "false", "true"),
        (2, "false", 0, 3, "false", 2, "false", "true"), (8, "false", 0, 3, "false", 2, "true", "true"))]


# ... and tc32_rows' short path with 2 chunks per tile (TILE_SHORT_MAX_CHUNKS 2, tiles 1 or 2 in flight), 3-4
# (TILE_SHORT_MAX_CHUNKS 4, a tile in flight) and 5-8 (TILE_SHORT_MAX_CHUNKS 8, a tile at 2 blocks per SM, 5-7 also
# at 3 as an H200 plans them)
PREPARED_VARIANTS += [(src, f"tc32_rows<{policy}, 256, 1, {vec}, {u}, float, true, {minb}, {sc}>")
                      for src, policy in (("tensorcore_fp32.cu", "tcr32::Split"), ("tensorcore_tf32.cu", "tcr32::Tf32"))
                      for vec in ("true", "false")
                      for u, minb, sc in ((1, 4, 2), (2, 4, 2), (1, 4, 3), (1, 4, 4), (1, 2, 5), (1, 2, 6), (1, 2, 7),
                                          (1, 2, 8), (1, 3, 5), (1, 3, 6), (1, 3, 7))]
# ... for sm_80 and sm_90, but the split's 8 chunks of a tile with 16-byte loads, sm_90 only (on sm_80 its 128 registers
# spill 56 bytes: an A100 keeps TILE_SHORT_MAX_CHUNKS below 8), and its 7 chunks with scalar loads at 3 blocks per SM,
# sm_80 only (on sm_90 16 bytes spill: an H200 keeps the split's TILE_SHORT_MAX_CHUNKS_SCALAR at 6)
_SPILL_ON = {"tc32_rows<tcr32::Split, 256, 1, true, 1, float, true, 2, 8>": "sm_80",
             "tc32_rows<tcr32::Split, 256, 1, false, 1, float, true, 3, 7>": "sm_90"}
PREPARED_ON = [(src, kernel, arch) for src, kernel in PREPARED_VARIANTS for arch in ("sm_80", "sm_90")
               if _SPILL_ON.get(kernel) != arch]


@pytest.mark.parametrize("source,kernel,arch", PREPARED_ON)
def test_the_prepared_variants_compile_clean(source, kernel, arch):
    assert_compiles_clean(source, kernel, arch, needle="mma.sync.aligned", use_cache=False)


# full sums whose resident grid is one thread-block cluster (FLAT_CLUSTER_MAX_BLOCKS, sm_90): the cluster barrier and
# the distributed shared-memory loads in the PTX, and the cluster size the kernel declares
CLUSTER_FLAT = ([("tensorcore.cu", f"tc_flat_cluster<{t}, 256, 2, {chain}, float, 2, 6, {c}>")
                 for t in ("__half", "__nv_bfloat16", "__nv_fp8_e4m3") for chain in (1, 4) for c in (2, 16)]
                + [("shuffle.cu", f"shuffle_flat_cluster<{t}, float, 256, {u}, {a}, {m}, {c}>")
                   for t, u, m in (("float", 8, 4), ("__half", 2, 8), ("__nv_fp8_e4m3", 2, 8))
                   for a in ("true", "false") for c in (2, 16)])


@pytest.mark.parametrize("source,kernel", CLUSTER_FLAT)
def test_the_cluster_flat_combination_compiles_clean(source, kernel):
    ck = assert_compiles_clean(source, kernel, "sm_90", needle="barrier.cluster.arrive.release", use_cache=False)
    cluster = kernel.rsplit(", ", 1)[1].rstrip(">")
    assert "mapa.shared::cluster" in ck.ptx and "ld.shared::cluster.f32" in ck.ptx
    assert f".reqnctapercluster {cluster}, 1, 1" in ck.ptx


def _evict_first_instantiations() -> list[tuple[str, str]]:
    """(source, kernel) of the hinted kernels the GPU test of evict-first loads plans on an H200 (EVICT_FIRST)."""
    import importlib

    from test_emulate_gpu import EVICT_FIRST

    from tcreduce.testing import contiguous_problem, patched_plans

    seen = set()
    for method, module, knobs, dtype, shape, axis, _ in EVICT_FIRST:
        problem = contiguous_problem(shape, axis, dtype)
        with patched_plans(importlib.import_module(f"tcreduce.plans.{module}"), knobs):
            seen |= {(ln.source, ln.kernel) for ln in registry.get(method, "sum").plan(
                problem, dtype, "float32", KNOWN_GPUS["H200"]).launches}
    return sorted(seen)


@pytest.mark.parametrize("source,kernel", _evict_first_instantiations())
def test_evict_first_loads_compile_clean(source, kernel):
    """The hinted instantiations (no plan names them by default on every GPU): clean, and their loads carry the L2
    cache-hint policy."""
    assert_compiles_clean(source, kernel, "sm_90", needle="L2::cache_hint", use_cache=False)


def test_editing_an_included_header_changes_the_cache_key(tmp_path, monkeypatch):
    """CuPy's cache ignores -I headers (cupy/cupy#941); ours hashes the inlined source, so a header edit recompiles."""
    import shutil

    import tcreduce._compile as c

    for f in ("tensorcore.cu", "common.cuh"):
        shutil.copy(kernel_dir() / f, tmp_path / f)
    monkeypatch.setattr(c, "kernel_dir", lambda: tmp_path)
    monkeypatch.setenv("TCREDUCE_CACHE_DIR", str(tmp_path / "cache"))
    name = "tc_flat<__half, 256, 2, 1, float, 2, 6>"
    before = c.compile_kernel("tensorcore.cu", name, "sm_90")
    assert c.compile_kernel("tensorcore.cu", name, "sm_90").key == before.key  # cached: same key
    header = tmp_path / "common.cuh"
    edited = header.read_text().replace("constexpr unsigned HALF2_ONES", "// edited\nconstexpr unsigned HALF2_ONES")
    header.write_text(edited)
    after = c.compile_kernel("tensorcore.cu", name, "sm_90")
    assert after.key != before.key and "// edited" in c.load_source("tensorcore.cu")


def test_cub_gpu_to_gpu_competitor_builds(tmp_path):
    """The benchmark's CUB gpu_to_gpu sum (experiments/cub_determinism.cu) compiles against CuPy's CCCL headers."""
    pytest.importorskip("cupy")
    from experiments import cub_determinism

    why = cub_determinism.missing()
    if why:
        pytest.skip(why)
    lib = cub_determinism.build("sm_90", tmp_path)
    assert lib.is_file() and lib.stat().st_size > 0
    assert cub_determinism.build("sm_90", tmp_path) == lib  # cached: built once
