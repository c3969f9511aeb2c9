"""CPU (CI) tests of the experiments: the entry point's arguments and skip messages, CSV and metadata writing, the
progress bar, exact sums, the accuracy study in a tiny CPU configuration, and every study's figures drawn from
synthetic CSVs (the GPU studies' measuring parts run on a GPU only: ``pytest -m gpu`` runs them in tiny form)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import experiments
from experiments import __main__ as entry
from experiments import plotting
from experiments.ceiling import READ_CONFIGS, measure_ceiling
from experiments.context import Context, MissingInterface, Progress
from experiments.env import DEFAULT_OUT
from experiments.exact import exact_sum_gpu, exact_sum_host, rel_error
from experiments.inputs import DISTRIBUTIONS, make_input, random_pool, rotating_views
from experiments.methods import LADDER_ORDER, sum_methods
from experiments.records import metadata, read_csv, write_csv, write_metadata
from experiments.timing import TimingConfig, time_gpu

GPU_STUDIES = ("throughput", "segments", "tradeoff", "ladder")
META = {"study": "synthetic", "date_utc": "2026-11-22T00:00:00+00:00", "command": "python -m experiments x",
        "quick": False, "backend": "gpu", "device": {"gpu_name": "NVIDIA H200", "sm_count": 132, "driver": "580.1",
                                                      "cuda_runtime": "13.0"},
        "git": {"commit": "0123456789abcdef", "dirty": False}}


def _read(path: Path) -> tuple[list[dict], dict]:
    rows, meta = read_csv(path)
    assert rows, f"{path} has no rows"
    return rows, meta


def _well_formed_csv(path: Path, columns: list[str]) -> list[dict]:
    text = path.read_text()
    body = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert text.startswith("# study: "), "metadata header first"
    reader = csv.reader(io.StringIO("\n".join(body)))
    header = next(reader)
    assert header == columns
    lines = list(reader)
    assert lines and all(len(r) == len(columns) for r in lines)
    return [dict(zip(header, r)) for r in lines]


def _figure_ok(path: Path) -> None:
    assert path.is_file() and path.stat().st_size > 2000, path
    head = path.read_bytes()[:8]
    assert head.startswith(b"\x89PNG") if path.suffix == ".png" else head.startswith(b"%PDF"), path


# --------------------------------------------------------------------------------------------- entry point
@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(entry, "detect_gpu", lambda: (False, "CuPy sees no CUDA device (test)"))


def test_list_and_help(capsys):
    assert entry.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in experiments.STUDIES:
        assert name in out
    assert entry.main(["--help"]) == 0
    assert "--quick" in capsys.readouterr().out


def test_bad_arguments_exit_64(capsys):
    assert entry.main(["nonsense"]) == 64
    assert "invalid choice" in capsys.readouterr().err
    assert entry.main([]) == 64


def test_parser_options():
    args = entry.build_parser().parse_args(["all", "--quick", "--out", "x", "--methods", "shuffle,cub"])
    assert args.study == "all" and args.quick and args.out == Path("x") and args.methods == "shuffle,cub"


def test_default_output_folders():
    assert entry.default_out(True, False) == DEFAULT_OUT
    assert entry.default_out(True, True) == DEFAULT_OUT / "quick"
    assert entry.default_out(False, False) == DEFAULT_OUT / "cpu"
    assert entry.default_out(False, True) == DEFAULT_OUT / "cpu-quick"


@pytest.mark.parametrize("name", GPU_STUDIES)
def test_gpu_study_alone_without_gpu_is_skipped_with_reason(name, no_gpu, tmp_path, capsys):
    assert entry.main([name, "--out", str(tmp_path), "--no-progress"]) == 2
    out = capsys.readouterr().out
    assert f"skipped {name}: needs a CUDA GPU" in out and "CuPy sees no CUDA device (test)" in out
    assert not list(tmp_path.iterdir())


def test_all_without_gpu_runs_accuracy_and_names_the_skipped(no_gpu, tmp_path, capsys, monkeypatch):
    ran = []
    monkeypatch.setattr(experiments.study("accuracy"), "run", lambda ctx: ran.append(ctx) or [])
    assert entry.main(["all", "--out", str(tmp_path), "--tiny", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert len(ran) == 1 and not ran[0].gpu and ran[0].mode == "tiny"
    for name in GPU_STUDIES:
        assert f"skipped {name}: needs a CUDA GPU" in out
    assert "summary:" in out


def test_cpu_flag_forces_emulator(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(entry, "detect_gpu", lambda: (True, "fake GPU"))
    ran = []
    monkeypatch.setattr(experiments.study("accuracy"), "run", lambda ctx: ran.append(ctx) or [])
    assert entry.main(["accuracy", "--cpu", "--out", str(tmp_path), "--no-progress"]) == 0
    assert not ran[0].gpu and "--cpu" in capsys.readouterr().out


def test_failed_study_gives_status_1(no_gpu, tmp_path, capsys, monkeypatch):
    def boom(ctx):
        raise MissingInterface("the accuracy study needs tcreduce.emulate.sum (test)")

    monkeypatch.setattr(experiments.study("accuracy"), "run", boom)
    assert entry.main(["accuracy", "--out", str(tmp_path), "--no-progress"]) == 1
    assert "FAILED accuracy: MissingInterface: the accuracy study needs tcreduce.emulate.sum" in capsys.readouterr().out


def test_replot_without_csv(no_gpu, tmp_path, capsys):
    assert entry.main(["segments", "--replot", "--out", str(tmp_path)]) == 2
    assert "no " in capsys.readouterr().out


def test_every_study_module_has_the_interface():
    for name in experiments.STUDIES:
        mod = experiments.study(name)
        assert mod.NAME == name and isinstance(mod.NEEDS_GPU, bool) and mod.SUMMARY
        assert callable(mod.run) and callable(mod.config)
        assert name in plotting.PLOTTERS
        if mod.NEEDS_GPU:
            assert mod.WHY_GPU
    assert not experiments.study("accuracy").NEEDS_GPU
    with pytest.raises(ValueError, match="unknown study"):
        experiments.study("nope")


@pytest.mark.parametrize("name", experiments.STUDIES)
@pytest.mark.parametrize("quick", [False, True])
def test_configs(name, quick, tmp_path):
    mode = "quick" if quick else "full"
    for gpu in (False, True):
        ctx = Context(out=tmp_path, quick=quick, gpu=gpu, mode=mode)
        cfg = experiments.study(name).config(ctx)
        json.dumps(cfg, default=str)
    if name == "accuracy":
        gpu_full = experiments.study(name).config(Context(out=tmp_path, gpu=True))
        assert gpu_full["sizes"][0] == 2**10 and gpu_full["sizes"][-1] == 2**30
        cpu_full = experiments.study(name).config(Context(out=tmp_path, gpu=False))
        assert cpu_full["sizes"][-1] == 2**20 and not cpu_full["emulator_check_sizes"]
    if name == "segments" and not quick:
        cfg = experiments.study(name).config(Context(out=tmp_path, gpu=True))
        assert cfg["total_bytes"] >= 512 * 2**20 and cfg["segment_lengths"][0] == 16
        assert cfg["segment_lengths"][-1] == 2**20
    if name == "ladder" and not quick:
        cfg = experiments.study(name).config(Context(out=tmp_path, gpu=True))
        assert [n for _, n in cfg["sizes"]] == [10**8, 2**28]


# --------------------------------------------------------------------------------------------- common pieces
def test_csv_round_trip(tmp_path):
    rows = [{"a": 1, "b": 0.1, "c": "x,y", "d": None, "e": True}, {"a": 2, "b": float("nan"), "c": "z"}]
    p = write_csv(tmp_path / "t.csv", rows, ["a", "b", "c", "d", "e"], META)
    got, meta = read_csv(p)
    assert meta["device"] == "NVIDIA H200 (132 SMs)" and meta["commit"] == "0123456789ab"
    assert meta["command"] == "python -m experiments x"
    assert got[0] == {"a": "1", "b": "0.1", "c": "x,y", "d": "", "e": "true"}
    assert got[1]["b"] == "" and float(got[0]["b"]) == 0.1
    _well_formed_csv(p, ["a", "b", "c", "d", "e"])


def test_time_interleaved_times_host_bound_labels_in_turns_under_the_same_host_states(monkeypatch):
    """A fake CuPy whose events read a clock that the calls advance: a host that is slow (1.5x) in the last 30% of
    every millisecond. Re-timed in turns of random order and in batches of one size, two labels of the same cost
    read the same time (the mean of the middle 80% of their samples), a dearer one its own, the slow state shows in
    each p90; every turn takes every label once, and each label follows each other one in some turn; a GPU-bound
    label keeps its first timing."""
    import types

    from experiments import timing
    from experiments.timing import Timed, Timing, time_interleaved

    clock = [0.0]  # ms
    calls: list[str] = []  # the labels called, "|" where an event is recorded

    class Event:
        def record(self, stream=None):
            self.t = clock[0]
            calls.append("|")

    stream = types.SimpleNamespace(synchronize=lambda: None)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
        Event=Event, get_current_stream=lambda: stream, get_elapsed_time=lambda s, e: e.t - s.t))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(timing, "pinned", contextlib.nullcontext)

    def call(label: str, us: float):
        def fn(x):
            calls.append(label)
            clock[0] += us * 1e-3 * (1.5 if clock[0] % 1.0 > 0.7 else 1.0)
        return Timed(fn, [None, None])

    def t(us: float, batch: int):
        return Timing(us * 1e-6, us * 1e-6, us * 1e-6, 10, batch, 2)

    first = {"a": t(14.0, 4), "b": t(10.0, 3), "c": t(12.0, 4), "gpu": t(700.0, 1)}
    timed = {"a": call("a", 10.0), "b": call("b", 10.0), "c": call("c", 12.0), "gpu": call("gpu", 700.0)}
    got = time_interleaved(first, timed, samples=300, below_s=50e-6)
    assert got["gpu"] is first["gpu"] and "gpu" not in calls
    batches = [b for b in "".join(calls).split("|") if b]  # the calls between two events: one sample
    assert all(b == b[0] * 4 for b in batches), batches[:6]  # every label in batches of the largest first batch
    turns = [[b[0] for b in batches[i:i + 3]] for i in range(0, len(batches), 3)]
    assert len(turns) == 300 and all(sorted(turn) == ["a", "b", "c"] for turn in turns)
    follows = {(x, y) for turn in turns for x, y in zip(turn, turn[1:])}
    assert follows == {(x, y) for x in "abc" for y in "abc" if x != y}
    for label in "abc":
        g = got[label]
        assert (g.reps, g.batch, g.buffers) == (300, 4, 2), g
        assert g.p10_s < g.median_s < g.p90_s and abs(g.p90_s * 1e6 / (12.0 if label == "c" else 10.0) - 1.5) < 0.01
    assert abs(got["a"].median_s / got["b"].median_s - 1) < 0.03, got
    assert abs(got["c"].median_s / got["a"].median_s - 1.2) < 0.03, got


def test_contenders_and_the_read_before_each_interleaved_sample(monkeypatch):
    """contenders: the labels of at least ``at_least_s`` within ``within`` of the fastest such label;
    interleaved_samples runs ``before`` once before every sample, outside the sample's events."""
    import types

    from experiments import timing
    from experiments.timing import Timed, Timing, contenders, interleaved_samples

    def t(us: float) -> Timing:
        return Timing(us * 1e-6, us * 1e-6, us * 1e-6, 10, 1, 1)

    first = {"a": t(100.0), "b": t(108.0), "c": t(111.0), "host": t(20.0)}
    assert contenders(first, 1.10, 50e-6) == ["a", "b"]
    assert contenders(first, 1.10) == ["host"]
    assert contenders({"host": t(20.0)}, 1.10, 50e-6) == []

    log: list[str] = []

    class Event:
        def record(self, stream=None):
            log.append("|")

    stream = types.SimpleNamespace(synchronize=lambda: None)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
        Event=Event, get_current_stream=lambda: stream, get_elapsed_time=lambda s, e: 1.0))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(timing, "pinned", contextlib.nullcontext)
    timed = {label: Timed(lambda x, label=label: log.append(label), [None]) for label in "ab"}
    series = interleaved_samples(timed, 5, before=lambda: log.append("scrub"))
    assert all(len(v) == 5 for v in series.values())
    samples = "".join(x if x != "scrub" else "s" for x in log)
    assert samples.count("s") == 10 and all(chunk in ("s|a|", "s|b|") for chunk in
                                             (samples[i:i + 4] for i in range(0, len(samples), 4))), samples


def test_metadata_fields(tmp_path):
    ctx = Context(out=tmp_path, gpu=False, mode="tiny")
    meta = metadata("accuracy", ctx, {"sizes": [1]})
    for key in ("study", "date_utc", "command", "backend", "device", "git", "versions", "config"):
        assert key in meta
    for key in ("python", "numpy", "cupy", "torch", "tcreduce"):
        assert key in meta["versions"]
    assert meta["backend"].startswith("emulator")
    p = write_metadata(tmp_path / "m.json", meta)
    assert json.loads(p.read_text())["study"] == "accuracy"


def test_progress_bar_non_tty(capsys):
    buf = io.StringIO()
    bar = Progress(50, "test", stream=buf)
    for _ in range(50):
        bar.update(1, "x")
    lines = buf.getvalue().splitlines()
    assert 2 <= len(lines) <= 12 and "50/50" in lines[-1]
    quiet = io.StringIO()
    Progress(3, "q", stream=quiet, enabled=False).update(3)
    assert quiet.getvalue() == ""


def test_rel_error_exact():
    assert rel_error(1.0, 1.0) == 0.0
    assert rel_error(0.0, 0.0) == 0.0
    assert rel_error(1.0, 0.0) == math.inf
    assert math.isnan(rel_error(float("nan"), 1.0))
    a, b = 1.0 + 2**-52, 1.0
    assert rel_error(a, b) == 2**-52


@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_make_input(dist, dtype):
    if dtype not in DISTRIBUTIONS[dist]["dtypes"]:
        with pytest.raises(ValueError):
            make_input(dist, dtype, 10, 1)
        return
    x = make_input(dist, dtype, 4096, seed=5)
    assert x.dtype == np.dtype(dtype) and x.shape == (4096,)
    assert np.all(np.isfinite(x)) and np.count_nonzero(x) > 4000
    assert np.array_equal(x, make_input(dist, dtype, 4096, seed=5))  # fixed seeds
    if dist == "mixed":
        s, a = exact_sum_host(x), exact_sum_host(np.abs(x))
        assert 2e3 < a / abs(s) < 5e4  # condition number about 1e4
    if dist == "near_overflow":
        assert x.min() >= 32768 and x.max() <= 65504
    if dist == "uniform":
        assert x.min() >= 0 and x.max() < 1


def test_exact_sum_host_matches_reference():
    reference = pytest.importorskip("tcreduce.reference")
    rng = np.random.default_rng(1)
    for dtype in (np.float16, np.float32):
        x = (rng.standard_normal(10001) * 100).astype(dtype)
        assert exact_sum_host(x) == float(reference.exact_sum(x))


def test_sum_methods_and_ladder_order():
    names = [m.name for m in sum_methods("float32", ladder=True)]
    ranks = [LADDER_ORDER.index(n) for n in names if n in LADDER_ORDER]
    assert ranks == sorted(ranks)
    assert all(not m.name.startswith("ladder_") for m in sum_methods("float16", ladder=False))


def test_bandwidth_kernel_compiles():
    compile_kernel = pytest.importorskip("tcreduce._compile").compile_kernel
    try:
        kernels = {("read16_blocks" if rounds else "read16", u, s) for u, s, _, rounds in READ_CONFIGS}
        assert {k for k, _, _ in kernels} == {"read16", "read16_blocks"}
        for arch in ("sm_80", "sm_90"):
            for kernel, unroll, stream in sorted(kernels):
                ck = compile_kernel("bandwidth.cu", f"tcr_bw::{kernel}<{unroll}, {'true' if stream else 'false'}>",
                                    arch, use_cache=False)
                assert "warning" not in ck.log.lower() and not ck.spills, ck.log
                assert "ld.global" in ck.ptx and ".v4.u32" in ck.ptx
    except Exception as e:  # no NVRTC on this machine: the compile tests of tests/test_compile.py say so too
        if "nvrtc" in str(e).lower() or "cuda_fp16.h" in str(e) or isinstance(e, ImportError):
            pytest.skip(f"NVRTC unavailable: {e}")
        raise


# --------------------------------------------------------------------------------------------- accuracy, CPU
def _stand_in_emulator(monkeypatch):
    """A stand-in for tcreduce.emulate.sum (fp32 sums in NumPy's order) to exercise the study's plumbing."""
    import tcreduce.emulate as em

    real_sum = getattr(em, "sum", None)

    def fake_sum(x, axis=None, dtype=None, keepdims=False, *, method, gpu="H100"):
        if method == "exact" and real_sum is not None:  # its bound is half an ulp: no stand-in order meets it
            return real_sum(x, axis, dtype, keepdims, method=method, gpu=gpu)
        return np.float32(np.sum(np.asarray(x), dtype=np.float32))

    monkeypatch.setattr(em, "sum", fake_sum, raising=False)


@pytest.mark.parametrize("emulator", ["stand-in", "real"])
def test_accuracy_tiny_cpu(emulator, tmp_path, monkeypatch):
    import tcreduce.emulate as em

    if emulator == "real":
        if not hasattr(em, "sum"):
            pytest.skip("tcreduce.emulate.sum is not in this checkout yet")
    else:
        _stand_in_emulator(monkeypatch)
    mod = experiments.study("accuracy")
    ctx = Context(out=tmp_path, quick=True, gpu=False, mode="tiny", progress=False)
    paths = mod.run(ctx)
    assert not ctx.errors, ctx.errors
    rows = _well_formed_csv(tmp_path / "accuracy.csv", mod.COLUMNS)
    meta = json.loads((tmp_path / "accuracy.json").read_text())
    assert meta["study"] == "accuracy" and meta["backend"].startswith("emulator") and meta["config"]["sizes"]
    methods = {r["method"] for r in rows}
    assert "float64" in methods and "tensorcore" in methods
    measured = [r for r in rows if r["kind"] == "tcreduce"]
    assert measured and all(r["rel_error"] != "" and r["bound_abs"] != "" for r in measured)
    assert all(r["within_bound"] == "true" for r in measured)
    assert {r["dist"] for r in rows} == {"uniform", "near_overflow", "mixed", "normal"}
    assert {r["dtype"] for r in rows} == {"float16", "float32", "bfloat16", "float8_e4m3fn"}  # the new formats too
    for ext in ("png", "pdf"):
        _figure_ok(tmp_path / f"accuracy.{ext}")
    assert tmp_path / "accuracy.png" in paths


def test_accuracy_without_emulator_fails_clearly(tmp_path, monkeypatch):
    import tcreduce.emulate as em

    monkeypatch.delattr(em, "sum", raising=False)
    ctx = Context(out=tmp_path, gpu=False, mode="tiny", progress=False)
    with pytest.raises(MissingInterface, match="tcreduce.emulate"):
        experiments.study("accuracy").run(ctx)


# ----------------------------------------------------------------------------------------- synthetic figures
def _syn_accuracy(path: Path) -> None:
    from experiments.accuracy import COLUMNS

    rows = []
    for dt in ("float16", "float32"):
        for dist, spec in DISTRIBUTIONS.items():
            if dt not in spec["dtypes"]:
                continue
            for k in range(10, 31, 2):
                n = 2**k
                for m, c in (("tensorcore", 3e-8), ("shuffle", 2e-8), ("cub", 1e-8), ("torch.sum", 1e-8),
                             ("float64", 0.0), ("ladder_atomic", 1e-6), ("ladder_float4", 5e-8)):
                    if dt == "float32" and m == "tensorcore":
                        continue
                    kind = "float64" if m == "float64" else "competitor" if "." in m else "tcreduce"
                    err = c * math.sqrt(n) / 30
                    rows.append(dict(dtype=dt, dist=dist, n=n, kind=kind, method=m, rel_error=err,
                                     rel_bound=(err * 50 if kind == "tcreduce" else None),
                                     emu_equal=(True if kind == "tcreduce" and k <= 20 and m != "ladder_atomic"
                                                else None)))
    write_csv(path, rows, COLUMNS, dict(META, study="accuracy"))


def _syn_throughput(path: Path) -> None:
    from experiments.throughput import COLUMNS

    rows = []
    for dt in ("float16", "float32"):
        for k in range(10, 31):
            n = 2**k
            for m, peak, kind in (("tensorcore", 4300, "tcreduce"), ("shuffle", 4200, "tcreduce"),
                                  ("auto", 4300, "tcreduce"),
                                  ("cub", 1500, "tcreduce"), ("torch.sum", 4100, "competitor"),
                                  ("cupy.sum CUB", 4000, "competitor"), ("cupy.sum no CUB", 5, "competitor"),
                                  ("read kernel", 4500, "ceiling")):
                nbytes = n * (2 if dt == "float16" else 4)
                t = 8e-6 + nbytes / (peak * 1e9)
                tg = 2e-6 + nbytes / (peak * 1e9)
                rows.append(dict(dtype=dt, n=n, method=m, kind=kind, time_us=t * 1e6, bytes=nbytes,
                                 gbs=nbytes / t / 1e9, frac_ceiling=nbytes / t / 1e9 / 4500,
                                 graph_us=tg * 1e6 if t < 1e-3 else None,
                                 graph_gbs=nbytes / tg / 1e9 if t < 1e-3 else None))
    meta = dict(META, study="throughput", csv_header={"ceiling_gbs": 4500.0})
    write_csv(path, rows, COLUMNS, meta)


def _syn_segments(path: Path) -> None:
    from experiments.segments import COLUMNS

    rows = []
    for dt in ("float16", "bfloat16", "float32"):
        for lay in ("rows", "cols"):
            for k in range(4, 21):
                n = 2**k
                for m, kind, f in (("tensorcore", "tcreduce", lambda k: 3800 - 30 * abs(k - 12)),
                                   ("shuffle", "tcreduce", lambda k: 3000 + 50 * k),
                                   ("auto", "tcreduce", lambda k: max(3800 - 30 * abs(k - 12), 3000 + 50 * k)),
                                   ("torch.sum", "competitor", lambda k: 300 * k / 2),
                                   ("cupy.sum CUB", "competitor", lambda k: 2000 + 40 * k),
                                   ("cupy.sum no CUB", "competitor", lambda k: 400.0)):
                    if dt == "float32" and m == "tensorcore":
                        continue
                    rows.append(dict(dtype=dt, layout=lay, n=n, m=2**28 // n, method=m, kind=kind, gbs=f(k),
                                     frac_ceiling=f(k) / 4500))
    meta = dict(META, study="segments", csv_header={"ceiling_gbs": 4500.0, "total_bytes": 2**29})
    write_csv(path, rows, COLUMNS, meta)


def _syn_tradeoff(path: Path) -> None:
    from experiments.tradeoff import COLUMNS

    rows = []
    for dt in ("float16", "float32"):
        for dist in ("uniform", "normal"):
            for label, method, g, e in (("tensorcore", "tensorcore", 4200, 1e-7),
                                        ("tensorcore chain=16", "tensorcore", 4300, 5e-7),
                                        ("tensorcore_chained", "tensorcore_chained", 4350, 7e-6),
                                        ("shuffle", "shuffle", 4100, 8e-8), ("cub", "cub", 1500, 5e-8),
                                        ("torch.sum", "torch.sum", 4000, 6e-9),
                                        ("cupy.sum fp64", "cupy.sum fp64", 1200, 1e-16)):
                if dt == "float32" and method.startswith("tensorcore"):
                    continue
                rows.append(dict(dtype=dt, dist=dist, n=2**28, label=label, method=method, gbs=g,
                                 rel_error_median=e, rel_error_min=e / 2, rel_error_max=e * 2, seeds=3))
    write_csv(path, rows, COLUMNS, dict(META, study="tradeoff", csv_header={"n": 2**28}))


def _syn_ladder(path: Path) -> None:
    from experiments.ladder import COLUMNS, SEED_003_CLAIMS

    rows = []
    for label, n in (("10^8", 10**8), ("2^28", 2**28)):
        ceiling = 4400.0
        rows.append(dict(size_label=label, n=n, method="read kernel", kind="ceiling", gbs=ceiling, frac_ceiling=1.0,
                         ceiling_gbs=ceiling))
        for i, rung in enumerate(LADDER_ORDER):
            g = 60 + (ceiling - 60) * (i / 13) ** 0.7
            claim = SEED_003_CLAIMS.get(rung)
            rows.append(dict(size_label=label, n=n, method=rung, kind="rung", order=i, gbs=g,
                             frac_ceiling=g / ceiling, ceiling_gbs=ceiling,
                             seed_claim_pct=claim[2] if claim else None))
        for ref, kind in (("shuffle", "tcreduce"), ("cupy.sum CUB", "library"), ("torch.sum", "library")):
            rows.append(dict(size_label=label, n=n, method=ref, kind=kind, gbs=4100, frac_ceiling=4100 / ceiling,
                             ceiling_gbs=ceiling))
    write_csv(path, rows, COLUMNS, dict(META, study="ladder"))


SYNTHETIC = {"accuracy": (_syn_accuracy, ["accuracy", "accuracy_emulator", "accuracy_ladder"]),
             "throughput": (_syn_throughput, ["throughput", "throughput_calls"]),
             "segments": (_syn_segments, ["segments", "segments_speedup"]),
             "tradeoff": (_syn_tradeoff, ["tradeoff"]),
             "ladder": (_syn_ladder, ["ladder"])}


@pytest.mark.parametrize("name", experiments.STUDIES)
def test_figures_from_synthetic_csv(name, tmp_path):
    make, stems = SYNTHETIC[name]
    csv_path = tmp_path / f"{name}.csv"
    make(csv_path)
    _read(csv_path)
    paths = plotting.PLOTTERS[name](csv_path, tmp_path)
    assert {p.name for p in paths} == {f"{s}.{e}" for s in stems for e in ("png", "pdf")}
    for p in paths:
        _figure_ok(p)


def test_replot_entry_point(tmp_path, no_gpu, capsys):
    _syn_ladder(tmp_path / "ladder.csv")
    assert entry.main(["ladder", "--replot", "--out", str(tmp_path)]) == 0
    assert "ladder.png" in capsys.readouterr().out
    _figure_ok(tmp_path / "ladder.pdf")


def test_pareto_front():
    pts = [(4000, 1e-7), (4300, 5e-7), (1500, 5e-8), (1000, 1e-6), (4300, 6e-7), (1200, 1e-16)]
    front = plotting.pareto(pts)
    assert set(front) == {0, 1, 2, 5}
    assert [pts[i][0] for i in front] == sorted(pts[i][0] for i in front)


def test_footer_names_device_and_commit():
    text = plotting.footer_text({"device": "NVIDIA H100 (132 SMs)", "commit": "abc123", "date_utc": "2026-11-22T1",
                                 "command": "/usr/bin/python3 -m experiments all", "quick": "true"})
    assert "NVIDIA H100" in text and "abc123" in text and "python3 -m experiments all" in text
    assert "QUICK" in text and "/usr/bin" not in text


# ------------------------------------------------------------------------------------------------ on a GPU
@pytest.mark.gpu
@pytest.mark.parametrize("name", experiments.STUDIES)
def test_study_tiny_on_gpu(name, tmp_path):
    mod = experiments.study(name)
    ctx = Context(out=tmp_path, quick=True, gpu=True, mode="tiny", progress=False)
    mod.run(ctx)
    import tcreduce.emulate as em

    errors = [e for e in ctx.errors if hasattr(em, "sum") or "tcreduce.emulate.sum" not in e]
    assert not errors, errors
    _well_formed_csv(tmp_path / f"{name}.csv", mod.COLUMNS)
    _figure_ok(tmp_path / f"{name}.png")


@pytest.mark.gpu
def test_exact_sum_gpu_matches_fsum():
    import cupy

    for dtype in ("float16", "float32"):
        for dist in ("uniform", "mixed", "lognormal", "normal"):
            x = make_input(dist, dtype, 100003, seed=9, xp=cupy)
            h = cupy.asnumpy(x)
            assert exact_sum_gpu(x) == exact_sum_host(h)
            assert exact_sum_gpu(x, absolute=True) == exact_sum_host(np.abs(h))


@pytest.mark.gpu
def test_timing_and_ceiling_on_gpu():
    import cupy

    cfg = TimingConfig.for_mode("tiny")
    x = random_pool("float32", 2**24, seed=1)
    t = time_gpu(lambda v: cupy.sum(v), [x], cfg)
    assert 0 < t.p10_s <= t.median_s <= t.p90_s and t.reps >= cfg.min_reps
    c = measure_ceiling(2**26, cfg)
    assert 100 < c.read_gbs < 20000 and 100 < c.copy_gbs < 20000
    views = rotating_views(random_pool("float16", 2**26, seed=2), 2**12)
    assert len(views) > 1 and all(v.size == 2**12 and v.data.ptr % 256 == 0 for v in views)


def test_cpu_list_reads_the_sysfs_format():
    from experiments.env import cpu_list

    assert cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert cpu_list("5") == [5] and cpu_list("") == []


def test_pinned_timing_runs_on_one_cpu_and_restores_the_thread(monkeypatch):
    """time_gpu's timings run on one CPU (timing.pinned): TCREDUCE_TIMING_CPU picks it ("none": no pinning; a CPU the
    process may not use: ValueError naming those it may); the thread's former CPUs come back after the block, also
    when it raises."""
    import os

    from experiments import timing

    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("this OS cannot pin threads")
    before = os.sched_getaffinity(0)
    cpu = min(before)
    for setting, want in ((str(cpu), {cpu}), ("none", before)):
        monkeypatch.setenv("TCREDUCE_TIMING_CPU", setting)
        timing.timing_cpu.cache_clear()
        with timing.pinned():
            assert os.sched_getaffinity(0) == want
        assert os.sched_getaffinity(0) == before
    monkeypatch.setenv("TCREDUCE_TIMING_CPU", str(cpu))
    timing.timing_cpu.cache_clear()
    with pytest.raises(RuntimeError), timing.pinned():
        raise RuntimeError("a failed timing")
    assert os.sched_getaffinity(0) == before
    monkeypatch.delenv("TCREDUCE_TIMING_CPU")
    timing.timing_cpu.cache_clear()
    assert timing.timing_cpu() in before  # no GPU here: the last CPU this process may use
    for bad in (str(max(before) + 1), "-1", "first"):  # a CPU this process may not use, or no CPU number
        monkeypatch.setenv("TCREDUCE_TIMING_CPU", bad)
        timing.timing_cpu.cache_clear()
        with pytest.raises(ValueError, match="TCREDUCE_TIMING_CPU"):
            timing.timing_cpu()
    timing.timing_cpu.cache_clear()
