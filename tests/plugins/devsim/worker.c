/* devsim's worker: runs the queued items of one top-level state in order,
 * forwarding collectives to the gloo plugin on real addresses, running
 * batch_copy spans (scaling through the core's own plait_scale_fn, identity
 * fills), waiting for user streams (ready) and calling done callbacks
 * (notify) once the gate is open. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queue.h"

const plait_transport_t *devsim_gloo;

static size_t dtype_bytes(plait_dtype_t d) {
  static const size_t b[] = {1, 1, 2, 2, 4, 8, 2, 2, 4, 8, 1};
  return (unsigned)d < sizeof b / sizeof b[0] ? b[d] : 0;
}

/* The identity of op in dtype d, as its bytes (little-endian host). */
static void identity(plait_dtype_t d, plait_op_t op, unsigned char *out) {
  int lowest = op == PLAIT_OP_MAX, highest = op == PLAIT_OP_MIN, one = op == PLAIT_OP_PRODUCT;
  memset(out, 0, 8);
  uint64_t u = 0;
  switch (d) {
  case PLAIT_UINT8: u = highest ? 0xff : one; break;
  case PLAIT_INT8: u = highest ? 0x7f : lowest ? 0x80 : (uint64_t)one; break;
  case PLAIT_UINT16: u = highest ? 0xffff : one; break;
  case PLAIT_INT16: u = highest ? 0x7fff : lowest ? 0x8000 : (uint64_t)one; break;
  case PLAIT_INT32: u = highest ? 0x7fffffffu : lowest ? 0x80000000u : (uint64_t)one; break;
  case PLAIT_INT64:
    u = highest ? 0x7fffffffffffffffull : lowest ? 0x8000000000000000ull : (uint64_t)one;
    break;
  case PLAIT_FLOAT16: u = highest ? 0x7c00 : lowest ? 0xfc00 : one ? 0x3c00 : 0; break;
  case PLAIT_BFLOAT16: u = highest ? 0x7f80 : lowest ? 0xff80 : one ? 0x3f80 : 0; break;
  case PLAIT_FLOAT32:
    u = highest ? 0x7f800000u : lowest ? 0xff800000u : one ? 0x3f800000u : 0;
    break;
  case PLAIT_FLOAT64:
    u = highest ? 0x7ff0000000000000ull : lowest ? 0xfff0000000000000ull
        : one   ? 0x3ff0000000000000ull : 0;
    break;
  case PLAIT_BOOL: u = highest || one; break;
  default: break;
  }
  memcpy(out, &u, 8);
}

static plait_result_t run_batch(devsim_root_t *root, item_t *it) {
  size_t sz = dtype_bytes(it->dtype);
  unsigned char id[8];
  identity(it->dtype, it->op, id);
  for (size_t i = 0; i < it->n; i++) {
    const plait_span_t *s = &it->spans[i];
    unsigned char *dst = s->dst;
    if (!s->src) {
      for (size_t k = 0; k < s->count; k++) memcpy(dst + k * sz, id, sz);
    } else if (it->factor == 1.0) {
      if (s->dst != s->src) memcpy(s->dst, s->src, s->count * sz);
    } else {
      plait_result_t rc = root->scale(it->dtype, s->dst, s->src, s->count, it->factor);
      if (rc) {
        snprintf(it->msg, sizeof it->msg, "devsim: batch_copy: the core's scale kernel failed (%d)",
                 rc);
        return rc;
      }
    }
  }
  return PLAIT_SUCCESS;
}

/* Runs one collective on gloo; on failure gloo's message goes to it->msg. */
static plait_result_t run_collective(item_t *it) {
  const plait_transport_t *g = devsim_gloo;
  void *gs = it->st->gloo;
  plait_result_t rc = PLAIT_ERR_INTERNAL;
  const char *what = "?";
  switch (it->kind) {
  case IT_ALLREDUCE:
    what = "allreduce";
    {
      plait_span_t sp = {it->a, it->a, it->count};
      rc = g->allreduce(gs, &sp, 1, it->dtype, it->op, 1.0, 1.0);
    }
    break;
  case IT_ALLGATHERV: what = "allgatherv", rc = g->allgatherv(gs, it->a, it->sizes); break;
  case IT_BROADCAST:
    what = "broadcast";
    rc = g->broadcast(gs, it->a, it->count, it->root_rank);
    break;
  case IT_ALLTOALLV:
    what = "alltoallv";
    rc = g->alltoallv(gs, it->a, it->sizes, it->b, it->sizes2);
    break;
  case IT_REDUCESCATTER:
    what = "reducescatter";
    rc = g->reducescatter(gs, it->a, it->b, it->sizes, it->dtype, it->op);
    break;
  case IT_BARRIER: what = "barrier", rc = g->barrier(gs); break;
  case IT_COPY: memmove(it->a, it->b, it->count); return PLAIT_SUCCESS;
  default: break;
  }
  if (rc) snprintf(it->msg, sizeof it->msg, "devsim: %s: %s", what, g->last_error(gs));
  else atomic_fetch_add(&devsim_stats.collectives_run, 1);
  return rc;
}

static plait_result_t run_subset(item_t *it) {
  void *gsub = NULL;
  plait_result_t rc = devsim_gloo->subset(it->st->gloo, it->ranks, (int)it->n, &gsub);
  if (rc) {
    snprintf(it->msg, sizeof it->msg, "devsim: subset: %s", devsim_gloo->last_error(it->st->gloo));
    return rc;
  }
  if (!gsub) return PLAIT_SUCCESS;
  devsim_state_t *sub = calloc(1, sizeof *sub);
  if (!sub) {
    devsim_gloo->finalize(gsub);
    snprintf(it->msg, sizeof it->msg, "devsim: subset: out of memory");
    return PLAIT_ERR_NO_MEMORY;
  }
  sub->root = it->st->root, sub->gloo = gsub, sub->nranks = (int)it->n;
  for (size_t i = 0; i < it->n; i++)
    if (it->ranks[i] == it->st->rank) sub->rank = (int)i;
  *it->sub_out = sub;
  return PLAIT_SUCCESS;
}

/* What stops an item before it runs: the state's failure, or finalize. */
static plait_result_t blocker(devsim_root_t *root, char *msg, size_t len) {
  pthread_mutex_lock(&root->mu);
  plait_result_t rc = root->failed_rc;
  if (rc) snprintf(msg, len, "%s", root->failed_msg);
  else if (root->closing) {
    rc = PLAIT_ERR_SHUTDOWN;
    snprintf(msg, len, "devsim: finalized before this work ran");
  }
  pthread_mutex_unlock(&root->mu);
  return rc;
}

static plait_result_t run_item(devsim_root_t *root, item_t *it) {
  if (it->kind == IT_FINALIZE_SUB) { /* always: it releases gloo's sub-state */
    devsim_gloo->finalize(it->st->gloo);
    return PLAIT_SUCCESS;
  }
  plait_result_t rc = blocker(root, it->msg, sizeof it->msg);
  if (rc) return rc;
  switch (it->kind) {
  case IT_BATCH: return run_batch(root, it);
  case IT_READY:
    if (devsim_stream_wait(it->stream, it->ticket, &root->stop) == 0) return PLAIT_SUCCESS;
    return blocker(root, it->msg, sizeof it->msg);
  case IT_NOTIFY:
    devsim_gate_wait(&root->stop);
    return blocker(root, it->msg, sizeof it->msg);
  case IT_SUBSET: return run_subset(it);
  default: break;
  }
  return run_collective(it);
}

static void item_free(item_t *it) {
  free(it->spans);
  free(it->sizes);
  free(it->sizes2);
  free(it->owned);
  free(it->ranks);
  free(it);
}

static void *worker_main(void *arg) {
  devsim_root_t *root = arg;
  pthread_mutex_lock(&root->mu);
  for (;;) {
    while (!root->head && !root->closing) pthread_cond_wait(&root->cv, &root->mu);
    item_t *it = root->head;
    if (!it) break;
    root->head = it->next;
    if (!root->head) root->tail = NULL;
    pthread_mutex_unlock(&root->mu);
    plait_result_t rc = run_item(root, it);
    if (rc && it->kind != IT_NOTIFY && it->kind != IT_READY && rc != PLAIT_ERR_SHUTDOWN &&
        !it->waited)
      devsim_fail(root, rc, it->msg); /* asynchronous work failed: the state is broken */
    if (it->kind == IT_NOTIFY) {
      atomic_fetch_add(&devsim_stats.done_calls, 1);
      if (rc) atomic_fetch_add(&devsim_stats.failed_dones, 1);
      it->done(it->ctx, rc, rc ? it->msg : NULL);
    }
    pthread_mutex_lock(&root->mu);
    if (it->waited) {
      it->rc = rc;
      it->finished = 1;
      pthread_cond_broadcast(&root->cv);
    } else {
      item_free(it);
    }
  }
  pthread_mutex_unlock(&root->mu);
  return NULL;
}

int devsim_worker_start(devsim_root_t *root) {
  return pthread_create(&root->worker, NULL, worker_main, root);
}

void devsim_worker_stop(devsim_root_t *root) {
  pthread_mutex_lock(&root->mu);
  root->closing = 1;
  atomic_store(&root->stop, 1);
  pthread_cond_broadcast(&root->cv);
  pthread_mutex_unlock(&root->mu);
  devsim_wake();
  pthread_join(root->worker, NULL);
}

void devsim_fail(devsim_root_t *root, plait_result_t rc, const char *msg) {
  pthread_mutex_lock(&root->mu);
  if (!root->failed_rc) {
    root->failed_rc = rc;
    snprintf(root->failed_msg, sizeof root->failed_msg, "%s", msg ? msg : "devsim: failed");
  }
  atomic_store(&root->stop, 1);
  pthread_cond_broadcast(&root->cv);
  pthread_mutex_unlock(&root->mu);
  devsim_wake();
}

plait_result_t devsim_submit(devsim_state_t *st, item_t *it) {
  devsim_root_t *root = st->root;
  it->st = st;
  pthread_mutex_lock(&root->mu);
  if (root->failed_rc && it->kind != IT_NOTIFY && it->kind != IT_FINALIZE_SUB) {
    plait_result_t rc = root->failed_rc;
    snprintf(st->err, sizeof st->err, "%s", root->failed_msg);
    pthread_mutex_unlock(&root->mu);
    item_free(it);
    return rc;
  }
  if (root->tail) root->tail->next = it;
  else root->head = it;
  root->tail = it;
  pthread_cond_broadcast(&root->cv);
  if (!it->waited) {
    pthread_mutex_unlock(&root->mu);
    return PLAIT_SUCCESS;
  }
  while (!it->finished) pthread_cond_wait(&root->cv, &root->mu);
  pthread_mutex_unlock(&root->mu);
  plait_result_t rc = it->rc;
  if (rc) snprintf(st->err, sizeof st->err, "%s", it->msg);
  item_free(it);
  return rc;
}
