# aotpack developer entry points. `make demo` builds the demo wheel, `make test` runs the suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# torch, pinned, its CPU build: the corpus kernels import it. PyPI's x86_64 torch is the CUDA build, which pins a
# Triton of its own (2.13: 3.7, not the newest tested) and starts CUDA under the suite's fake driver; PyTorch's CPU
# index has the CPU build (where that index cannot be reached, pip finds it where it is told to: PIP_FIND_LINKS)
TORCH := 'torch==2.13.0' --extra-index-url https://download.pytorch.org/whl/cpu
export TORCH_IS_CPU := import sys, torch; sys.exit(torch.version.cuda and f'torch {torch.__version__} is a CUDA build \
(CUDA {torch.version.cuda}): the suite needs the CPU build (pip could not reach https://download.pytorch.org/whl/cpu: \
put a torch-2.13.0+cpu wheel where pip looks, e.g. PIP_FIND_LINKS, and remove $(VENV))')
export NEWEST_TRITON := import sys; from aotpack.backends.triton.releases import newest_supported; \
print('%d.%d' % newest_supported(sys.version_info[:2]))

.PHONY: docs demo gpu-deps hopper hopper-matched corpus corpus-matched variations-matched recorded-matched test check test-releases test-torch unit lint gpu-test clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	$(PY) -c "$$TORCH_IS_CPU"
	# cuda: nvcc from PyPI (nvidia-cuda-nvcc), used where no CUDA toolkit is found ($$CUDA_HOME, PATH)
	$(PY) -m pip install -q -e '.[test,corpus,cuda,dask]'
	# the newest Triton aotpack is tested with for this Python (releases.py), not whatever PyPI has newest
	$(PY) -m pip install -q "triton==$$($(PY) -c "$$NEWEST_TRITON").*"
	touch $(STAMP)

# The demo in a venv of its own, holding only what recipes/demo.yaml's build needs: aotpack, a Triton for its three
# Triton kernels (the triton extra) and nvcc from PyPI for its CUDA C++ one (the cuda extra, used where no CUDA
# toolkit is found); none of its kernels imports torch, and the test, corpus and dask extras are the suite's
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed

$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/pip install -q --upgrade pip
	$(DEMO_VENV)/bin/pip install -q -e '.[triton,cuda]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)  ## build recipes/demo.yaml into dist/
	@echo "building the $$($(DEMO_VENV)/bin/aotpack plan recipes/demo.yaml 2>/dev/null | wc -l) variants of \
	recipes/demo.yaml (3 Triton kernels, 1 CUDA C++) with $$(nproc) compile processes: the progress line's ETA \
	says how long, from the first variants compiled on"
	$(DEMO_VENV)/bin/aotpack build recipes/demo.yaml -o dist

hopper: $(STAMP)  ## build recipes/hopper.yaml (TMA matmul, attention; sm_90a) into dist/
	$(VENV)/bin/aotpack build recipes/hopper.yaml -o dist

# The Hopper recipe built with another Triton release (default 3.6.0, the JIT on the device tool's
# H100), in a venv of its own, into dist/triton-X.Y/: `make gpu-test` then also runs its GPU tests and
# benchmarks it against that same Triton's JIT, so both sides run one compiler's code.
TRITON_MATCH ?= 3.6.0
hopper-matched:
	$(PYTHON) -m venv .venv-triton-$(TRITON_MATCH)
	.venv-triton-$(TRITON_MATCH)/bin/pip install -q -e . triton==$(TRITON_MATCH)
	.venv-triton-$(TRITON_MATCH)/bin/aotpack build recipes/hopper.yaml -o dist/triton-$(basename $(TRITON_MATCH))

# The third-party corpus (tests/corpus/thirdparty.yaml: liger-kernel, fla-core, conch kernels as published)
corpus: $(STAMP)
	$(VENV)/bin/aotpack build tests/corpus/thirdparty.yaml -o dist

# ... and built by the device's Triton, like hopper-matched (its venv needs the corpus packages too)
corpus-matched:
	$(PYTHON) -m venv .venv-triton-$(TRITON_MATCH)
	.venv-triton-$(TRITON_MATCH)/bin/pip install -q $(TORCH)
	.venv-triton-$(TRITON_MATCH)/bin/pip install -q -e '.[corpus]' triton==$(TRITON_MATCH)
	.venv-triton-$(TRITON_MATCH)/bin/aotpack build tests/corpus/thirdparty.yaml -o dist/triton-$(basename $(TRITON_MATCH))

# The corpus kernels' recipes written the other equivalent ways users write them (tests/corpus/variations.py), one
# dtype each, built by the device's Triton like corpus-matched: tests/gpu/test_variations.py and
# benchmarks/thirdparty.py compare them with the JIT
variations-matched:
	$(PYTHON) -m venv .venv-triton-$(TRITON_MATCH)
	.venv-triton-$(TRITON_MATCH)/bin/pip install -q $(TORCH)
	.venv-triton-$(TRITON_MATCH)/bin/pip install -q -e '.[corpus]' triton==$(TRITON_MATCH)
	.venv-triton-$(TRITON_MATCH)/bin/python -m tests.corpus.variations --one-dtype build/variations.yaml
	.venv-triton-$(TRITON_MATCH)/bin/aotpack build build/variations.yaml -o dist/triton-$(basename $(TRITON_MATCH))

# The workload recorded on the H100 (tests/gpu/liger_recorded.yaml: `aotpack record` of
# tests/gpu/record_workload.py), built by the Triton that recorded it, for tests/gpu/test_recorded.py; and the
# host-TMA matmul recorded under Triton 3.6.0's JIT (tests/gpu/tma_recorded.yaml: tests/gpu/tma_workload.py
# --record-without-gpu) for tests/gpu/test_recorded_tma.py
recorded-matched:
	$(PYTHON) -m venv .venv-triton-$(TRITON_MATCH)
	.venv-triton-$(TRITON_MATCH)/bin/pip install -q $(TORCH)
	.venv-triton-$(TRITON_MATCH)/bin/pip install -q -e '.[corpus]' triton==$(TRITON_MATCH)
	.venv-triton-$(TRITON_MATCH)/bin/aotpack build tests/gpu/liger_recorded.yaml -o dist/triton-$(basename $(TRITON_MATCH))
	.venv-triton-$(TRITON_MATCH)/bin/aotpack build tests/gpu/tma_recorded.yaml -o dist/triton-$(basename $(TRITON_MATCH))

test: $(STAMP)  ## lint, type-check, the docs site (strict), unit and integration tests (GPU tests skip; the aarch64 wheel on an emulated aarch64 machine), every Triton release
	$(VENV)/bin/ruff check aotpack tests benchmarks
	$(VENV)/bin/ruff format --check aotpack tests benchmarks
	$(VENV)/bin/mypy
	$(MAKE) docs
	$(PY) -m pytest tests/unit -m unit --durations=15
	AOTPACK_TEST_AARCH64=1 $(PY) -m pytest tests/integration tests/gpu -m "integration or gpu" --durations=30
	$(PY) -m tests.releases

# The fast tiers, what a contributor runs before pushing: lint, format, types and the unit tier (no compiler, no
# GPU), with a line per test file as it goes
check: $(STAMP)
	$(VENV)/bin/ruff check aotpack tests benchmarks
	$(VENV)/bin/ruff format --check aotpack tests benchmarks
	$(VENV)/bin/mypy
	$(PY) -m pytest tests/unit -m unit

# The Triton-release tier alone (tests/releases.py): each tested release's subset, --triton builds, installs
test-releases: $(STAMP)
	$(PY) -m tests.releases

# The torch tier (opt-in; tests/torch_releases.py): torch.compile's recorded caches with every torch that pins a
# tested Triton, each in a venv of its own under build/torch-venvs (about 3 GB each: torch's CUDA build from PyPI)
test-torch: $(STAMP)
	$(PY) -m tests.torch_releases

unit: $(STAMP)
	$(PY) -m pytest

# The pure-Python packages aotpack imports that a GPU host's torch environment may lack (ruamel.yaml, to read a
# recipe with the CLI; pyproject-metadata; packaging 24.2+, for SPDX license expressions), as this venv has them: wheels into dist/deps/, which gpu-test
# installs beside the wheels (the GPU host may have no network: `aotpack tune` from this checkout needs them)
gpu-deps: $(STAMP)
	rm -rf dist/deps
	$(VENV)/bin/pip download -q --only-binary=:all: --no-deps -d dist/deps \
	  $$($(VENV)/bin/pip freeze | grep -iE '^(ruamel\.yaml|pyproject-metadata|packaging)==')

# On a GPU host (no network needed): install the wheel from dist/ into a scratch folder and run the
# GPU tests and the launch benchmark against it. Logs go to $$OUT when set.
gpu-test:
	bash benchmarks/gpu_round.sh

# The documentation site (mkdocs.yml, docs/) into site/, with MkDocs in a venv of its own; `make test` builds it
# (strict: a warning, a broken link or a page left out of the nav fails)
DOCS_VENV := .venv-docs
docs:
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/pip install -q 'mkdocs==1.6.1' 'pymdown-extensions>=10'
	$(DOCS_VENV)/bin/mkdocs build --strict

clean:
	rm -rf dist build site .pytest_cache .mypy_cache .ruff_cache
