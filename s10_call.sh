#!/usr/bin/env bash
# session 10 ad-hoc device call (not committed)
set -u
export PYTHONUNBUFFERED=1 TCREDUCE_CACHE_DIR=/tmp/tcr-cache TCREDUCE_COMMIT=$(cat .commit 2>/dev/null)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee $OUT/env.txt
step() { echo "=== $1 $(date +%T)"; }
for part in ${PARTS:-tune ab_tma ab_add2}; do
  step $part
  case $part in
    tune) python3 benchmarks/tune_plans.py --precompile 16 --only $TUNE_ONLY > $OUT/tune.log 2>&1; tail -n 3 $OUT/tune.log ;;
    tune_triton) python3 benchmarks/tune_plans.py --triton --precompile 16 --only $TRITON_ONLY > $OUT/tune_triton.log 2>&1; tail -n 3 $OUT/tune_triton.log ;;
    ab_tma) python3 benchmarks/ab_compare.py --before .before/main --after .before/tma-lean-loop --rounds 3 --cases cols --dtypes float32 --methods tensorcore --ns 128,512,1024,2048,4096,16384,131072,1048576 --out $OUT/ab_tma > $OUT/ab_tma.log 2>&1; tail -n 12 $OUT/ab_tma.log ;;
    ab_add2) python3 benchmarks/ab_compare.py --before .before/main --after .before/split-add2-trim --rounds 3 --cases cols,rows --dtypes float32 --methods tensorcore --ns 128,1024,16384,1048576 --out $OUT/ab_add2 > $OUT/ab_add2.log 2>&1; tail -n 12 $OUT/ab_add2.log ;;
  esac
done
step end
