/* devsim's user streams (what a framework's CUDA streams are to nccl): each
 * a thread running delayed writes into device memory in FIFO order; the
 * completion gate; the counters tests read. One mutex and condition
 * variable (g_mu, g_cv) cover stream progress, the gate and the stop flags
 * of waiting workers, so a waiter never spins. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define STREAM_MAGIC 0x64657673u /* "devs" */

typedef struct write_op {
  struct write_op *next;
  void *real;
  void *data;
  size_t bytes;
  int delay_ms;
} write_op_t;

struct devsim_stream {
  uint32_t magic;
  pthread_t thread;
  write_op_t *head, *tail;
  uint64_t enqueued, completed; /* under g_mu */
  int stopping;
  atomic_long ready_calls;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int gate_closed;
static devsim_stream_t *default_stream;

devsim_stats_t devsim_stats;

static void *stream_main(void *arg) {
  devsim_stream_t *s = arg;
  pthread_mutex_lock(&g_mu);
  for (;;) {
    while (!s->head && !s->stopping) pthread_cond_wait(&g_cv, &g_mu);
    if (!s->head) break;
    write_op_t *w = s->head;
    pthread_mutex_unlock(&g_mu);
    struct timespec ts = {w->delay_ms / 1000, (long)(w->delay_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
    memcpy(w->real, w->data, w->bytes);
    pthread_mutex_lock(&g_mu);
    s->head = w->next;
    if (!s->head) s->tail = NULL;
    s->completed++;
    free(w->data);
    free(w);
    pthread_cond_broadcast(&g_cv);
  }
  pthread_mutex_unlock(&g_mu);
  return NULL;
}

DEVSIM_EXPORT void *devsim_stream_create(void) {
  devsim_stream_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->magic = STREAM_MAGIC;
  if (pthread_create(&s->thread, NULL, stream_main, s)) {
    free(s);
    return NULL;
  }
  return s;
}

DEVSIM_EXPORT void devsim_stream_synchronize(void *stream) {
  devsim_stream_t *s = devsim_stream_of(stream);
  if (!s) return;
  pthread_mutex_lock(&g_mu);
  while (s->completed < s->enqueued) pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
}

DEVSIM_EXPORT void devsim_stream_destroy(void *stream) {
  devsim_stream_t *s = devsim_stream_of(stream);
  if (!s || s == default_stream) return;
  pthread_mutex_lock(&g_mu);
  s->stopping = 1;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
  pthread_join(s->thread, NULL);
  s->magic = 0;
  free(s);
}

DEVSIM_EXPORT void *devsim_default_stream(void) {
  pthread_mutex_lock(&g_mu);
  devsim_stream_t *s = default_stream;
  pthread_mutex_unlock(&g_mu);
  if (s) return s;
  s = devsim_stream_create();
  pthread_mutex_lock(&g_mu);
  if (!default_stream) {
    default_stream = s;
    s = NULL;
  }
  devsim_stream_t *d = default_stream;
  pthread_mutex_unlock(&g_mu);
  if (s) devsim_stream_destroy(s); /* lost a race */
  return d;
}

devsim_stream_t *devsim_stream_of(void *stream) {
  devsim_stream_t *s = stream ? stream : devsim_default_stream();
  return s && s->magic == STREAM_MAGIC ? s : NULL;
}

DEVSIM_EXPORT int devsim_stream_enqueue_write(void *stream, void *dptr, const void *src,
                                              size_t bytes, int delay_ms) {
  devsim_stream_t *s = devsim_stream_of(stream);
  void *real = devsim_real(dptr, bytes);
  write_op_t *w = calloc(1, sizeof *w);
  if (!s || !real || !w || delay_ms < 0 || !(w->data = malloc(bytes ? bytes : 1))) {
    free(w);
    return -1;
  }
  memcpy(w->data, src, bytes);
  w->real = real, w->bytes = bytes, w->delay_ms = delay_ms;
  pthread_mutex_lock(&g_mu);
  if (s->tail) s->tail->next = w;
  else s->head = w;
  s->tail = w;
  s->enqueued++;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
  return 0;
}

DEVSIM_EXPORT long devsim_ready_calls(void *stream) {
  devsim_stream_t *s = devsim_stream_of(stream);
  return s ? atomic_load(&s->ready_calls) : -1;
}

uint64_t devsim_stream_ticket(devsim_stream_t *s) {
  atomic_fetch_add(&s->ready_calls, 1);
  atomic_fetch_add(&devsim_stats.ready_calls, 1);
  pthread_mutex_lock(&g_mu);
  uint64_t t = s->enqueued;
  pthread_mutex_unlock(&g_mu);
  return t;
}

int devsim_stream_wait(devsim_stream_t *s, uint64_t ticket, const atomic_int *stop) {
  pthread_mutex_lock(&g_mu);
  while (s->completed < ticket && !atomic_load(stop)) pthread_cond_wait(&g_cv, &g_mu);
  int rc = s->completed < ticket ? -1 : 0;
  pthread_mutex_unlock(&g_mu);
  return rc;
}

DEVSIM_EXPORT void devsim_gate(int closed) {
  pthread_mutex_lock(&g_mu);
  gate_closed = closed != 0;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
}

void devsim_gate_wait(const atomic_int *stop) {
  pthread_mutex_lock(&g_mu);
  while (gate_closed && !atomic_load(stop)) pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
}

void devsim_wake(void) {
  pthread_mutex_lock(&g_mu);
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
}

/* ---- counters ---- */

#define HISTORY 256
static pthread_mutex_t hist_mu = PTHREAD_MUTEX_INITIALIZER;
static devsim_batch_record_t history[HISTORY];
static size_t history_n; /* records ever made since the last reset */
static int interrupt_rc;
static char interrupt_why[512];

void devsim_record_batch(const devsim_batch_record_t *r) {
  pthread_mutex_lock(&hist_mu);
  history[history_n++ % HISTORY] = *r;
  pthread_mutex_unlock(&hist_mu);
}

void devsim_record_interrupt(int rc, const char *why) {
  pthread_mutex_lock(&hist_mu);
  interrupt_rc = rc;
  snprintf(interrupt_why, sizeof interrupt_why, "%s", why ? why : "");
  pthread_mutex_unlock(&hist_mu);
}

DEVSIM_EXPORT size_t devsim_batch_history(devsim_batch_record_t *out, size_t cap) {
  pthread_mutex_lock(&hist_mu);
  size_t have = history_n < HISTORY ? history_n : HISTORY;
  size_t n = have < cap ? have : cap;
  for (size_t i = 0; i < n; i++) out[i] = history[(history_n - n + i) % HISTORY];
  pthread_mutex_unlock(&hist_mu);
  return n;
}

DEVSIM_EXPORT int devsim_last_interrupt(char *why, size_t len) {
  pthread_mutex_lock(&hist_mu);
  int rc = interrupt_rc;
  if (why && len) snprintf(why, len, "%s", interrupt_why);
  pthread_mutex_unlock(&hist_mu);
  return rc;
}

DEVSIM_EXPORT void devsim_counters(devsim_counters_t *o) {
  devsim_stats_t *s = &devsim_stats;
  o->batch_copy_calls = atomic_load(&s->batch_copy_calls);
  o->batch_copy_spans = atomic_load(&s->batch_copy_spans);
  o->identity_spans = atomic_load(&s->identity_spans);
  o->collectives = atomic_load(&s->collectives);
  o->mem_copy_calls = atomic_load(&s->mem_copy_calls);
  o->ready_calls = atomic_load(&s->ready_calls);
  o->notify_calls = atomic_load(&s->notify_calls);
  o->done_calls = atomic_load(&s->done_calls);
  o->interrupt_calls = atomic_load(&s->interrupt_calls);
  o->failed_dones = atomic_load(&s->failed_dones);
  o->collectives_run = atomic_load(&s->collectives_run);
}

DEVSIM_EXPORT void devsim_counters_reset(void) {
  devsim_stats_t *s = &devsim_stats;
  atomic_store(&s->batch_copy_calls, 0);
  atomic_store(&s->batch_copy_spans, 0);
  atomic_store(&s->identity_spans, 0);
  atomic_store(&s->collectives, 0);
  atomic_store(&s->mem_copy_calls, 0);
  atomic_store(&s->ready_calls, 0);
  atomic_store(&s->notify_calls, 0);
  atomic_store(&s->done_calls, 0);
  atomic_store(&s->interrupt_calls, 0);
  atomic_store(&s->failed_dones, 0);
  atomic_store(&s->collectives_run, 0);
  pthread_mutex_lock(&hist_mu);
  history_n = 0;
  pthread_mutex_unlock(&hist_mu);
}
