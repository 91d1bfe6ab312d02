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

/* Triton's launch syntax: args (config index, grid: tuple of 1 to 3 ints, *the kernel's runtime
 * arguments in order). Launches the variant of that config compiled for exactly the call's JIT class,
 * or raises <package>.MissingVariant. */
PyObject *aot_py_launch(const aot_kernel *k, PyObject *args);

/* Key-based choice: args (key: tuple of ints, binding: int, device: int) -> variant id. */
PyObject *aot_py_choose(const aot_kernel *k, PyObject *args);

/* Runtime autotuning from Python: _autotune(on), _memo(kernel) -> [(target, binding, class, key,
 * config)], _memo_put(kernel, target, binding, class, key, config). Targets, classes and configs by name. */
PyObject *aot_py_autotune(PyObject *module, PyObject *args);
PyObject *aot_py_memo(PyObject *module, PyObject *args);
PyObject *aot_py_memo_put(PyObject *module, PyObject *args);

/* _image(kernel, variant_id) -> the variant's kernel image (cubin or PTX), unpacked as the loader does. */
PyObject *aot_py_image(PyObject *module, PyObject *args);

/* Module setup: creates `<package>.CudaError` and `<package>.MissingVariant` in the module. */
int aot_py_init(PyObject *module);

#endif
