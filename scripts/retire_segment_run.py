"""Keep a committed segment study as one more run of the same plans before a new study replaces it.

    python3 scripts/retire_segment_run.py [--drop-dtypes float8_e4m3fn,float8_e5m2] [paper_figures/h200]

Copies ``segments.csv`` of the directory to ``segments_runs/<commit>.csv`` (the commit its header names, 7 characters),
the header unchanged and every row kept except those of the formats in ``--drop-dtypes``: the formats whose kernels or
plans the change under study alters, so that ``scripts/derive_auto.py``, which reads every run of a directory as the
same plans, sees only points those plans still hold (a run keeps whole formats: derive_auto checks each run has every
point of the formats it measures). Refuses to overwrite a run already there. No GPU needed.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def retire(csv_dir: Path, drop_dtypes: frozenset[str] = frozenset()) -> tuple[Path, int, int]:
    """Write ``csv_dir/segments_runs/<commit>.csv`` from ``csv_dir/segments.csv`` without the rows of
    ``drop_dtypes``; returns (path written, rows kept, rows read). ValueError if the header names no clean commit or the
    run exists already."""
    from experiments.records import read_csv

    src = csv_dir / "segments.csv"
    lines = src.read_text().splitlines(keepends=True)
    header = [line for line in lines if line.startswith("#")]
    body = lines[len(header):]
    commit = read_csv(src)[1].get("commit", "")
    if not re.fullmatch(r"[0-9a-f]{7,40}", commit):  # "unknown", or "<hash>+dirty": no commit's plans
        raise ValueError(f"{src}: its header names no clean commit ('# commit: {commit}')")
    commit = commit[:7]
    dst = csv_dir / "segments_runs" / f"{commit}.csv"
    if dst.exists():
        raise ValueError(f"{dst} exists already: that run was retired before")
    rows = list(csv.reader(body))
    dtype_col = rows[0].index("dtype")
    kept = [rows[0]] + [r for r in rows[1:] if r[dtype_col] not in drop_dtypes]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(kept)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text("".join(header) + buf.getvalue())
    return dst, len(kept) - 1, len(rows) - 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv_dir", nargs="?", type=Path, default=ROOT / "paper_figures" / "h200")
    ap.add_argument("--drop-dtypes", default="", help="comma-separated formats whose rows are left out")
    args = ap.parse_args(argv)
    drop = frozenset(d for d in args.drop_dtypes.split(",") if d)
    try:
        dst, kept, read = retire(args.csv_dir, drop)
    except ValueError as e:
        print(f"retire_segment_run: {e}", file=sys.stderr)
        return 1
    print(f"wrote {dst} ({kept} of {read} rows; left out: {', '.join(sorted(drop)) or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
