/* What a kernel learns in the process: the configs runtime autotuning chose, per kernel and key, and the lock that
 * also guards a kernel's class misses; and its kept picks (lock-free). Data below dispatch, which reads it, and the
 * timing (aot_tune.c), which fills it. See aot_runtime.h. */
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

/* ---------------------------------------------------------------- the kept picks (AOT_PICKS, in sets)
 * The dispatcher's picks by call point (pick_point, aot_dispatch.c) are written here, on a miss; a set's slots are
 * sequence locks, read without a lock by rt_pick_find (aot_internal.h, inlined into the dispatcher). */

_Static_assert(AOT_PICKS % AOT_PICK_WAYS == 0, "the kept picks are whole sets");

/* The slot a new pick goes to: one never written, else the one kept longest ago (its age: the clock now less its
 * stamp, in unsigned arithmetic, right across the clock's wrap). Racing keepers may choose the same slot; its
 * sequence lock lets one write. */
static aot_pick *pick_victim(const aot_kernel *k, const pick_point *pt) {
  uint32_t now = atomic_load_explicit(&k->memo->pick_clock, memory_order_relaxed), oldest_age = 0;
  aot_pick *oldest = &pt->set[0];
  for (int way = 0; way < AOT_PICK_WAYS; way++) {
    aot_pick *s = &pt->set[way];
    if (atomic_load_explicit(&s->seq, memory_order_relaxed) == 0) return s;
    uint32_t age = now - atomic_load_explicit(&s->stamp, memory_order_relaxed);
    if (age > oldest_age) oldest = s, oldest_age = age;
  }
  return oldest;
}

void rt_pick_keep(const aot_kernel *k, const pick_point *pt, int v, int miss) {
  int kept;
  if (rt_pick_find(k, pt, &kept) >= 0) return; /* another thread's miss kept it meanwhile: one copy per set */
  aot_pick *s = pick_victim(k, pt);
  uint32_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
  if (seq & 1 || !atomic_compare_exchange_strong(&s->seq, &seq, seq + 1)) return; /* another thread writes it */
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&s->stamp, atomic_fetch_add_explicit(&k->memo->pick_clock, 1, memory_order_relaxed),
                        memory_order_relaxed);
  atomic_store_explicit(&s->target, pt->target, memory_order_relaxed);
  atomic_store_explicit(&s->binding, pt->binding, memory_order_relaxed);
  atomic_store_explicit(&s->sms, pt->sms, memory_order_relaxed);
  atomic_store_explicit(&s->states[0], pt->states[0], memory_order_relaxed);
  atomic_store_explicit(&s->states[1], pt->states[1], memory_order_relaxed);
  for (int d = 0; d < k->nkey; d++) atomic_store_explicit(&s->key[d], pt->key[d], memory_order_relaxed);
  atomic_store_explicit(&s->variant, v, memory_order_relaxed);
  atomic_store_explicit(&s->miss, miss, memory_order_relaxed);
  atomic_store_explicit(&s->seq, seq + 2 == 0 ? 2 : seq + 2, memory_order_release);
}
