"""``python -m experiments <study|all|list> [--quick] [--out DIR]``: run the studies, write CSV, metadata and
figures, and say plainly which studies were skipped and why.

Exit status: 0 when every study asked for ran without a failed measurement (``all`` on a machine without a GPU
counts the GPU studies as skipped, not failed); 1 when a study or a measurement failed; 2 when the one study asked for
cannot run here (for example ``throughput`` without a GPU); 64 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path
from typing import Optional, Sequence

from . import STUDIES, study
from .context import Context, MissingInterface, StudySkipped
from .env import DEFAULT_OUT


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m experiments",
        description="tcreduce experiments: accuracy, throughput, segment-size sweep, trade-off, reduction ladder. "
                    "Each study writes <study>.csv, <study>.json and figures (PNG, PDF).",
        epilog="Without a GPU only 'accuracy' runs (through the emulator); the others are skipped with the reason.")
    p.add_argument("study", choices=[*STUDIES, "all", "list"],
                   help="a study, 'all' (every study this machine can run), or 'list' (describe them)")
    p.add_argument("--quick", action="store_true",
                   help="fewer sizes and repetitions (a GPU run in about a minute): a smoke run, not paper numbers")
    p.add_argument("--out", type=Path, default=None,
                   help="output folder (default: paper_figures/, paper_figures/quick/ with --quick, "
                        "paper_figures/cpu/ without a GPU)")
    p.add_argument("--cpu", action="store_true", help="ignore any GPU: run what runs through the emulator only")
    p.add_argument("--replot", action="store_true", help="redraw the figures from the CSVs in the output folder")
    p.add_argument("--methods", default=None,
                   help="comma-separated tcreduce methods to measure (default: every registered method)")
    p.add_argument("--gpu-model", default="H100", help="the GPU the emulator models when there is no GPU (H100)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # the tests' configuration
    return p


def detect_gpu() -> tuple[bool, str]:
    """(GPU usable, device name or why not). Tests replace this."""
    from .env import gpu_status

    return gpu_status()


def default_out(gpu: bool, quick: bool) -> Path:
    if gpu:
        return DEFAULT_OUT / "quick" if quick else DEFAULT_OUT
    return DEFAULT_OUT / ("cpu-quick" if quick else "cpu")


def skip_message(name: str, gpu_reason: str) -> str:
    mod = study(name)
    why = getattr(mod, "WHY_GPU", "it needs a GPU")
    return f"skipped {name}: needs a CUDA GPU ({why}); {gpu_reason}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 64
    if args.study == "list":
        for name in STUDIES:
            mod = study(name)
            print(f"{name:<11} {'GPU' if mod.NEEDS_GPU else 'GPU or CPU (emulator)':<22} {mod.SUMMARY}")
        return 0
    if args.cpu:
        gpu, reason = False, "--cpu was given"
    else:
        gpu, reason = detect_gpu()
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    out = (args.out or default_out(gpu, args.quick or args.tiny)).resolve()
    names = list(STUDIES) if args.study == "all" else [args.study]
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip()) if args.methods else None
    where = f"GPU: {reason}" if gpu else f"no GPU ({reason}): emulator as {args.gpu_model}"
    print(f"tcreduce experiments: {', '.join(names)} | {where} | mode {mode} | out {out}", flush=True)

    if args.replot:
        from .plotting import PLOTTERS

        status = 0
        for name in names:
            csv_path = out / f"{name}.csv"
            if not csv_path.is_file():
                print(f"replot {name}: no {csv_path}")
                status = status or (2 if len(names) == 1 else 0)
                continue
            for p in PLOTTERS[name](csv_path, out):
                print(f"  wrote {p}")
        return status

    results: list[tuple[str, str, str]] = []
    any_error = False
    for name in names:
        mod = study(name)
        if mod.NEEDS_GPU and not gpu:
            msg = skip_message(name, reason)
            print(msg, flush=True)
            results.append((name, "skipped", msg.split(": ", 1)[1]))
            continue
        ctx = Context(out=out, quick=args.quick or args.tiny, gpu=gpu, gpu_reason=reason, mode=mode,
                      emulated_gpu=args.gpu_model, methods=methods, progress=not args.no_progress)
        t0 = time.perf_counter()
        print(f"== {name}: {mod.SUMMARY}", flush=True)
        try:
            paths = mod.run(ctx)
        except StudySkipped as e:
            print(f"skipped {name}: {e}", flush=True)
            results.append((name, "skipped", str(e)))
            continue
        except Exception as e:
            any_error = True
            if not isinstance(e, MissingInterface):
                traceback.print_exc()
            print(f"FAILED {name}: {type(e).__name__}: {e}", flush=True)
            results.append((name, "failed", f"{type(e).__name__}: {e}"))
            continue
        dt = time.perf_counter() - t0
        for p in paths:
            print(f"  wrote {p}")
        if ctx.errors:
            any_error = True
            results.append((name, "errors", f"{len(ctx.errors)} failed measurements in {dt:.0f} s "
                                            f"(first: {ctx.errors[0]})"))
        else:
            results.append((name, "ok", f"{len(paths)} files in {dt:.0f} s"))
    print("\nsummary:")
    for name, status, detail in results:
        print(f"  {name:<11} {status:<8} {detail}")
    if len(names) == 1 and results and results[0][1] == "skipped":
        return 2
    return 1 if any_error else 0


if __name__ == "__main__":
    sys.exit(main())
