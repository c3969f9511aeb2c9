#!/usr/bin/env bash
# The one command for a lent GPU: environment report, the GPU test suite, and the smoke benchmark.
# Logs go to $OUT (or ./gpu_logs); on a copy without .git, name the commit in $TCREDUCE_COMMIT. Usage: scripts/gpu_check.sh [pytest args...]   e.g. -k tensorcore
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TCREDUCE_CACHE_DIR=${TCREDUCE_CACHE_DIR:-/tmp/tcreduce-cache}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  python3 -c "import cupy, numpy, sys; print('python', sys.version.split()[0], 'cupy', cupy.__version__, 'numpy', numpy.__version__)"
  python3 -c "from experiments.env import git_info; print('commit', git_info())"
} 2>&1 | tee "$OUT/env.txt"
python3 -m pytest -m gpu -q --maxfail=30 -p no:cacheprovider --junitxml="$OUT/gpu-tests.xml" "$@" 2>&1 \
  | tee "$OUT/gpu-tests.log" | tail -n 60
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  python3 benchmarks/perf_floor.py --out "$OUT" 2>&1 | tee "$OUT/perf_floor.log" | tail -n 40
fi
