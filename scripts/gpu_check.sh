#!/usr/bin/env bash
# The one command for a lent GPU: environment report, the GPU test suite, the smoke benchmark and, on request, the
# paper's studies. Logs go to $OUT (or ./gpu_logs); on a copy without .git, name the commit in $TCREDUCE_COMMIT.
#
#   scripts/gpu_check.sh [pytest args...]            e.g. -k tensorcore
#
# Stages (environment variables):
#   JOBS=12          pytest-xdist workers for the GPU tests that fit in memory side by side ("gpu and not large";
#                    tests are not timed, so sharing the GPU is harmless); 0 runs them in one process
#   SKIP_TESTS=1     skip the test suite;   SKIP_LARGE=1  skip the > 2^31-element tests (run one at a time)
#   SHARD=K/N        only the K-th of N disjoint parts of the tests (tests/conftest.py --shard): the suite over N
#                    device calls when it outlasts one (session 36: 98% of it in 590 s at JOBS=14)
#   SKIP_BENCH=1     skip benchmarks/perf_floor.py;   CASES=a,b  only those perf_floor cases
#   STUDIES="accuracy throughput tradeoff segments"   also run these studies into $OUT/figures (then commit them
#                    into paper_figures/ by hand after reading them)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TCREDUCE_CACHE_DIR=${TCREDUCE_CACHE_DIR:-/tmp/tcreduce-cache}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # never NVLink multicast
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  python3 -c "import cupy, numpy, sys; print('python', sys.version.split()[0], 'cupy', cupy.__version__, 'numpy', numpy.__version__)"
  python3 -c "from experiments.env import git_info; print('commit', git_info())"
} 2>&1 | tee "$OUT/env.txt"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  jobs=${JOBS:-12}
  par=()
  if [ "$jobs" != 0 ] && python3 -c "import xdist" 2>/dev/null; then par=(-n "$jobs"); fi
  if [ -n "${SHARD:-}" ]; then par+=(--shard "$SHARD"); fi
  python3 -m pytest -m "gpu and not large" -q --maxfail=60 -p no:cacheprovider --durations=30 "${par[@]}" \
    --junitxml="$OUT/gpu-tests.xml" "$@" 2>&1 | tee "$OUT/gpu-tests.log" | grep -E "FAILED|ERROR|passed|failed" | tail -n 60
  if [ "${SKIP_LARGE:-0}" != 1 ]; then
    python3 -m pytest -m "gpu and large" -q -p no:cacheprovider "$@" 2>&1 | tee "$OUT/gpu-large.log" | tail -n 8
  fi
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  python3 benchmarks/perf_floor.py --out "$OUT" ${CASES:+--cases "$CASES"} 2>&1 | tee "$OUT/perf_floor.log" | tail -n 60
fi
for study in ${STUDIES:-}; do
  python3 -m experiments "$study" --out "$OUT/figures" --no-progress 2>&1 | tee "$OUT/study-$study.log" | tail -n 15
done
if [ -d "$OUT/figures" ]; then  # the device tool returns at most 8 files: one archive of the studies' outputs
  tar czf "$OUT/figures.tgz" -C "$OUT" figures && rm -rf "$OUT/figures"
fi
