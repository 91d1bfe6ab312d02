/* The binding's base: the exceptions it raises and the category it warns with, err as a Python exception,
 * and the text of Python objects that messages quote. Every other file of the binding may call it; it calls
 * none of them. */
#include "aot_py_internal.h"

#include <stdio.h>

static PyObject *cuda_error; /* <package>.CudaError */
PyObject *bind_missing_error; /* <package>.MissingVariant */
PyObject *bind_miss_warning;  /* the category class misses are warned with (opt-in: _warn_misses), or NULL */

/* str(obj) into buf (the limited API of 3.9 has no borrowed UTF-8 view). */
const char *bind_text_of(PyObject *obj, char *buf, size_t size) {
  PyObject *str = obj ? PyObject_Str(obj) : NULL;
  PyObject *bytes = str ? PyUnicode_AsUTF8String(str) : NULL;
  const char *s = bytes ? PyBytes_AsString(bytes) : NULL;
  snprintf(buf, size, "%s", s ? s : "?");
  Py_XDECREF(bytes);
  Py_XDECREF(str);
  PyErr_Clear();
  return buf;
}

const char *bind_type_name(PyObject *obj, char *buf, size_t size) {
  PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__name__");
  bind_text_of(name, buf, size);
  Py_XDECREF(name);
  return buf;
}

int bind_add_errors(PyObject *module, const char *package) {
  char qual[256];
  snprintf(qual, sizeof qual, "%s.CudaError", package);
  cuda_error = PyErr_NewExceptionWithDoc(qual, "A CUDA driver error, or no usable GPU or driver.", PyExc_RuntimeError,
                                         NULL);
  if (cuda_error == NULL) return -1;
  Py_INCREF(cuda_error);
  if (PyModule_AddObject(module, "CudaError", cuda_error) < 0) return -1;
  snprintf(qual, sizeof qual, "%s.MissingVariant", package);
  bind_missing_error = PyErr_NewExceptionWithDoc(
      qual, "A call in Triton's launch syntax that no built variant matches exactly (its config and class).",
      PyExc_LookupError, NULL);
  if (bind_missing_error == NULL) return -1;
  Py_INCREF(bind_missing_error);
  return PyModule_AddObject(module, "MissingVariant", bind_missing_error) < 0 ? -1 : 0;
}

PyObject *bind_raise(const aot_error *err) {
  PyObject *type = err->status == AOT_E_TYPE      ? PyExc_TypeError
                   : err->status == AOT_E_VALUE   ? PyExc_ValueError
                   : err->status == AOT_E_MISSING ? bind_missing_error
                                                  : cuda_error;
  PyErr_SetString(type, err->message);
  return NULL;
}
