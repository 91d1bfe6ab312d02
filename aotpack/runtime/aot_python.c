/* The binding's entry points for calls (aot_python.h): a Python call parsed (aot_py_args.c) into an aot_call
 * and launched or selected by the runtime, its failure raised (aot_py_errors.c). */
#include "aot_py_internal.h"

/* A call's positional arguments as an array (borrowed), or -1 with a TypeError when there are too many. */
static Py_ssize_t positional(const aot_kernel *k, PyObject *args, PyObject **out) {
  Py_ssize_t n = PyTuple_Size(args);
  if (n > k->nparams) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)", k->name, k->nparams, n);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) out[i] = PyTuple_GetItem(args, i);
  return n;
}

/* The first call of a class miss, warned when the package asked for it. */
static int warn_miss(const aot_kernel *k, const aot_call *call) {
  int spec;
  char jit[AOT_MAX_ARGS + 1];
  uint64_t calls;
  if (bind_miss_warning == NULL || aot_miss_get(k, call->new_miss - 1, &spec, jit, &calls, NULL) != 0) return 0;
  return PyErr_WarnFormat(bind_miss_warning, 1,
                          "%s.%s: a call ran class %s where Triton's JIT would compile class %s; add it to the "
                          "recipe (kernels.%s.classes: [%s]) and rebuild, or let `aotpack record -o RECIPE -- "
                          "PROGRAM` add every class miss (%s.stats() lists them)",
                          k->package, k->name, k->spec_names[spec], jit, k->name, jit, k->package);
}

/* Start a call of k and parse its Python arguments into it: the device, with *stream, *forced and *plan set,
 * or -1 with a Python exception set (err's, when parsing failed in the runtime's terms). */
static int start_call(const aot_kernel *k, PyObject *args, PyObject *kwargs, aot_call *call, aot_error *err,
                      uint64_t *stream, int *forced, bind_plan *plan) {
  aot_call_start(call, k, err);
  PyObject *pos[AOT_MAX_ARGS];
  Py_ssize_t npos = positional(k, args, pos);
  if (npos < 0) return -1;
  int device = bind_parse(k, pos, npos, kwargs, call, stream, forced, plan);
  if (device < 0 && !PyErr_Occurred()) bind_raise(err);
  return device;
}

PyObject *aot_py_call(const aot_kernel *k, PyObject *args, PyObject *kwargs) {
  aot_error err = {AOT_OK, ""};
  aot_call call;
  uint64_t stream;
  int forced;
  bind_plan plan;
  int device = start_call(k, args, kwargs, &call, &err, &stream, &forced, &plan);
  if (device < 0) return NULL;
  if (plan.capability > 0)
    return PyErr_Format(PyExc_TypeError, "%s(): target= and sms= plan a select() for a GPU that need not be here; "
                        "a launch runs on the GPU its arguments are on", k->name);
  /* The GIL stays held: a launch takes microseconds, and the first call's module load never waits
   * for Python, so holding it cannot deadlock and saves a release/acquire on every call. */
  if (aot_launch(k, &call, device, (aot_stream)(uintptr_t)stream, forced) != 0) return bind_raise(&err);
  if (call.new_miss && warn_miss(k, &call) < 0) return NULL;
  Py_RETURN_NONE;
}

/* select() by key values (the package's Python fills them from names): (key, binding, device[, target, sms]) */
PyObject *aot_py_choose(const aot_kernel *k, PyObject *args) {
  aot_error err = {AOT_OK, ""};
  PyObject *key_obj, *target = Py_None, *sms = Py_None;
  int binding, device;
  if (!PyArg_ParseTuple(args, "Oii|OO", &key_obj, &binding, &device, &target, &sms)) return NULL;
  int64_t key[AOT_MAX_KEY];
  int n = bind_int_tuple(key_obj, key, AOT_MAX_KEY, "key", "values", &err);
  if (n < 0) return bind_raise(&err);
  if (n != k->nkey) return PyErr_Format(PyExc_TypeError, "%s.select(): expected %d key values, got %d", k->name,
                                        k->nkey, n);
  bind_plan plan = {0, 0};
  if (sms != Py_None && target == Py_None)
    return PyErr_Format(PyExc_TypeError, "%s.select(): sms= only with target= (a GPU that need not be here)",
                        k->name);
  if (target != Py_None && bind_planned(k, target, sms, &plan, &err) < 0) return bind_raise(&err);
  int v = plan.capability > 0 ? aot_choose_key_planned(k, key, binding, plan.capability, plan.sms, &err)
                              : aot_choose_key(k, key, binding, device, &err);
  if (v < 0) return bind_raise(&err);
  return PyUnicode_FromString(k->variants[v].id);
}

PyObject *aot_py_select(const aot_kernel *k, PyObject *args, PyObject *kwargs) {
  aot_error err = {AOT_OK, ""};
  aot_call call;
  uint64_t stream;
  int forced;
  bind_plan plan;
  int device = start_call(k, args, kwargs, &call, &err, &stream, &forced, &plan);
  if (device < 0) return NULL;
  int v = plan.capability > 0 ? aot_select_planned(k, &call, plan.capability, plan.sms, forced)
                              : aot_select(k, &call, device, forced);
  if (v < 0) return bind_raise(&err);
  return PyUnicode_FromString(k->variants[v].id);
}
