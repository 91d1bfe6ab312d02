/* The extension module's own objects and functions beside the calls: its setup, the kernel type, runtime
 * autotuning's memo, class misses, kernel images. The top of the binding: it calls the others, none calls it.
 * See aot_python.h. */
#include "aot_py_internal.h"

#include <stdio.h>
#include <string.h>

PyObject *aot_py_autotune(PyObject *module, PyObject *args) {
  (void)module;
  int mode;
  if (!PyArg_ParseTuple(args, "i", &mode)) return NULL;
  if (mode < AOT_TUNE_OFF || mode > AOT_TUNE_KEY) return PyErr_Format(PyExc_ValueError, "no tuning mode %d", mode);
  aot_autotune_enable(mode);
  Py_RETURN_NONE;
}

static const aot_kernel *kernel_named(const char *name) {
  for (int i = 0; i < aot_num_kernels; i++)
    if (strcmp(aot_all_kernels[i]->name, name) == 0) return aot_all_kernels[i];
  PyErr_Format(PyExc_ValueError, "no kernel %s", name);
  return NULL;
}

/* ---------------------------------------------------------------- the kernel object */

/* The base of a package's kernel objects (_aotpack_runtime.py's Kernel adds the Python side): calling one goes
 * from the interpreter straight to aot_py_call, with no __call__ looked up and no function in between. */
typedef struct {
  PyObject_HEAD
  const aot_kernel *k;
} kernel_object;

static PyObject *kernel_new(PyTypeObject *cls, PyObject *args, PyObject *kwargs) {
  const char *name;
  if (kwargs != NULL) return PyErr_Format(PyExc_TypeError, "_Kernel(name) takes no keyword arguments");
  if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
  const aot_kernel *k = kernel_named(name);
  allocfunc alloc = (allocfunc)PyType_GetSlot(cls, Py_tp_alloc);
  kernel_object *self = k && alloc ? (kernel_object *)alloc(cls, 0) : NULL;
  if (self != NULL) self->k = k;
  return (PyObject *)self;
}

static PyObject *kernel_call(PyObject *self, PyObject *args, PyObject *kwargs) {
  return aot_py_call(((kernel_object *)self)->k, args, kwargs);
}

static void kernel_dealloc(PyObject *self) {
  PyTypeObject *type = Py_TYPE(self); /* a heap type: its instances hold a reference to it */
  ((freefunc)PyType_GetSlot(type, Py_tp_free))(self);
  Py_DECREF(type);
}

static int add_kernel_type(PyObject *module, const char *package) {
  static char name[256];
  snprintf(name, sizeof name, "%s._native._Kernel", package);
  static PyType_Slot slots[] = {
      {Py_tp_new, (void *)kernel_new},
      {Py_tp_call, (void *)kernel_call},
      {Py_tp_dealloc, (void *)kernel_dealloc},
      {Py_tp_doc, (void *)"_Kernel(name): calling it launches the kernel `name` (the base of the kernel objects)."},
      {0, NULL},
  };
  static PyType_Spec spec = {name, sizeof(kernel_object), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, slots};
  PyObject *type = PyType_FromSpec(&spec);
  if (type == NULL || PyModule_AddObject(module, "_Kernel", type) < 0) {
    Py_XDECREF(type);
    return -1;
  }
  return 0;
}

int aot_py_init(PyObject *module) {
  PyObject *name = PyObject_GetAttrString(module, "__name__");
  if (name == NULL) return -1;
  char package[256];
  bind_text_of(name, package, sizeof package - 16); /* room for the longest name made of it */
  Py_DECREF(name);
  char *native = strstr(package, "._native"); /* the errors belong to the package, not its extension */
  if (native != NULL) *native = '\0';
  if (bind_add_errors(module, package) < 0 || add_kernel_type(module, package) < 0) return -1;
  return bind_args_init();
}

PyObject *aot_py_memo(PyObject *module, PyObject *args) {
  (void)module;
  const char *name;
  if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
  const aot_kernel *k = kernel_named(name);
  PyObject *out = k ? PyList_New(0) : NULL;
  aot_tuned t;
  for (int i = 0; out != NULL && aot_memo_get(k, i, &t) == 0; i++) {
    PyObject *key = PyTuple_New(k->nkey);
    for (int d = 0; key != NULL && d < k->nkey; d++) PyTuple_SetItem(key, d, PyLong_FromLongLong(t.key[d]));
    PyObject *row = key ? Py_BuildValue("(sisNs)", k->targets[t.target].id, t.binding, k->spec_names[t.spec], key,
                                        k->config_labels[t.config])
                        : NULL;
    if (row == NULL || PyList_Append(out, row) < 0) Py_CLEAR(out);
    Py_XDECREF(row);
  }
  return out;
}

PyObject *aot_py_memo_put(PyObject *module, PyObject *args) {
  (void)module;
  const char *name, *target, *config, *spec;
  PyObject *key_obj;
  aot_tuned t;
  aot_error err = {AOT_OK, ""};
  if (!PyArg_ParseTuple(args, "ssisOs", &name, &target, &t.binding, &spec, &key_obj, &config)) return NULL;
  const aot_kernel *k = kernel_named(name);
  if (k == NULL) return NULL;
  t.target = t.config = t.spec = -1;
  for (int i = 0; i < k->nspecs; i++)
    if (strcmp(k->spec_names[i], spec) == 0) t.spec = i;
  for (int i = 0; i < k->ntargets; i++)
    if (strcmp(k->targets[i].id, target) == 0) t.target = i;
  for (int i = 0; i < k->nconfigs; i++)
    if (strcmp(k->config_labels[i], config) == 0) t.config = i;
  if (t.target < 0 || t.config < 0 || t.spec < 0 || t.binding < 0 || t.binding >= k->nbindings)
    return PyErr_Format(PyExc_ValueError, "%s: no target %s, config %s or class %s (a cache from another build?)",
                        name, target, config, spec);
  if (bind_int_tuple(key_obj, t.key, AOT_MAX_KEY, "key", "values", &err) != k->nkey) {
    PyErr_Format(PyExc_ValueError, "%s: expected %d key values", name, k->nkey);
    return NULL;
  }
  if (aot_memo_put(k, &t) != 0) return PyErr_NoMemory();
  Py_RETURN_NONE;
}

PyObject *aot_py_misses(PyObject *module, PyObject *args) {
  (void)module;
  const char *name;
  if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
  const aot_kernel *k = kernel_named(name);
  if (k == NULL) return NULL;
  int spec;
  char jit[AOT_MAX_ARGS + 1];
  uint64_t calls, lost;
  aot_miss_get(k, -1, &spec, jit, &calls, &lost);
  PyObject *rows = PyList_New(0);
  for (int i = 0; rows != NULL && aot_miss_get(k, i, &spec, jit, &calls, NULL) == 0; i++) {
    if (calls == 0) continue; /* seen by select() only */
    PyObject *row = Py_BuildValue("(ssK)", k->spec_names[spec], jit, (unsigned long long)calls);
    if (row == NULL || PyList_Append(rows, row) < 0) Py_CLEAR(rows);
    Py_XDECREF(row);
  }
  return rows == NULL ? NULL : Py_BuildValue("(NK)", rows, (unsigned long long)lost);
}

PyObject *aot_py_warn_misses(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *category;
  if (!PyArg_ParseTuple(args, "O", &category)) return NULL;
  PyObject *old = bind_miss_warning;
  if (category != Py_None) Py_INCREF(category);
  bind_miss_warning = category == Py_None ? NULL : category;
  Py_XDECREF(old);
  Py_RETURN_NONE;
}

PyObject *aot_py_image(PyObject *module, PyObject *args) {
  (void)module;
  const char *name, *id;
  if (!PyArg_ParseTuple(args, "ss", &name, &id)) return NULL;
  const aot_kernel *k = kernel_named(name);
  if (k == NULL) return NULL;
  aot_error err = {AOT_OK, ""};
  int v = aot_find_variant(k, id, &err);
  if (v < 0) return bind_raise(&err);
  const aot_variant *var = &k->variants[v];
  PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)var->raw_size); /* room for the NUL too */
  if (out != NULL && aot_unpack(var, (unsigned char *)PyBytes_AsString(out), &err) != 0) {
    Py_DECREF(out);
    return bind_raise(&err);
  }
  return out;
}
