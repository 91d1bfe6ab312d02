#!/usr/bin/env bash
# The drop-in workloads (tests/gpu/workloads.py: Llama with Liger-Kernel, Helion kernels, fla-core's functions)
# on a GPU, in two steps with a build on the CPU host between them:
#
#   benchmarks/workloads.sh record OUT [NAMES...]
#     per workload: the JIT with an empty Triton cache (cold), again with that cache (warm), then
#     `aotpack record` of it (NAME_served, a server's shapes, only under the JIT: the recording of NAME serves
#     it); OUT/workloads.tar holds the JIT's outputs and times (jit/) and the recordings
#     (recipes/NAME/recipe.yaml with their written-out sources). Build each recipe on the CPU host with the
#     JIT's Triton, then
#   benchmarks/workloads.sh jit OUT [NAMES...]
#     only the JIT's runs (OUT/workloads.tar holds jit/): a new reference for recipes already recorded;
#   benchmarks/workloads.sh replay OUT WHEELS_DIR REFERENCE_TAR [NAMES...]
#     installs the wheels and runs tests/gpu/test_workloads.py against the JIT's outputs: a fresh process per
#     workload, an empty Triton cache, activate(fallback="error"); OUT gets its log and times.
#
# Needs python3 with torch (CUDA), triton, and the workloads' packages (transformers, liger-kernel, helion,
# fla-core); aotpack itself runs from this checkout (PyYAML, ruamel.yaml and packaging suffice to record).
set -uo pipefail
mode=$1 out=$2
shift 2
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# Inductor's cache key holds CXX: unset in every run, as on a serving machine without a compiler (the replay's)
unset CXX
work=$(mktemp -d)
if [ "$mode" = record ] || [ "$mode" = jit ]; then
  names=${*:-llama helion fla}
  for name in $names; do
    # each run a HOME of its own: a library's own caches there (FlagGems' autotuning database) start empty
    HOME=$work/home-$name-cold TRITON_CACHE_DIR=$work/cache-$name TORCHINDUCTOR_CACHE_DIR=$work/inductor-$name \
      python3 -m tests.gpu.workloads "$name" jit "$work/jit/cold" 2>&1 | tail -3
    HOME=$work/home-$name-warm TRITON_CACHE_DIR=$work/cache-$name TORCHINDUCTOR_CACHE_DIR=$work/inductor-$name \
      python3 -m tests.gpu.workloads "$name" jit "$work/jit/warm" 2>&1 | tail -3
    [ "$mode" = jit ] && continue
    base=$(python3 -c "from tests.gpu.workloads import RECORDED_AS; print(RECORDED_AS.get('$name', '$name'))")
    if [ "$base" != "$name" ] && [ -d "$work/recipes/$base/inductor-cache" ]; then
      # a server's shapes, where the recording ships torch.compile's caches: the JIT running the recorded graphs
      # (jit/graphs: what the replay must match bit for bit)
      HOME=$work/home-$name-graphs TRITON_CACHE_DIR=$work/cache-graphs-$name TORCHINDUCTOR_CACHE_DIR=$work/inductor-graphs-$name \
        python3 -c "import runpy, sys; from aotpack.runtime import _aotpack_inductor as graphs; graphs.serve(sys.argv[1]);
sys.argv = ['workloads', *sys.argv[2:]]; runpy.run_module('tests.gpu.workloads', run_name='__main__')" \
        "$work/recipes/$base/inductor-cache" "$name" jit "$work/jit/graphs" 2>&1 | tail -3
    fi
    case $name in
      *_served) continue ;;  # a server's shapes: replayed from the recording of the workload it serves
      llama|llama_compiled) widen=(--widen bs=1..8 --widen cos_bs=1..8) ;;  # Liger's RoPE takes the batch as a constexpr
      flaggems) widen=(--widen TILE_N=64..4096:pow2) ;;  # its softmax, sum and layer norm tile the row length
      *) widen=() ;;
    esac
    mkdir -p "$work/recipes/$name"
    HOME=$work/home-$name-record TRITON_CACHE_DIR=$work/cache-rec-$name python3 -m aotpack record -o "$work/recipes/$name/recipe.yaml" \
      --package "${name}_kernels" "${widen[@]}" -- python -m tests.gpu.workloads "$name" jit "$work/jit/recorded" \
      > "$work/recipes/$name/record.log" 2>&1
    tail -5 "$work/recipes/$name/record.log"
  done
  if [ "$mode" = jit ]; then tar -C "$work" -cf "$out/workloads.tar" jit; else tar -C "$work" -cf "$out/workloads.tar" jit recipes; fi
elif [ "$mode" = replay ]; then
  wheels=$1 reference=$2
  shift 2
  site=$(mktemp -d)
  python3 -m pip install -q --no-deps --no-index --target "$site" "$wheels"/*.whl || exit 1
  mkdir -p "$work/reference" && tar -C "$work/reference" -xf "$reference"
  AOTPACK_WORKLOADS="${*:-llama helion fla}" AOTPACK_WORKLOAD_REFERENCE=$work/reference/jit \
    AOTPACK_WORKLOAD_OUT=$out PYTHONPATH="$site:$PYTHONPATH" \
    python3 -m pytest tests/gpu/test_workloads.py -m gpu -v -p no:cacheprovider 2>&1 | tee "$out/workloads-tests.log"
  exit "${PIPESTATUS[0]}"
fi
