/* Launching a chosen variant: grid, block and shared memory checked, parameters packed, scratch allocated,
 * tensor descriptors encoded, then cuLaunchKernel. See aot_runtime.h. */
#include "aot_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- what a launch needs beyond grid and block */

static int missing_entry(aot_error *err, const char *symbol, const aot_variant *var) {
  return aot_fail(err, AOT_E_CUDA, "%s needs %s, which this NVIDIA driver (CUDA %d.%d) lacks; update the driver",
                  var->id, symbol, rt_driver_version / 1000, rt_driver_version % 1000 / 10);
}

/* Global scratch comes from a memory pool of aotpack's own per device, allocated and freed in stream
 * order around each launch that needs it: reuse across streams is the pool's business (it orders
 * it), and under graph capture the allocation becomes a node the graph owns, so a replay never
 * shares it with eager calls or other graphs. The pool keeps what it has (release threshold:
 * unlimited), so after the first calls an allocation is a cheap bookkeeping step. */
static void *scratch_pool(device_state *d, int ordinal, const aot_variant *var, aot_error *err) {
  void *pool = atomic_load_explicit(&d->scratch_pool, memory_order_acquire);
  if (pool != NULL) return pool;
  if (rt_cu.MemPoolCreate == NULL || rt_cu.MemPoolSetAttribute == NULL || rt_cu.MemPoolDestroy == NULL ||
      rt_cu.MemAllocFromPoolAsync == NULL || rt_cu.MemFreeAsync == NULL) {
    missing_entry(err, "the stream-ordered allocator (cuMemPoolCreate)", var);
    return NULL;
  }
  pthread_mutex_lock(&rt_load_lock);
  pool = atomic_load_explicit(&d->scratch_pool, memory_order_relaxed);
  if (pool == NULL) {
    cu_mem_pool_props props;
    memset(&props, 0, sizeof props);
    props.alloc_type = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location_type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location_id = ordinal;
    uint64_t keep_all = UINT64_MAX;
    int rc = rt_cu.MemPoolCreate(&pool, &props);
    if (rc == CUDA_SUCCESS) {
      rc = rt_cu.MemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all);
      /* not kept: an empty pool, never used; the error worth reporting is the attribute's, not the destroy's */
      if (rc != CUDA_SUCCESS) (void)rt_cu.MemPoolDestroy(pool);
    }
    if (rc != CUDA_SUCCESS) {
      char what[192];
      snprintf(what, sizeof what, "creating a scratch memory pool on device %d (%s)", ordinal, d->name);
      rt_cu_fail(err, rc, what);
      pool = NULL;
    } else {
      atomic_store_explicit(&d->scratch_pool, pool, memory_order_release);
    }
  }
  pthread_mutex_unlock(&rt_load_lock);
  return pool;
}

/* Encode a tensor descriptor over the whole tensor (of the descriptor's rank, last dimension
 * contiguous: push_descriptor checked), with the box, swizzle and element type the compiler chose.
 * Checks what else TMA requires first, naming the argument. */
static int encode_tma(const aot_variant *var, const aot_tma *m, const aot_param *prm, const aot_tensor *t,
                      cu_tensor_map *map, aot_error *err) {
  if (rt_cu.TensorMapEncodeTiled == NULL) return missing_entry(err, "cuTensorMapEncodeTiled", var);
  int rank = m->rank;
  uint64_t dims[5], strides[5];
  uint32_t box[5], element_strides[5] = {1, 1, 1, 1, 1};
  int64_t last_byte = 0; /* the offset of the last element's first byte */
  if (t->ptr % 16 != 0)
    return aot_fail(err, AOT_E_VALUE, "argument %s: a tensor descriptor needs a 16-byte aligned address, got 0x%" PRIx64,
                    prm->name, t->ptr);
  for (int d = 0; d < rank; d++) {
    int64_t size = t->shape[d], stride = t->strides[d], stride_bytes, reach;
    if (size < 1)
      return aot_fail(err, AOT_E_VALUE, "argument %s: a tensor descriptor needs sizes from 1 to 2^31-1, got %" PRId64
                      " in dimension %d", prm->name, size, d);
    if (__builtin_mul_overflow(stride, (int64_t)m->elem_size, &stride_bytes) ||
        __builtin_mul_overflow(size - 1, stride_bytes, &reach) || __builtin_add_overflow(last_byte, reach, &last_byte))
      return aot_fail(err, AOT_E_VALUE, "argument %s: its shape and strides span more than 64-bit sizes in bytes "
                      "(stride %" PRId64 " of dimension %d, %d-byte elements)", prm->name, stride, d, m->elem_size);
    if (d < rank - 1 && stride_bytes % 16 != 0)
      return aot_fail(err, AOT_E_VALUE, "argument %s: a tensor descriptor needs strides of a multiple of 16 bytes; "
                      "stride %" PRId64 " of dimension %d is %" PRId64 " bytes", prm->name, stride, d, stride_bytes);
    dims[rank - 1 - d] = (uint64_t)size;
    if (d < rank - 1) strides[rank - 2 - d] = (uint64_t)stride_bytes;
    box[rank - 1 - d] = m->box[d];
  }
  int rc = rt_cu.TensorMapEncodeTiled(map, m->elem_type, (unsigned)rank, (void *)(uintptr_t)t->ptr, dims, strides, box,
                                      element_strides, 0, m->swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, 0);
  if (rc != CUDA_SUCCESS) {
    char what[128];
    snprintf(what, sizeof what, "encoding the tensor descriptor of argument %s (cuTensorMapEncodeTiled)", prm->name);
    return rt_cu_fail(err, rc, what);
  }
  /* Drivers up to CUDA 13.1 set a flag in descriptors of tensors smaller than 128 KiB that makes
   * loads go wrong; CUTLASS and Triton clear it (bit 21 of the second word) the same way. */
  if (rt_driver_version <= 13010 && last_byte <= 128 * 1024 - m->elem_size) {
    uint64_t word;
    memcpy(&word, map->bytes + 8, sizeof word);
    word &= ~(UINT64_C(1) << 21);
    memcpy(map->bytes + 8, &word, sizeof word);
  }
  return 0;
}

/* x rounded up to a multiple of align (0 or 1: x itself) into *out; nonzero when that passes size_t. */
static int round_up(size_t x, size_t align, size_t *out) {
  if (align <= 1) return *out = x, 0;
  if (__builtin_add_overflow(x, align - 1, out)) return 1;
  *out = *out / align * align;
  return 0;
}

/* The kernel's parameter values, copied into one aligned buffer, and the driver's pointer list. */
enum { MAX_PARAMS = 4 * AOT_MAX_ARGS + 3 };
typedef struct {
  _Alignas(64) unsigned char bytes[8192];
  size_t used;
  void *params[MAX_PARAMS];
  int n;
} param_pack;

static int push(param_pack *p, const void *value, size_t size, size_t align, aot_error *err) {
  size_t at;
  if (round_up(p->used, align, &at) || at + size > sizeof p->bytes || p->n + 1 >= MAX_PARAMS) /* at, size < 9 KB */
    return aot_fail(err, AOT_E_VALUE, "the kernel's parameters exceed what aotpack can pass (%d values, %zu bytes)",
                    MAX_PARAMS, sizeof p->bytes);
  memset(p->bytes + p->used, 0, at - p->used); /* no stray bytes in padding */
  memcpy(p->bytes + at, value, size);
  p->params[p->n++] = p->bytes + at;
  p->used = at + size;
  return 0;
}

static int push_dims(param_pack *p, const aot_tensor *t, int rank, int shape_i32, aot_error *err) {
  int rc = 0;
  for (int d = 0; d < rank && rc == 0; d++) {
    int32_t small = (int32_t)t->shape[d];
    rc = shape_i32 ? push(p, &small, 4, 4, err) : push(p, &t->shape[d], 8, 8, err);
  }
  for (int d = 0; d < rank && rc == 0; d++) rc = push(p, &t->strides[d], 8, 8, err);
  return rc;
}

/* A descriptor argument: with TMA, the encoded map, then the shape (i32) and strides (i64); without,
 * as Triton decomposes it: the pointer, shape and strides (i64), two flags (no NaN padding, no tf32
 * rounding), then the shape (i32) and strides again. */
static int push_descriptor(param_pack *p, const aot_variant *var, const aot_tma *m, const aot_param *prm,
                           const aot_tensor *t, aot_error *err) {
  static const uint8_t no = 0;
  int rank = prm->desc_rank;
  if (t->ndim != rank)
    return aot_fail(err, AOT_E_VALUE,
                    t->ndim < 0 ? "argument %s: a tensor descriptor is built from the tensor's shape and strides; "
                                  "pass a tensor of %d dimensions, not a raw pointer"
                                : "argument %s: expected a tensor of %d dimensions, got %d",
                    prm->name, rank, t->ndim);
  if (t->strides[rank - 1] != 1)
    return aot_fail(err, AOT_E_VALUE, "argument %s: a tensor descriptor needs its last dimension contiguous "
                    "(stride 1), got stride %" PRId64 "; call .contiguous() on it", prm->name, t->strides[rank - 1]);
  for (int d = 0; d < rank; d++) /* the kernel reads the sizes as i32 */
    if (t->shape[d] > INT32_MAX)
      return aot_fail(err, AOT_E_VALUE, "argument %s: a tensor descriptor needs sizes up to 2^31-1, got %" PRId64
                      " in dimension %d", prm->name, t->shape[d], d);
  if (m != NULL) {
    cu_tensor_map map;
    if (encode_tma(var, m, prm, t, &map, err) != 0 || push(p, &map, sizeof map, 64, err) != 0) return -1;
    return push_dims(p, t, rank, 1, err);
  }
  if (push(p, &t->ptr, 8, 8, err) != 0 || push_dims(p, t, rank, 0, err) != 0 || push(p, &no, 1, 1, err) != 0 ||
      push(p, &no, 1, 1, err) != 0)
    return -1;
  return push_dims(p, t, rank, 1, err);
}

/* The call's arguments (Triton's trailing scratch pointers are pushed once allocated). */
static int pack_args(const aot_kernel *k, const aot_call *call, const aot_variant *var, param_pack *p,
                     aot_error *err) {
  p->used = 0, p->n = 0;
  int desc = 0, rc = 0;
  for (int i = 0; i < k->nparams && rc == 0; i++) {
    const aot_param *prm = &k->params[i];
    if (prm->launch_only || (var->folded >> i & 1)) continue; /* not a parameter of this code */
    if (prm->desc_rank) {
      rc = push_descriptor(p, var, var->tma ? &var->tma[desc++] : NULL, prm, &call->t[i], err);
      continue;
    }
    float f32 = (float)call->f[i];
    uint32_t f32_bits;
    memcpy(&f32_bits, &f32, sizeof f32_bits);
    int32_t i32 = (int32_t)call->i[i];
    /* as Triton's launcher packs them: fp16 rounded to nearest even, bf16 the float truncated, booleans
     * in 32 bits */
    uint16_t half = (uint16_t)(prm->kind == AOT_ARG_F16 ? aot_f16_bits(call->f[i]) : (int32_t)(f32_bits >> 16));
    switch (prm->kind) {
    case AOT_ARG_PTR: rc = push(p, &call->t[i].ptr, 8, 8, err); break;
    case AOT_ARG_F16: case AOT_ARG_BF16: rc = push(p, &half, 2, 2, err); break;
    case AOT_ARG_F32: rc = push(p, &f32, 4, 4, err); break;
    case AOT_ARG_F64: rc = push(p, &call->f[i], 8, 8, err); break;
    case AOT_ARG_I32: case AOT_ARG_U32: case AOT_ARG_BOOL: rc = push(p, &i32, 4, 4, err); break;
    default: rc = push(p, &call->i[i], 8, 8, err); break;
    }
  }
  return rc;
}

/* Launch on `blocks` (a cluster of num_ctas blocks along x counts num_ctas there). */
static int launch_ex(const aot_variant *var, CUfunction fn, const int64_t blocks[3], const int64_t block[3],
                     int64_t shared, aot_stream stream, void **params, aot_error *err) {
  if (var->num_ctas == 1 && !var->cooperative && !var->pdl)
    return rt_cu.LaunchKernel(fn, (unsigned)blocks[0], (unsigned)blocks[1], (unsigned)blocks[2], (unsigned)block[0],
                              (unsigned)block[1], (unsigned)block[2], (unsigned)shared, stream, params, NULL);
  if (rt_cu.LaunchKernelEx == NULL) return missing_entry(err, "cuLaunchKernelEx", var);
  cu_launch_attribute attrs[4];
  memset(attrs, 0, sizeof attrs);
  unsigned n = 0;
  if (var->num_ctas > 1) { /* a cluster of num_ctas blocks along x */
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.cluster.x = var->num_ctas, attrs[n].value.cluster.y = 1, attrs[n++].value.cluster.z = 1;
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
    attrs[n++].value.flag = CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
  }
  if (var->cooperative) attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, attrs[n++].value.flag = 1;
  if (var->pdl) attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, attrs[n++].value.flag = 1;
  cu_launch_config config = {
      {(unsigned)blocks[0], (unsigned)blocks[1], (unsigned)blocks[2]},
      {(unsigned)block[0], (unsigned)block[1], (unsigned)block[2]},
      (unsigned)shared, stream, attrs, n};
  return rt_cu.LaunchKernelEx(&config, fn, params, NULL);
}

/* A launch's global scratch, global then the profiler's: bytes per program times programs (each block of
 * a cluster is one), each part at its alignment, plus room to align the base. Nonzero when a size passes
 * size_t (a grid no memory could serve). */
typedef struct {
  size_t profile_at, bytes, align, alloc;
} scratch_plan;

static int plan_scratch(const aot_variant *var, const int64_t blocks[3], scratch_plan *s) {
  size_t programs, global, profile;
  s->align = var->scratch[1] > var->profile_scratch[1] ? var->scratch[1] : var->profile_scratch[1];
  return __builtin_mul_overflow((size_t)blocks[0], (size_t)blocks[1], &programs) ||
         __builtin_mul_overflow(programs, (size_t)blocks[2], &programs) ||
         __builtin_mul_overflow(programs, (size_t)var->scratch[0], &global) ||
         round_up(global, var->profile_scratch[1], &s->profile_at) ||
         __builtin_mul_overflow(programs, (size_t)var->profile_scratch[0], &profile) ||
         __builtin_add_overflow(s->profile_at, profile, &s->bytes) ||
         __builtin_add_overflow(s->bytes, s->align, &s->alloc);
}

/* Check a launch's sizes against CUDA's limits: the grid (blocks, counting each block of a cluster, into
 * `blocks`), the block's threads and the dynamic shared memory. 1: Triton's syntax with an empty grid
 * (nothing to launch), 0, or -1 and err. Every product is checked: one past int64 is past a limit. */
static int check_launch(const aot_kernel *k, aot_call *call, const aot_variant *var, const device_state *d,
                        const int64_t grid[3], const int64_t block[3], int64_t shared, int64_t blocks[3]) {
  static const int64_t limit[3] = {INT32_MAX, 65535, 65535};
  const char *syntax = call->launch_config > 0 ? "[grid](...)" : "()";
  for (int i = 0; i < 3; i++) {
    if (grid[i] == 0 && call->launch_config > 0) return 1;
    if (grid[i] <= 0 && call->launch_config > 0)
      return aot_fail(call->err, AOT_E_VALUE, "%s[grid](...): grid dimension %d is %" PRId64, k->name, i, grid[i]);
    if (grid[i] <= 0)
      return aot_fail(call->err, AOT_E_VALUE, "%s(): grid dimension %d, %s, is %" PRId64 " for this call: nothing "
                      "would run; check the arguments (an empty input?)", k->name, i, k->grid_exprs[i], grid[i]);
    int cluster = i == 0 ? var->num_ctas : 1;
    if (__builtin_mul_overflow(grid[i], (int64_t)cluster, &blocks[i]) || blocks[i] > limit[i]) {
      char clusters[48] = "";
      if (cluster > 1) snprintf(clusters, sizeof clusters, " clusters of %d blocks", cluster);
      return aot_fail(call->err, AOT_E_VALUE, "%s%s: grid dimension %d is %" PRId64 "%s, above the CUDA limit of %"
                      PRId64 " blocks; check the arguments", k->name, syntax, i, grid[i], clusters, limit[i]);
    }
  }
  int64_t threads;
  if (block[0] < 1 || block[1] < 1 || block[2] < 1 || __builtin_mul_overflow(block[0], block[1], &threads) ||
      __builtin_mul_overflow(threads, block[2], &threads) || threads > 1024)
    return aot_fail(call->err, AOT_E_VALUE, "%s(): block %" PRId64 "x%" PRId64 "x%" PRId64 " is not 1 to 1024 "
                    "threads; check the arguments", k->name, block[0], block[1], block[2]);
  if (shared < 0 || shared > (int64_t)d->max_shared_optin - var->static_shared) /* small: no overflow */
    return aot_fail(call->err, AOT_E_VALUE, "%s(): %" PRId64 " bytes of dynamic shared memory (beside %u static) is "
                    "over the %d bytes %s allows per block", k->name, shared, var->static_shared, d->max_shared_optin,
                    d->name);
  return 0;
}

int rt_launch_variant(const aot_kernel *k, aot_call *call, int v, int ordinal, device_state *d, aot_stream stream) {
  aot_error *err = call->err;
  const aot_variant *var = &k->variants[v];
  const int64_t *consts = rt_config_consts(k, var->config);
  int64_t grid[3], blocks[3], block[3] = {32 * (int64_t)var->num_warps, 1, 1}, shared = var->shared;
  if (call->launch_config > 0) memcpy(grid, call->grid, sizeof grid); /* Triton's launch syntax: the caller's */
  else k->grid(call, consts, grid);
  if (k->block != NULL) k->block(call, consts, block);
  if (k->shared != NULL) k->shared(call, consts, &shared);
  if (err->status != AOT_OK) return -1;
  int checked = check_launch(k, call, var, d, grid, block, shared, blocks);
  if (checked != 0) return checked > 0 ? 0 : -1; /* Triton's syntax: an empty grid launches nothing */
  scratch_plan scratch_at = {0, 0, 0, 0};
  if ((var->scratch[0] || var->profile_scratch[0]) && plan_scratch(var, blocks, &scratch_at) != 0)
    return aot_fail(err, AOT_E_VALUE, "%s(): %s needs %u + %u bytes of scratch memory per block, for %" PRId64 "x%"
                    PRId64 "x%" PRId64 " blocks: more than 64-bit sizes hold; check the arguments (the grid)", k->name,
                    var->id, var->scratch[0], var->profile_scratch[0], blocks[0], blocks[1], blocks[2]);
  CUfunction fn = rt_function(k, v, ordinal, d, err);
  param_pack pack;
  if (fn == NULL || pack_args(k, call, var, &pack, err) != 0) return -1;

  CUcontext current = NULL, popped;
  int rc = rt_cu.CtxGetCurrent(&current);
  if (rc != CUDA_SUCCESS) return rt_cu_fail(err, rc, "reading the calling thread's context (cuCtxGetCurrent)");
  int pushed = current != d->context;
  if (pushed && (rc = rt_cu.CtxPushCurrent(d->context)) != CUDA_SUCCESS)
    return rt_cu_fail(err, rc, "making the device's context current");
  CUdeviceptr base = 0, scratch = 0, profile = 0;
  int status = 0;
  if (scratch_at.bytes > 0) {
    void *pool = scratch_pool(d, ordinal, var, err);
    if (pool == NULL) {
      status = -1;
    } else if ((rc = rt_cu.MemAllocFromPoolAsync(&base, scratch_at.alloc, pool, stream)) != CUDA_SUCCESS) {
      char what[128];
      snprintf(what, sizeof what, "allocating %zu bytes of scratch memory for %s", scratch_at.alloc, var->id);
      status = rt_cu_fail(err, rc, what);
    } else {
      size_t aligned;
      (void)round_up(base, scratch_at.align, &aligned); /* inside the allocation (align bytes past base): no wrap */
      scratch = var->scratch[0] ? aligned : 0;
      profile = var->profile_scratch[0] ? aligned + scratch_at.profile_at : 0;
    }
  }
  /* Triton's trailing scratch pointers: global, then profile (null when the variant needs none) */
  CUdeviceptr extra[2] = {scratch, profile};
  for (int e = 0; e < var->extra_ptrs && status == 0; e++) status = push(&pack, &extra[e], 8, 8, err);
  pack.params[pack.n] = NULL; /* the driver reads the kernel's count; tools that walk the list need the end */
  if (status == 0 && (rc = launch_ex(var, fn, blocks, block, shared, stream, pack.params, err)) != CUDA_SUCCESS) {
    char what[512];
    snprintf(what, sizeof what, "launching %s on device %d", var->id, ordinal);
    status = err->status != AOT_OK ? -1 : rt_cu_fail(err, rc, what);
  }
  /* freed after the kernel, in stream order; a failure after a launch (a fault of the kernel, typically) is
   * reported, as is one restoring the caller's context, unless an earlier error is */
  if (base != 0 && (rc = rt_cu.MemFreeAsync(base, stream)) != CUDA_SUCCESS && status == 0)
    status = rt_cu_fail(err, rc, "freeing scratch memory after the launch (cuMemFreeAsync)");
  if (pushed && (rc = rt_cu.CtxPopCurrent(&popped)) != CUDA_SUCCESS && status == 0)
    status = rt_cu_fail(err, rc, "restoring the caller's context (cuCtxPopCurrent)");
  return status;
}
