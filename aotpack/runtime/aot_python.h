/* The CPython side of the runtime (limited API, abi3): turns a Python call into an aot_call. */
#ifndef AOT_PYTHON_H
#define AOT_PYTHON_H

#include <Python.h>

#include "aot_runtime.h"

/* Call kernel `k` with Python arguments (tensors, __cuda_array_interface__ objects or int
 * pointers; scalars; keyword `stream`). Returns None, or NULL with a Python exception set. */
PyObject *aot_py_call(const aot_kernel *k, PyObject *args, PyObject *kwargs);

/* The variant id the call would launch on its device, without launching. */
PyObject *aot_py_select(const aot_kernel *k, PyObject *args, PyObject *kwargs);

/* Triton's launch syntax (launch: triton kernels): a builtin run(*args, grid, warmup=False, num_warps=4,
 * num_stages=3, **kwargs), what JITFunction.run takes. spec is a dict of these keys (names: every parameter in order,
 * runtime: per name True for a runtime argument and False for a constexpr, defaults: {name: value},
 * configs: {(constexpr values, num_warps, num_stages): config index}, options: {option: value the variants
 * were built with}, selecting: launch options that would need other code, plain: unwraps a constexpr object,
 * compiled: per config what run returns, as the JIT's returns its CompiledKernel, fallback: None or
 * f(message, args, kwargs) called instead of raising MissingVariant). The constexprs and options pick the
 * config; the call's JIT class picks its variant, or MissingVariant is raised. */
PyObject *aot_py_runner(const aot_kernel *k, PyObject *spec);

/* Key-based choice: args (key: tuple of ints, binding: int, device: int) -> variant id. */
PyObject *aot_py_choose(const aot_kernel *k, PyObject *args);

/* Runtime autotuning from Python: _autotune(on), _memo(kernel) -> [(target, binding, class, key,
 * config)], _memo_put(kernel, target, binding, class, key, config). Targets, classes and configs by name. */
PyObject *aot_py_autotune(PyObject *module, PyObject *args);
PyObject *aot_py_memo(PyObject *module, PyObject *args);
PyObject *aot_py_memo_put(PyObject *module, PyObject *args);

/* Class misses: _misses(kernel) -> ([(class run, the JIT's class, calls)], calls lost past the table);
 * _warn_misses(category or None): warn the first call of each miss with that category, or not. */
PyObject *aot_py_misses(PyObject *module, PyObject *args);
PyObject *aot_py_warn_misses(PyObject *module, PyObject *args);

/* _image(kernel, variant_id) -> the variant's kernel image (cubin or PTX), unpacked as the loader does. */
PyObject *aot_py_image(PyObject *module, PyObject *args);

/* Module setup: creates `<package>.CudaError` and `<package>.MissingVariant` in the module. */
int aot_py_init(PyObject *module);

#endif
