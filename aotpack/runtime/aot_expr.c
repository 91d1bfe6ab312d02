/* The scalars and launch expressions the generated code calls: every operation total, every failure an
 * error of the call. See aot_runtime.h. */
#include "aot_internal.h"

#include <inttypes.h>
#include <string.h>

/* ---------------------------------------------------------------- scalars */

int32_t aot_f16_bits(double value) {
  uint64_t u;
  memcpy(&u, &value, sizeof u);
  uint32_t sign = (uint32_t)(u >> 48) & 0x8000;
  int exp = (int)(u >> 52 & 0x7ff);
  uint64_t mantissa = u & ((UINT64_C(1) << 52) - 1);
  if (exp == 0x7ff) return (int32_t)(sign | 0x7c00 | (mantissa ? 0x200 : 0)); /* inf, NaN */
  if (exp == 0) return (int32_t)sign; /* double subnormals are far below fp16's range */
  int e = exp - 1023 + 15;            /* fp16's biased exponent */
  uint64_t m = mantissa | UINT64_C(1) << 52;
  int shift = 42; /* keeps the implicit bit and 10 of the mantissa */
  if (e <= 0) shift += 1 - e, e = 0; /* subnormal */
  if (shift > 63) return (int32_t)sign;
  uint64_t kept = m >> shift, rest = m & ((UINT64_C(1) << shift) - 1), halfway = UINT64_C(1) << (shift - 1);
  if (rest > halfway || (rest == halfway && (kept & 1))) kept++; /* round to nearest even */
  if (e == 0) return (int32_t)(sign | (uint32_t)kept); /* a carry into bit 10 makes the smallest normal */
  if (kept >> 11) kept >>= 1, e++;
  if (e >= 31) return -1; /* too large for fp16 */
  return (int32_t)(sign | (uint32_t)e << 10 | (uint32_t)(kept & 0x3ff));
}

/* ---------------------------------------------------------------- expression helpers */

static int64_t expr_fail(aot_call *x, const char *what) {
  if (x->err->status == AOT_OK)
    aot_fail(x->err, AOT_E_VALUE, "%s(): %s", x->kernel->name, what);
  return 0;
}

/* Every operation of a launch expression is total: a result past int64 is an error, as is a division
 * by zero; none traps (INT64_MIN / -1 and INT64_MIN % -1 do, in C). */
static int64_t overflow(aot_call *x) {
  return expr_fail(x, "a launch expression overflows 64-bit integers; check the arguments");
}

int64_t aot_add(aot_call *x, int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? overflow(x) : r;
}

int64_t aot_sub(aot_call *x, int64_t a, int64_t b) {
  int64_t r;
  return __builtin_sub_overflow(a, b, &r) ? overflow(x) : r;
}

int64_t aot_mul(aot_call *x, int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? overflow(x) : r;
}

int64_t aot_neg(aot_call *x, int64_t a) { return aot_sub(x, 0, a); }

int64_t aot_floordiv(aot_call *x, int64_t a, int64_t b) {
  if (b == 0) return expr_fail(x, "division by zero in a launch expression; check the arguments");
  if (b == -1) return aot_neg(x, a);
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t aot_mod(aot_call *x, int64_t a, int64_t b) {
  if (b == 0) return expr_fail(x, "modulo by zero in a launch expression; check the arguments");
  if (b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

int64_t aot_cdiv(aot_call *x, int64_t a, int64_t b) {
  if (b == 0) return expr_fail(x, "division by zero in a launch expression; check the arguments");
  if (b == -1) return aot_neg(x, a);
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) == (b < 0))) ? q + 1 : q;
}

int64_t aot_next_pow2(aot_call *x, int64_t a) {
  (void)x;
  int64_t p = 1;
  while (p < a && p < (INT64_C(1) << 62)) p <<= 1;
  return p;
}

static const aot_tensor *shaped(aot_call *x, int param, const char *fn) {
  const aot_tensor *t = &x->t[param];
  if (t->ndim < 0) {
    if (x->err->status == AOT_OK)
      aot_fail(x->err, AOT_E_TYPE,
               "argument %s: %s() needs its shape, but it was passed as a raw pointer; pass a tensor or give "
               "the arguments computed from it explicitly",
               x->kernel->params[param].name, fn);
    return NULL;
  }
  return t;
}

int64_t aot_numel(aot_call *x, int param) {
  const aot_tensor *t = shaped(x, param, "numel");
  if (t == NULL) return 0;
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    if (__builtin_mul_overflow(n, t->shape[d], &n)) return overflow(x);
  return n;
}

static int64_t dim_of(aot_call *x, int param, int64_t dim, const char *fn, int strides) {
  const aot_tensor *t = shaped(x, param, fn);
  if (t == NULL) return 0;
  if (dim < 0 || dim >= t->ndim) {
    if (x->err->status == AOT_OK)
      aot_fail(x->err, AOT_E_VALUE, "argument %s: %s(%s, %" PRId64 ") needs a tensor of at least %" PRId64
               " dimensions, got %d", x->kernel->params[param].name, fn, x->kernel->params[param].name, dim,
               dim + 1, t->ndim);
    return 0;
  }
  return strides ? t->strides[dim] : t->shape[dim];
}

int64_t aot_size(aot_call *x, int param, int64_t dim) { return dim_of(x, param, dim, "size", 0); }
int64_t aot_stride(aot_call *x, int param, int64_t dim) { return dim_of(x, param, dim, "stride", 1); }
