"""Every fixed bound, in one place. The C runtime's sizes: the build writes them into the generated
``aot_limits.h`` that ``aot_runtime.h`` includes, and the recipe loader refuses a recipe past any
of them with a located error (a call past MAX_DIMS or MAX_DEVICES is refused by the runtime). And
what the build reads: every input file is read up to its bound, and an error past it names the bound,
so a mistaken path or a hostile file costs at most this much time and memory."""

from .runtime import _aotpack_inductor as _inductor

MAX_ARGS = 64  # arguments of a kernel (a call keeps a 64-bit set of them)
MAX_KEY = 8  # expressions of a problem key; also constexprs bound to the call with `equals:`
MAX_DIMS = 8  # dimensions of a tensor argument
MAX_DEVICES = 64  # CUDA devices one process launches on
SELECTION_SLACK = 1.05  # a pick this much slower than the fastest config counts against a rule
SELECTION_WEIGHT_OFFSET = 0.25  # aotpack/selection.py's neighbour weight 1 / (distance + this)^2
MAX_MEASURED_KEYS = 512  # a table's timed keys per kernel, arch, types and class (choosing the rule is quadratic)
MAX_MEASURED_ROWS = 8192  # a kernel's timed rows in all (the demo's matmul has 1,720)
MAX_NEIGHBOURS = 16  # measured keys the dispatcher's rule predicts a config's time from (aotpack/selection.py)

# inputs of a build (yamlnodes.read_text reads each one)
MAX_RECIPE_BYTES = 4 << 20  # a recipe is a page of YAML
MAX_SOURCE_BYTES = 16 << 20  # a CUDA source (aotpack reads it for its entry points; nvcc reads its includes)
MAX_TABLE_BYTES = 64 << 20  # a tuning table (a row per key, config and class)
MAX_YAML_DEPTH = 32  # how deeply a recipe may nest (the deepest real recipe needs 6)
# values a recipe holds, each alias counted once per use: an alias of aliases of aliases ("billion laughs")
# multiplies them; real recipes hold a few thousand
MAX_YAML_VALUES = 200_000
MAX_NAME = 100  # a package's name: it is in file names (of at most 255 bytes) with a version and tags

# what a recipe may ask for (the recipe loader refuses more, located)
MAX_RECORDED_VARIANTS = 65536  # a `launch: triton` kernel's variants, widened rows multiplied out
MAX_DESC_RANK = 5  # what cuTensorMapEncodeTiled takes
MAX_WARPS = 32  # 32 warps of 32 threads: CUDA's 1024 threads per block
MAX_STAGES = 32  # Triton's software pipelining depth: real kernels use 1 to 7; each stage holds more shared memory
MAX_CONSTEXPR_TEXT = 1024  # a string constexpr (an activation's name): it is in the variant's name and the manifest
MAX_TOKENS = 256  # the longest expression (real grids and keys use a dozen)
MAX_DEPTH = 32  # parentheses, calls and signs nested in one expression

# what the planner evaluates
MAX_ONE_INT_FLOORS = 4  # a recorded class gets a floor per 16-divisible integer relaxed alone up to this many of them
MAX_CLASSES = 256  # `specialize: all` past this many classes is refused
MAX_EVERY_COMBINATION = 4  # symbols of a kind whose every combination is evaluated; past that, all but one alike
MAX_TUNE_SAMPLES = 4096  # keys `tune: {sample: ...}` draws (each costs a tuning pass over every config)
MAX_CALLS = 4096  # typical calls evaluated per choice of None arguments

# numbers given as text (values.py reads every one: options, [tool.aotpack] and -C settings, the environment)
MAX_DIGITS = 20  # digits of a number (2**63 has 19): int() of thousands of digits is slow, and past 4300 refused
MAX_SIZE = 1 << 60  # a size in bytes (--trim, $AOTPACK_CACHE_SIZE): 1048576T, more than any disk holds
MAX_JOBS = 1024  # parallel compiles: more than any machine has cores, far fewer than would exhaust it
MAX_PROGRAM_RUNS = 16  # runs of a recorded program (aotpack record --runs: 3 by default)
MAX_TUNE_RUNS = 100_000  # timed (--reps, 30 by default) or untimed (--warmup, 5) runs per variant and key

# what aotpack reads of a wheel it may not have built (aotpack inspect): a hostile one costs at most this much
MAX_WHEEL_BYTES = 4 << 30  # a wheel (the largest CUDA library wheels are about 3G); only its manifest is read
MAX_MANIFEST_BYTES = 64 << 20  # its manifest.json, unpacked (a few hundred bytes per variant)
MAX_MANIFEST_DEPTH = 32  # how deeply the manifest nests (aotpack writes 8 levels, and 2 per tuple in a constexpr)
MAX_RECORD_BYTES = 1 << 16  # a record the cache keeps for itself (size.json, a toolchain's stamp): a line of JSON

# what aotpack record reads and takes
MAX_WIDEN = 4096  # values one --widen may give
MAX_REPORT_BYTES = 64 << 20  # a report lists at most 64 class misses per kernel, and what the JIT compiled
MAX_REPORTS = 4096  # report files read from one folder
# Triton cache entries a recipe ships (triton_cache:): a torch.compile'd model records a few hundred kernels
MAX_CACHE_ENTRIES = 65536
MAX_CACHE_FILES = 16  # files of one entry: its IRs, binary and metadata (Triton writes 7 for CUDA)
MAX_CACHE_BYTES = 2 << 30  # all of them together (a cubin and its IRs are kilobytes to a few megabytes)
MAX_RECORDED_DEPTH = 32  # how deeply a recorded entry's or set's metadata nests (Triton's and torch's: 3 levels)
# torch.compile's caches a recipe ships (inductor_cache:): a set per process that compiled; a set is a few MiB
MAX_INDUCTOR_SETS = 256
MAX_INDUCTOR_BYTES = _inductor.MAX_BYTES  # all of them together, as activate() loads one (its own limit)
MAX_INDUCTOR_META = _inductor.MAX_META  # a set's .json
MAX_INDUCTOR_CPP = _inductor.MAX_CPP_KERNELS  # shared objects of Inductor's C++ kernels one set lists
MAX_INDUCTOR_CPP_FILES = 4096  # of them in the folder, all sets together
MAX_INDUCTOR_CPP_BYTES = _inductor.MAX_CPP_BYTES  # one of them, uncompressed


def header() -> str:
    """aot_limits.h."""
    lines = ["/* Generated by aotpack from aotpack/limits.py; do not edit. */", "#ifndef AOT_LIMITS_H",
             "#define AOT_LIMITS_H"]  # fmt: skip
    for name in ("MAX_ARGS", "MAX_KEY", "MAX_DIMS", "MAX_DEVICES", "MAX_NEIGHBOURS", "MAX_CLASSES"):
        lines.append(f"#define AOT_{name} {globals()[name]}")
    lines.append(f"#define AOT_WEIGHT_OFFSET {SELECTION_WEIGHT_OFFSET!r}")
    return "\n".join([*lines, "#endif", ""])
