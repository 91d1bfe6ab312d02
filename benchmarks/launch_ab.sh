#!/usr/bin/env bash
# Launch cost of two builds of the demo wheel, alternated in one session of the machine so that its
# drift hits both alike: benchmarks/launch.py and launch_breakdown.py for BEFORE, AFTER, BEFORE, ...
#
#   benchmarks/launch_ab.sh BEFORE.whl AFTER.whl [ROUNDS]   (logs under $OUT, default a temporary folder)
#
# Needs python3 with torch (CUDA), triton and a C compiler, as benchmarks/gpu_round.sh; builds nothing.
set -euo pipefail
before=$1 after=$2 rounds=${3:-2}
out=${OUT:-$(mktemp -d)}
export PYTHONUNBUFFERED=1
for side in before after; do
  wheel=${!side}
  mkdir -p "$out/site-$side"
  python3 -m pip install -q --no-deps --no-index --target "$out/site-$side" "$wheel"
done
for round in $(seq 1 "$rounds"); do
  for side in before after; do
    echo "== $side, round $round"
    PYTHONPATH="$out/site-$side${PYTHONPATH:+:$PYTHONPATH}" python3 benchmarks/launch.py 2>&1 \
      | tee "$out/launch-$side-$round.log"
    PYTHONPATH="$out/site-$side${PYTHONPATH:+:$PYTHONPATH}" python3 benchmarks/launch_breakdown.py 2>&1 \
      | tee "$out/launch_breakdown-$side-$round.log"
  done
done
rm -rf "$out/site-before" "$out/site-after"
