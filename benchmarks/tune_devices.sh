#!/bin/bash
# `aotpack tune --devices all` and `--executor` (a Dask scheduler and one worker process per GPU) against
# one GPU, on a host with several (the demo wheel installed, the repository importable; Dask for the
# cluster rows): wall time of each, alternated, for a small job and for the matmul job.
# Usage: bash benchmarks/tune_devices.sh [OUT [ROUNDS [JOBS]]]   (logs and tables under OUT, default
# /tmp/tune-devices; ROUNDS 2; JOBS "small matmul", or "full": every demo kernel at the default reps)
set -u
out=${1:-/tmp/tune-devices}
rounds=${2:-2}
jobs=${3:-small matmul}
declare -A args=([small]="--kernel add --kernel softmax --reps 10" [matmul]="--kernel matmul --reps 10" [full]="")
mkdir -p "$out"
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
run() {  # name devices|cluster args...
  local name=$1 devices=$2; shift 2
  local where=(--devices "$devices"); [ "$devices" = cluster ] && where=()
  local start=$(date +%s%N)
  python3 -m aotpack tune recipes/demo.yaml -o "$out/$name-$devices" "${where[@]}" "$@" > "$out/$name-$devices.log" 2>&1
  local rc=$?
  echo "$name devices=$devices rc=$rc wall_s=$(( ($(date +%s%N) - start) / 1000000 ))e-3"
}
cluster=""
if python3 -c "import distributed" 2>/dev/null; then  # a running cluster: its start is not charged
  python3 -m distributed.cli.dask_scheduler --scheduler-file "$out/scheduler.json" --port 0 \
    --dashboard-address :0 > "$out/scheduler.log" 2>&1 &
  pids=$!
  for _ in $(seq 100); do [ -e "$out/scheduler.json" ] && break; sleep 0.1; done
  for i in $(seq 0 $(( $(nvidia-smi -L | wc -l) - 1 ))); do
    CUDA_VISIBLE_DEVICES=$i python3 -m distributed.cli.dask_worker --scheduler-file "$out/scheduler.json" \
      --nthreads 1 --no-dashboard > "$out/worker-$i.log" 2>&1 &
    pids="$pids $!"
  done
  cluster=$(python3 -c "import distributed, sys, torch; c = distributed.Client(scheduler_file=sys.argv[1]); \
c.wait_for_workers(torch.cuda.device_count(), timeout=120); print(c.scheduler.address)" "$out/scheduler.json")
  trap 'kill $pids 2>/dev/null' EXIT
fi
for round in $(seq "$rounds"); do
  for job in $jobs; do
    run "$job" 0 ${args[$job]}
    run "$job" all ${args[$job]}
    [ -n "$cluster" ] && run "$job" cluster ${args[$job]} --executor "$cluster"
  done
done
for job in $jobs; do  # the same table from one GPU and from all (the winners; timings differ)
  for other in all cluster; do
  [ -d "$out/$job-$other" ] || continue
  python3 - "$out/$job-0" "$out/$job-$other" <<'PY'
import json, pathlib, sys
rows = [[(r["key"], r["types"], r.get("specialization"), r["config"]) for k in sorted(t["kernels"]) for r in t["kernels"][k]]
        for t in (json.loads(next(pathlib.Path(d).glob("*.json")).read_text()) for d in sys.argv[1:])]
print(sys.argv[1], "rows", len(rows[0]), "same keys/order:", [r[:3] for r in rows[0]] == [r[:3] for r in rows[1]],
      "same winners:", sum(a == b for a, b in zip(*rows)), "of", len(rows[0]))
PY
  done
done
