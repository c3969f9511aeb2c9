"""method="auto" against the committed sweeps (CPU): at every swept point of every GPU with committed sweeps, auto's
pick on that GPU is within 2% of the fastest eligible method measured there; the committed table is what
scripts/derive_auto.py derives from the CSVs; the documented fallbacks hold outside the sweep and on other GPUs."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tcreduce._auto import FALLBACK, choose_method, form_of, lookup
from tcreduce._device import KNOWN_GPUS

ROOT = Path(__file__).resolve().parent.parent
H100 = KNOWN_GPUS["H100"]


def _load_script(name: str):
    """scripts/<name>.py as a module (registered in sys.modules: dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def derive():
    return _load_script("derive_auto")


@pytest.fixture(scope="module")
def segment_summary():
    return _load_script("segment_summary")


@pytest.fixture(scope="module")
def sweeps(derive):
    """{GPU family: its swept points}: the primary sweeps (paper_figures/, an H100) and every family's own."""
    root = ROOT / "paper_figures"
    points, meta = derive.load_points(root)
    out = {derive.family_of(meta): points}
    for family, d in derive.device_dirs(root).items():
        out[family] = derive.load_points(d, required=False)[0]
    return out


def _pick(shape, axes, dtype="float16", kind="sum", device=H100):
    return choose_method(kind, SimpleNamespace(shape=shape), axes, dtype, device)


def test_the_sweeps_cover_every_form(sweeps):
    assert list(sweeps)[:2] == ["H100", "H200"]
    primary = sweeps["H100"]
    assert {(p.dtype, p.form) for p in primary} >= {(d, f) for d in ("float16", "float32")
                                                    for f in ("full", "rows", "cols")} | {
        (d, "full") for d in ("bfloat16", "float8_e4m3fn", "float8_e5m2")}
    assert len(primary) >= 2 * (21 + 17 + 17) + 3 * 21
    h200 = sweeps["H200"]
    full = ("float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2")
    swept = {(d, f) for d in ("float16", "bfloat16", "float32") for f in ("rows", "cols")}
    fp8 = {("float8_e4m3fn", f) for f in ("rows", "cols")}  # in the segment study from session 34 on
    forms = {(p.dtype, p.form) for p in h200}
    assert swept | {(d, "full") for d in full} <= forms <= swept | fp8 | {(d, "full") for d in full}
    assert len(h200) == (len(forms) - len(full)) * 17 + len(full) * 21


@pytest.mark.parametrize("family", ["H100", "H200"])
def test_every_swept_point_within_2_percent_of_the_fastest(sweeps, derive, family):
    off = []
    for p in sweeps[family]:
        m = _pick(p.shape, p.axes, p.dtype, device=KNOWN_GPUS[family])
        assert m in derive.eligible(p.dtype), (p, m)
        eligible = {k: t for k, t in p.times.items() if k in derive.eligible(p.dtype) and math.isfinite(t)}
        assert m in eligible, f"auto picks {m} at {p.dtype} {p.form} n={p.length}, which was not measured there"
        best = min(eligible.values())
        if eligible[m] > best * (1 + derive.TOLERANCE):
            off.append(f"{p.dtype} {p.form} n={p.length}: {m} {eligible[m]:.1f} us, fastest {best:.1f} us")
    why = f"auto's pick on {family} is more than 2% slower than the fastest eligible method:\n"
    assert not off, why + "\n".join(off)


def test_committed_table_is_derived_from_the_csvs(derive):
    text = derive.generate(ROOT / "paper_figures")
    committed = (ROOT / "tcreduce" / "_auto_table.py").read_text()
    assert committed == text, "tcreduce/_auto_table.py is out of date: run python3 scripts/derive_auto.py"


def test_exclusions_and_ties(derive):
    assert "tensorcore_chained" in derive.EXCLUDED and "cub" in derive.EXCLUDED
    assert derive.eligible("float16")[:2] == ["tensorcore", "shuffle"]
    assert "shuffle" in derive.eligible("float32") and "tensorcore_tf32" not in derive.eligible("float32")
    p = derive.Point("float16", "full", 1024, (1024,), (0,), {"shuffle": 10.05, "tensorcore": 10.1, "cub": 1.0})
    assert derive.pick(p) == ("tensorcore", 10.1)  # within 1%: the tie goes to the tensor cores
    p = derive.Point("float16", "full", 1024, (1024,), (0,), {"shuffle": 10.0, "tensorcore": 10.2})
    assert derive.pick(p)[0] == "shuffle"
    # with graph times (full sums): a pick that takes more than 1% more GPU time than a method within 2% of the
    # fastest back-to-back time gives way to it; level GPU times keep the back-to-back rule
    times = {"shuffle": 10.05, "tensorcore": 9.95, "kahan": 9.9}
    p = derive.Point("float16", "full", 1024, (1024,), (0,), times, {"shuffle": 2.3, "tensorcore": 2.8, "kahan": 3.2})
    assert derive.pick(p) == ("shuffle", 10.05)
    p = derive.Point("float16", "full", 1024, (1024,), (0,), times, {"shuffle": 2.3, "tensorcore": 2.31, "kahan": 3.2})
    assert derive.pick(p)[0] == "tensorcore"  # 2.31 within 1% of 2.3: the preferred
    p = derive.Point("float16", "full", 1024, (1024,), (0,), times, {"shuffle": 3.3, "tensorcore": 3.3, "kahan": 3.3})
    assert derive.pick(p)[0] == "tensorcore"  # level GPU times: the back-to-back tie (kahan, tensorcore), preferred
    graph = {"shuffle": 1.0, "tensorcore": 2.8, "kahan": 3.2}
    p = derive.Point("float16", "full", 1024, (1024,), (0,), dict(times, shuffle=10.5), graph)
    assert derive.pick(p)[0] == "tensorcore"  # shuffle 6% above the fastest back to back: not near, whatever its graph
    _, notes = derive.derive([derive.Point("float32", "rows", 16, (4, 16), (1,), {"shuffle": 2.0, "cub": 1.0})])
    assert notes and "cub" in notes[0]


def test_ties_hold_in_every_run(derive):
    """With more runs of the same plans (segments_runs/), a method ties with the fastest only within 1% in every run;
    where none does, the least worst ratio to a run's fastest wins (ties of that by preference)."""
    def point(times, *more):
        return derive.Point("float16", "cols", 128, (128, 1 << 21), (0,), times, {}, more)

    assert derive.pick(point({"shuffle": 10.0, "tensorcore": 10.05}))[0] == "tensorcore"  # one run: a tie
    assert derive.pick(point({"shuffle": 10.0, "tensorcore": 10.05}, {"shuffle": 10.0, "tensorcore": 10.3}))[0] \
        == "shuffle"  # 3% behind on the other machine: no tie
    assert derive.pick(point({"shuffle": 10.0, "tensorcore": 10.05}, {"shuffle": 10.0, "tensorcore": 9.95})) == \
        ("tensorcore", 10.05)  # tied in both: the preferred, with its time in the committed run
    assert derive.pick(point({"shuffle": 10.0, "tensorcore": 10.3}, {"shuffle": 10.4, "tensorcore": 10.0}))[0] \
        == "tensorcore"  # neither ties in both: worst ratios 1.03 against 1.04
    assert derive.pick(point({"shuffle": 10.0, "tensorcore": 10.5}, {"shuffle": 10.5, "tensorcore": 10.0}))[0] \
        == "tensorcore"  # equal worst ratios: the preferred
    assert derive.pick(point({"shuffle": 10.0, "tensorcore": 9.0}, {"shuffle": 10.0}))[0] == "shuffle"  # in every run


def test_ties_are_narrower_where_every_run_timed_both_in_interleaved_turns(derive):
    """Within TIE_INTERLEAVED (0.5%) instead of TIE (1%), only where each run timed the method and its fastest in
    interleaved turns, GPU-bound (at least HOST_BOUND_S a call: 50 us)."""
    def point(turns, *more, us=1000.0):
        return derive.Point("float32", "full", 1 << 30, (1 << 30,), (0,), {"shuffle": us, "tensorcore": us * 1.007},
                            {}, tuple(t for t, _ in more), (frozenset(turns), *(frozenset(s) for _, s in more)))

    both = {"shuffle", "tensorcore"}
    assert derive.TIE_INTERLEAVED < 0.007 < derive.TIE
    assert derive.pick(point(both))[0] == "shuffle"  # 0.7% measured in turns: no tie
    assert derive.pick(point({"shuffle"}))[0] == "tensorcore"  # the tensor cores timed back to back: a tie
    assert derive.pick(point(()))[0] == "tensorcore"
    assert derive.pick(point(both, us=10.0))[0] == "tensorcore"  # host-bound calls' turns: a 1% tie
    other = {"shuffle": 1000.0, "tensorcore": 1002.0}
    assert derive.pick(point(both, (other, both)))[0] == "shuffle"  # 0.7% in turns in the first run
    assert derive.pick(point(both, (other, ())))[0] == "tensorcore"  # a run timed back to back: 1% in each
    assert derive.pick(derive.Point("float32", "full", 1 << 30, (1 << 30,), (0,),
                                    {"shuffle": 1000.0, "tensorcore": 1003.0}, {}, (), (frozenset(both),)))[0] \
        == "tensorcore"  # 0.3%: tied either way


def test_more_runs_must_measure_the_same_points(derive, tmp_path):
    committed = ROOT / "paper_figures" / "h200"
    (tmp_path / "segments_runs").mkdir()
    text = (committed / "segments.csv").read_text()
    (tmp_path / "segments.csv").write_text(text)
    (tmp_path / "segments_runs" / "other.csv").write_text(text)
    points, meta = derive.load_points(tmp_path, required=False)
    assert "segments_runs/other" in meta and all(len(p.more_times) == 1 for p in points if p.form != "full")
    assert all(p.more_times[0] == p.times for p in points if p.form != "full")
    lines = text.splitlines(keepends=True)
    (tmp_path / "segments_runs" / "other.csv").write_text("".join(ln for ln in lines if not ln.startswith("float32,")))
    points, _ = derive.load_points(tmp_path, required=False)  # a run without a whole format: that format has one run
    assert all(len(p.more_times) == (p.dtype != "float32") for p in points if p.form != "full")
    (tmp_path / "segments_runs" / "other.csv").write_text("".join(ln for ln in lines if ",1048576," not in ln))
    with pytest.raises(ValueError, match="does not measure the points"):
        derive.load_points(tmp_path, required=False)


def test_forms():
    assert form_of((1 << 20,), (0,)) == ("full", 1 << 20)
    assert form_of((4, 1, 8), (0, 2)) == ("full", 32)  # kept axes of size 1: a full sum
    assert form_of((100, 16), (1,)) == ("rows", 16)
    assert form_of((2, 3, 4), (1, 2)) == ("rows", 12)
    assert form_of((16, 100), (0,)) == ("cols", 16)
    assert form_of((5, 17, 40), (1,)) == ("cols", 17)
    assert form_of((6, 5, 4, 3), (1, 3)) == ("cols", 15)


def test_fallbacks(monkeypatch):
    from tcreduce import _auto_table

    table = _auto_table.TABLE[("float16", "rows")]
    lo, hi = min(table), max(table)
    assert lookup("float16", "rows", 1) == table[lo] and lookup("float16", "rows", 3) == table[lo]
    assert lookup("float16", "rows", 1 << 40) == table[hi]
    assert lookup("float16", "rows", 24) == table[5]  # log2(24) = 4.58: bucket 5
    assert lookup("float16", "rows", 22) == table[4]
    assert _pick((1 << 20,), (0,), kind="max") == FALLBACK and _pick((1 << 20,), (0,), kind="min") == FALLBACK
    assert choose_method("max", None, (0,), "float32", H100) == FALLBACK
    assert lookup("float8_e4m3fn", "rows", 1 << 20) == FALLBACK  # not swept
    # a bf16 form the sweep lacks: choose_method borrows fp16's rows
    monkeypatch.delitem(_auto_table.TABLE, ("bfloat16", "rows"))
    assert lookup("bfloat16", "rows", 1 << 20) == FALLBACK
    monkeypatch.setitem(_auto_table.TABLE, ("float16", "rows"), {10: "wmma"})
    assert _pick((1 << 18, 1024), (1,), "bfloat16") == "wmma" == lookup("float16", "rows", 1024)
    assert _pick((1 << 20,), (0,), "bfloat16") == _auto_table.TABLE[("bfloat16", "full")][20]  # its own sweep
    assert _pick((1 << 18, 32), (1,), "float8_e4m3fn") == FALLBACK
    monkeypatch.setitem(_auto_table.TABLE, ("float16", "full"), {10: "tensorcore", 20: "no_such_method", 30: "wmma"})
    assert lookup("float16", "full", 1 << 15) == "tensorcore"  # between 10 and 20: the nearer, the smaller on a tie
    assert lookup("float16", "full", 1 << 16) == FALLBACK  # an unregistered method
    assert lookup("float16", "full", 1 << 29) == "wmma"
    monkeypatch.setitem(_auto_table.TABLE, ("float32", "full"), {10: "wmma"})
    assert lookup("float32", "full", 1 << 10) == FALLBACK  # wmma takes no float32


def test_each_gpu_family_uses_its_own_table_where_it_has_one(monkeypatch):
    from tcreduce import _auto_table
    from tcreduce._auto import table_for
    from tcreduce._plan import DeviceSpec

    h200 = KNOWN_GPUS["H200"]
    own = _auto_table.DEVICE_TABLES["H200"]
    assert table_for(h200, "float32", "rows") is own and table_for(h200, "float32", "full") is own
    for other in (H100, KNOWN_GPUS["A100"], DeviceSpec("NVIDIA GeForce RTX 4090", 128, (8, 9)), None):
        assert table_for(other, "float32", "rows") is _auto_table.TABLE
    assert table_for(DeviceSpec("NVIDIA H200 NVL", 132, (9, 0)), "float16", "cols") is own  # CuPy's device name
    # the same shapes, two GPUs: float32 rows of 2^17 take the split tensor-core sum on an H100, shuffle on an H200
    rows2p17 = ((1 << 10, 1 << 17), (1,), "float32")
    assert _pick(*rows2p17) == _auto_table.TABLE[("float32", "rows")][17] == "tensorcore"
    assert _pick(*rows2p17, device=h200) == own[("float32", "rows")][17] == "shuffle"
    assert _pick((1 << 20,), (0,), "float32", device=h200) == own[("float32", "full")][20]
    # a form the device's table lacks comes from the primary table
    monkeypatch.delitem(own, ("float32", "full"))
    assert table_for(h200, "float32", "full") is _auto_table.TABLE
    assert _pick((1 << 20,), (0,), "float32", device=h200) == _auto_table.TABLE[("float32", "full")][20]
    # a bf16 form neither table has borrows fp16's, from the device's table first
    monkeypatch.delitem(own, ("bfloat16", "rows"))
    monkeypatch.delitem(_auto_table.TABLE, ("bfloat16", "rows"))
    monkeypatch.setitem(own, ("float16", "rows"), {10: "wmma"})
    assert _pick((1 << 18, 1024), (1,), "bfloat16", device=h200) == "wmma"
    assert _pick((1 << 18, 1024), (1,), "bfloat16") == _auto_table.TABLE[("float16", "rows")][10]


def test_a_device_directory_must_hold_its_own_family(derive, tmp_path):
    assert derive.family_of({"segments": {"device": "NVIDIA H200 (132 SMs)"}, "throughput": {}}) == "H200"
    with pytest.raises(ValueError, match="one known GPU family"):
        derive.family_of({"segments": {"device": "NVIDIA H200"}, "throughput": {"device": "NVIDIA H100 80GB HBM3"}})
    with pytest.raises(ValueError, match="one known GPU family"):
        derive.family_of({"segments": {"device": "Tesla T4"}})
    assert derive.device_dirs(tmp_path) == {}
    (tmp_path / "h200").mkdir()
    (tmp_path / "h200" / "segments.csv").write_text("")
    assert derive.device_dirs(tmp_path) == {"H200": tmp_path / "h200"}


def test_segment_summary_reads_the_committed_sweeps(segment_summary):
    """scripts/segment_summary.py (issue 10's ratios) on every committed segments.csv: a line per format and form, and
    ratios that match the CSV's own numbers at the worst point it names."""
    mod = segment_summary
    for path in sorted((ROOT / "paper_figures").glob("**/segments.csv")):
        points = mod.load(path)
        lines = mod.summary(points)
        assert sum(" rows " in ln or " cols " in ln for ln in lines[:6]) >= 4, lines
        worst = min(points, key=lambda p: p.gbs["auto"] / mod.best_competitor(p)[0])
        ratio = worst.gbs["auto"] / mod.best_competitor(worst)[0]
        assert f"auto/best competitor {ratio:.3f}-" in "\n".join(lines), (path, ratio)
        assert all(0 < p.auto_ceiling < 1.2 for p in points), path
        for name, dtypes in mod.GROUPS:  # issue 10's groups: each group line counts its own points
            vs = [p.gbs["auto"] / mod.best_competitor(p)[0] for p in points if p.dtype in dtypes]
            want = (f"  {name}: auto/best competitor {min(vs):.3f}-{max(vs):.3f}, {sum(v < 1 for v in vs)} of "
                    f"{len(vs)} below 1.0, {sum(v < 0.98 for v in vs)} below 0.98" if vs else None)
            assert want is None or any(ln.startswith(want) for ln in lines), (path, name, want)


def test_segment_summary_rates_the_committed_tables_picks(segment_summary):
    """segment_summary --picks: on every committed segments.csv, each point's pick is what tcreduce's auto chooses on
    that GPU for that form and length, it has a column there, and the reported worst ratio is that column's."""
    from experiments.records import read_csv
    from tcreduce._device import named_device

    mod = segment_summary
    for path in sorted((ROOT / "paper_figures").glob("**/segments.csv")):
        gpu = read_csv(path)[1]["device"].split(" (")[0]
        points = mod.load(path)
        ratios = []
        for p in points:
            pick = mod.table_pick(p, gpu)
            shape, axes = ((3, p.n), (1,)) if p.layout == "rows" else ((p.n, 3), (0,))
            assert pick == _pick(shape, axes, p.dtype, device=named_device(gpu))
            assert pick in p.gbs, (path, p, pick)
            ratios.append(p.gbs[pick] / mod.best_competitor(p)[0])
        lines = mod.pick_summary(points, gpu)
        assert f"pick/best competitor {min(ratios):.3f}-{max(ratios):.3f}," in lines[0], (path, lines[0])


def test_retire_segment_run_keeps_the_header_and_the_other_formats(tmp_path):
    """scripts/retire_segment_run.py: segments.csv becomes segments_runs/<commit>.csv, its header and the rows of the
    formats kept byte for byte, the dropped formats' rows left out; a second call refuses to overwrite that run, and a
    CSV of no clean commit (unknown, or a dirty tree) is refused."""
    from experiments.records import read_csv, write_csv

    retire = _load_script("retire_segment_run")
    cols = ["dtype", "layout", "n", "method", "gbs", "note"]
    rows = [dict(dtype=d, layout=lay, n=n, method=m, gbs=1000.5 + n, note="kept cols br=1, bc=1024" if m == "triton"
                 else "") for d in ("float16", "float8_e4m3fn", "float8_e5m2", "float32") for lay in ("rows", "cols")
            for n in (16, 1024) for m in ("shuffle", "triton")]
    meta = dict(study="segments", git=dict(commit="1e1d5b40c7c1800e9764d2432f282051d6a83196"), quick=False)
    write_csv(tmp_path / "segments.csv", rows, cols, meta)
    assert retire.main([str(tmp_path), "--drop-dtypes", "float8_e4m3fn,float8_e5m2"]) == 0
    got, got_meta = read_csv(tmp_path / "segments_runs" / "1e1d5b4.csv")
    want, want_meta = read_csv(tmp_path / "segments.csv")
    assert got_meta == want_meta and got_meta["commit"] == "1e1d5b40c7c1"
    assert got == [r for r in want if not r["dtype"].startswith("float8")] and len(got) == 16
    text = (tmp_path / "segments.csv").read_text()
    kept = "".join(line for line in text.splitlines(keepends=True) if "float8" not in line)
    assert (tmp_path / "segments_runs" / "1e1d5b4.csv").read_text() == kept  # the same bytes, quotes included
    assert retire.main([str(tmp_path)]) == 1  # that run exists already
    for commit, dirty in (("unknown", False), ("0123456789abcdef", True)):
        other = tmp_path / commit
        write_csv(other / "segments.csv", rows, cols, dict(meta, git=dict(commit=commit, dirty=dirty)))
        with pytest.raises(ValueError, match="no clean commit"):
            retire.retire(other)
