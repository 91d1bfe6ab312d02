/* The dispatcher's pick does not depend on the order it reads a span's blocks (test_dispatch_rows.py): random
 * tables (1-3 targets and bindings, 1-4 classes and configs, 1-2 key dimensions, up to 40 rows, any of target,
 * binding and class -1, rows with and without times, unmeasured configs, keys from a small set so that distances
 * tie, 0-4 neighbours, scaled or not, a bound constexpr that some configs fail), laid out as the generator lays
 * them out (rows grouped by target, binding and class, each group in table order) and read through spans of
 * blocks in two orders: the generator's and a shuffle. Each call's config, exact flag and status must be the same.
 * Prints the mismatches and the calls compared; exits 1 on a mismatch. Argument: the number of tables. */
#include "aot_dispatch.c" /* choose_config is the file's own */
#include "aot_measured.c"

#include <stdio.h>
#include <stdlib.h>

/* what a package's generated kernels.c defines beside its kernels */
const char *const aot_dtype_names[] = {"int64"};
const int aot_num_dtypes = 1;

#define ROWS 40
#define MAX_T 3
#define MAX_B 3

static uint64_t seed;
static uint64_t next(void) { /* splitmix64 */
  uint64_t z = (seed += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}
static int below(int n) { return (int)(next() % (uint64_t)n); }

/* the bound constexpr: config c fits a call whose second argument is even iff its constant is 0 */
static void bound(aot_call *call, const int64_t *consts, int64_t *out) {
  (void)consts;
  out[0] = call->i[1] % 2;
}

/* rows by (target, binding, class), then by their place in the table */
static int group_cmp(const aot_rule *a, const aot_rule *b) {
  if (a->target != b->target) return a->target < b->target ? -1 : 1;
  if (a->binding != b->binding) return a->binding < b->binding ? -1 : 1;
  return a->spec < b->spec ? -1 : a->spec > b->spec;
}
static int rule_cmp(const void *pa, const void *pb) {
  const aot_rule *a = pa, *b = pb;
  int by_group = group_cmp(a, b);
  return by_group != 0 ? by_group : a->order < b->order ? -1 : a->order > b->order;
}

int main(int argc, char **argv) {
  int tables = argc > 1 ? atoi(argv[1]) : 1000;
  static aot_param params[2];
  for (int p = 0; p < 2; p++) params[p].kind = AOT_ARG_I64, params[p].name = "n";
  static const int64_t keyset[] = {1, 200, 256, 300, 512, 1024, 4096};
  long mismatches = 0, calls = 0;
  for (int tb = 0; tb < tables; tb++) {
    seed = UINT64_C(12345) + (uint64_t)tb * UINT64_C(7919);
    int nt = 1 + below(MAX_T), nb = 1 + below(MAX_B), ns = 1 + below(4), nc = 1 + below(4), nkey = 1 + below(2);
    int nr = below(4) == 0 ? below(3) : below(ROWS + 1);
    static uint8_t specs[4 * 2];
    for (int s = 0; s < ns; s++)
      for (int p = 0; p < 2; p++) specs[s * 2 + p] = s == ns - 1 ? AOT_SPEC_ANY : (uint8_t)below(3);
    static int64_t consts[4];
    for (int c = 0; c < nc; c++) consts[c] = below(2);
    static const int bound_consts[1] = {0};
    static aot_rule rules[ROWS + 1];
    static double us_log2[ROWS][4], key_log2[ROWS][2], work_log2[ROWS][4];
    memset(rules, 0, sizeof rules);
    for (int r = 0; r < nr; r++) {
      aot_rule *x = &rules[r];
      x->target = below(nt + 1) - 1, x->binding = below(nb + 1) - 1, x->spec = below(ns + 1) - 1;
      x->order = r, x->config = below(nc);
      for (int d = 0; d < nkey; d++) x->key[d] = keyset[below(2 + below(3))], key_log2[r][d] = log2((double)x->key[d]);
      for (int c = 0; c < nc; c++)
        us_log2[r][c] = below(5) == 0 ? NAN : log2((double)(1 + below(4))), work_log2[r][c] = (double)below(8);
      x->key_log2 = key_log2[r];
      x->us_log2 = below(4) ? us_log2[r] : NULL;
      x->work_log2 = x->us_log2 != NULL ? work_log2[r] : NULL;
    }
    qsort(rules, (size_t)nr, sizeof rules[0], rule_cmp); /* grouped, each group in table order */
    int firsts[ROWS + 1], ends[ROWS + 1], ngroups = 0;
    for (int r = 0; r < nr; r++) {
      if (r == 0 || group_cmp(&rules[r], &rules[r - 1]) != 0) firsts[ngroups++] = r;
      ends[ngroups - 1] = r + 1;
    }
    static aot_rule_block blocks[2][MAX_T * MAX_B * (ROWS + 1)];
    static int32_t spans[2][2 * MAX_T * MAX_B];
    int nblocks[2] = {0, 0};
    for (int t = 0; t < nt; t++)
      for (int b = 0; b < nb; b++)
        for (int layout = 0; layout < 2; layout++) {
          int first = nblocks[layout];
          for (int g = 0; g < ngroups; g++) {
            const aot_rule *x = &rules[firsts[g]];
            if ((x->target == t || x->target < 0) && (x->binding == b || x->binding < 0))
              blocks[layout][nblocks[layout]++] = (aot_rule_block){.spec = x->spec, .first = firsts[g], .end = ends[g]};
          }
          for (int i = nblocks[layout] - 1; layout == 1 && i > first; i--) { /* shuffle the span's blocks */
            int j = first + below(i - first + 1);
            aot_rule_block keep = blocks[layout][i];
            blocks[layout][i] = blocks[layout][j], blocks[layout][j] = keep;
          }
          spans[layout][2 * (t * nb + b)] = first, spans[layout][2 * (t * nb + b) + 1] = nblocks[layout];
        }
    static const aot_tile tiles[1] = {{.dim = 0, .konst = 0, .loop = 0}};
    aot_kernel k = {.name = "k", .nparams = 2, .params = params, .nbindings = nb, .ntargets = nt, .nconfigs = nc,
                    .default_config = 0, .nconsts = 1, .consts = consts, .nkey = nkey,
                    .pow2_buckets = (uint8_t)below(2), .nrules = nr, .rules = rules, .neighbours = (uint8_t)below(5),
                    .scale = below(2) ? 0.5 : 0.0, .ntiles = below(2), .tiles = tiles, .nbound = below(2),
                    .bound_consts = bound_consts, .bound = bound, .nspecs = ns, .specs = specs};
    for (int q = 0; q < 12; q++) {
      static const int64_t values[] = {1, 16, 32, 7, 48};
      aot_call call = {.kernel = &k};
      call.i[0] = values[below(5)], call.i[1] = values[below(5)];
      int t = below(nt), b = below(nb), spec = -1;
      for (int s = 0; s < ns && spec < 0; s++)
        if (spec_holds(&k, &call, s)) spec = s;
      int64_t key[2];
      for (int d = 0; d < nkey; d++) key[d] = below(3) ? keyset[below(7)] : 1 + below(5000);
      int got[2][3];
      for (int layout = 0; layout < 2; layout++) {
        aot_error err = {.status = AOT_OK};
        call.err = &err;
        k.rule_blocks = blocks[layout], k.rule_spans = spans[layout];
        int exact = -1;
        got[layout][0] = choose_config(&k, &call, key, t, b, spec, 132, &exact);
        got[layout][1] = exact, got[layout][2] = (int)err.status;
      }
      calls++;
      if (memcmp(got[0], got[1], sizeof got[0]) != 0) {
        if (mismatches++ < 5)
          printf("table %d call %d: config %d exact %d status %d, shuffled: config %d exact %d status %d\n", tb, q,
                 got[0][0], got[0][1], got[0][2], got[1][0], got[1][1], got[1][2]);
      }
    }
  }
  printf("%ld mismatches in %ld calls\n", mismatches, calls);
  return mismatches != 0;
}
