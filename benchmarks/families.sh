#!/usr/bin/env bash
# Model families the tests do not name (benchmarks/families.py), recorded and served, in two steps with a build on
# the CPU host between them (docs/dropin.md, "torch.compile", has the measured table):
#
#   benchmarks/families.sh record OUT
#     per family and mode, `aotpack record` as the drop-in guide says (two values or more per dimension, an odd
#     length, size 1, --widen bs=1..8 --widen cos_bs=1..8); OUT/rec.tar.xz holds the recordings. Build each
#     (aotpack build rec/NAME/recipe.yaml -o wheels/NAME) with the JIT's Triton, then
#   benchmarks/families.sh serve OUT WHEELS_DIR
#     per recording: served (no C compiler on PATH, CXX unset, empty caches, a fresh HOME, fallback="error") at
#     seeded random sizes never recorded, then Triton's JIT cold and warm at the same sizes; OUT/j holds each
#     run's JSON (python3 benchmarks/families_table.py OUT/j prints the table).
#
# Needs python3 with torch (CUDA), triton, transformers and liger-kernel; aotpack runs from this checkout.
set -uo pipefail
mode=$1 out=$2
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
here=$PWD/benchmarks
work=$(mktemp -d)
names=${NAMES:-"qwen3-eager qwen3-default qwen3-ro mistral-eager mistral-default mistral-ro gemma2-eager gemma2-default gemma2-ro olmo2-eager olmo2-default olmo2-ro"}
RECORD=${RECORD:-2x64,4x96,1x77,3x50,6x131}
SERVE=${SERVE:-1x137,5x212,7x197,4x40}  # random.Random(56): batch 1..8, length 16..256
mkdir -p "$out/j"
record() {  # name
  local fam=${1%-*} mode=${1#*-}; mkdir -p "$work/$1/home"
  TRITON_CACHE_DIR=$work/$1/tc TORCHINDUCTOR_COMPILE_THREADS=2 HOME=$work/$1/home python3 -m aotpack record \
    -o "$work/rec/$1/recipe.yaml" --package "${fam}_${mode}_kernels" --widen bs=1..8 --widen cos_bs=1..8 \
    -- python3 "$here/families.py" "$fam" "$mode" jit - "$RECORD" > "$work/$1.log" 2>&1
  echo "$1 recorded: rc=$?" | tee -a "$out/lanes.txt"
}
serve() {  # name wheels
  local fam=${1%-*} mode=${1#*-} site=$work/site-$1 py
  py=$(python3 -c 'import sys; print(sys.executable)')  # (by its path: found without PATH)
  python3 -m pip install -q --no-index --no-deps --target "$site" "$2/$1"/*.whl || return
  mkdir -p "$work/$1/h1" "$work/$1/h2"
  env -u CC -u CXX PATH="$bare" HOME=$work/$1/h1 TRITON_CACHE_DIR=$work/$1/s-tc TORCHINDUCTOR_CACHE_DIR=$work/$1/s-ic \
    TORCHINDUCTOR_COMPILE_THREADS=2 PYTHONPATH="$site:$PYTHONPATH" \
    "$py" "$here/families.py" "$fam" "$mode" serve "$out/j/$1-serve.json" "$SERVE" > "$work/$1-serve.log" 2>&1
  for run in cold warm; do
    env -u CC -u CXX HOME=$work/$1/h2 TRITON_CACHE_DIR=$work/$1/j-tc TORCHINDUCTOR_CACHE_DIR=$work/$1/j-ic \
      TORCHINDUCTOR_COMPILE_THREADS=2 python3 "$here/families.py" "$fam" "$mode" jit "$out/j/$1-$run.json" \
      "$SERVE" > "$work/$1-$run.log" 2>&1
  done
  echo "$1 served" | tee -a "$out/lanes.txt"
}
if [ "$mode" = record ]; then
  for name in $names; do record "$name" & done
  wait
  tar -C "$work/rec" -cf - . | xz -T0 > "$out/rec.tar.xz"
elif [ "$mode" = serve ]; then
  bare=$(python3 -c "from pathlib import Path; from tests.shared import without_c_compiler; print(without_c_compiler(Path('$work/bare')))")
  for name in $names; do serve "$name" "$3" & done
  wait
else
  echo "usage: benchmarks/families.sh record OUT | serve OUT WHEELS_DIR" >&2
  exit 2
fi
