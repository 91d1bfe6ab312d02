"""The runtime: everything that runs in a user's process, as source. Its C is compiled into every generated
package's shared objects (pipeline/native.py); its Python ships in every wheel beside the package's ``__init__``
(pipeline/build.py) and, with the recording agent, beside a program ``aotpack record`` runs (record/program.py).
This module lists the files, for all three; it ships nowhere.

Every ``runtime/*.py`` but this one follows the same rules (tests/unit/test_runtime_rules.py holds them):

- standard library and sibling modules only at module level: Triton and torch are imported where they are used,
  or at load only where the module's docstring says so and why ("At load it imports triton: ...");
- never aotpack, which a served or recorded process may not have (and where it has it, must not import:
  _aotpack_agent.py says why);
- Python 3.9's syntax: wheels install on 3.9;
- one name everywhere: a file's module name is its own in this tree (``aotpack.runtime.<name>``), in a wheel
  (``<package>.<name>``) and beside the agent (``_aotpack_recording.<name>``), siblings imported relatively;
- its state in one object (``_state``) with its lock, no other mutable global; a module whose state ``activate()``
  sets up gives it back in a ``reset()`` that ``deactivate()`` calls;
- at most 600 lines."""

# The C: the runtime proper, compiled with the generated tables into lib<package>.so, and the Python binding,
# compiled with module.c into the extension; each has its public header (generated code includes it) and a
# private one.
RUNTIME_SOURCES = ("aot_runtime.c", "aot_driver.c", "aot_expr.c", "aot_memo.c", "aot_dispatch.c", "aot_measured.c",
                   "aot_tune.c", "aot_images.c", "aot_launch.c")  # fmt: skip
BINDING_SOURCES = ("aot_py_errors.c", "aot_py_dlpack.c", "aot_py_args.c", "aot_python.c", "aot_py_runner.c",
                   "aot_py_module.c")  # fmt: skip
C_FILES = ("aot_runtime.h", "aot_internal.h", *RUNTIME_SOURCES, "aot_python.h", "aot_py_internal.h", *BINDING_SOURCES)

# The Python every wheel ships: a generated package's __init__ imports _aotpack_runtime, which imports the others
PYTHON_FILES = ("_aotpack_runtime.py", "_aotpack_activate.py", "_aotpack_desc.py", "_aotpack_env.py",
                "_aotpack_guard.py", "_aotpack_identity.py", "_aotpack_imports.py", "_aotpack_inductor.py",
                "_aotpack_jit.py", "_aotpack_report.py", "_aotpack_source.py", "_aotpack_torch.py",
                "_aotpack_tune.py", "_aotpack_tuners.py", "_aotpack_folders.py", "_aotpack_held.py")  # fmt: skip
# aotpack record's agent, which runs in each process of a recorded program beside them (in no wheel)
AGENT = "_aotpack_agent.py"
# the package the runtime's Python and the agent form beside a recorded program
RECORDING_PACKAGE = "_aotpack_recording"
