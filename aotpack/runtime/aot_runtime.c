/* The runtime's entry points for a call (aot_runtime.h), each a short descent into its parts: dispatch
 * (aot_dispatch.c), autotuning (aot_tune.c), launch (aot_launch.c) on a device (aot_driver.c). */
#include "aot_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int aot_pointer_device(uint64_t ptr, const char *arg, aot_error *err) {
  if (rt_driver(err) != 0) return -1;
  int ordinal = -1, memtype = 0;
  int rc = rt_cu.PointerGetAttribute(&memtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)ptr);
  if (rc == CUDA_SUCCESS)
    rc = rt_cu.PointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)ptr);
  if (rc != CUDA_SUCCESS || memtype == CU_MEMORYTYPE_HOST)
    return aot_fail(err, AOT_E_VALUE, "argument %s: 0x%" PRIx64 " is not a CUDA device pointer (%s)", arg, ptr,
                    rc != CUDA_SUCCESS ? rt_cu_name(rc) : "host memory");
  return ordinal;
}

void aot_set_tensor(aot_call *call, int param, uint64_t ptr, int dtype, int ndim, const int64_t *shape,
                    const int64_t *strides) {
  aot_tensor *t = &call->t[param];
  t->ptr = ptr;
  t->dtype = dtype >= 0 && dtype < aot_num_dtypes ? dtype : -1;
  t->ndim = ndim >= 0 && ndim <= AOT_MAX_DIMS && shape != NULL ? ndim : -1;
  if (ndim > AOT_MAX_DIMS && call->err->status == AOT_OK) /* reported when the call is made */
    aot_fail(call->err, AOT_E_VALUE, "argument %s has %d dimensions; at most %d are supported",
             call->kernel->params[param].name, ndim, AOT_MAX_DIMS);
  int64_t expect = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    t->shape[d] = shape[d];
    t->strides[d] = strides != NULL ? strides[d] : expect;
    expect = aot_sat_mul(expect, shape[d]);
  }
  call->given |= UINT64_C(1) << param;
}

int aot_choose_key(const aot_kernel *k, const int64_t *key, int binding, int ordinal, aot_error *err) {
  device_state *d = rt_device(ordinal, err);
  if (d == NULL) return -1;
  if (binding < 0 || binding >= k->nbindings) return aot_fail(err, AOT_E_VALUE, "%s(): no such types", k->name);
  int target = rt_choose_target(k, d, err);
  return target < 0 ? -1 : rt_variant_for(k, key, target, binding, d, err);
}

/* A GPU that need not be here: its capability and multiprocessors, named as the runtime names devices. */
static void planned_device(device_state *d, int capability, int sms) {
  memset(d, 0, sizeof *d);
  d->capability = capability, d->sms = sms, d->planned = 1;
  snprintf(d->name, sizeof d->name, "a planned sm_%d with %d multiprocessors", capability, sms);
}

int aot_select_planned(const aot_kernel *k, aot_call *call, int capability, int sms, int forced) {
  call->kernel = k;
  device_state d;
  planned_device(&d, capability, sms);
  choice c = {.untuned = 0, .miss = -2};
  return rt_choose(k, call, &d, forced, &c);
}

int aot_choose_key_planned(const aot_kernel *k, const int64_t *key, int binding, int capability, int sms,
                           aot_error *err) {
  if (binding < 0 || binding >= k->nbindings) return aot_fail(err, AOT_E_VALUE, "%s(): no such types", k->name);
  device_state d;
  planned_device(&d, capability, sms);
  int target = rt_choose_target(k, &d, err);
  return target < 0 ? -1 : rt_variant_for(k, key, target, binding, &d, err);
}

int aot_select(const aot_kernel *k, aot_call *call, int device_ordinal, int forced) {
  call->kernel = k;
  device_state *d = rt_device(device_ordinal, call->err);
  choice c = {.untuned = 0, .miss = -2};
  return d == NULL ? -1 : rt_choose(k, call, d, forced, &c);
}

int aot_find_variant(const aot_kernel *k, const char *id, aot_error *err) {
  for (int v = 0; v < k->nvariants; v++)
    if (strcmp(k->variants[v].id, id) == 0) return v;
  return aot_fail(err, AOT_E_VALUE, "%s(): no variant %s; the package's __aotpack__ manifest lists them", k->name,
                  id);
}

int aot_launch(const aot_kernel *k, aot_call *call, int ordinal, aot_stream stream, int forced) {
  call->kernel = k;
  device_state *d = rt_device(ordinal, call->err);
  if (d == NULL) return -1;
  choice c = {.untuned = 0, .miss = -2};
  int v = rt_choose(k, call, d, forced, &c), capturing = 0, rc;
  /* time the configs, unless the stream captures a graph (timing synchronizes the stream, which a capture forbids) */
  if (v >= 0 && c.untuned) {
    if ((rc = rt_cu.StreamIsCapturing(stream, &capturing)) != CUDA_SUCCESS)
      return rt_cu_fail(call->err, rc, "asking whether the stream captures a graph (cuStreamIsCapturing)");
    if (!capturing) v = rt_autotune(k, call, ordinal, d, stream, &c), c.miss = -2;
  }
  if (v < 0) return -1;
  /* the dispatcher chose (was it the JIT's class?), or Triton's launch syntax ran a class other than the JIT's */
  if (forced < 0 && (call->launch_config == 0 || c.miss != -2))
    rt_count_miss(k, call, c.miss == -2 ? rt_class_miss(k, call, v) : c.miss);
  return rt_launch_variant(k, call, v, ordinal, d, stream);
}
