/* The device-memory path of execution: the core never reads or writes
 * device memory itself. Copies, scaling and fills there are the transport's
 * batch_copy (one call per phase of a response), the producers' streams are
 * waited for through ready(), and the memory the core allocates there (the
 * outputs of allgather, alltoall and reducescatter, and scratch buffers) is
 * the transport's mem_alloc / mem_free (memory.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/execute/execute_internal.h"
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
