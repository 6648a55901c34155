#!/usr/bin/env bash
# Every GPU path in one call on a lent GPU (docs/gpu.md), logs under $OUT:
#   bash perf/gpu_check.sh            # tests, demo --quick, stacked vs lone runs, throughput vs open_clip_train
#   bash perf/gpu_check.sh demo N     # `demo --preset gpu` from an empty cache, stopped after N seconds
# GPU utilisation and memory are sampled every second into $OUT/smi.csv; phase start times (epoch
# seconds) into $OUT/phases.txt. Each step has its own time limit so that one hang cannot eat the call.
set -u
OUT=${OUT:-/tmp/gpu-check}; mkdir -p "$OUT"
export MOSAICTOOL_CACHE=/tmp/mosaictool-cache
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 1 > "$OUT/smi.csv" 2>&1 &
smi=$!
trap 'kill $smi 2>/dev/null' EXIT
phase() { echo "$(date +%s) $1" | tee -a "$OUT/phases.txt"; }
if [ "${1:-}" = demo ]; then
  phase demo
  timeout "${2:-540}" mosaictool demo --preset gpu --out /tmp/demo-gpu > "$OUT/demo_gpu.stdout" 2> "$OUT/demo_gpu.log"
  echo "demo rc=$?" | tee -a "$OUT/phases.txt"
  phase end
  exit 0
fi
phase tests
timeout 300 python -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider --durations=8 > "$OUT/pytest.txt" 2>&1
echo "pytest rc=$?"; tail -15 "$OUT/pytest.txt"
phase demo-quick
timeout 150 mosaictool demo --quick --out /tmp/dq > "$OUT/demo_quick.stdout" 2> "$OUT/demo_quick.log"
echo "demo --quick rc=$?"
phase multirun
timeout 150 python perf/gpu_multirun.py /tmp/dq --steps 100 --seeds 2 --repeats 2 > "$OUT/multirun.txt" 2>&1
echo "multirun rc=$?"; tail -8 "$OUT/multirun.txt"
phase gpu-train
timeout 240 python perf/gpu_train.py --methods clip,negclip,mosaiclip --steps 40 --skip 10 > "$OUT/gpu_train.txt" 2>&1
echo "gpu_train rc=$?"; tail -20 "$OUT/gpu_train.txt"
phase end
