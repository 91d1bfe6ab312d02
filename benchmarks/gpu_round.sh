#!/usr/bin/env bash
# The whole GPU round in one call: install the built wheel(s) from dist/, run tests/gpu and the
# benchmarks. Needs python3 with torch (CUDA), triton and pytest; builds nothing.
set -uo pipefail
out=${OUT:-$(mktemp -d)}
site=$(mktemp -d)
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-index --target "$site" dist/*.whl || exit 1
# aotpack's pure-Python imports this host may lack (make gpu-deps), for `aotpack tune` from the checkout
if compgen -G "dist/deps/*.whl" > /dev/null; then
  python3 -m pip install -q --no-deps --no-index --target "$site" dist/deps/*.whl ||
    echo "dist/deps did not install (make gpu-deps again): aotpack tune's GPU test may fail" >&2
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
python3 -m pytest tests/gpu -m gpu -v -p no:cacheprovider -W error -W ignore::DeprecationWarning 2>&1 | tee "$out/gpu-tests.log"
status=${PIPESTATUS[0]}
python3 benchmarks/images.py dist/demo_kernels-*.whl 2>&1 | tee "$out/images.log"
python3 benchmarks/launch.py 2>&1 | tee "$out/launch.log"
python3 benchmarks/launch_breakdown.py 2>&1 | tee "$out/launch_breakdown.log"
if python3 -c "import hopper_kernels" 2>/dev/null; then
  python3 benchmarks/hopper.py 2>&1 | tee "$out/hopper.log"
fi
# Wheels built with another Triton (dist/triton-X.Y/, e.g. the version installed here, so that the JIT
# comparison runs the same compiler: same code, so bit-identical results and the speed comparison that
# matters): the wheels of one release installed together in a folder of their own, then each package's GPU
# tests and benchmark (thirdparty.py covers the corpus and, when installed, its recipe variations).
for folder in dist/triton-*/; do
  [ -d "$folder" ] || continue
  tag=$(basename "$folder")
  other=$(mktemp -d)
  python3 -m pip install -q --no-deps --no-index --target "$other" "$folder"*.whl || exit 1
  for entry in hopper_kernels:test_hopper.py:hopper.py thirdparty_kernels:test_thirdparty.py:thirdparty.py \
               variations_kernels:test_variations.py: liger_recorded:test_recorded.py:launch.py \
               tma_recorded:test_recorded_tma.py:; do
    IFS=: read -r package test bench <<< "$entry"
    [ -d "$other/$package" ] || continue
    PYTHONPATH="$other:$PYTHONPATH" python3 -m pytest "tests/gpu/$test" -m gpu -q -p no:cacheprovider 2>&1 \
      | tail -3 | tee "$out/$package-tests-$tag.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    [ -z "$bench" ] || PYTHONPATH="$other:$PYTHONPATH" python3 "benchmarks/$bench" 2>&1 | tee "$out/$package-$tag.log"
  done
done
if python3 -c "import thirdparty_kernels" 2>/dev/null; then
  python3 benchmarks/thirdparty.py 2>&1 | tee "$out/thirdparty.log"
fi
# the repository itself is importable here (to tune and read recipes aotpack needs PyYAML and, from dist/deps
# (make gpu-deps), ruamel.yaml, pyproject-metadata and packaging)
export PYTHONPATH="$PYTHONPATH:$PWD"
if [ -n "${AOTPACK_TUNE:-}" ]; then
  python3 -m aotpack tune recipes/demo.yaml -o "$out/tables" 2>&1 | tee "$out/tune.log"
fi
python3 benchmarks/dispatch.py 2>&1 | tee "$out/dispatch.log"
exit $status
