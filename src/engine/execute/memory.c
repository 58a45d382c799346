/* The memory the executor allocates: host buffers for the outputs plait
 * allocates, and device memory from the transport (scratch freed when the
 * response has finished, and outputs handed to handles, freed by
 * plait_release). Its own file so that the per-collective files and
 * pending.c call it downward, not back into execute.c or execute_device.c. */
#include <pthread.h>
#include <stdlib.h>

#include "engine/execute/execute_internal.h"
#include "engine/submit/handle.h"

void *plait_exec_alloc_host(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, 64, bytes ? bytes : 64)) return NULL;
  return p;
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
