/* The device-memory path of execution: the core never reads or writes
 * device memory itself. Copies, scaling and fills there are the transport's
 * batch_copy (one call per phase of a response), the producers' streams are
 * waited for through ready(), and the memory the core allocates there (the
 * outputs of allgather, alltoall and reducescatter, and scratch buffers) is
 * the transport's mem_alloc / mem_free. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/execute/execute_internal.h"
#include "engine/submit/handle.h"
#include "engine/execute/pending.h"
#include "engine/transport/process_set.h"
#include "engine/observe/timeline.h"
#include "util/log.h"

plait_result_t plait_exec_batch(plait_exec_t *x, const plait_meta_t *m, const plait_span_t *s,
                                size_t n, double factor, const char *what, const char *name) {
  if (!n) return PLAIT_SUCCESS;
  plait_result_t rc = x->t->batch_copy(x->ts, s, n, (plait_dtype_t)m->dtype, (plait_op_t)m->op,
                                       factor);
  return rc ? plait_exec_transport_error(x, rc, what, name) : PLAIT_SUCCESS;
}

plait_result_t plait_exec_ready(plait_exec_t *x, plait_entry_t *const *es, uint32_t n) {
  if (!PLAIT_TRANSPORT_HAS(x->t, ready)) return PLAIT_SUCCESS;
  void *seen[8]; /* the streams already waited for: almost always one */
  int nseen = 0, full = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (!es[i] || !plait_exec_on_device(&es[i]->meta)) continue;
    void *st = es[i]->stream;
    int known = 0;
    for (int j = 0; j < nseen && !known; j++) known = seen[j] == st;
    for (uint32_t j = 0; full && !known && j < i; j++) /* past 8 streams: look back */
      known = es[j] && plait_exec_on_device(&es[j]->meta) && es[j]->stream == st;
    if (known) continue;
    plait_result_t rc = x->t->ready(x->ts, st);
    if (rc) return plait_exec_transport_error(x, rc, "waiting for the stream of", es[i]->name);
    if (nseen < 8) seen[nseen++] = st;
    else full = 1;
  }
  return PLAIT_SUCCESS;
}

plait_result_t plait_exec_copy_in_device(plait_exec_t *x, const plait_response_t *r,
                                         plait_entry_t **es, const plait_meta_t *m,
                                         const size_t *offs) {
  size_t esz = plait_dtype_size_inline((plait_dtype_t)m->dtype), k = 0;
  plait_span_t *sp = malloc(sizeof *sp * 2 * (r->n ? r->n : 1));
  if (!sp) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory copying into the fusion buffer");
  for (uint32_t i = 0; i < r->n; i++) {
    const plait_meta_t *mi = es[i] ? &es[i]->meta : &r->e[i].meta;
    size_t count = (size_t)plait_meta_elements(mi), bytes = count * esz;
    char *dst = (char *)x->fusion + offs[i];
    /* a joined rank's member: the identity (src NULL); padding too, so that
     * every byte the collective reads is defined */
    if (count) sp[k++] = (plait_span_t){dst, es[i] ? es[i]->input.data : NULL, count};
    size_t pad = offs[i + 1] - offs[i] - bytes;
    if (pad) sp[k++] = (plait_span_t){dst + bytes, NULL, pad / esz};
    if (es[i]) plait_tl_begin(x->tl, es[i]->name, plait_tl_name(PLAIT_TL_MEMCPY_IN));
  }
  plait_result_t rc = plait_exec_batch(x, m, sp, k, m->prescale, "copy into the fusion buffer of",
                                       r->e[0].name);
  for (uint32_t i = 0; i < r->n; i++)
    if (es[i]) plait_tl_end(x->tl, es[i]->name, plait_tl_name(PLAIT_TL_MEMCPY_IN));
  free(sp);
  return rc;
}

plait_result_t plait_exec_copy_out_device(plait_exec_t *x, const plait_response_t *r,
                                          plait_entry_t **es, const plait_meta_t *m,
                                          const size_t *offs, double post) {
  size_t k = 0;
  plait_span_t *sp = malloc(sizeof *sp * (r->n ? r->n : 1));
  if (!sp) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory copying out of the fusion buffer");
  for (uint32_t i = 0; i < r->n; i++) {
    size_t count = es[i] ? (size_t)plait_meta_elements(&es[i]->meta) : 0;
    if (!count) continue;
    sp[k++] = (plait_span_t){es[i]->output.data, (char *)x->fusion + offs[i], count};
    plait_tl_begin(x->tl, es[i]->name, plait_tl_name(PLAIT_TL_MEMCPY_OUT));
  }
  plait_result_t rc = plait_exec_batch(x, m, sp, k, post, "copy out of the fusion buffer of",
                                       r->e[0].name);
  for (uint32_t i = 0; i < r->n; i++)
    if (es[i] && plait_meta_elements(&es[i]->meta))
      plait_tl_end(x->tl, es[i]->name, plait_tl_name(PLAIT_TL_MEMCPY_OUT));
  free(sp);
  return rc;
}

/* ---- Device memory owned by handles: it outlives the response, and is
 * freed by plait_release on the caller's thread. The transport may be gone
 * by then (plait_shutdown): the owner then leaks it rather than call a
 * plugin that was finalized. */
struct plait_devmem {
  pthread_mutex_t mu;
  int refs;  /* the executor's and one per output handed out */
  int alive; /* the transport is running */
  const plait_transport_t *t;
  void *ts;
};

static void devmem_unref_unlock(struct plait_devmem *d) {
  int last = --d->refs == 0;
  pthread_mutex_unlock(&d->mu);
  if (!last) return;
  pthread_mutex_destroy(&d->mu);
  free(d);
}

struct plait_devmem *plait_devmem_new(const plait_transport_t *t, void *ts) {
  struct plait_devmem *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  pthread_mutex_init(&d->mu, NULL);
  d->refs = 1;
  d->alive = 1;
  d->t = t;
  d->ts = ts;
  return d;
}

void plait_devmem_close(struct plait_devmem *d) {
  if (!d) return;
  pthread_mutex_lock(&d->mu);
  d->alive = 0;
  devmem_unref_unlock(d);
}

/* A handle's owned_free: any thread. */
static void devmem_release(void *ctx, void *ptr) {
  struct plait_devmem *d = ctx;
  pthread_mutex_lock(&d->mu);
  if (d->alive) d->t->mem_free(d->ts, ptr);
  devmem_unref_unlock(d);
}

plait_result_t plait_exec_dev_alloc(plait_exec_t *x, size_t bytes, int keep, const char *what,
                                    void **p) {
  *p = NULL;
  plait_scratch_t *s = keep ? NULL : malloc(sizeof *s);
  if ((!keep && !s) || (keep && !x->devmem)) /* devmem: made at init, owns kept memory */
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory allocating %s", what);
  void *ts = x->ts0 ? x->ts0 : x->ts;
  plait_result_t rc = x->t->mem_alloc(ts, bytes ? bytes : 1, p);
  if (rc) {
    free(s);
    *p = NULL;
    return plait_error(rc, "cannot allocate %zu bytes of device memory for %s in transport "
                       "'%s': %s", bytes, what, x->t->name, x->t->last_error(ts));
  }
  if (s) {
    s->ptr = *p;
    s->next = x->scratch;
    x->scratch = s;
  }
  return PLAIT_SUCCESS;
}

void plait_exec_dev_free(plait_exec_t *x, void *p) {
  if (p) x->t->mem_free(x->ts0 ? x->ts0 : x->ts, p);
}

void plait_exec_set_device_output(plait_exec_t *x, struct plait_handle *h,
                                  const plait_tensor_t *out, void *owned, int64_t *splits,
                                  int nsplits) {
  struct plait_devmem *d = x->devmem;
  if (!d) { /* cannot happen (dev_alloc refuses): the memory is left, never freed under use */
    plait_handle_set_output(h, out, NULL, splits, nsplits);
    return;
  }
  pthread_mutex_lock(&d->mu);
  d->refs++;
  pthread_mutex_unlock(&d->mu);
  plait_handle_set_output_freed_by(h, out, owned, devmem_release, d, splits, nsplits);
}

void plait_exec_scratch_release(plait_exec_t *x, plait_scratch_t **list) {
  for (plait_scratch_t *s = x->scratch; s;) {
    plait_scratch_t *next = s->next;
    if (list) {
      s->next = *list;
      *list = s;
    } else {
      plait_exec_dev_free(x, s->ptr);
      free(s);
    }
    s = next;
  }
  x->scratch = NULL;
}

plait_result_t plait_exec_quiesce(plait_exec_t *x, const char *why) {
  if (!x->pending || !plait_pending_outstanding(x->pending)) return PLAIT_SUCCESS;
  int left = plait_pending_wait(x->pending, -1);
  if (left)
    return plait_error(PLAIT_ERR_TIMEOUT, "transport '%s': %d device operation(s) did not finish "
                       "within PLAIT_TIMEOUT_S, before %s", x->t->name, left, why);
  return PLAIT_SUCCESS;
}

/* interrupt() on the job's state and every process set's sub-state, once. */
static void interrupt_all(plait_exec_t *x, plait_result_t rc, const char *why) {
  if (x->interrupted || !PLAIT_TRANSPORT_HAS(x->t, interrupt)) return;
  x->interrupted = 1;
  x->t->interrupt(x->ts0, rc, why);
  int32_t ids[256];
  int n = 0;
  if (x->psets) plait_psets_ids(x->psets, ids, 256, &n);
  for (int i = 0; i < n && i < 256; i++) {
    plait_pset_t *s = ids[i] ? plait_psets_get(x->psets, ids[i]) : NULL;
    if (s && s->index >= 0 && s->ts) x->t->interrupt(s->ts, rc, why);
  }
}

void plait_exec_settle(plait_exec_t *x, plait_result_t rc, const char *why) {
  char msg[2048];
  if (rc != PLAIT_SUCCESS) interrupt_all(x, rc, why);
  if (!x->pending) return;
  int left = plait_pending_wait(x->pending, -1);
  if (rc == PLAIT_SUCCESS) { /* a clean end: what finished completes as usual */
    plait_result_t r = plait_pending_reap(x->pending, x);
    if (r || left) {
      rc = r ? r : PLAIT_ERR_SHUTDOWN;
      if (r) snprintf(msg, sizeof msg, "%s", plait_last_error());
      else snprintf(msg, sizeof msg, "plait was shut down while transport '%s' still ran %d "
                    "device operation(s) (they did not finish within PLAIT_TIMEOUT_S)",
                    x->t->name, left);
      why = msg;
      interrupt_all(x, rc, why);
      left = plait_pending_wait(x->pending, -1);
    }
  }
  if (left)
    PLAIT_WARN("exec", "transport '%s': %d device operation(s) never reported completion within "
               "PLAIT_TIMEOUT_S; their tensors fail", x->t->name, left);
  plait_pending_fail_all(x->pending, x, rc ? rc : PLAIT_ERR_SHUTDOWN, why);
}
