#include "robustness/parked.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "errors.h"
#include "robustness/liveness.h"
#include "robustness/orphan_lock.h"
#include "robustness/tcp_links.h"

typedef struct parked {
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_av *av;
  struct fid_cq *cq;
  struct fid_ep *ep;
  struct fid_mr **mrs;
  int nmrs;
  char *bufs[3]; /* the scratch buffers (slots, work, tmp) sends may read */
  int sends;     /* posted sends not yet completed */
  ofi_peer_t *peers; /* the peers they go to */
  ofi_tcp_name_t *names; /* their endpoints' addresses (tcp_links.h) */
  int *linked;           /* TCP connections to each when parked */
  int npeers;
  ofi_tcp_name_t self;   /* this endpoint's address */
  char provider[64];
  int rescued; /* closed on a thread of its own, bounded (parked.h) */
  int owner_tid; /* rescued: the thread got out, whose mutexes stay held */
  struct parked *next;
} parked_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static parked_t *list;
static int pinned;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The list and libfabric must outlive the core's dlclose of this plugin. */
static void pin_locked(ofi_state_t *st) {
  Dl_info self;
  if (pinned || !dladdr((void *)&ofi_park, &self) || !self.dli_fname) return;
  pinned = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) != NULL;
  if (!pinned) OFI_WARN(st, "cannot keep %s loaded: %s", self.dli_fname, dlerror());
}

/* This endpoint's address and peer r's, for tcp_links.h (valid only for IP
 * addresses: tcp;ofi_rxm). */
static void name_self(ofi_state_t *st, ofi_tcp_name_t *n) {
  struct sockaddr_storage ss;
  size_t len = sizeof ss;
  memset(&ss, 0, sizeof ss);
  if (fi_getname(&st->ep->fid, &ss, &len) == 0) ofi_tcp_name(&ss, len, n);
  else memset(n, 0, sizeof *n);
}

static void name_peer(ofi_state_t *st, int r, ofi_tcp_name_t *n) {
  struct sockaddr_storage ss;
  size_t len = sizeof ss;
  memset(&ss, 0, sizeof ss);
  memset(n, 0, sizeof *n);
  if (st->av && st->addrs && fi_av_lookup(st->av, st->addrs[r], &ss, &len) == 0)
    ofi_tcp_name(&ss, len, n);
}

/* Moves st's objects to a new entry of the list; NULL when it cannot even
 * be remembered (st->abandoned then: left open, as before). */
static parked_t *park(ofi_state_t *st, int sends, int rescued) {
  parked_t *p = calloc(1, sizeof *p);
  int n = 0;
  for (ofi_mr_t *m = st->mrs; m; m = m->next) n += m->mr != NULL;
  if (p && n) p->mrs = calloc((size_t)n, sizeof *p->mrs);
  if (!p || (n && !p->mrs)) {
    free(p);
    st->abandoned = 1;
    return NULL;
  }
  int np = 0;
  for (int r = 0; st->park_peers && st->peers && r < st->nranks; r++) np += st->park_peers[r];
  if (np) {
    p->peers = calloc((size_t)np, sizeof *p->peers);
    p->names = calloc((size_t)np, sizeof *p->names);
    p->linked = calloc((size_t)np, sizeof *p->linked);
  }
  if (!rescued && p->peers && p->names && p->linked) { /* a rescued ep: no call */
    name_self(st, &p->self);
    for (int r = 0; r < st->nranks; r++)
      if (st->park_peers[r]) {
        p->peers[p->npeers] = st->peers[r];
        name_peer(st, r, &p->names[p->npeers]);
        p->linked[p->npeers] = ofi_tcp_links(&p->self, &p->names[p->npeers]);
        p->npeers++;
      }
  }
  for (ofi_mr_t *m = st->mrs; m; m = m->next)
    if (m->mr) p->mrs[p->nmrs++] = m->mr, m->mr = NULL;
  ofi_scratch_t *scratch[] = {&st->slots, &st->work, &st->tmp};
  for (int i = 0; i < 3; i++) {
    p->bufs[i] = scratch[i]->buf; /* its entry in st->mrs is untracked with the rest */
    scratch[i]->buf = NULL, scratch[i]->len = 0;
  }
  p->info = st->info, p->fabric = st->fabric, p->domain = st->domain;
  p->av = st->av, p->cq = st->cq, p->ep = st->ep, p->sends = sends, p->rescued = rescued;
  p->owner_tid = rescued ? st->rescued_tid : 0;
  snprintf(p->provider, sizeof p->provider, "%s", st->provider);
  st->info = NULL, st->fabric = NULL, st->domain = NULL;
  st->av = NULL, st->cq = NULL, st->ep = NULL;
  pthread_mutex_lock(&lock);
  pin_locked(st);
  p->next = list;
  list = p;
  pthread_mutex_unlock(&lock);
  return p;
}

void ofi_park(ofi_state_t *st, int sends) {
  if (park(st, sends, 0))
    OFI_INFO(st, "the broken endpoint has %d sends posted to a peer that may be alive: "
             "parked, closed once they complete or that peer is gone (%s)", sends,
             st->provider);
}

void ofi_park_rescued(ofi_state_t *st) {
  if (park(st, 0, 1))
    OFI_INFO(st, "the rescued endpoint is parked, to be closed at the next init (%s)",
             st->provider);
}

/* Whether peer i of p is known to be gone: its process on this host has
 * exited (liveness.h), or, where its pid cannot be checked (another host,
 * another pid namespace), every TCP connection this endpoint had to it when
 * parked has been closed by its end (tcp_links.h: killed or exited; a
 * stopped peer keeps them open). */
static int peer_gone(const parked_t *p, int i) {
  char why[128];
  if (ofi_peer_record_gone(&p->peers[i], why, sizeof why)) return 1;
  return p->linked[i] > 0 && ofi_tcp_links(&p->self, &p->names[i]) == 0;
}

/* Whether every peer of p's sends is gone; closing with sends posted to
 * gone peers is safe (reset_cycles, tcp_rank_killed_*, hosts_reset_*). */
static int peers_gone(const parked_t *p) {
  for (int i = 0; i < p->npeers; i++)
    if (!peer_gone(p, i)) return 0;
  return p->npeers > 0;
}

/* Reads p's queue for at most `for_s`; returns whether no send is left. */
static int drained(parked_t *p, double for_s) {
  double until = now_s() + for_s;
  while (p->sends > 0) {
    struct fi_cq_entry ent[32];
    ssize_t n = fi_cq_read(p->cq, ent, 32);
    if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry e;
      memset(&e, 0, sizeof e);
      if (fi_cq_readerr(p->cq, &e, 0) > 0) p->sends--; /* its context is gone: counted only */
    } else if (n > 0) {
      p->sends -= (int)n;
    } else if (now_s() >= until) {
      return 0;
    } else {
      struct timespec ts = {0, 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  return 1;
}

static void close_parked(parked_t *p) {
  fi_close(&p->ep->fid);
  if (p->av) fi_close(&p->av->fid);
  fi_close(&p->cq->fid);
  for (int i = 0; i < p->nmrs; i++) fi_close(&p->mrs[i]->fid);
  if (p->domain) fi_close(&p->domain->fid);
  if (p->fabric) fi_close(&p->fabric->fid);
  if (p->info) fi_freeinfo(p->info);
  for (int i = 0; i < 3; i++) free(p->bufs[i]);
  free(p->peers);
  free(p->names);
  free(p->linked);
  free(p->mrs);
  free(p);
}

/* A rescued entry's close on a thread of its own; the closer is freed by
 * whichever of the two threads lets go of it last. */
typedef struct closer {
  parked_t *p;
  atomic_int tid; /* the closing thread's, once it runs */
  atomic_int done;
  atomic_int refs;
} closer_t;

static void closer_release(closer_t *c) {
  if (atomic_fetch_sub(&c->refs, 1) == 1) free(c);
}

static void *close_thread(void *arg) {
  closer_t *c = arg;
  atomic_store(&c->tid, ofi_gettid());
  close_parked(c->p);
  atomic_store(&c->done, 1);
  closer_release(c);
  return NULL;
}

/* Closes a rescued entry on a thread of its own, which then owns it. A close
 * blocked on a mutex that the rescued thread, since exited, left held is let
 * through (orphan_lock.h; counted in *released); one that spins or blocks on
 * anything else stays there, and this thread goes on. Returns whether it
 * returned within OFI_PARKED_CLOSE_S. */
static int close_bounded(parked_t *p, int *released) {
  closer_t *c = calloc(1, sizeof *c);
  pthread_t t;
  if (!c) return 0; /* kept open: as before */
  c->p = p;
  int owner = p->owner_tid;
  atomic_init(&c->tid, 0);
  atomic_init(&c->done, 0);
  atomic_init(&c->refs, 2);
  if (pthread_create(&t, NULL, close_thread, c) != 0) {
    free(c);
    return 0;
  }
  double until = now_s() + OFI_PARKED_CLOSE_S;
  while (!atomic_load(&c->done) && now_s() < until) {
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
    int tid = atomic_load(&c->tid);
    if (tid && !atomic_load(&c->done) && ofi_release_orphan_lock(tid, owner)) (*released)++;
  }
  int done = atomic_load(&c->done);
  if (done) pthread_join(t, NULL);
  else pthread_detach(t);
  closer_release(c);
  return done;
}

int ofi_parked_sweep(ofi_state_t *st) {
  int closed = 0, left = 0, stuck = 0, released = 0;
  parked_t *rescued = NULL;
  pthread_mutex_lock(&lock);
  for (parked_t **pp = &list; *pp;) {
    parked_t *p = *pp;
    if (p->rescued) { /* never called here: closed below, bounded */
      *pp = p->next;
      p->next = rescued;
      rescued = p;
    /* the queue is read first, gone or not: rxm takes in its peers' hang-ups
     * before the close */
    } else if (drained(p, OFI_PARKED_SWEEP_S) || peers_gone(p)) {
      *pp = p->next;
      close_parked(p);
      closed++;
    } else {
      pp = &p->next;
      left++;
    }
  }
  pthread_mutex_unlock(&lock);
  while (rescued) {
    parked_t *p = rescued;
    rescued = p->next;
    if (close_bounded(p, &released)) closed++;
    else stuck++;
  }
  if (st && stuck)
    OFI_WARN(st, "%d rescued endpoints did not close within %.0f s (a lock the rescue left "
             "held): left open", stuck, OFI_PARKED_CLOSE_S);
  if (st && released)
    OFI_INFO(st, "released %d libfabric mutexes that a rescued thread, since exited, left held, "
             "for the close of its endpoint", released);
  if (st && (closed || left))
    OFI_DEBUG(st, "parked endpoints: %d closed now, %d still parked", closed, left);
  return left;
}
