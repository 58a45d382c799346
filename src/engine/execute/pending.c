/* Device responses awaiting the transport's done callback: see pending.h. */
#include "engine/execute/pending.h"
#include "engine/execute/execute_internal.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/submit/handle.h"
#include "util/clock.h"
#include "util/log.h"

typedef struct op {
  struct op *next;
  plait_pending_t *p;
  plait_entry_t **es; /* the local entries */
  uint32_t n;
  uint8_t coll;
  char what[32];
  char name[PLAIT_MAX_NAME + 1]; /* the response's first name, for messages */
  const plait_transport_t *t;
  plait_scratch_t *scratch;
  double t_enqueued; /* the response's work was enqueued by then */
  /* written by done, under p->mu */
  int done;
  plait_result_t rc;
  char *msg;
  double t_done;
} op_t;

struct plait_pending {
  pthread_mutex_t mu;
  pthread_cond_t cond; /* broadcast by every done */
  op_t *head, *tail;
  int outstanding; /* ops whose done has not come */
  int wake_fd;     /* -1 once destroyed */
  double timeout_s;
};

plait_pending_t *plait_pending_new(int wake_fd, double timeout_s) {
  plait_pending_t *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  if (pthread_mutex_init(&p->mu, NULL) || pthread_cond_init(&p->cond, &a)) {
    pthread_condattr_destroy(&a);
    free(p);
    return NULL;
  }
  pthread_condattr_destroy(&a);
  p->wake_fd = wake_fd;
  p->timeout_s = timeout_s;
  return p;
}

static void op_free(op_t *o) {
  free(o->es);
  free(o->msg);
  free(o);
}

void plait_pending_destroy(plait_pending_t *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->wake_fd = -1;
  int left = p->outstanding;
  pthread_mutex_unlock(&p->mu);
  if (left) {
    PLAIT_WARN("pending", "%d device operation(s) never reported completion; their callbacks "
               "stay valid (the memory is kept)", left);
    return;
  }
  for (op_t *o = p->head; o;) {
    op_t *next = o->next;
    op_free(o);
    o = next;
  }
  pthread_cond_destroy(&p->cond);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

/* plait_done_fn: a plugin thread; records and wakes, nothing more. */
static void on_done(void *ctx, plait_result_t rc, const char *msg) {
  op_t *o = ctx;
  plait_pending_t *p = o->p;
  char *copy = rc && msg ? strdup(msg) : NULL;
  double now = plait_now();
  pthread_mutex_lock(&p->mu);
  if (!o->done) {
    o->done = 1;
    o->rc = rc;
    o->msg = copy, copy = NULL;
    o->t_done = now;
    p->outstanding--;
    pthread_cond_broadcast(&p->cond);
    uint64_t one = 1;
    if (p->wake_fd >= 0 && write(p->wake_fd, &one, sizeof one) < 0) { /* already awake */
    }
  }
  pthread_mutex_unlock(&p->mu);
  free(copy);
}

static const char *what_of(const plait_response_t *r) {
  if (r->coll == PLAIT_COLL_ALLREDUCE) return r->n > 1 ? "fused allreduce of" : "allreduce";
  return plait_coll_name((plait_coll_t)r->coll);
}

plait_result_t plait_pending_add(plait_pending_t *p, plait_exec_t *x, const plait_response_t *r,
                                 plait_entry_t **es, double t0) {
  op_t *o = calloc(1, sizeof *o);
  if (o) o->es = calloc(r->n ? r->n : 1, sizeof *o->es);
  if (!o || !o->es) {
    free(o);
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory waiting for the transport");
  }
  o->p = p;
  o->coll = r->coll;
  o->t = x->t;
  o->t_enqueued = plait_now();
  (void)t0;
  snprintf(o->what, sizeof o->what, "%s", what_of(r));
  snprintf(o->name, sizeof o->name, "%s", r->n ? r->e[0].name : "");
  pthread_mutex_lock(&p->mu);
  p->outstanding++;
  if (p->tail) p->tail->next = o;
  else p->head = o;
  p->tail = o;
  pthread_mutex_unlock(&p->mu);
  /* the entries are the list's before done can come */
  for (uint32_t i = 0; i < r->n; i++) {
    if (!es[i]) continue;
    char key[PLAIT_OP_KEY_MAX];
    plait_namemap_remove(x->local, plait_op_key(key, es[i]->meta.pset, es[i]->name));
    o->es[o->n++] = es[i];
  }
  o->scratch = x->scratch;
  x->scratch = NULL;
  plait_result_t rc = x->t->notify(x->ts, on_done, o);
  if (rc == PLAIT_SUCCESS) return PLAIT_SUCCESS;
  /* no done will come: the job fails; the entries and buffers go back */
  rc = plait_exec_transport_error(x, rc, o->what, o->name);
  pthread_mutex_lock(&p->mu);
  p->outstanding--;
  o->done = 1;
  o->rc = rc;
  o->msg = strdup(plait_last_error());
  pthread_mutex_unlock(&p->mu);
  return rc;
}

/* Takes o (done) off the list; p->mu is held. */
static void unlink_op(plait_pending_t *p, op_t *o) {
  op_t **at = &p->head, *prev = NULL;
  while (*at != o) prev = *at, at = &(*at)->next;
  *at = o->next;
  if (p->tail == o) p->tail = prev;
}

static void release_scratch(plait_exec_t *x, op_t *o) {
  for (plait_scratch_t *s = o->scratch; s;) {
    plait_scratch_t *next = s->next;
    plait_exec_dev_free(x, s->ptr);
    free(s);
    s = next;
  }
  o->scratch = NULL;
}

plait_result_t plait_pending_reap(plait_pending_t *p, plait_exec_t *x) {
  if (!p) return PLAIT_SUCCESS;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    op_t *o = p->head;
    while (o && !o->done) o = o->next;
    if (o && o->rc) { /* the job fails: the entries stay for plait_pending_fail_all */
      plait_result_t rc = o->rc;
      const char *plugin = o->msg && *o->msg ? o->msg : plait_strerror(rc);
      plait_result_t err = strstr(plugin, "' failed in transport '")
                               ? plait_error(rc, "%s", plugin) /* already said at enqueue */
                               : plait_error(rc, "%s '%s' failed in transport '%s': %s", o->what,
                                             o->name, o->t->name, plugin);
      pthread_mutex_unlock(&p->mu);
      return err;
    }
    if (o) unlink_op(p, o);
    pthread_mutex_unlock(&p->mu);
    if (!o) return PLAIT_SUCCESS;
    release_scratch(x, o);
    plait_stats_t *s = plait_stats_lock(x->stats); /* enqueued -> done: the transport's */
    s->transport_s += o->t_done > o->t_enqueued ? o->t_done - o->t_enqueued : 0;
    plait_stats_unlock(x->stats);
    for (uint32_t i = 0; i < o->n; i++) {
      plait_entry_t *e = o->es[i];
      if (o->coll == PLAIT_COLL_ALLREDUCE)
        plait_handle_set_output(e->handle, &e->output, NULL, NULL, 0);
      plait_exec_finish(x, e, PLAIT_SUCCESS, NULL);
    }
    op_free(o);
  }
}

int plait_pending_outstanding(plait_pending_t *p) {
  if (!p) return 0;
  pthread_mutex_lock(&p->mu);
  int n = p->outstanding;
  pthread_mutex_unlock(&p->mu);
  return n;
}

int plait_pending_wait(plait_pending_t *p, double timeout_s) {
  if (!p) return 0;
  if (timeout_s < 0) timeout_s = p->timeout_s;
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  double whole = floor(timeout_s > 1e6 ? 1e6 : timeout_s);
  until.tv_sec += (time_t)whole;
  until.tv_nsec += (long)((timeout_s - whole) * 1e9);
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&p->mu);
  while (p->outstanding > 0)
    if (plait_cond_wait_until(&p->cond, &p->mu, &until) == ETIMEDOUT) break;
  int left = p->outstanding;
  pthread_mutex_unlock(&p->mu);
  return left;
}

void plait_pending_fail_all(plait_pending_t *p, plait_exec_t *x, plait_result_t rc,
                            const char *msg) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  op_t *all = p->head, *keep = NULL, *keep_tail = NULL;
  p->head = p->tail = NULL;
  pthread_mutex_unlock(&p->mu);
  for (op_t *o = all; o;) {
    op_t *next = o->next;
    pthread_mutex_lock(&p->mu);
    int done = o->done;
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; i < o->n; i++) plait_exec_finish(x, o->es[i], rc, msg);
    o->n = 0;
    if (done) {
      release_scratch(x, o);
      op_free(o);
    } else { /* its done may still come: keep it (and its buffers) */
      o->next = NULL;
      if (keep_tail) keep_tail->next = o;
      else keep = o;
      keep_tail = o;
    }
    o = next;
  }
  pthread_mutex_lock(&p->mu);
  p->head = keep;
  p->tail = keep_tail;
  pthread_mutex_unlock(&p->mu);
}
