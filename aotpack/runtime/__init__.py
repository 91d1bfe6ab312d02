"""The runtime every generated package ships, as source: its C, compiled into the package's shared objects
(pipeline/native.py), and its Python, copied beside them (pipeline/build.py) and beside ``aotpack record``'s
agent (record/program.py). This module lists the files, for all three; it ships nowhere."""

# The C: the runtime proper, compiled with the generated tables into lib<package>.so, and the Python binding,
# compiled with module.c into the extension; each has its public header (generated code includes it) and a
# private one.
RUNTIME_SOURCES = ("aot_runtime.c", "aot_driver.c", "aot_expr.c", "aot_memo.c", "aot_dispatch.c", "aot_tune.c",
                   "aot_images.c", "aot_launch.c")  # fmt: skip
BINDING_SOURCES = ("aot_py_errors.c", "aot_py_dlpack.c", "aot_py_args.c", "aot_python.c", "aot_py_runner.c",
                   "aot_py_module.c")  # fmt: skip
C_FILES = ("aot_runtime.h", "aot_internal.h", *RUNTIME_SOURCES, "aot_python.h", "aot_py_internal.h", *BINDING_SOURCES)

# The Python, standard library only: the main module, which a generated package imports as _aotpack_runtime and
# the agent as _aotpack_kernels, and the modules it imports by their own names (shipped under them beside it).
PYTHON_MAIN = "aot_kernels.py"
PYTHON_HELPERS = ("_aotpack_desc.py", "_aotpack_guard.py", "_aotpack_imports.py", "_aotpack_inductor.py",
                  "_aotpack_jit.py", "_aotpack_tune.py")  # fmt: skip
