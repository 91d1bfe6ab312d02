/* The rule between measured keys (aotpack/selection.py, which computes the same numbers in the same order):
 * the nearest rows with times, and each config's time predicted from them. See aot_runtime.h. */
#include "aot_internal.h"

#include <math.h>

/* log2 of a config's work at a key (aotpack/selection.py's log2_work): the programs the grid's tiles make,
 * at least one per multiprocessor (with an occupancy o > 0: in whole waves of o per multiprocessor), times the
 * trips of the loops' tiles; with a fixed cost, times the elements the loops' tiles cover plus that cost.
 * One log2 of the product (aotpack/selection.py takes the same). Doubles: exact for whole numbers below 2^53,
 * past any grid CUDA launches; past that, still finite. */
static double log2_work(const aot_kernel *k, int config, const int64_t *key, int sms, int occupancy) {
  const int64_t *consts = rt_config_consts(k, config);
  double programs = 1, trips = 1, elements = 1;
  for (int t = 0; t < k->ntiles; t++) {
    int64_t step = consts[k->tiles[t].konst], v = key[k->tiles[t].dim];
    double n = step > 0 ? (double)(v / step + (v % step != 0)) : (double)v;
    if (n < 1) n = 1;
    if (k->tiles[t].loop) trips *= n, elements *= n * (double)(step > 1 ? step : 1);
    else programs *= n;
  }
  double slots = (double)(sms > 1 ? sms : 1) * (occupancy > 1 ? occupancy : 1);
  programs = occupancy > 0 ? ceil(programs / slots) * slots : programs > slots ? programs : slots;
  return log2(programs * (k->fixed > 0 ? elements + (double)k->fixed : trips));
}

/* Whether a row at distance d, of table place `order`, comes before the i-th nearest (ties: the earlier row). */
static int before(const aot_kernel *k, double d, int order, const nearest_rows *near, int i) {
  return d < near->dist[i] || (d == near->dist[i] && order < k->rules[near->row[i]].order);
}

void rt_nearest_add(const aot_kernel *k, nearest_rows *near, int r, int score) {
  const aot_rule *rule = &k->rules[r];
  int kk = k->neighbours > AOT_MAX_NEIGHBOURS ? AOT_MAX_NEIGHBOURS : k->neighbours;
  if (score > near->score) near->n = 0, near->score = score; /* rows that serve the call better start over */
  double d = 0;
  for (int i = 0; i < k->nkey; i++) d += fabs(rule->key_log2[i] - near->key_log2[i]);
  int at;
  if (near->n < kk) {
    at = near->n++;
  } else if (before(k, d, rule->order, near, kk - 1)) {
    at = kk - 1;
  } else {
    return;
  }
  while (at > 0 && before(k, d, rule->order, near, at - 1))
    near->row[at] = near->row[at - 1], near->dist[at] = near->dist[at - 1], at--;
  near->row[at] = r, near->dist[at] = d;
}

/* Each config's time predicted from the nearest rows, each scaled by the call's work (on this GPU: its
 * multiprocessors, the blocks of the variant the call runs) over the row's (the build's, on the GPU that timed
 * it) to the power k->scale; the least wins (aotpack/selection.py computes the same in the same order). -1: no
 * config was measured at every neighbour. */
int rt_predicted_config(const aot_kernel *k, aot_call *call, const int64_t *key, const nearest_rows *near,
                        int sms, int target, int binding, int spec) {
  int best = -1;
  double best_t = 0;
  for (int c = 0; c < k->nconfigs; c++) {
    if (!rt_config_fits(k, call, c)) continue;
    int measured = 1;
    for (int i = 0; i < near->n && measured; i++) measured = !isnan(k->rules[near->row[i]].us_log2[c]);
    if (!measured) continue;
    int occupancy = k->occupancy != NULL ? k->occupancy[c] : 0;
    if (k->own_occupancy && k->scale > 0) { /* the blocks per multiprocessor of the variant it runs for the call */
      int v = rt_variant_in_config(k, call, c, target, binding, spec);
      occupancy = v >= 0 ? k->variants[v].blocks : 0;
    }
    double here = k->scale > 0 ? log2_work(k, c, key, sms, occupancy) : 0, total = 0, weights = 0;
    for (int i = 0; i < near->n; i++) {
      const aot_rule *rule = &k->rules[near->row[i]];
      double w = 1.0 / ((near->dist[i] + AOT_WEIGHT_OFFSET) * (near->dist[i] + AOT_WEIGHT_OFFSET));
      double t = rule->us_log2[c];
      if (k->scale > 0) t += k->scale * (here - rule->work_log2[c]); /* the row's on the GPU that timed it */
      total += w * t;
      weights += w;
    }
    if (best < 0 || total / weights < best_t) best = c, best_t = total / weights;
  }
  return best;
}
