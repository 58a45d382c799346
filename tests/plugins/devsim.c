/*
 * "devsim": a transport that behaves like a GPU transport (nccl) on the
 * host, so that the core's device-memory path is tested without a GPU.
 *
 *  - Device memory only (PLAIT_CAP_DEVICE_MEMORY): mem_alloc hands out host
 *    memory disguised as a non-canonical address (devsim/memory.c), so the
 *    core crashes at once if it ever touches device memory itself; every
 *    pointer it passes is checked to lie in a live allocation.
 *  - A "device stream" per state: a worker thread (devsim/worker.c) runs
 *    batch_copy, collectives and mem_copy in order; with notify in the table
 *    they return once enqueued, and done callbacks come from that thread.
 *    Collectives run on the real gloo plugin (loaded beside this one), on
 *    the real addresses, from the worker thread only (gloo's init runs in
 *    this plugin's init, where the bootstrap may be used).
 *  - User streams (devsim/streams.c) stand for a framework's CUDA streams:
 *    ready(stream) makes the worker wait for what was enqueued on them.
 *  - Helpers for tests (../devsim.h): device buffers, streams, a gate that
 *    holds completions, counters of every new entry.
 *
 * Environment, read when the plugin is loaded: DEVSIM_SYNC=1 leaves notify
 * out of the table (every call blocks: the synchronous device path);
 * DEVSIM_NO_BATCH=1 leaves batch_copy out (the core's refusals). Read at
 * init: DEVSIM_DEVICE, the device index (default: the local rank).
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devsim/queue.h"
#include "plait/dtypes.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static _Thread_local char init_err[1024];
static int sync_mode; /* DEVSIM_SYNC=1 */

static size_t elem_bytes(plait_dtype_t d) { return plait_dtype_size_inline(d); }

static plait_result_t failf(devsim_state_t *st, plait_result_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static plait_result_t failf(devsim_state_t *st, plait_result_t rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(st ? st->err : init_err, sizeof init_err, fmt, ap);
  va_end(ap);
  return rc;
}

/* The real address of a device buffer the core passed, or an error naming
 * the entry and the pointer. */
static plait_result_t real_of(devsim_state_t *st, const char *what, const void *dptr,
                              size_t bytes, void **real) {
  *real = NULL;
  if (!dptr && bytes == 0) return PLAIT_SUCCESS;
  if ((*real = devsim_real(dptr, bytes)) != NULL) return PLAIT_SUCCESS;
  return failf(st, PLAIT_ERR_INVALID_ARGUMENT,
               "devsim: %s: %p (+%zu bytes) is not in devsim device memory (no live mem_alloc "
               "block holds it)",
               what, dptr, bytes);
}

static item_t *item_new(devsim_state_t *st, item_kind_t kind) {
  item_t *it = calloc(1, sizeof *it);
  if (it) it->kind = kind, it->waited = sync_mode;
  else failf(st, PLAIT_ERR_NO_MEMORY, "devsim: out of memory");
  return it;
}

/* ---------------------------------------------------------------- life */

static const plait_transport_t *load_gloo(void) {
  static const plait_transport_t *g;
  if (g) return g;
  char path[4096];
  const char *tries[3] = {PLAIT_DEVSIM_GLOO_FILE, NULL, NULL};
  Dl_info info;
  if (dladdr((void *)load_gloo, &info) && info.dli_fname) {
    snprintf(path, sizeof path, "%s", info.dli_fname);
    char *slash = strrchr(path, '/');
    if (slash) strcpy(slash + 1, "libplait-transport-gloo.so"), tries[1] = path;
  }
  const char *why = "no path to try";
  for (int i = 0; i < 3; i++) {
    if (!tries[i] || !*tries[i]) continue;
    void *so = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
    if (so && (g = dlsym(so, PLAIT_TRANSPORT_SYMBOL)) != NULL) return g;
    why = dlerror();
  }
  snprintf(init_err, sizeof init_err, "devsim: cannot load the gloo plugin it runs on (%s; tried "
           "%s and beside devsim)", why, PLAIT_DEVSIM_GLOO_FILE);
  return NULL;
}

static plait_result_t ds_init(const plait_transport_init_args_t *a, void **state) {
  if (!a || !state) return failf(NULL, PLAIT_ERR_INVALID_ARGUMENT, "devsim: init: NULL argument");
  if (!(devsim_gloo = load_gloo())) return PLAIT_ERR_TRANSPORT;
  devsim_root_t *root = calloc(1, sizeof *root);
  if (!root) return failf(NULL, PLAIT_ERR_NO_MEMORY, "devsim: out of memory");
  void *gs = NULL;
  plait_result_t rc = devsim_gloo->init(a, &gs);
  if (rc) {
    failf(NULL, rc, "devsim: gloo init: %s", devsim_gloo->last_error(NULL));
    free(root);
    return rc;
  }
  pthread_mutex_init(&root->mu, NULL);
  pthread_cond_init(&root->cv, NULL);
  root->scale = a->scale;
  const char *dev = getenv("DEVSIM_DEVICE");
  root->device = dev && *dev ? atoi(dev) : a->local_rank;
  root->top = (devsim_state_t){.root = root, .gloo = gs, .rank = a->rank, .nranks = a->nranks};
  if (devsim_worker_start(root)) {
    devsim_gloo->finalize(gs);
    free(root);
    return failf(NULL, PLAIT_ERR_INTERNAL, "devsim: cannot start the worker thread");
  }
  *state = &root->top;
  return PLAIT_SUCCESS;
}

static plait_result_t ds_finalize(void *state) {
  devsim_state_t *st = state;
  devsim_root_t *root = st->root;
  if (st != &root->top) { /* a process set's sub-state: gloo's goes on the worker */
    item_t *it = calloc(1, sizeof *it);
    if (it) {
      it->kind = IT_FINALIZE_SUB, it->waited = 1;
      devsim_submit(st, it);
    }
    free(st);
    return PLAIT_SUCCESS;
  }
  devsim_worker_stop(root);
  devsim_gloo->finalize(root->top.gloo);
  pthread_mutex_destroy(&root->mu);
  pthread_cond_destroy(&root->cv);
  free(root);
  return PLAIT_SUCCESS;
}

static const char *ds_last_error(void *state) {
  return state ? ((devsim_state_t *)state)->err : init_err;
}

static int ds_device(void *state) { return ((devsim_state_t *)state)->root->device; }

/* --------------------------------------------------------- collectives */

static plait_result_t coll(devsim_state_t *st, item_t *it) {
  atomic_fetch_add(&devsim_stats.collectives, 1);
  return devsim_submit(st, it);
}

/* One span, in place, unscaled (allreduce_flags 0: the core copies and
 * scales with batch_copy). */
static plait_result_t ds_allreduce(void *state, const plait_span_t *spans, size_t nspans,
                                   plait_dtype_t d, plait_op_t op, double pre, double post) {
  devsim_state_t *st = state;
  if (!spans || nspans != 1 || spans[0].src != spans[0].dst || pre != 1.0 || post != 1.0)
    return failf(st, PLAIT_ERR_INVALID_ARGUMENT, "devsim: allreduce takes one span, in place, "
                 "unscaled (%zu spans, prescale %g, postscale %g)", spans ? nspans : 0, pre,
                 post);
  void *buf = spans[0].dst;
  size_t n = spans[0].count;
  void *real;
  plait_result_t rc = real_of(st, "allreduce", buf, n * elem_bytes(d), &real);
  item_t *it = rc ? NULL : item_new(st, IT_ALLREDUCE);
  if (!it) return rc ? rc : PLAIT_ERR_NO_MEMORY;
  it->a = real, it->count = n, it->dtype = d, it->op = op;
  return coll(st, it);
}

/* A copy of the nranks sizes, and their sum. */
static size_t *sizes_copy(devsim_state_t *st, const size_t *v, size_t *sum) {
  size_t *c = malloc(sizeof *c * (size_t)st->nranks);
  *sum = 0;
  for (int r = 0; c && r < st->nranks; r++) *sum += (c[r] = v[r]);
  return c;
}

static plait_result_t ds_allgatherv(void *state, void *buf, const size_t *bytes) {
  devsim_state_t *st = state;
  item_t *it = item_new(st, IT_ALLGATHERV);
  size_t total;
  if (!it || !(it->sizes = sizes_copy(st, bytes, &total))) {
    free(it);
    return failf(st, PLAIT_ERR_NO_MEMORY, "devsim: out of memory");
  }
  plait_result_t rc = real_of(st, "allgatherv", buf, total, &it->a);
  if (rc) {
    free(it->sizes), free(it);
    return rc;
  }
  return coll(st, it);
}

static plait_result_t ds_broadcast(void *state, void *buf, size_t bytes, int root) {
  devsim_state_t *st = state;
  void *real;
  plait_result_t rc = real_of(st, "broadcast", buf, bytes, &real);
  item_t *it = rc ? NULL : item_new(st, IT_BROADCAST);
  if (!it) return rc ? rc : PLAIT_ERR_NO_MEMORY;
  it->a = real, it->count = bytes, it->root_rank = root;
  return coll(st, it);
}

static plait_result_t ds_alltoallv(void *state, const void *send, const size_t *send_bytes,
                                   void *recv, const size_t *recv_bytes) {
  devsim_state_t *st = state;
  item_t *it = item_new(st, IT_ALLTOALLV);
  size_t ts, tr;
  if (!it || !(it->sizes = sizes_copy(st, send_bytes, &ts)) ||
      !(it->sizes2 = sizes_copy(st, recv_bytes, &tr))) {
    if (it) free(it->sizes), free(it);
    return failf(st, PLAIT_ERR_NO_MEMORY, "devsim: out of memory");
  }
  plait_result_t rc = real_of(st, "alltoallv send", send, ts, &it->a);
  if (!rc) rc = real_of(st, "alltoallv recv", recv, tr, &it->b);
  if (rc) {
    free(it->sizes), free(it->sizes2), free(it);
    return rc;
  }
  return coll(st, it);
}

static plait_result_t ds_reducescatter(void *state, const void *send, void *recv,
                                       const size_t *counts, plait_dtype_t d, plait_op_t op) {
  devsim_state_t *st = state;
  item_t *it = item_new(st, IT_REDUCESCATTER);
  size_t total;
  if (!it || !(it->sizes = sizes_copy(st, counts, &total))) {
    free(it);
    return failf(st, PLAIT_ERR_NO_MEMORY, "devsim: out of memory");
  }
  plait_result_t rc = real_of(st, "reducescatter send", send, total * elem_bytes(d), &it->a);
  if (!rc)
    rc = real_of(st, "reducescatter recv", recv, counts[st->rank] * elem_bytes(d), &it->b);
  if (rc) {
    free(it->sizes), free(it);
    return rc;
  }
  it->dtype = d, it->op = op;
  return coll(st, it);
}

static plait_result_t ds_barrier(void *state) {
  item_t *it = item_new(state, IT_BARRIER);
  return it ? coll(state, it) : PLAIT_ERR_NO_MEMORY;
}

static plait_result_t ds_subset(void *state, const int *ranks, int n, void **sub) {
  devsim_state_t *st = state;
  if (!sub || !ranks || n < 1 || n > st->nranks)
    return failf(st, PLAIT_ERR_INVALID_ARGUMENT, "devsim: subset: bad arguments");
  item_t *it = calloc(1, sizeof *it);
  devsim_state_t *made = NULL;
  if (!it || !(it->ranks = malloc(sizeof(int) * (size_t)n))) {
    free(it);
    return failf(st, PLAIT_ERR_NO_MEMORY, "devsim: out of memory");
  }
  memcpy(it->ranks, ranks, sizeof(int) * (size_t)n);
  it->kind = IT_SUBSET, it->n = (size_t)n, it->sub_out = &made, it->waited = 1;
  plait_result_t rc = devsim_submit(st, it);
  *sub = rc ? NULL : made;
  return rc;
}

/* ------------------------------------------------------------- memory */

static plait_result_t ds_mem_alloc(void *state, size_t bytes, void **ptr) {
  (void)state;
  if (!ptr) return PLAIT_ERR_INVALID_ARGUMENT;
  *ptr = devsim_alloc_raw(bytes);
  return *ptr ? PLAIT_SUCCESS : PLAIT_ERR_NO_MEMORY;
}

/* Any thread: the error goes to no state's buffer (the core's thread owns it). */
static plait_result_t ds_mem_free(void *state, void *ptr) {
  (void)state;
  return devsim_free_raw(ptr) ? PLAIT_ERR_INVALID_ARGUMENT : PLAIT_SUCCESS;
}

static plait_result_t ds_mem_copy(void *state, void *dst, const void *src, size_t bytes,
                                  plait_copy_kind_t kind) {
  devsim_state_t *st = state;
  atomic_fetch_add(&devsim_stats.mem_copy_calls, 1);
  int dst_dev = kind == PLAIT_COPY_HOST_TO_DEVICE || kind == PLAIT_COPY_DEVICE_TO_DEVICE;
  int src_dev = kind == PLAIT_COPY_DEVICE_TO_HOST || kind == PLAIT_COPY_DEVICE_TO_DEVICE;
  if ((unsigned)kind > PLAIT_COPY_DEVICE_TO_DEVICE || (bytes && (!dst || !src)))
    return failf(st, PLAIT_ERR_INVALID_ARGUMENT, "devsim: mem_copy: bad arguments");
  if ((!dst_dev && devsim_real(dst, 0)) || (!src_dev && devsim_real(src, 0)))
    return failf(st, PLAIT_ERR_INVALID_ARGUMENT,
                 "devsim: mem_copy: a pointer the copy kind (%d) says is host memory is devsim "
                 "device memory", (int)kind);
  if (!dst_dev && !src_dev) {
    memmove(dst, src, bytes);
    return PLAIT_SUCCESS;
  }
  item_t *it = item_new(st, IT_COPY);
  if (!it) return PLAIT_ERR_NO_MEMORY;
  plait_result_t rc = PLAIT_SUCCESS;
  it->a = dst, it->b = (void *)src, it->count = bytes;
  if (dst_dev) rc = real_of(st, "mem_copy dst", dst, bytes, &it->a);
  if (!rc && src_dev) rc = real_of(st, "mem_copy src", src, bytes, &it->b);
  if (!rc && !src_dev && !it->waited) { /* host source: taken now, as pageable memcpy does */
    if (!(it->owned = malloc(bytes ? bytes : 1))) rc = PLAIT_ERR_NO_MEMORY;
    else memcpy(it->owned, src, bytes), it->b = it->owned;
  }
  if (rc) {
    free(it);
    return rc;
  }
  return devsim_submit(st, it);
}

/* ---------------------------------------------------- the device path */

/* Spans i and j (or i with itself) overlap where they must not. */
static int overlaps(const plait_span_t *s, size_t i, size_t j, size_t sz) {
  uintptr_t d0 = (uintptr_t)s[i].dst, d1 = d0 + s[i].count * sz;
  uintptr_t e0 = (uintptr_t)s[j].dst, e1 = e0 + s[j].count * sz;
  if (i != j && d0 < e1 && e0 < d1 && s[i].count && s[j].count) return 1;
  if (!s[j].src || (i == j && s[i].src == s[i].dst)) return 0;
  uintptr_t f0 = (uintptr_t)s[j].src, f1 = f0 + s[j].count * sz;
  return d0 < f1 && f0 < d1 && s[i].count && s[j].count;
}

static plait_result_t ds_batch_copy(void *state, const plait_span_t *spans, size_t n,
                                    plait_dtype_t d, plait_op_t op, double factor) {
  devsim_state_t *st = state;
  size_t sz = elem_bytes(d);
  devsim_batch_record_t rec = {n, 0, 0, (int)d, (int)op, factor};
  for (size_t i = 0; i < n; i++) rec.identity += !spans[i].src, rec.elements += spans[i].count;
  atomic_fetch_add(&devsim_stats.batch_copy_calls, 1);
  atomic_fetch_add(&devsim_stats.batch_copy_spans, n);
  atomic_fetch_add(&devsim_stats.identity_spans, rec.identity);
  devsim_record_batch(&rec);
  if (!sz || (unsigned)op >= PLAIT_OP_COUNT_ || (n && !spans))
    return failf(st, PLAIT_ERR_INVALID_ARGUMENT, "devsim: batch_copy: bad dtype %d, op %d or "
                 "spans", (int)d, (int)op);
  if (d == PLAIT_BOOL && factor != 1.0)
    return failf(st, PLAIT_ERR_INVALID_ARGUMENT, "devsim: batch_copy: factor %g on bool", factor);
  item_t *it = item_new(st, IT_BATCH);
  if (!it || (n && !(it->spans = malloc(sizeof *it->spans * n)))) {
    free(it);
    return failf(st, PLAIT_ERR_NO_MEMORY, "devsim: out of memory");
  }
  plait_result_t rc = PLAIT_SUCCESS;
  for (size_t i = 0; i < n && !rc; i++) {
    char what[64];
    snprintf(what, sizeof what, "batch_copy span %zu dst", i);
    rc = real_of(st, what, spans[i].dst, spans[i].count * sz, &it->spans[i].dst);
    snprintf(what, sizeof what, "batch_copy span %zu src", i);
    it->spans[i].src = NULL; /* NULL: the identity */
    if (!rc && spans[i].src)
      rc = real_of(st, what, spans[i].src, spans[i].count * sz, (void **)&it->spans[i].src);
    it->spans[i].count = spans[i].count;
  }
  for (size_t i = 0; i < n && !rc && n <= 4096; i++)
    for (size_t j = 0; j < n && !rc; j++)
      if (overlaps(spans, i, j, sz))
        rc = failf(st, PLAIT_ERR_INVALID_ARGUMENT,
                   "devsim: batch_copy: span %zu's dst overlaps span %zu", i, j);
  if (rc) {
    free(it->spans), free(it);
    return rc;
  }
  it->n = n, it->dtype = d, it->op = op, it->factor = factor;
  return devsim_submit(st, it);
}

static plait_result_t ds_ready(void *state, void *stream) {
  devsim_state_t *st = state;
  devsim_stream_t *s = devsim_stream_of(stream);
  if (!s)
    return failf(st, PLAIT_ERR_INVALID_ARGUMENT, "devsim: ready: %p is not a devsim stream",
                 stream);
  item_t *it = item_new(st, IT_READY);
  if (!it) return PLAIT_ERR_NO_MEMORY;
  it->stream = s, it->ticket = devsim_stream_ticket(s);
  return devsim_submit(st, it);
}

static plait_result_t ds_notify(void *state, plait_done_fn done, void *ctx) {
  devsim_state_t *st = state;
  if (!done) return failf(st, PLAIT_ERR_INVALID_ARGUMENT, "devsim: notify: done is NULL");
  atomic_fetch_add(&devsim_stats.notify_calls, 1);
  item_t *it = item_new(st, IT_NOTIFY);
  if (!it) return PLAIT_ERR_NO_MEMORY;
  it->done = done, it->ctx = ctx, it->waited = 0;
  return devsim_submit(st, it);
}

static plait_result_t ds_interrupt(void *state, plait_result_t rc, const char *why) {
  devsim_state_t *st = state;
  atomic_fetch_add(&devsim_stats.interrupt_calls, 1);
  devsim_record_interrupt((int)rc, why);
  char msg[768];
  snprintf(msg, sizeof msg, "devsim: interrupted: %s", why ? why : "(no reason given)");
  devsim_fail(st->root, rc ? rc : PLAIT_ERR_PEER_LOST, msg);
  return PLAIT_SUCCESS;
}

/* Filled when the plugin is loaded (the core reads it after dlopen). */
DEVSIM_EXPORT plait_transport_t plait_transport_v2;

__attribute__((constructor)) static void devsim_load(void) {
  const char *s = getenv("DEVSIM_SYNC"), *nb = getenv("DEVSIM_NO_BATCH");
  sync_mode = s && !strcmp(s, "1");
  plait_transport_v2 = (plait_transport_t){
      PLAIT_TRANSPORT_ABI_VERSION, sizeof(plait_transport_t), "devsim",
      PLAIT_CAP_DEVICE_MEMORY | PLAIT_CAP_ALLREDUCE | PLAIT_CAP_ALLGATHERV |
          PLAIT_CAP_BROADCAST | PLAIT_CAP_ALLTOALLV | PLAIT_CAP_REDUCESCATTER | PLAIT_CAP_BARRIER,
      PLAIT_DTYPE_MASK_ALL, PLAIT_OP_MASK_ALL,
      0, 0, 0, 0, /* allreduce_flags, auto_place (by name only), fusion_piece, max tensor */
      ds_init, ds_finalize, ds_last_error,
      ds_allreduce, ds_allgatherv, ds_broadcast, ds_alltoallv, ds_reducescatter, ds_barrier,
      ds_mem_alloc, ds_mem_free, ds_mem_copy,
      .subset = ds_subset,
      .device = ds_device,
      .batch_copy = nb && !strcmp(nb, "1") ? NULL : ds_batch_copy,
      .ready = ds_ready,
      .notify = sync_mode ? NULL : ds_notify,
      .interrupt = ds_interrupt};
}
