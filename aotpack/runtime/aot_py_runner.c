/* Triton's launch syntax (launch: triton kernels): kernel[grid](...), through a runner whose spec the
 * package's Python side makes (aot_python.h describes it). */
#include "aot_py_internal.h"

#include <stdio.h>
#include <string.h>

/* A runner is a builtin bound to (capsule of the kernel, spec); see aot_python.h for the spec. */
enum { SPEC_NAMES, SPEC_RUNTIME, SPEC_DEFAULTS, SPEC_CONFIGS, SPEC_OPTIONS, SPEC_SELECTING, SPEC_PLAIN, SPEC_COMPILED,
       SPEC_FALLBACK, SPEC_LEN };
/* The spec's keys (aot_python.h), by position in the tuple a runner keeps: read by key once, when it is made. */
static const char *const spec_keys[SPEC_LEN] = {"names",    "runtime", "defaults", "configs", "options",
                                                "selecting", "plain",   "compiled", "fallback"};
#define AOT_MAX_PARAMS (2 * AOT_MAX_ARGS) /* runtime arguments and constexprs */

/* A constexpr as the configs hold it: plain Python values as they are, others (tl.constexpr) through
 * the spec's unwrapper. Returns a new reference. */
static PyObject *plain(PyObject *spec, PyObject *value) {
  if (value == Py_None || PyLong_Check(value) || PyFloat_Check(value) || PyUnicode_Check(value)) {
    Py_INCREF(value);
    return value;
  }
  return PyObject_CallFunctionObjArgs(PyTuple_GetItem(spec, SPEC_PLAIN), value, NULL);
}

/* The config index the call's constexprs and options pick, or -1 with MissingVariant set. */
static long pick_config(const aot_kernel *k, PyObject *spec, PyObject *const *values, PyObject *num_warps,
                        PyObject *num_stages) {
  PyObject *names = PyTuple_GetItem(spec, SPEC_NAMES), *runtime = PyTuple_GetItem(spec, SPEC_RUNTIME);
  Py_ssize_t n = PyTuple_Size(names), nconst = 0;
  for (Py_ssize_t i = 0; i < n; i++) nconst += PyTuple_GetItem(runtime, i) == Py_False;
  PyObject *consts = PyTuple_New(nconst);
  for (Py_ssize_t i = 0, c = 0; consts != NULL && i < n; i++) {
    if (PyTuple_GetItem(runtime, i) != Py_False) continue;
    PyObject *v = plain(spec, values[i]);
    if (v == NULL || PyTuple_SetItem(consts, c++, v) < 0) Py_CLEAR(consts);
  }
  PyObject *key = consts ? PyTuple_Pack(3, consts, num_warps, num_stages) : NULL;
  PyObject *found = key ? PyDict_GetItemWithError(PyTuple_GetItem(spec, SPEC_CONFIGS), key) : NULL;
  long config = found ? PyLong_AsLong(found) : -1;
  if (key != NULL && found == NULL && !PyErr_Occurred()) {
    PyObject *shown = PyUnicode_FromString("");
    for (Py_ssize_t i = 0, c = 0; shown != NULL && i < n; i++) {
      if (PyTuple_GetItem(runtime, i) != Py_False) continue;
      PyObject *part = PyUnicode_FromFormat("%U=%R, ", PyTuple_GetItem(names, i), PyTuple_GetItem(consts, c++));
      PyObject *joined = part ? PyUnicode_Concat(shown, part) : NULL;
      Py_XDECREF(part);
      Py_DECREF(shown);
      shown = joined;
    }
    if (shown != NULL)
      PyErr_Format(bind_missing_error,
                   "%s[grid](...): no variant was built for %Unum_warps=%R, num_stages=%R; record a run that makes "
                   "this call",
                   k->name, shown, num_warps, num_stages);
    Py_XDECREF(shown);
  }
  Py_XDECREF(key);
  Py_XDECREF(consts);
  return config;
}

/* Sort the keywords of a call into values[] (by the spec's names), grid, warmup and the options. */
static int run_keywords(const aot_kernel *k, PyObject *spec, PyObject *kwargs, PyObject **values, PyObject **grid,
                        int *warmup, PyObject **num_warps, PyObject **num_stages) {
  PyObject *names = PyTuple_GetItem(spec, SPEC_NAMES), *options = PyTuple_GetItem(spec, SPEC_OPTIONS);
  Py_ssize_t n = PyTuple_Size(names), pos = 0;
  PyObject *key, *value;
  while (kwargs != NULL && PyDict_Next(kwargs, &pos, &key, &value)) {
    if (PyUnicode_CompareWithASCIIString(key, "grid") == 0) {
      *grid = value;
    } else if (PyUnicode_CompareWithASCIIString(key, "warmup") == 0) {
      if ((*warmup = PyObject_IsTrue(value)) < 0) return -1;
    } else if (PyUnicode_CompareWithASCIIString(key, "num_warps") == 0) {
      *num_warps = value;
    } else if (PyUnicode_CompareWithASCIIString(key, "num_stages") == 0) {
      *num_stages = value;
    } else {
      Py_ssize_t i = 0;
      while (i < n && PyUnicode_Compare(key, PyTuple_GetItem(names, i)) != 0) i++;
      if (i < n && values[i] != NULL) {
        PyErr_Format(PyExc_TypeError, "%s[grid]() got multiple values for argument %R", k->name, key);
        return -1;
      }
      if (i < n) {
        values[i] = value;
        continue;
      }
      PyObject *built = PyDict_GetItemWithError(options, key); /* a launch option the variants were built with */
      int same = built != NULL ? PyObject_RichCompareBool(built, value, Py_EQ) : 0;
      if (same < 0 || PyErr_Occurred()) return -1;
      if (same) continue;
      int selecting = PySequence_Contains(PyTuple_GetItem(spec, SPEC_SELECTING), key);
      if (selecting < 0) return -1;
      if (selecting)
        PyErr_Format(bind_missing_error, "%s[grid](...): no variant was built with %U=%R", k->name, key, value);
      else
        PyErr_Format(PyExc_TypeError, "%s[grid]() got an unexpected keyword argument %R", k->name, key);
      return -1;
    }
  }
  if (*grid == NULL) {
    PyErr_Format(PyExc_TypeError, "%s.run() missing the keyword argument 'grid'", k->name);
    return -1;
  }
  return 0;
}

/* An argument of a type no recorded row had (another dtype, a float where an integer ran) is a call no variant
 * was built for, as the JIT sees it (it compiles another signature): MissingVariant, which the fallback takes. */
static PyObject *call_raise(const aot_kernel *k, const aot_error *err) {
  if (err->status != AOT_E_TYPE) return bind_raise(err);
  aot_error missing = {AOT_E_MISSING, ""};
  snprintf(missing.message, sizeof missing.message, "%s[grid](...): %s; record a run that makes this call", k->name,
           err->message);
  return bind_raise(&missing);
}

static PyObject *run_launch(PyObject *self, PyObject *args, PyObject *kwargs) {
  const aot_kernel *k = PyCapsule_GetPointer(PyTuple_GetItem(self, 0), NULL);
  PyObject *spec = PyTuple_GetItem(self, 1);
  if (k == NULL || spec == NULL) return NULL;
  PyObject *names = PyTuple_GetItem(spec, SPEC_NAMES), *runtime = PyTuple_GetItem(spec, SPEC_RUNTIME);
  Py_ssize_t n = PyTuple_Size(names), nargs = PyTuple_Size(args);
  if (n > AOT_MAX_PARAMS)
    return PyErr_Format(PyExc_TypeError, "%s: %zd parameters; at most %d are supported", k->name, n, AOT_MAX_PARAMS);
  if (nargs > n) return PyErr_Format(PyExc_TypeError, "%s[grid]() takes %zd arguments (%zd given)", k->name, n, nargs);
  PyObject *values[AOT_MAX_PARAMS] = {NULL}, *grid = NULL;
  PyObject *num_warps = bind_small_ints[4], *num_stages = bind_small_ints[3]; /* Triton's defaults */
  int warmup = 0;
  for (Py_ssize_t i = 0; i < nargs; i++) values[i] = PyTuple_GetItem(args, i);
  if (run_keywords(k, spec, kwargs, values, &grid, &warmup, &num_warps, &num_stages) < 0) return NULL;
  PyObject *defaults = PyTuple_GetItem(spec, SPEC_DEFAULTS);
  for (Py_ssize_t i = 0; i < n; i++) {
    if (values[i] != NULL) continue;
    values[i] = PyDict_GetItemWithError(defaults, PyTuple_GetItem(names, i));
    if (values[i] == NULL)
      return PyErr_Occurred() ? NULL
                              : PyErr_Format(PyExc_TypeError, "%s[grid]() missing required argument %R", k->name,
                                             PyTuple_GetItem(names, i));
  }
  long config = pick_config(k, spec, values, num_warps, num_stages);
  if (config < 0) return NULL;
  if (config >= k->nconfigs) return PyErr_Format(PyExc_ValueError, "%s: no config %ld", k->name, config);
  PyObject *compiled = PyTuple_GetItem(PyTuple_GetItem(spec, SPEC_COMPILED), config); /* what the JIT's run returns */
  if (compiled == NULL) return NULL; /* (borrowed: the spec holds it) */
  if (warmup) {
    Py_INCREF(compiled);
    return compiled;
  }
  aot_error err = {AOT_OK, ""};
  aot_call call;
  aot_call_start(&call, k, &err);
  int64_t dims[3] = {1, 1, 1};
  PyObject *computed = grid;
  Py_INCREF(computed);
  if (PyCallable_Check(grid)) { /* Triton calls it with the arguments by name, constexprs included */
    PyObject *bound = PyDict_New();
    for (Py_ssize_t i = 0; bound != NULL && i < n; i++)
      if (PyDict_SetItem(bound, PyTuple_GetItem(names, i), values[i]) < 0) Py_CLEAR(bound);
    Py_DECREF(computed);
    computed = bound ? PyObject_CallFunctionObjArgs(grid, bound, NULL) : NULL;
    Py_XDECREF(bound);
    if (computed == NULL) return NULL;
  }
  int got = bind_int_tuple(computed, dims, 3, "grid", "dimensions", &err);
  Py_DECREF(computed);
  if (got < 0) return bind_raise(&err);
  if (got == 0) return PyErr_Format(PyExc_ValueError, "%s[grid]: the grid has no dimensions", k->name);
  PyObject *rest[AOT_MAX_ARGS];
  Py_ssize_t nrest = 0;
  for (Py_ssize_t i = 0; i < n; i++)
    if (PyTuple_GetItem(runtime, i) == Py_True) {
      if (nrest == k->nparams) return PyErr_Format(PyExc_ValueError, "%s: more runtime arguments than built", k->name);
      rest[nrest++] = values[i];
    }
  uint64_t stream;
  int forced;
  bind_plan plan;
  int device = bind_parse(k, rest, nrest, NULL, &call, &stream, &forced, &plan);
  if (device < 0) return PyErr_Occurred() ? NULL : call_raise(k, &err);
  call.launch_config = (int)config + 1;
  memcpy(call.grid, dims, sizeof dims);
  if (aot_launch(k, &call, device, (aot_stream)(uintptr_t)stream, -1) != 0) return call_raise(k, &err);
  Py_INCREF(compiled);
  return compiled;
}

/* The runner: run_launch, and on MissingVariant the spec's fallback (when it has one) with the
 * exception's text and the call as made. */
static PyObject *run(PyObject *self, PyObject *args, PyObject *kwargs) {
  PyObject *done = run_launch(self, args, kwargs);
  PyObject *fallback = PyTuple_GetItem(PyTuple_GetItem(self, 1), SPEC_FALLBACK);
  if (done != NULL || fallback == NULL || fallback == Py_None || !PyErr_ExceptionMatches(bind_missing_error)) return done;
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyObject *message = value ? PyObject_Str(value) : PyUnicode_FromString("no variant");
  PyObject *empty = kwargs == NULL ? PyDict_New() : NULL;
  done = message ? PyObject_CallFunctionObjArgs(fallback, message, args, kwargs ? kwargs : empty, NULL) : NULL;
  Py_XDECREF(empty);
  Py_XDECREF(message);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  return done;
}

static PyMethodDef run_def = {"run", (PyCFunction)(void (*)(void))run, METH_VARARGS | METH_KEYWORDS,
                              "run(*args, grid, warmup=False, num_warps=4, num_stages=3, **constexprs): launch "
                              "in Triton's syntax"};

/* The spec as a runner keeps it: its values in spec_keys' order, each read by key (NULL and an exception where the
 * spec is no dict or lacks one, or has a key no runner reads). */
static PyObject *spec_tuple(const aot_kernel *k, PyObject *spec) {
  if (!PyDict_Check(spec)) return PyErr_Format(PyExc_TypeError, "_runner_%s(spec): expected a dict", k->name);
  if (PyDict_Size(spec) != SPEC_LEN)
    return PyErr_Format(PyExc_TypeError, "_runner_%s(spec): expected the %d keys of aot_python.h, got %zd", k->name,
                        (int)SPEC_LEN, PyDict_Size(spec));
  PyObject *kept = PyTuple_New(SPEC_LEN);
  for (int i = 0; kept != NULL && i < SPEC_LEN; i++) {
    PyObject *value = PyDict_GetItemString(spec, spec_keys[i]); /* (borrowed) */
    if (value == NULL) {
      Py_DECREF(kept);
      return PyErr_Format(PyExc_TypeError, "_runner_%s(spec): no key '%s'", k->name, spec_keys[i]);
    }
    Py_INCREF(value);
    if (PyTuple_SetItem(kept, i, value) < 0) { /* (it drops the value's reference) */
      Py_DECREF(kept);
      return NULL;
    }
  }
  return kept;
}

PyObject *aot_py_runner(const aot_kernel *k, PyObject *spec) {
  PyObject *kept = spec_tuple(k, spec);
  PyObject *capsule = kept ? PyCapsule_New((void *)k, NULL, NULL) : NULL;
  PyObject *self = capsule ? PyTuple_Pack(2, capsule, kept) : NULL;
  Py_XDECREF(capsule);
  Py_XDECREF(kept);
  PyObject *fn = self ? PyCFunction_NewEx(&run_def, self, NULL) : NULL;
  Py_XDECREF(self);
  return fn;
}
