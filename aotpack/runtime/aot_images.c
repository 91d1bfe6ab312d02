/* Kernel images: unpacked (LZ4), checked (CRC-32) and loaded once per device. See aot_runtime.h. */
#include "aot_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An LZ4 length: the 4 bits of the token, and while they (then each added byte) are all ones, one more
 * byte; -1 past the end of the input. */
static int lz4_length(const unsigned char *src, size_t size, size_t *pos, size_t *length) {
  if (*length != 15) return 0;
  unsigned char byte;
  do {
    if (*pos >= size) return -1;
    byte = src[(*pos)++];
    *length += byte;
  } while (byte == 255);
  return 0;
}

int aot_lz4_decode(const unsigned char *src, size_t src_size, unsigned char *dst, size_t want) {
  size_t in = 0, out = 0;
  while (out < want) {
    if (in >= src_size) return -1;
    unsigned char token = src[in++];
    size_t literals = token >> 4, length = token & 15;
    if (lz4_length(src, src_size, &in, &literals) != 0 || literals > src_size - in) return -1;
    size_t take = literals < want - out ? literals : want - out;
    if (take <= 16 && src_size - in >= 16 && want - out >= 16)
      memcpy(dst + out, src + in, 16); /* a short run: one fixed-size copy (the excess is rewritten later) */
    else
      memcpy(dst + out, src + in, take);
    in += literals, out += take;
    if (out == want) break;
    if (src_size - in < 2) return -1; /* the last sequence has no match: the block ended short */
    size_t offset = (size_t)src[in] | (size_t)src[in + 1] << 8;
    in += 2;
    if (offset == 0 || offset > out || lz4_length(src, src_size, &in, &length) != 0) return -1;
    length += 4;
    if (length > want - out) length = want - out;
    unsigned char *to = dst + out, *from = to - offset;
    out += length;
    if (offset >= 8 && want - out >= 8) { /* 8 bytes at a time; each read is written before it is reached */
      for (size_t i = 0; i < length; i += 8) memcpy(to + i, from + i, 8);
    } else {
      for (size_t i = 0; i < length; i++) to[i] = from[i]; /* overlapping copies repeat */
    }
  }
  return 0;
}

/* CRC-32 (zlib's), eight bytes per step ("slicing by 8"); the tables are built once per process. */
static uint32_t crc_tables[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; bit++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_tables[0][i] = c;
  }
  for (int k = 1; k < 8; k++)
    for (int i = 0; i < 256; i++)
      crc_tables[k][i] = (crc_tables[k - 1][i] >> 8) ^ crc_tables[0][crc_tables[k - 1][i] & 0xFF];
}

static uint32_t word(const unsigned char *p) { /* little-endian, whatever the host */
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t crc32(const unsigned char *data, size_t size) {
  pthread_once(&crc_once, crc_init);
  const uint32_t(*t)[256] = (const uint32_t(*)[256])crc_tables;
  uint32_t c = 0xFFFFFFFFu;
  for (; size >= 8; data += 8, size -= 8) {
    uint32_t one = c ^ word(data), two = word(data + 4);
    c = t[7][one & 0xFF] ^ t[6][(one >> 8) & 0xFF] ^ t[5][(one >> 16) & 0xFF] ^ t[4][one >> 24] ^ t[3][two & 0xFF] ^
        t[2][(two >> 8) & 0xFF] ^ t[1][(two >> 16) & 0xFF] ^ t[0][two >> 24];
  }
  for (; size > 0; data++, size--) c = t[0][(c ^ *data) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

int aot_unpack(const aot_variant *var, unsigned char *dst, aot_error *err) {
  const aot_block *block = var->block;
  size_t end = (size_t)var->offset + var->raw_size; /* only the block's bytes up to the image's end */
  unsigned char *raw = end <= block->raw_size ? malloc(end ? end : 1) : NULL;
  int ok = raw != NULL && aot_lz4_decode(block->data, block->size, raw, end) == 0 &&
           crc32(raw + var->offset, var->raw_size) == var->crc32;
  if (ok) memcpy(dst, raw + var->offset, var->raw_size), dst[var->raw_size] = 0;
  free(raw);
  if (ok) return 0;
  return aot_fail(err, AOT_E_CUDA, "%s: its kernel image %s; reinstall the package", var->id,
                  raw == NULL && end <= block->raw_size ? "does not fit in memory" : "is damaged (CRC-32 mismatch)");
}

CUfunction rt_function(const aot_kernel *k, int v, int ordinal, const device_state *d, aot_error *err) {
  void *_Atomic *slot = &k->functions[(size_t)v * AOT_MAX_DEVICES + (size_t)ordinal];
  CUfunction fn = (CUfunction)atomic_load_explicit(slot, memory_order_acquire);
  if (fn != NULL) return fn;
  const aot_variant *var = &k->variants[v];
  if (rt_driver_version < var->min_driver) {
    aot_fail(err, AOT_E_CUDA,
             "the NVIDIA driver supports CUDA %d.%d, but %s needs a driver for CUDA %d.%d or newer; update the "
             "driver",
             rt_driver_version / 1000, rt_driver_version % 1000 / 10, var->id, var->min_driver / 1000,
             var->min_driver % 1000 / 10);
    return NULL;
  }
  int64_t shared = (int64_t)var->shared + var->static_shared; /* two 32-bit sizes: no overflow in 64 bits */
  if (shared > d->max_shared_optin) {
    aot_fail(err, AOT_E_CUDA, "%s needs %" PRId64 " bytes of shared memory; %s allows %d per block", var->id, shared,
             d->name, d->max_shared_optin);
    return NULL;
  }
  /* Opt in to more than 48 KB of dynamic shared memory: the fixed amount (Triton), or all the chip
   * allows beside the static part when the recipe computes it per call (CUDA). */
  int dynamic_max = k->shared != NULL ? d->max_shared_optin - (int)var->static_shared : (int)var->shared;
  pthread_mutex_lock(&rt_load_lock);
  fn = (CUfunction)atomic_load_explicit(slot, memory_order_relaxed);
  if (fn == NULL) {
    CUmodule module = NULL;
    CUcontext popped;
    int rc = rt_cu.CtxPushCurrent(d->context);
    if (rc != CUDA_SUCCESS) {
      rt_cu_fail(err, rc, "making the device's context current");
    } else {
      char what[512];
      unsigned char *image = malloc((size_t)var->raw_size + 1);
      if (image == NULL) {
        aot_fail(err, AOT_E_CUDA, "%s: its kernel image does not fit in memory", var->id);
      } else if (aot_unpack(var, image, err) != 0) {
        /* err says why */
      } else if ((rc = rt_cu.ModuleLoadData(&module, image)) != CUDA_SUCCESS) {
        snprintf(what, sizeof what, "loading %s on device %d (%s)", var->id, ordinal, d->name);
        rt_cu_fail(err, rc, what);
      } else if ((rc = rt_cu.ModuleGetFunction(&fn, module, var->entry)) != CUDA_SUCCESS) {
        snprintf(what, sizeof what, "finding %s in %s", var->entry, var->id);
        rt_cu_fail(err, rc, what);
        fn = NULL;
      } else if (dynamic_max > 48 * 1024 &&
                 (rc = rt_cu.FuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_max)) !=
                     CUDA_SUCCESS) {
        snprintf(what, sizeof what, "allowing %d bytes of shared memory for %s", dynamic_max, var->id);
        rt_cu_fail(err, rc, what);
        fn = NULL;
      } else if (var->num_ctas > 8 &&
                 (rc = rt_cu.FuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)) !=
                     CUDA_SUCCESS) {
        snprintf(what, sizeof what, "allowing clusters of %d blocks for %s", var->num_ctas, var->id);
        rt_cu_fail(err, rc, what);
        fn = NULL;
      } else {
        atomic_store_explicit(slot, (void *)fn, memory_order_release);
      }
      /* a failed load leaves nothing behind; an unload that fails too is not reported over the load's error,
       * which is the one to fix (at worst the module stays loaded) */
      if (fn == NULL && module != NULL) rt_cu.ModuleUnload(module);
      free(image); /* the driver keeps its own copy of a loaded module */
      if ((rc = rt_cu.CtxPopCurrent(&popped)) != CUDA_SUCCESS && fn != NULL) {
        rt_cu_fail(err, rc, "restoring the caller's context (cuCtxPopCurrent)");
        fn = NULL; /* the loaded function stays in its slot for the next call */
      }
    }
  }
  pthread_mutex_unlock(&rt_load_lock);
  return fn;
}
