"""The tuned competitors of the experiments (tuned Triton kernels, torch.compile'd torch.sum).

CPU: the pure-Python host side (experiments/triton_plans.py: problems, sweeps, row splits) and what the studies say
without torch or Triton. GPU (needs torch with CUDA and Triton, ``pip install -e ".[bench]"``): every configuration
of every sweep against exact and float64 references on awkward shapes, with NaN-poisoned outputs and workspaces; the
checks themselves catch a wrong competitor."""

from __future__ import annotations

import math

import numpy as np
import pytest

from experiments import competitors as comp
from experiments.triton_plans import (COLS_ONE_PASS, Config, Problem, candidates, cdiv, depth, problem_of,
                                      split_rows)

SMS = 132


# ------------------------------------------------------------------------------------------------------- CPU
def test_problem_of_forms():
    assert problem_of((1000,), (1,), None) == Problem("full", 1000, 1, 1, ())
    assert problem_of((4, 5, 6), (30, 6, 1), None).m == 120
    assert problem_of((7, 16), (16, 1), -1) == Problem("rows", 7, 16, 16, (7,))
    assert problem_of((7, 16), (40, 1), 1) == Problem("rows", 7, 16, 40, (7,))  # strided rows
    assert problem_of((3, 4, 16), (64, 16, 1), -1) == Problem("rows", 12, 16, 16, (3, 4))
    assert problem_of((16,), (1,), -1) == Problem("rows", 1, 16, 16, ())
    assert problem_of((16, 1000), (1000, 1), 0) == Problem("cols", 16, 1000, 1000, (1000,))
    assert problem_of((16, 1000), (1024, 1), 0).ld == 1024
    for shape, strides, axis in (((10,), (2,), None), ((4, 8), (1, 4), -1), ((4, 8), (1, 4), 0),
                                 ((2, 3, 4), (12, 4, 1), 1), ((2, 3, 4), (24, 8, 1), -1), ((4, 8), (8, 1), 2)):
        with pytest.raises(ValueError):
            problem_of(shape, strides, axis)


@pytest.mark.parametrize("r", [1, 2, 7, 8, 9, 100, 4096, 65536, 65537, 10**6 + 3])
@pytest.mark.parametrize("br", [1, 4, 8, 16, 32])
@pytest.mark.parametrize("splits", [1, 2, 3, 16, 64, 1000])
def test_split_rows_covers_every_row_once(r, br, splits):
    rows_per, used = split_rows(r, br, splits)
    assert rows_per % br == 0 and rows_per > 0
    assert used >= 1 and (used - 1) * rows_per < r <= used * rows_per  # no empty split, every row covered
    assert used <= max(splits, 1) or rows_per == br  # never more splits than asked unless BR forces it
    again = split_rows(r, br, used)  # what the launcher recomputes from a stored config covers the rows too
    assert (again[1] - 1) * again[0] < r <= again[1] * again[0] and again[0] % br == 0


@pytest.mark.parametrize("p", [Problem("full", n, 1, 1, ()) for n in (1, 4097, 2**30)]
                         + [Problem("rows", m, n, n, (m,)) for m, n in ((1, 1), (2**24, 16), (256, 2**20),
                                                                         (2**18, 1024), (3, 17))]
                         + [Problem("cols", r, c, c, (c,)) for r, c in ((16, 2**24), (4096, 2**16), (2**16, 4096),
                                                                         (1, 1), (65537, 8), (5, 300))])
def test_candidates(p):
    cands = candidates(p, SMS)
    assert cands and len(set(cands)) == len(cands)
    for cfg in cands:
        assert cfg.num_warps in (4, 8)
        assert depth(cfg, p) >= 1
        if p.form == "full":
            assert (cfg.a, cfg.b) in ((4096, 8), (8192, 4), (2048, 16))
        elif p.form == "rows":
            assert cfg.kind == "rows" and cfg.a & (cfg.a - 1) == 0 and cfg.b & (cfg.b - 1) == 0
            assert cfg.a * cfg.b <= 4096 and cfg.b <= max(1, 1 << (p.n - 1).bit_length())
        else:
            assert cfg.kind in ("cols", "cols_split") and 1 <= cfg.a <= 32 and 128 <= cfg.b <= 1024
            assert 1024 <= cfg.a * cfg.b <= 8192
            if cfg.kind == "cols_split":
                assert cfg.splits >= 2 and split_rows(p.m, cfg.a, cfg.splits)[1] >= 2
    if p.form == "rows" and cdiv(p.m, 32) >= 2 * SMS:
        assert {c.a for c in cands} == {32, 64, 128, 256}  # the reference sweep: ROWS 32..256
    if p.form == "cols" and p.m >= 2**16 and cdiv(p.n, 128) < 2 * SMS:
        assert any(c.kind == "cols_split" for c in cands)  # tall arrays get the two-pass variant


def test_config_labels():
    assert Config("full", 4096, 8, 4).label == "full block=4096 iters=8 warps=4"
    assert Config("cols_split", 8, 256, 4, 64).label.endswith("splits=64")
    assert all(br * bc >= 1024 for br, bc, _ in COLS_ONE_PASS)


def test_describe_autotuner_names_the_kernel_and_the_config_it_kept():
    """The segment study's note for torch.compile: each inductor kernel and the launch configuration its autotuner
    kept (a fake autotuner here: the attributes inductor's CachingAutotuner has)."""
    class Config:
        def __str__(self):
            return "XBLOCK: 256, R0_BLOCK: 2, num_warps: 4"

    class Launcher:
        config = Config()

    def triton_red_fused_sum_0():
        pass

    class Tuner:
        fn = triton_red_fused_sum_0
        launchers = [Launcher()]

    class DeadTuner:  # its JIT function's module is gone, nothing launched yet
        kernel_name = "triton_per_fused_sum_1"
        launchers = None

        @property
        def fn(self):
            raise AttributeError("gone")

    assert comp.describe_autotuner(Tuner()) == "triton_red_fused_sum_0: XBLOCK: 256, R0_BLOCK: 2, num_warps: 4"
    assert comp.describe_autotuner(DeadTuner()) == "triton_per_fused_sum_1: not launched"


def test_no_inductor_autotuners_without_inductor(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "torch._inductor.runtime.triton_heuristics", raising=False)
    assert comp.inductor_autotuners() == []


def test_without_torch_the_studies_say_what_they_skip(monkeypatch):
    monkeypatch.setattr(comp, "torch_cuda", lambda: None)
    notes = comp.tuned_missing()
    assert len(notes) == 2 and notes[0].startswith(comp.TRITON_LABEL) and notes[1].startswith(comp.COMPILE_LABEL)
    assert all("not measured" in n for n in notes)
    assert comp.tuned_competitors(None) == []
    labels = [c.label for c in comp.competitors(None, tuned=True)]
    assert comp.TRITON_LABEL not in labels and "cupy.sum CUB" in labels


# ------------------------------------------------------------------------------------------------------- GPU
FULL_N = [1, 2, 15, 16, 17, 255, 257, 4095, 4097, 32768, 32769, 2**16 + 1, 2**20 + 3]
ROW_SHAPES = [(1, 1), (1, 17), (3, 15), (17, 16), (100, 17), (33, 255), (5, 1000), (65537, 16), (4, 2**18 + 1),
              (1000, 256), (300, 1032)]
COL_SHAPES = [(1, 1), (1, 300), (16, 1000), (1000, 16), (257, 33), (65537, 8), (16, 2**18), (4096, 300),
              (100000, 17), (20000, 1025)]


def _torch_triton():
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


def _cases():
    out = [(None, (n,), None) for n in FULL_N]
    out += [(-1, s, None) for s in ROW_SHAPES]
    out += [(-1, (64, 300), (slice(None), slice(0, 257)))]  # strided rows (ld 300, n 257)
    out += [(0, s, None) for s in COL_SHAPES]
    out += [(0, (300, 512), (slice(None), slice(0, 300)))]  # strided columns (ld 512)
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("axis,shape,view", _cases(), ids=lambda v: str(v))
def test_every_triton_configuration(axis, shape, view, dtype):
    """Every configuration of the sweep, poisoned outputs: exact on integer data, within the depth bound on
    uniform [-0.25, 0.75) and normal data (the checks the studies run, applied to every candidate)."""
    torch = _torch_triton()
    from experiments import triton_kernels as tk

    tdt = getattr(torch, dtype)
    base = torch.empty(shape, dtype=tdt, device="cuda")
    x = base[view] if view else base
    p = problem_of(tuple(x.shape), tuple(x.stride()), axis)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cands = candidates(p, sms)
    assert cands
    g = torch.Generator(device="cuda")
    g.manual_seed(sum(shape) + (axis or 7))
    for cfg in cands:
        comp.check_exact(lambda v, cfg=cfg: tk.run(cfg, v, p, poison=True), x, axis, cfg.label)
        for dist in ("uniform", "normal"):
            src = (torch.rand(shape, generator=g, device="cuda") * 1.0 - 0.25 if dist == "uniform"
                   else torch.randn(shape, generator=g, device="cuda"))
            base.copy_(src.to(tdt))
            got = tk.run(cfg, x, p, poison=True)
            assert got.dtype == torch.float32 and tuple(got.shape) == p.shape
            comp.check_real(got, x, axis, depth(cfg, p), f"{cfg.label} {dist}")


@pytest.mark.gpu
@pytest.mark.parametrize("axis,shape", [(None, (2**22 + 5,)), (-1, (2**16, 64)), (-1, (256, 2**14 + 1)),
                                        (0, (4096, 2**12)), (0, (2**16, 256)), (0, (16, 2**16))])
def test_tuned_sum_end_to_end(axis, shape):
    torch = _torch_triton()
    from experiments.triton_kernels import TunedSum

    x = (torch.rand(shape, device="cuda") - 0.25).half()
    ts = TunedSum(axis)
    tuned = ts.prepare(x)
    assert tuned.config in candidates(tuned.problem, torch.cuda.get_device_properties(0).multi_processor_count)
    assert any(isinstance(v, float) for v in tuned.sweep.values()), tuned.sweep
    comp.check_real(ts(x), x, axis, depth(tuned.config, tuned.problem), tuned.config.label)
    assert ts.prepare(x) is tuned  # kept per shape
    assert ts.describe(x) == f"kept {tuned.config.label}" and ts.describe(x[1:]) == ""  # the study's CSV note
    # graph capture through torch (how the throughput study times it)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        ts(x)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        res = ts(x)
    x.copy_((torch.rand(shape, device="cuda") - 0.25).half())
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(res, ts(x))


@pytest.mark.gpu
@pytest.mark.parametrize("axis,shape", [(None, (100003,)), (-1, (1000, 33)), (0, (257, 1000))])
def test_compiled_torch_sum_is_checked(axis, shape):
    torch = _torch_triton()
    cs = comp.CompiledSum(axis)
    x = (torch.rand(shape, device="cuda") - 0.25).half()
    cs.prepare(x)
    got = cs(x)
    assert got.dtype == torch.float32
    note = cs.describe(x)  # the study's CSV note: the kernels inductor generated and the configs they kept
    assert "triton_" in note and "num_warps" in note, note
    assert cs.describe(x[1:]) == ""  # not prepared
    terms = x.numel() if axis is None else x.shape[axis]
    comp.check_real(got, x, axis, terms, "torch.compile")


@pytest.mark.gpu
def test_checks_catch_wrong_competitors():
    torch = _torch_triton()
    x = (torch.rand(4097, device="cuda") - 0.25).half()

    def drops_last(t):
        return torch.sum(t[:-1], dtype=torch.float32)

    def doubles_first(t):
        return torch.sum(t, dtype=torch.float32) + t[0].float()

    def fp16_result(t):
        return torch.sum(t, dtype=torch.float16)

    for bad in (drops_last, doubles_first, fp16_result):
        with pytest.raises(comp.WrongResult):
            comp.check_exact(bad, x, None, bad.__name__)
    with pytest.raises(comp.WrongResult):
        comp.check_real(torch.sum(x, dtype=torch.float32) * (1 + 1e-3), x, None, 100, "scaled")
    with pytest.raises(comp.WrongResult):
        comp.check_real(torch.tensor(math.nan, device="cuda"), x, None, 100, "nan")
    y = comp.integer_data(x)
    vals = set(np.unique(y.float().cpu().numpy()).tolist())
    assert vals == {-2.0, -1.0, 1.0, 2.0} and y.dtype == x.dtype and y.stride() == x.stride()
    comp.check_exact(lambda t: torch.sum(t, dtype=torch.float32), x, None, "torch.sum")  # a right one passes
