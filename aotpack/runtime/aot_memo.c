/* The tuned-choice memo: the configs runtime autotuning chose, per kernel and key, and the lock that
 * also guards a kernel's class misses. Data below dispatch, which reads it, and the timing (aot_tune.c),
 * which fills it. See aot_runtime.h. */
#include "aot_internal.h"

#include <stdlib.h>

/* ---------------------------------------------------------------- runtime autotuning (opt-in)
 * For kernels the recipe marks `autotune: true`, once enabled: a key with no exact row in the table
 * is timed over every config on first sight (not while the stream captures a graph), and the winner
 * is remembered per process. Per bucket (AOT_TUNE_BUCKET), keys in one bucket of the recipe share
 * the winner; per key (AOT_TUNE_KEY), each distinct key value is timed, as @triton.autotune does.
 * The package's Python side saves and loads these to a cache file. */

atomic_int rt_autotune_mode; /* aot_tune_mode */
pthread_mutex_t rt_memo_lock = PTHREAD_MUTEX_INITIALIZER;

void aot_autotune_enable(int mode) { atomic_store(&rt_autotune_mode, mode); }

static int memo_same(const aot_tuned *a, const aot_tuned *b, int nkey) {
  if (a->target != b->target || a->binding != b->binding || a->spec != b->spec) return 0;
  for (int d = 0; d < nkey; d++)
    if (a->key[d] != b->key[d]) return 0;
  return 1;
}

int rt_memo_find(const aot_kernel *k, const aot_tuned *want) {
  int config = -1;
  pthread_mutex_lock(&rt_memo_lock);
  for (int i = 0; i < k->memo->n && config < 0; i++)
    if (memo_same(&k->memo->items[i], want, k->nkey)) config = k->memo->items[i].config;
  pthread_mutex_unlock(&rt_memo_lock);
  return config;
}

int aot_memo_put(const aot_kernel *k, const aot_tuned *entry) {
  int rc = 0;
  pthread_mutex_lock(&rt_memo_lock);
  aot_memo *m = k->memo;
  int i = 0;
  while (i < m->n && !memo_same(&m->items[i], entry, k->nkey)) i++;
  if (i == m->cap) {
    int cap;
    size_t bytes;
    aot_tuned *grown = NULL;
    if (!__builtin_mul_overflow(m->cap ? m->cap : 8, 2, &cap) &&
        !__builtin_mul_overflow((size_t)cap, sizeof *grown, &bytes))
      grown = realloc(m->items, bytes);
    if (grown == NULL) rc = -1;
    else m->items = grown, m->cap = cap;
  }
  if (rc == 0) {
    m->items[i] = *entry;
    if (i == m->n) m->n++;
  }
  pthread_mutex_unlock(&rt_memo_lock);
  return rc;
}

int aot_memo_get(const aot_kernel *k, int i, aot_tuned *out) {
  pthread_mutex_lock(&rt_memo_lock);
  int ok = i >= 0 && i < k->memo->n;
  if (ok) *out = k->memo->items[i];
  pthread_mutex_unlock(&rt_memo_lock);
  return ok ? 0 : -1;
}
