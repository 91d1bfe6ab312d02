/* Choosing a variant for a call: type binding, checks, target, specialization class, the table's config for
 * the key; the class misses it counts, and the point its picks are kept by (aot_memo.c keeps them). See
 * aot_runtime.h. */
#include "aot_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- choosing a variant */

static int bind_types(const aot_kernel *k, const aot_call *call, aot_error *err) {
  int bound[AOT_MAX_ARGS];
  int from[AOT_MAX_ARGS];
  for (int v = 0; v < k->ntypevars; v++) bound[v] = -1;
  for (int p = 0; p < k->nparams; p++) {
    const aot_param *prm = &k->params[p];
    int dtype = call->t[p].dtype;
    if (prm->kind != AOT_ARG_PTR || dtype < 0) continue;
    if (prm->typevar < 0) {
      if (dtype != prm->dtype)
        return aot_fail(err, AOT_E_TYPE, "argument %s: expected dtype %s, got %s", prm->name,
                        aot_dtype_names[prm->dtype], aot_dtype_names[dtype]);
    } else if (bound[prm->typevar] < 0) {
      bound[prm->typevar] = dtype;
      from[prm->typevar] = p;
    } else if (bound[prm->typevar] != dtype) {
      return aot_fail(err, AOT_E_TYPE, "argument %s: expected dtype %s (the dtype of %s), got %s", prm->name,
                      aot_dtype_names[bound[prm->typevar]], k->params[from[prm->typevar]].name,
                      aot_dtype_names[dtype]);
    }
  }
  for (int v = 0; v < k->ntypevars; v++) {
    if (bound[v] < 0)
      return aot_fail(err, AOT_E_TYPE,
                      "%s(): cannot tell the dtype %s from raw pointers; pass at least one tensor typed by %s",
                      k->name, k->typevar_names[v], k->typevar_names[v]);
  }
  for (int b = 0; b < k->nbindings; b++) {
    int match = 1;
    for (int v = 0; v < k->ntypevars; v++) match &= k->bindings[b * k->ntypevars + v] == bound[v];
    if (match) return b;
  }
  char have[256] = "";
  size_t off = 0;
  for (int v = 0; v < k->ntypevars && off < sizeof have; v++)
    off += (size_t)snprintf(have + off, sizeof have - off, "%s%s=%s", v ? ", " : "", k->typevar_names[v],
                            aot_dtype_names[bound[v]]);
  return aot_fail(err, AOT_E_TYPE, "%s(): no variant was built for %s; see %s.%s.__doc__ for the built dtypes",
                  k->name, have, k->package, k->name);
}

/* What the call's argument p is, in the terms Triton's JIT specializes on (aot_spec_state). Floats
 * and booleans are not specialized. */
static uint8_t call_state(const aot_kernel *k, const aot_call *call, int p) {
  const aot_param *prm = &k->params[p];
  if (call->none >> p & 1) return AOT_SPEC_NONE;
  if (prm->kind == AOT_ARG_PTR) return call->t[p].ptr % 16 == 0 ? AOT_SPEC_DIV16 : AOT_SPEC_ANY;
  if (prm->kind != AOT_ARG_I32 && prm->kind != AOT_ARG_I64 && prm->kind != AOT_ARG_U32 && prm->kind != AOT_ARG_U64)
    return AOT_SPEC_ANY;
  if (call->i[p] == 1) return AOT_SPEC_ONE;
  return (uint64_t)call->i[p] % 16 == 0 ? AOT_SPEC_DIV16 : AOT_SPEC_ANY;
}

/* What the JIT itself would key the argument on: the call's state where the JIT keys that argument
 * on it (not under do_not_specialize, say), else nothing. */
static uint8_t jit_state(const aot_kernel *k, const aot_call *call, int p) {
  uint8_t have = call_state(k, call, p);
  return k->params[p].jit_states >> have & 1 ? have : AOT_SPEC_ANY;
}

static const char spec_letter[] = AOT_SPEC_LETTERS;

/* Whether the call satisfies an argument's hint (16-divisible, or 1). */
static int hint_holds(const aot_kernel *k, const aot_call *call, int p) {
  const aot_param *prm = &k->params[p];
  return prm->hint == 0 || call_state(k, call, p) == (prm->hint == 1 ? AOT_SPEC_ONE : AOT_SPEC_DIV16);
}

/* The first argument whose value breaks what specialization class s assumes, or -1 (a NULL call:
 * assume it holds). */
static int spec_breaker(const aot_kernel *k, const aot_call *call, int s) {
  const uint8_t *want = &k->specs[(size_t)s * (size_t)k->nparams];
  for (int p = 0; call != NULL && p < k->nparams; p++) {
    uint8_t have = call_state(k, call, p);
    if (want[p] != have && (want[p] != AOT_SPEC_ANY || have == AOT_SPEC_NONE)) return p;
  }
  return -1;
}

static int spec_holds(const aot_kernel *k, const aot_call *call, int s) { return spec_breaker(k, call, s) < 0; }

/* The call's class: the first (most specialized) whose assumptions it satisfies. */
static int call_spec(const aot_kernel *k, const aot_call *call, aot_error *err) {
  for (int s = 0; s < k->nspecs; s++)
    if (spec_holds(k, call, s)) return s;
  for (int p = 0; p < k->nparams; p++)
    if (call->none >> p & 1)
      return aot_fail(err, AOT_E_VALUE, "argument %s: no variant was built for it being None; pass a tensor",
                      k->params[p].name);
  return aot_fail(err, AOT_E_VALUE, "%s(): no variant was built for this call's arguments", k->name);
}

static int check_call(const aot_kernel *k, aot_call *call) {
  for (int p = 0; p < k->nparams; p++) {
    const aot_param *prm = &k->params[p];
    if (call->none >> p & 1) continue;
    if (prm->required && !hint_holds(k, call, p)) {
      if (prm->hint == 1)
        return aot_fail(call->err, AOT_E_VALUE, "argument %s must be 1 (the kernel was built for that), got %" PRId64,
                        prm->name, call->i[p]);
      if (prm->kind == AOT_ARG_PTR)
        return aot_fail(call->err, AOT_E_VALUE, "argument %s must be 16-byte aligned (the kernel was built for that), "
                        "got address 0x%" PRIx64, prm->name, call->t[p].ptr);
      return aot_fail(call->err, AOT_E_VALUE, "argument %s must be a multiple of 16 (the kernel was built for that), "
                      "got %" PRId64, prm->name, call->i[p]);
    }
    if (prm->kind == AOT_ARG_I32 && (call->i[p] < INT32_MIN || call->i[p] > INT32_MAX))
      return aot_fail(call->err, AOT_E_VALUE, "argument %s = %" PRId64 " does not fit in i32", prm->name,
                      call->i[p]);
    if (prm->kind == AOT_ARG_U32 && (call->i[p] < 0 || call->i[p] > (int64_t)UINT32_MAX))
      return aot_fail(call->err, AOT_E_VALUE, "argument %s = %" PRId64 " does not fit in u32", prm->name,
                      call->i[p]);
    if (prm->kind == AOT_ARG_BOOL && call->i[p] != 0 && call->i[p] != 1)
      return aot_fail(call->err, AOT_E_VALUE, "argument %s = %" PRId64 " is not a boolean", prm->name, call->i[p]);
    if (prm->kind == AOT_ARG_F16 && aot_f16_bits(call->f[p]) < 0)
      return aot_fail(call->err, AOT_E_VALUE, "argument %s = %g does not fit in fp16", prm->name, call->f[p]);
  }
  int64_t need[AOT_MAX_ARGS];
  k->extents(call, need);
  if (call->err->status != AOT_OK) return -1;
  for (int p = 0; p < k->nparams; p++) {
    const aot_param *prm = &k->params[p];
    const aot_tensor *t = &call->t[p];
    if (prm->kind != AOT_ARG_PTR || t->ndim < 0) continue;
    int64_t numel = 1, span = 1, expect = 1, reach;
    int contiguous = 1, wraps = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (t->strides[d] < 0 || t->shape[d] < 0)
        return aot_fail(call->err, AOT_E_VALUE, "argument %s: negative strides or sizes are not supported",
                        prm->name);
      if (t->shape[d] != 1 && t->strides[d] != expect) contiguous = 0;
      wraps += __builtin_mul_overflow(numel, t->shape[d], &numel);
      wraps += __builtin_mul_overflow(t->shape[d] > 0 ? t->shape[d] - 1 : 0, t->strides[d], &reach);
      wraps += __builtin_add_overflow(span, reach, &span);
      wraps += __builtin_mul_overflow(expect, t->shape[d], &expect);
    }
    if (wraps)
      return aot_fail(call->err, AOT_E_VALUE, "argument %s: its shape and strides span more than 64-bit sizes",
                      prm->name);
    if (numel == 0) span = 0;
    if (prm->contiguous && !contiguous)
      return aot_fail(call->err, AOT_E_VALUE, "argument %s must be contiguous; call .contiguous() on it",
                      prm->name);
    if (need[p] > span)
      return aot_fail(call->err, AOT_E_VALUE,
                      "argument %s is too small: the kernel may touch %" PRId64 " elements from its start, "
                      "the tensor spans %" PRId64,
                      prm->name, need[p], span);
  }
  return 0;
}

/* A key value as the table holds it: pow2 buckets round up to a power of two; values up to 1 (0 is
 * often a flag) stay as they are. */
static int64_t bucket(const aot_kernel *k, int64_t v) {
  return k->pow2_buckets && v > 1 ? aot_next_pow2(NULL, v) : v;
}


/* log2 of x (x >= 1), exact at powers of two and linear in between: enough to rank distances. */
static double log2_approx(int64_t x) {
  if (x < 1) x = 1;
  int e = 63 - __builtin_clzll((unsigned long long)x);
  return e + (double)(x - (INT64_C(1) << e)) / (double)(INT64_C(1) << e);
}

/* A config's integer constexprs, as the grid and bound expressions read them. */
const int64_t *rt_config_consts(const aot_kernel *k, int config) {
  return &k->consts[(size_t)config * (size_t)k->nconsts];
}

/* Whether a config's bound constexprs have the values the call fixes (any config, without a call).
 * The values may depend on the config's other constexprs (a heuristic such as K % BLOCK_K == 0). */
int rt_config_fits(const aot_kernel *k, aot_call *call, int config) {
  if (call == NULL || k->nbound == 0) return 1;
  const int64_t *consts = rt_config_consts(k, config);
  int64_t want[AOT_MAX_KEY];
  k->bound(call, consts, want);
  for (int b = 0; b < k->nbound; b++)
    if (consts[k->bound_consts[b]] != want[b]) return 0;
  return call->err->status == AOT_OK;
}

/* Whether the rows of a class may serve the call: rows for any class, the call's own, or one the call satisfies
 * (a less specialized one: its tiles suit code that assumes less; rows for the call's own class win: block_score).
 * `holds` caches per class whether the call satisfies it (-1: not known yet; NULL: no cache). */
static int class_serves(const aot_kernel *k, const aot_call *call, int cls, int spec, int8_t *holds) {
  if (cls < 0 || cls == spec) return 1;
  if (holds == NULL) return spec_holds(k, call, cls);
  if (holds[cls] < 0) holds[cls] = (int8_t)spec_holds(k, call, cls);
  return holds[cls];
}

/* How well the rows of a block (one target, binding and class, in a span of the call's target and binding) serve
 * the call where their configs fit it: rows that name the target, the binding and the call's own class win. -1:
 * its class does not serve the call, or its score is below `best` (none of its rows would win). */
static int block_score(const aot_kernel *k, const aot_call *call, const aot_rule_block *block, int spec, int best,
                       int8_t *holds) {
  const aot_rule *first = &k->rules[block->first];
  int score = (first->target >= 0) * 8 + (first->binding >= 0) * 4 + (block->spec == spec) * 2 + (block->spec >= 0);
  return score >= best && class_serves(k, call, block->spec, spec, holds) ? score : -1;
}

/* The nearest-row rule's row (-1: none serves the call): among the rows that serve it best (block_score), the
 * nearest at or above the bucketed key in every dimension (the key rounds up), or when none is (the key is past
 * the table), the nearest (it clamps). Nearness: the sum over dimensions of |log2(row value / key value)|.
 * `exact`: that row's key is the bucketed key. */
static int nearest_row(const aot_kernel *k, aot_call *call, const int64_t *key, int spec, int8_t *holds,
                       const int32_t *span, int *exact) {
  int64_t v[AOT_MAX_KEY];
  double v_log2[AOT_MAX_KEY];
  for (int d = 0; d < k->nkey; d++) v[d] = bucket(k, key[d]), v_log2[d] = log2_approx(v[d]);
  int best = -1, best_score = -1, best_up = 0;
  double best_dist = 0;
  for (int b = span[0]; b < span[1]; b++) {
    const aot_rule_block *block = &k->rule_blocks[b];
    int score = block_score(k, call, block, spec, best_score, holds);
    if (score < 0) continue; /* none of its rows would win */
    for (int r = block->first; r < block->end; r++) {
      const aot_rule *rule = &k->rules[r];
      if (!rt_config_fits(k, call, rule->config)) continue;
      int up = 1;
      double dist = 0;
      for (int d = 0; d < k->nkey; d++) {
        double gap = log2_approx(rule->key[d]) - v_log2[d];
        up &= rule->key[d] >= v[d];
        dist += gap < 0 ? -gap : gap;
      }
      if (best < 0 || score > best_score ||
          (score == best_score &&
           (up > best_up || (up == best_up && (dist < best_dist ||
                                               (dist == best_dist && rule->order < k->rules[best].order)))))) {
        best = r, best_score = score, best_up = up, best_dist = dist;
      }
    }
  }
  *exact = best >= 0 && best_up && best_dist == 0;
  return best;
}

/* The config for a key. Among the table's rows for this arch, types and specialization (rows that name them
 * win over rows that do not; only the rows that may serve the target and binding are read, and a class the
 * call fails is skipped whole: k->rule_spans; of rows that tie, the earlier in the table wins): with
 * a rule between measured keys (k->neighbours), the config predicted fastest from the nearest rows with times,
 * when they serve the call as well as any row does and some config was measured at all of them; else the
 * nearest row's (nearest_row: a second pass, only then). No row: the default. A config's bound expressions are
 * evaluated (and may fail the call) only for the rows read. */
static int choose_config(const aot_kernel *k, aot_call *call, const int64_t *key, int target, int binding,
                         int spec, int sms, int *exact) {
  int8_t cache[AOT_MAX_CLASSES], *holds = k->nspecs <= AOT_MAX_CLASSES ? cache : NULL;
  if (holds != NULL) memset(holds, -1, (size_t)k->nspecs);
  const int32_t *span = &k->rule_spans[2 * ((size_t)target * (size_t)k->nbindings + (size_t)binding)];
  nearest_rows near = {.n = 0, .score = -1};
  int predicted = 0;
  if (k->neighbours > 0) {
    int best_score = -1;
    for (int d = 0; d < k->nkey; d++) near.key_log2[d] = log2((double)(key[d] < 1 ? 1 : key[d]));
    for (int b = span[0]; b < span[1]; b++) {
      const aot_rule_block *block = &k->rule_blocks[b];
      /* rows below the best score decide nothing: the rule reads only rows of the best (else nearest_row) */
      int score = block_score(k, call, block, spec, best_score, holds);
      if (score < 0) continue;
      for (int r = block->first; r < block->end; r++) {
        const aot_rule *rule = &k->rules[r];
        if (!rt_config_fits(k, call, rule->config)) continue;
        if (score > best_score) best_score = score;
        if (rule->us_log2 != NULL && score >= near.score) rt_nearest_add(k, &near, r, score);
      }
    }
    if (near.n > 0 && near.score == best_score) {
      predicted = 1;
      int c = rt_predicted_config(k, call, key, &near, sms, target, binding, spec);
      if (c >= 0) {
        *exact = near.dist[0] == 0;
        return c;
      }
    }
  }
  int best = nearest_row(k, call, key, spec, holds, span, exact);
  if (predicted) *exact = near.dist[0] == 0;
  return best >= 0 ? k->rules[best].config : k->default_config;
}

/* Machine code for exactly this chip; else the newest older machine code of the same major (sm_86
 * runs sm_80 code; 'a' code runs only on its own chip); else the newest PTX the chip can compile. */
int rt_choose_target(const aot_kernel *k, const device_state *d, aot_error *err) {
  int sass = -1, ptx = -1;
  for (int t = 0; t < k->ntargets; t++) {
    const aot_target *tg = &k->targets[t];
    int fits = tg->capability == d->capability || (!tg->specific && tg->capability < d->capability);
    if (!fits) continue;
    if (tg->ptx) {
      if (ptx < 0 || tg->capability > k->targets[ptx].capability) ptx = t;
    } else if (tg->capability == d->capability) {
      return t;
    } else if (tg->capability / 10 == d->capability / 10 && (sass < 0 || tg->capability > k->targets[sass].capability)) {
      sass = t;
    }
  }
  if (sass >= 0) return sass;
  if (ptx >= 0) return ptx;
  char have[256] = "";
  size_t off = 0;
  for (int t = 0; t < k->ntargets && off < sizeof have; t++)
    off += (size_t)snprintf(have + off, sizeof have - off, "%s%s", t ? ", " : "", k->targets[t].id);
  return aot_fail(err, AOT_E_CUDA,
                  "%s(): the GPU (%s) has compute capability %d.%d, but %s was built for %s; rebuild with a "
                  "target for this GPU",
                  k->name, d->name, d->capability / 10, d->capability % 10, k->package, have);
}

/* Per specialization class, the variant built for this binding, config and target (-1: none). */
static const int *class_slots(const aot_kernel *k, int binding, int config, int target) {
  return &k->variant_of[((size_t)(binding * k->nconfigs + config) * (size_t)k->ntargets + (size_t)target) *
                        (size_t)k->nspecs];
}

/* The variant of a config for this call: the most specialized class built whose assumptions the call
 * satisfies (classes are ordered; the least specialized assumes nothing and is always tried last). */
int rt_variant_in_config(const aot_kernel *k, aot_call *call, int config, int target, int binding,
                         int first_spec) {
  const int *slots = class_slots(k, binding, config, target);
  for (int s = first_spec; s < k->nspecs; s++)
    if (slots[s] >= 0 && spec_holds(k, call, s)) return slots[s];
  return -1;
}

/* The variant for a key: the table's config, else the default, else the first config that fits the
 * call and compiled for this target. */
static int variant_of_config(const aot_kernel *k, aot_call *call, int config, int target, int binding,
                             int first_spec, aot_error *err) {
  int fits = 0;
  for (int attempt = -2; attempt < k->nconfigs; attempt++) {
    int c = attempt == -2 ? config : attempt == -1 ? k->default_config : attempt;
    if (!rt_config_fits(k, call, c)) continue;
    fits = 1;
    int v = rt_variant_in_config(k, call, c, target, binding, first_spec);
    if (v >= 0) return v;
  }
  if (!fits) {
    char have[256] = "";
    size_t off = 0;
    int64_t want[AOT_MAX_KEY];
    k->bound(call, rt_config_consts(k, k->default_config), want);
    for (int b = 0; b < k->nbound && off < sizeof have; b++)
      off += (size_t)snprintf(have + off, sizeof have - off, "%s%s = %" PRId64, b ? ", " : "", k->bound_names[b],
                              want[b]);
    return aot_fail(err, AOT_E_VALUE, "%s(): this call needs %s, for which no variant was built; see %s.%s.__doc__",
                    k->name, have, k->package, k->name);
  }
  return aot_fail(err, AOT_E_CUDA, "%s(): no variant of %s compiled for %s; see the build log", k->name, k->name,
                  k->targets[target].id);
}

/* Triton's launch syntax: the caller's config, in the class the JIT computes for the call where it was built
 * (recorded: the JIT's own code); else the most specialized class built whose assumptions the call satisfies
 * (a recorded class's floor: a length or batch the recording never saw), which aot_launch counts as a class
 * miss. */
static int exact_variant(const aot_kernel *k, aot_call *call, int config, int target, int binding, choice *c) {
  const int *slots = class_slots(k, binding, config, target);
  for (int s = 0; s < k->nspecs; s++) {
    const uint8_t *want = &k->specs[(size_t)s * (size_t)k->nparams];
    int same = slots[s] >= 0;
    for (int p = 0; same && p < k->nparams; p++) same = k->params[p].launch_only || want[p] == jit_state(k, call, p);
    if (same) return slots[s];
  }
  int holds = rt_variant_in_config(k, call, config, target, binding, 0);
  if (holds >= 0) {
    c->miss = rt_class_miss(k, call, holds);
    return holds;
  }
  char have[AOT_MAX_ARGS + 1];
  int n = 0;
  for (int p = 0; p < k->nparams; p++)
    if (!k->params[p].launch_only) have[n++] = spec_letter[jit_state(k, call, p)];
  have[n] = '\0';
  return aot_fail(call->err, AOT_E_MISSING, "%s[grid](...): no variant was built for config %s in class %s (the "
                  "JIT's specialization of this call, one letter per argument); record a run that makes this "
                  "call, or allow the JIT fallback", k->name, k->config_labels[config], have);
}

int rt_variant_for(const aot_kernel *k, const int64_t *key, int target, int binding, const device_state *d,
                   aot_error *err) {
  int exact;
  int config = choose_config(k, NULL, key, target, binding, 0, d->sms, &exact);
  return variant_of_config(k, NULL, config, target, binding, 0, err);
}

/* ---------------------------------------------------------------- class misses
 * A call that runs a less specialized class than Triton's JIT would have compiled for it (some argument
 * the JIT would key as 16-divisible or 1 is assumed nothing) is a class miss: counted per pair of the
 * class run and the JIT's class, so that the package can say which classes to add to its recipe. */

/* The JIT's state of each parameter, 2 bits each; whether variant v's class assumes less than it. */
static int jit_class(const aot_kernel *k, const aot_call *call, int v, uint64_t jit[2]) {
  const uint8_t *ran = &k->specs[(size_t)k->variants[v].spec * (size_t)k->nparams];
  int miss = 0;
  jit[0] = jit[1] = 0;
  for (int p = 0; p < k->nparams; p++) {
    if (k->params[p].launch_only) continue;
    uint8_t want = call->none >> p & 1 ? AOT_SPEC_NONE : jit_state(k, call, p);
    jit[p / 32] |= (uint64_t)want << (2 * (p % 32));
    miss |= (want == AOT_SPEC_DIV16 || want == AOT_SPEC_ONE) && ran[p] == AOT_SPEC_ANY;
  }
  return miss;
}

/* The class miss of launching variant v for this call: its index + 1 (made on first sight), 0 when v's
 * class is the JIT's, or -1 when the table of pairs is full. */
int rt_class_miss(const aot_kernel *k, const aot_call *call, int v) {
  uint64_t jit[2];
  if (!jit_class(k, call, v, jit)) return 0;
  int spec = k->variants[v].spec, found = -1;
  aot_memo *m = k->memo;
  pthread_mutex_lock(&rt_memo_lock);
  for (int i = 0; i < m->nmisses && found < 0; i++)
    if (m->misses[i].spec == spec && m->misses[i].jit[0] == jit[0] && m->misses[i].jit[1] == jit[1]) found = i;
  if (found < 0 && m->nmisses < AOT_MISSES) {
    found = m->nmisses++;
    m->misses[found].spec = spec, m->misses[found].jit[0] = jit[0], m->misses[found].jit[1] = jit[1];
  }
  pthread_mutex_unlock(&rt_memo_lock);
  return found < 0 ? -1 : found + 1;
}

void rt_count_miss(const aot_kernel *k, aot_call *call, int miss) {
  if (miss < 0)
    atomic_fetch_add_explicit(&k->memo->lost_misses, 1, memory_order_relaxed);
  else if (miss > 0 && atomic_fetch_add_explicit(&k->memo->misses[miss - 1].calls, 1, memory_order_relaxed) == 0)
    call->new_miss = miss;
}

int aot_miss_get(const aot_kernel *k, int i, int *spec, char *jit, uint64_t *calls, uint64_t *lost) {
  if (lost != NULL) *lost = atomic_load_explicit(&k->memo->lost_misses, memory_order_relaxed);
  pthread_mutex_lock(&rt_memo_lock);
  int ok = i >= 0 && i < k->memo->nmisses;
  if (ok) {
    const aot_miss *m = &k->memo->misses[i];
    int n = 0;
    for (int p = 0; p < k->nparams; p++)
      if (k->spec_letters >> p & 1) jit[n++] = spec_letter[m->jit[p / 32] >> (2 * (p % 32)) & 3];
    jit[n] = '\0';
    *spec = m->spec;
    *calls = atomic_load_explicit(&m->calls, memory_order_relaxed);
  }
  pthread_mutex_unlock(&rt_memo_lock);
  return ok ? 0 : -1;
}

/* ---------------------------------------------------------------- a call's point, its picks kept by it (aot_memo.c)
 * Without constexprs bound to the call and without runtime tuning, the variant a call gets depends
 * only on its target, its GPU's multiprocessors (the rule counts programs in waves of them), types, argument
 * states and bucketed key (the exact key under a rule between measured
 * keys; the table search reads nothing else), so
 * a kernel keeps its recent picks (aot_pick, AOT_PICKS) and a repeated call skips the search. Every check of
 * the call has run before the lookup. */

static void pick_point_of(const aot_kernel *k, const aot_call *call, int target, int binding, int sms,
                          const int64_t *key, pick_point *pt) {
  pt->target = target, pt->binding = binding, pt->sms = sms, pt->states[0] = pt->states[1] = 0;
  for (int p = 0; p < k->nparams; p++) pt->states[p / 32] |= (uint64_t)call_state(k, call, p) << (2 * (p % 32));
  uint64_t h = ((uint64_t)(target * 31 + binding) ^ (uint64_t)sms << 32) ^ pt->states[0] * 0x9E3779B97F4A7C15u ^
               pt->states[1];
  for (int d = 0; d < k->nkey; d++) {
    pt->key[d] = k->neighbours > 0 ? key[d] : bucket(k, key[d]); /* the rule reads the exact key */
    h = (h ^ (uint64_t)pt->key[d]) * 0x100000001B3u;
  }
  h ^= h >> 30, h *= 0xBF58476D1CE4E5B9u, h ^= h >> 27, h *= 0x94D049BB133111EBu, h ^= h >> 31; /* every bit mixed */
  pt->set = &k->memo->picks[h % (AOT_PICKS / AOT_PICK_WAYS) * AOT_PICK_WAYS];
}

int rt_choose(const aot_kernel *k, aot_call *call, const device_state *d, int forced, choice *c) {
  aot_error *err = call->err;
  if (err->status != AOT_OK) return -1; /* filling the call failed (aot_set_tensor) */
  int binding = bind_types(k, call, err);
  if (binding < 0) return -1;
  k->defaults(call);
  if (err->status != AOT_OK || check_call(k, call) != 0) return -1;
  if (k->nbound > 0) { /* evaluated once here so that a failing expression is reported, not taken as a misfit */
    int64_t want[AOT_MAX_KEY];
    k->bound(call, rt_config_consts(k, k->default_config), want);
    if (err->status != AOT_OK) return -1;
  }
  int target = rt_choose_target(k, d, err);
  if (target < 0) return -1;
  if (forced >= 0) {
    const aot_variant *var = &k->variants[forced];
    if (var->binding != binding)
      return aot_fail(err, AOT_E_TYPE, "variant %s does not take this call's dtypes", var->id);
    if (var->target != target)
      return aot_fail(err, AOT_E_VALUE, "variant %s is not the code for this GPU (%s, which runs %s code)", var->id,
                      d->name, k->targets[target].id);
    if (!rt_config_fits(k, call, var->config))
      return aot_fail(err, AOT_E_VALUE, "variant %s was built for other values of the constexprs this call fixes; "
                      "leave variant= out, or pick one from %s.%s.variants", var->id, k->package, k->name);
    int p = spec_breaker(k, call, var->spec);
    if (p >= 0) {
      static const char *const what[] = {"not None", "16-divisible (16-byte aligned)", "equal to 1", "None"};
      uint8_t want = k->specs[(size_t)var->spec * (size_t)k->nparams + (size_t)p];
      return aot_fail(err, AOT_E_VALUE, "variant %s assumes argument %s is %s (class %s), and this call's is not; "
                      "pass a less specialized variant", var->id, k->params[p].name, what[want],
                      k->spec_names[var->spec]);
    }
    return forced;
  }
  if (call->launch_config > 0) return exact_variant(k, call, call->launch_config - 1, target, binding, c);
  int64_t key[AOT_MAX_KEY];
  k->key(call, key);
  if (err->status != AOT_OK) return -1;
  int mode = k->autotune ? atomic_load(&rt_autotune_mode) : AOT_TUNE_OFF;
  pick_point point;
  int keep = k->nbound == 0 && mode == AOT_TUNE_OFF && !d->planned; /* nothing but the point decides the pick */
  if (keep) {
    pick_point_of(k, call, target, binding, d->sms, key, &point);
    int v = rt_pick_find(k, &point, &c->miss);
    if (v >= 0) return v;
  }
  int spec = call_spec(k, call, err), exact;
  if (spec < 0) return -1;
  int config = choose_config(k, call, key, target, binding, spec, d->sms, &exact);
  if (keep) {
    int v = variant_of_config(k, call, config, target, binding, spec, err);
    if (v >= 0) rt_pick_keep(k, &point, v, c->miss = rt_class_miss(k, call, v));
    return v;
  }
  for (int dim = 0; dim < k->nkey && mode == AOT_TUNE_KEY; dim++)
    if (bucket(k, key[dim]) != key[dim]) exact = 0; /* the table's row is for the bucket, not this key */
  if (!exact && mode != AOT_TUNE_OFF) {
    c->point.target = target, c->point.binding = binding, c->point.spec = spec, c->point.config = -1;
    for (int dim = 0; dim < k->nkey; dim++) c->point.key[dim] = mode == AOT_TUNE_KEY ? key[dim] : bucket(k, key[dim]);
    int tuned = rt_memo_find(k, &c->point);
    if (tuned >= 0) config = tuned;
    c->untuned = tuned < 0;
  }
  return variant_of_config(k, call, config, target, binding, spec, err);
}
