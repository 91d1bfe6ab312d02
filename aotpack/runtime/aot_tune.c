/* Runtime autotuning: the timing of every config, whose winner goes to the memo (aot_memo.c). See
 * aot_runtime.h. */
#include "aot_internal.h"

#include <stdlib.h>

/* What a timing run needs: two events, and a buffer twice the L2 cache whose clearing before each run
 * evicts the inputs, so that every config is timed from memory as in a real call (and as Triton's
 * autotuner times them). */
typedef struct {
  CUevent start, stop;
  CUdeviceptr flush;
  size_t flush_bytes;
} timer;

static int timer_open(timer *t, const device_state *d, aot_error *err) {
  int rc;
  t->flush_bytes = 2 * (size_t)(d->l2_bytes > 0 ? d->l2_bytes : 0);
  if ((rc = rt_cu.EventCreate(&t->start, 0)) != CUDA_SUCCESS || (rc = rt_cu.EventCreate(&t->stop, 0)) != CUDA_SUCCESS)
    return rt_cu_fail(err, rc, "autotune: cuEventCreate");
  if (t->flush_bytes > 0 && (rc = rt_cu.MemAlloc(&t->flush, t->flush_bytes)) != CUDA_SUCCESS)
    return rt_cu_fail(err, rc, "autotune: allocating the buffer that clears the L2 cache (cuMemAlloc)");
  return 0;
}

/* Release what timer_open made; a failure is reported unless the call failed already. */
static void timer_close(timer *t, aot_error *err) {
  int rc[3] = {t->start ? rt_cu.EventDestroy(t->start) : CUDA_SUCCESS,
               t->stop ? rt_cu.EventDestroy(t->stop) : CUDA_SUCCESS, t->flush ? rt_cu.MemFree(t->flush) : CUDA_SUCCESS};
  for (int i = 0; i < 3; i++)
    if (rc[i] != CUDA_SUCCESS && err->status == AOT_OK)
      rt_cu_fail(err, rc[i], "autotune: releasing its events and L2-clearing buffer (cuEventDestroy, cuMemFree)");
}

static int timed_ms(const timer *t, aot_stream stream, float *ms, const aot_kernel *k, aot_call *call, int v,
                    int ordinal, device_state *d) {
  int rc;
  if (t->flush && (rc = rt_cu.MemsetD8Async(t->flush, 0, t->flush_bytes, stream)) != CUDA_SUCCESS)
    return rt_cu_fail(call->err, rc, "autotune: clearing the L2 cache (cuMemsetD8Async)");
  if ((rc = rt_cu.EventRecord(t->start, stream)) != CUDA_SUCCESS)
    return rt_cu_fail(call->err, rc, "autotune: cuEventRecord");
  if (rt_launch_variant(k, call, v, ordinal, d, stream) != 0) return -1;
  if ((rc = rt_cu.EventRecord(t->stop, stream)) != CUDA_SUCCESS ||
      (rc = rt_cu.EventSynchronize(t->stop)) != CUDA_SUCCESS ||
      (rc = rt_cu.EventElapsedTime(ms, t->start, t->stop)) != CUDA_SUCCESS)
    return rt_cu_fail(call->err, rc, "autotune: timing with CUDA events");
  return 0;
}

static int by_time(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* The median time of a variant: 2 warm-ups, then as many runs as fit in about 10 ms of GPU time
 * (at least 5, at most 64). */
static int median_ms(const timer *t, aot_stream stream, float *median, const aot_kernel *k, aot_call *call, int v,
                     int ordinal, device_state *d) {
  enum { WARMUP = 2, MIN_REPS = 5, MAX_REPS = 64 };
  const float budget_ms = 10.0f;
  float times[MAX_REPS], ms = 0;
  for (int rep = 0; rep < WARMUP; rep++)
    if (timed_ms(t, stream, &ms, k, call, v, ordinal, d) != 0) return -1;
  int reps = ms > budget_ms / MAX_REPS ? (int)(budget_ms / ms) : MAX_REPS;
  if (reps < MIN_REPS) reps = MIN_REPS;
  for (int rep = 0; rep < reps; rep++)
    if (timed_ms(t, stream, &times[rep], k, call, v, ordinal, d) != 0) return -1;
  qsort(times, (size_t)reps, sizeof *times, by_time);
  *median = times[reps / 2];
  return 0;
}

/* Time every config and remember the fastest; returns its variant. */
int rt_autotune(const aot_kernel *k, aot_call *call, int ordinal, device_state *d, aot_stream stream, choice *c) {
  CUcontext popped;
  timer t = {0};
  int rc = rt_cu.CtxPushCurrent(d->context);
  if (rc != CUDA_SUCCESS) return rt_cu_fail(call->err, rc, "making the device's context current");
  int best_v = -1, best_config = -1;
  float best_ms = 0;
  if (timer_open(&t, d, call->err) == 0) {
    for (int config = 0; config < k->nconfigs && call->err->status == AOT_OK; config++) {
      if (!rt_config_fits(k, call, config)) continue;
      int v = rt_variant_in_config(k, call, config, c->point.target, c->point.binding, c->point.spec);
      float ms;
      if (v < 0 || median_ms(&t, stream, &ms, k, call, v, ordinal, d) != 0) continue;
      if (best_v < 0 || ms < best_ms) best_v = v, best_config = config, best_ms = ms;
    }
  }
  timer_close(&t, call->err);
  if ((rc = rt_cu.CtxPopCurrent(&popped)) != CUDA_SUCCESS && call->err->status == AOT_OK)
    rt_cu_fail(call->err, rc, "restoring the caller's context (cuCtxPopCurrent)");
  if (call->err->status != AOT_OK) return -1;
  c->point.config = best_config;
  if (best_v >= 0 && aot_memo_put(k, &c->point) != 0) return aot_fail(call->err, AOT_E_CUDA, "out of memory");
  return best_v >= 0 ? best_v : aot_fail(call->err, AOT_E_CUDA, "%s(): autotune found no variant to time", k->name);
}
