#include "setup.h"

#include <ctype.h>
#include <dlfcn.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/coll.h"
#include "errors.h"
#include "robustness/liveness.h"
#include "robustness/parked.h"
#include "engine/crowding.h"
#include "engine/mr.h"
#include "engine/progress.h"
#include "robustness/rescue.h"
#include "robustness/shm_stale.h"

/* 1.14: FI_CONTEXT2 and the mr_mode bits; newer libfabrics accept it. */
#define OFI_API_VERSION FI_VERSION(1, 14)
#define ADDR_MAX 256
#define CARD_HEAD (4 + 8 + 8 + 8 + 8 + 8) /* then the name */
#define CARD_BYTES (CARD_HEAD + ADDR_MAX)

typedef struct start_ctx {
  const plait_transport_init_args_t *args;
  ofi_state_t *st;
  char *err;
  size_t err_len;
} start_ctx_t;

#define SETUP_FAIL(c, code, ...)                                               \
  do {                                                                         \
    snprintf((c)->err, (c)->err_len, __VA_ARGS__);                             \
    return (code);                                                             \
  } while (0)

static struct fi_info *make_hints(const char *prov) {
  struct fi_info *h = fi_allocinfo();
  if (!h) return NULL;
  h->caps = FI_TAGGED | FI_SEND | FI_RECV;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->ep_attr->type = FI_EP_RDM;
  h->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  h->domain_attr->resource_mgmt = FI_RM_ENABLED;
  if (prov) {
    h->fabric_attr->prov_name = strdup(prov);
    if (!h->fabric_attr->prov_name) {
      fi_freeinfo(h);
      return NULL;
    }
  }
  return h;
}

/* "tcp;ofi_rxm" -> "tcp": the core provider, which reads FI_<NAME>_IFACE. */
static int iface_var_set(const char *prov, char *var, size_t len) {
  size_t o = (size_t)snprintf(var, len, "FI_");
  for (const char *p = prov; *p && *p != ';' && o + 7 < len; p++)
    var[o++] = (char)toupper((unsigned char)*p);
  snprintf(var + o, len - o, "_IFACE");
  const char *v = getenv(var);
  return v && *v;
}

static int addressed_by_ip(uint32_t format) {
  return format == FI_SOCKADDR || format == FI_SOCKADDR_IN || format == FI_SOCKADDR_IN6;
}

static int is_shm(const char *prov) { return strncmp(prov, "shm", 3) == 0 && (!prov[3] || prov[3] == ';'); }

/*
 * Picks the provider: libfabric's choice (FI_PROVIDER narrows it), except
 * that with every rank on this host shm comes first where FI_PROVIDER lets
 * it in (unset, or naming it: "tcp,shm" serves a job across hosts over tcp
 * and the hierarchical collectives' local instance over shm), and with
 * ranks on several hosts shm is skipped. An IP-addressed provider (tcp,
 * sockets, verbs over IP) is asked again for an endpoint on the control
 * plane's address (FI_SOURCE), so that on one host it uses loopback and on
 * many the network the user chose for the rendezvous, unless the user names
 * the interface with FI_<PROVIDER>_IFACE.
 */
static plait_result_t choose(start_ctx_t *c, struct fi_info **out) {
  const char *env_prov = getenv("FI_PROVIDER");
  char wanted[160];
  snprintf(wanted, sizeof wanted, "%s%s%s", env_prov ? " (FI_PROVIDER=" : "",
           env_prov ? env_prov : "", env_prov ? ")" : "");
  struct fi_info *hints = make_hints(NULL), *list = NULL;
  if (!hints) SETUP_FAIL(c, PLAIT_ERR_NO_MEMORY, "out of memory");
  int rc = fi_getinfo(OFI_API_VERSION, NULL, NULL, 0, hints, &list);
  fi_freeinfo(hints);
  if (rc != 0)
    SETUP_FAIL(c, PLAIT_ERR_UNSUPPORTED,
               "no libfabric provider%s offers FI_EP_RDM endpoints with tagged messages "
               "here: fi_getinfo: %s",
               wanted, fi_strerror(-rc));
  const struct fi_info *pick = NULL;
  int one_host = c->args->local_size == c->args->nranks && c->args->cross_size <= 1;
  /* Left to choose, on one host: shared memory first. */
  for (const struct fi_info *i = list; i && !pick && one_host; i = i->next)
    if (is_shm(i->fabric_attr->prov_name)) pick = i;
  for (const struct fi_info *i = list; i && !pick; i = i->next)
    if (one_host || !is_shm(i->fabric_attr->prov_name)) pick = i;
  if (!pick) {
    fi_freeinfo(list);
    SETUP_FAIL(c, PLAIT_ERR_UNSUPPORTED,
               "the ranks are on several hosts (%d of %d here), but the only libfabric "
               "provider%s is shm, which reaches this host only",
               c->args->local_size, c->args->nranks, wanted);
  }
  char prov[64];
  snprintf(prov, sizeof prov, "%s", pick->fabric_attr->prov_name);
  char var[64];
  const char *host = c->args->host_address;
  if (!addressed_by_ip(pick->addr_format) || iface_var_set(prov, var, sizeof var) || !host ||
      !*host) {
    *out = fi_dupinfo(pick);
    fi_freeinfo(list);
    if (!*out) SETUP_FAIL(c, PLAIT_ERR_NO_MEMORY, "out of memory");
    return PLAIT_SUCCESS;
  }
  fi_freeinfo(list);
  hints = make_hints(prov);
  if (!hints) SETUP_FAIL(c, PLAIT_ERR_NO_MEMORY, "out of memory");
  list = NULL;
  rc = fi_getinfo(OFI_API_VERSION, host, NULL, FI_SOURCE, hints, &list);
  fi_freeinfo(hints);
  if (rc != 0)
    SETUP_FAIL(c, PLAIT_ERR_UNSUPPORTED,
               "libfabric provider %s has no endpoint on this host's control-plane address "
               "%s: fi_getinfo: %s (name the interface with %s)",
               prov, host, fi_strerror(-rc), var);
  *out = fi_dupinfo(list);
  fi_freeinfo(list);
  if (!*out) SETUP_FAIL(c, PLAIT_ERR_NO_MEMORY, "out of memory");
  return PLAIT_SUCCESS;
}

#define FI_TRY(c, call, what)                                                  \
  do {                                                                         \
    int fi_rc_ = (call);                                                       \
    if (fi_rc_ != 0)                                                           \
      SETUP_FAIL(c, PLAIT_ERR_TRANSPORT, "%s failed: %s (provider %s)", what,  \
                 fi_strerror(-fi_rc_), (c)->st->provider);                     \
  } while (0)

static plait_result_t open_endpoint(start_ctx_t *c) {
  ofi_state_t *st = c->st;
  struct fi_info *info = st->info;
  FI_TRY(c, fi_fabric(info->fabric_attr, &st->fabric, NULL), "fi_fabric");
  FI_TRY(c, fi_domain(st->fabric, info, &st->domain, NULL), "fi_domain");
  struct fi_cq_attr cq;
  memset(&cq, 0, sizeof cq);
  cq.format = FI_CQ_FORMAT_CONTEXT;
  cq.wait_obj = FI_WAIT_NONE;
  FI_TRY(c, fi_cq_open(st->domain, &cq, &st->cq, NULL), "fi_cq_open");
  struct fi_av_attr av;
  memset(&av, 0, sizeof av);
  av.type = info->domain_attr->av_type;
  av.count = (size_t)st->nranks;
  FI_TRY(c, fi_av_open(st->domain, &av, &st->av, NULL), "fi_av_open");
  if (strcmp(info->fabric_attr->prov_name, "shm") == 0) ofi_shm_clear_stale(st);
  FI_TRY(c, fi_endpoint(st->domain, info, &st->ep, NULL), "fi_endpoint");
  FI_TRY(c, fi_ep_bind(st->ep, &st->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  FI_TRY(c, fi_ep_bind(st->ep, &st->av->fid, 0), "fi_ep_bind(av)");
  FI_TRY(c, fi_enable(st->ep), "fi_enable");
  uint64_t mr_mode = (uint64_t)info->domain_attr->mr_mode;
  st->need_mr = (mr_mode & FI_MR_LOCAL) || st->tun.mr_always;
  st->mr_endpoint = (mr_mode & FI_MR_ENDPOINT) != 0;
  st->mr_prov_key = (mr_mode & FI_MR_PROV_KEY) != 0;
  st->next_key = 1;
  st->inject_size = info->tx_attr->inject_size;
  st->max_msg = info->ep_attr->max_msg_size ? info->ep_attr->max_msg_size : SIZE_MAX;
  size_t iov = info->tx_attr->iov_limit < info->rx_attr->iov_limit ? info->tx_attr->iov_limit
                                                                   : info->rx_attr->iov_limit;
  st->iov_limit = iov < 1 ? 1 : iov > OFI_IOV_MAX ? OFI_IOV_MAX : iov;
  return PLAIT_SUCCESS;
}

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Every rank's endpoint name (and identity, for liveness) through the
 * bootstrap, then into the address vector. */
static plait_result_t exchange(start_ctx_t *c) {
  ofi_state_t *st = c->st;
  const plait_bootstrap_t *b = c->args->bootstrap;
  unsigned char mine[CARD_BYTES];
  memset(mine, 0, sizeof mine);
  size_t addrlen = ADDR_MAX;
  FI_TRY(c, fi_getname(&st->ep->fid, mine + CARD_HEAD, &addrlen), "fi_getname");
  int64_t pid;
  uint64_t start, kernel;
  ofi_self_identity(&pid, &start, &kernel);
  put_le(mine, addrlen, 4);
  put_le(mine + 4, (uint64_t)pid, 8);
  put_le(mine + 12, start, 8);
  put_le(mine + 20, kernel, 8);
  st->direct_cookie = ((uint64_t)pid << 32) ^ (uint64_t)(uintptr_t)st ^ start;
  put_le(mine + 28, (uint64_t)(uintptr_t)&st->direct_cookie, 8); /* direct.c reads it */
  put_le(mine + 36, st->direct_cookie, 8);
  size_t n = (size_t)st->nranks;
  unsigned char *all = malloc(n * CARD_BYTES);
  uint64_t *cookies = calloc(2 * n, sizeof *cookies);
  st->addrs = calloc(n, sizeof *st->addrs);
  st->peers = calloc(n, sizeof *st->peers);
  if (!all || !cookies || !st->addrs || !st->peers) {
    free(all), free(cookies);
    SETUP_FAIL(c, PLAIT_ERR_NO_MEMORY, "out of memory");
  }
  plait_result_t rc = b->allgather(b->ctx, mine, CARD_BYTES, all);
  if (rc) {
    free(all), free(cookies);
    SETUP_FAIL(c, rc, "exchanging endpoint names through the bootstrap failed (%s)",
               st->provider);
  }
  for (int r = 0; r < st->nranks; r++) {
    const unsigned char *card = all + (size_t)r * CARD_BYTES;
    size_t len = (size_t)get_le(card, 4);
    st->peers[r].pid = (int64_t)get_le(card + 4, 8);
    st->peers[r].start_time = get_le(card + 12, 8);
    uint64_t k = get_le(card + 20, 8);
    st->peers[r].same_kernel = r != st->rank && k != 0 && k == kernel;
    cookies[2 * r] = get_le(card + 28, 8);
    cookies[2 * r + 1] = get_le(card + 36, 8);
    if (len == 0 || len > ADDR_MAX) {
      free(all), free(cookies);
      SETUP_FAIL(c, PLAIT_ERR_PROTOCOL, "rank %d sent an endpoint name of %zu bytes", r, len);
    }
    int got = fi_av_insert(st->av, card + CARD_HEAD, 1, &st->addrs[r], 0, NULL);
    if (got != 1) {
      char name[ADDR_MAX * 2];
      size_t nl = sizeof name;
      fi_av_straddr(st->av, card + CARD_HEAD, name, &nl);
      free(all), free(cookies);
      SETUP_FAIL(c, PLAIT_ERR_TRANSPORT,
                 "fi_av_insert of rank %d's address %s failed: %s (provider %s; did every "
                 "rank pick the same provider?)",
                 r, name, got < 0 ? fi_strerror(-got) : "not inserted", st->provider);
    }
  }
  if (st->log && st->log_level <= PLAIT_LOG_DEBUG) {
    char name[ADDR_MAX * 2];
    size_t nl = sizeof name;
    fi_av_straddr(st->av, mine + CARD_HEAD, name, &nl);
    const struct fi_info *i = st->info;
    OFI_DEBUG(st,
              "rank %d of %d: provider %s, fabric %s, domain %s, address %s, mr_mode 0x%x "
              "(%s), inject %zu bytes, %zu pieces per message, %s data progress",
              st->rank, st->nranks, st->provider, i->fabric_attr->name, i->domain_attr->name,
              name, (unsigned)i->domain_attr->mr_mode,
              st->need_mr ? "registering" : "no registration", st->inject_size,
              st->iov_limit, i->domain_attr->data_progress == FI_PROGRESS_MANUAL ? "manual" : "automatic");
  }
  free(all);
  rc = ofi_direct_decide(st, cookies, b);
  free(cookies);
  if (rc) SETUP_FAIL(c, rc, "agreeing through the bootstrap on direct reads of the peers' memory "
                     "failed (%s)", st->provider);
  return PLAIT_SUCCESS;
}

/* Rank 0's settings for everyone, so that all ranks choose alike. */
static plait_result_t agree_tunables(start_ctx_t *c) {
  const plait_bootstrap_t *b = c->args->bootstrap;
  unsigned char wire[OFI_TUNABLES_WIRE];
  ofi_tunables_encode(&c->st->tun, wire);
  plait_result_t rc = b->broadcast(b->ctx, wire, sizeof wire, 0);
  if (rc) SETUP_FAIL(c, rc, "sharing rank 0's PLAIT_OFI_* settings through the bootstrap failed");
  ofi_tunables_decode(&c->st->tun, wire);
  return PLAIT_SUCCESS;
}

/*
 * Keeps libfabric loaded for the rest of the process, even when the core
 * unloads this plugin: libfabric sets up process-wide state (providers,
 * parameters) on first use that it neither frees nor expects to set up again
 * when unloaded; kept, a later init also skips its 0.3 s start-up.
 */
static void pin_libfabric(void) {
  Dl_info info;
  if (dladdr((void *)fi_getinfo, &info) && info.dli_fname)
    (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

static plait_result_t start(start_ctx_t *c) {
  const plait_transport_init_args_t *a = c->args;
  ofi_state_t *st = c->st;
  plait_result_t rc = ofi_tunables_read(&st->tun, st->nranks, c->err, c->err_len);
  if (rc) return rc;
  /* this rank's own (not agreed): how it waits depends on its host's CPUs */
  const int cpus = ofi_cpus(), local = a->local_size > 0 ? a->local_size : st->nranks;
  if ((rc = ofi_yield_window(getenv("PLAIT_OFI_YIELD_US"), local, cpus, &st->yield_s, c->err,
                             c->err_len)))
    return rc;
  OFI_LOG(st, st->rank == 0 ? PLAIT_LOG_INFO : PLAIT_LOG_DEBUG,
          "progress: %d ranks on this host, %d CPU%s: %s; a wait yields for %g us before "
          "sleeping (PLAIT_OFI_YIELD_US=%s)", local, cpus, cpus == 1 ? "" : "s",
          ofi_crowded(local, cpus) ? "oversubscribed" : "not oversubscribed",
          st->yield_s * 1e6, getenv("PLAIT_OFI_YIELD_US") ? getenv("PLAIT_OFI_YIELD_US") : "auto");
  char unknown[512];
  if (ofi_tunables_unknown(unknown, sizeof unknown))
    OFI_WARN(st, "unknown variable(s) ignored: %s (the ofi plugin reads PLAIT_OFI_CHUNK, "
             "PLAIT_OFI_WINDOW, PLAIT_OFI_MR, PLAIT_OFI_{ALLREDUCE,ALLGATHERV,"
             "REDUCESCATTER}_RING_MIN, PLAIT_OFI_BROADCAST_CHAIN_MIN, PLAIT_OFI_HUGE_PAGES_MIN, "
             "PLAIT_OFI_SPANS_MIN, PLAIT_OFI_DIRECT and PLAIT_OFI_YIELD_US)", unknown);
  if (st->nranks == 1) return PLAIT_SUCCESS; /* every collective is local */
  if (!a->bootstrap) SETUP_FAIL(c, PLAIT_ERR_INVALID_ARGUMENT, "init: args->bootstrap is NULL");
  if (a->bootstrap->size < PLAIT_BOOTSTRAP_SIZE_V1)
    SETUP_FAIL(c, PLAIT_ERR_INVALID_ARGUMENT, "init: bootstrap->size is %zu, less than %zu, the "
               "first layout of plait_bootstrap_t", a->bootstrap->size,
               (size_t)PLAIT_BOOTSTRAP_SIZE_V1);
  if (!a->bootstrap->allgather || !a->bootstrap->broadcast)
    SETUP_FAIL(c, PLAIT_ERR_INVALID_ARGUMENT, "init: bootstrap->allgather or broadcast is NULL");
  if ((rc = agree_tunables(c))) return rc;
  pin_libfabric();
  if ((rc = choose(c, &st->info))) return rc;
  snprintf(st->provider, sizeof st->provider, "%s", st->info->fabric_attr->prov_name);
  if ((rc = open_endpoint(c))) return rc;
  if ((rc = exchange(c))) return rc;
  if ((rc = ofi_rescue_start(st))) SETUP_FAIL(c, rc, "%s", st->err);
  return PLAIT_SUCCESS;
}

plait_result_t ofi_probe(const plait_transport_init_args_t *args, char *detail, size_t len) {
  if (!args || args->size < PLAIT_TRANSPORT_INIT_ARGS_SIZE_V1 || args->nranks < 1 ||
      args->rank < 0 || args->rank >= args->nranks) {
    snprintf(detail, len, "probe: args is NULL or not valid");
    return PLAIT_ERR_INVALID_ARGUMENT;
  }
  if (args->nranks > (1 << 20)) {
    snprintf(detail, len, "%d ranks; the ofi transport's tags take up to %d", args->nranks,
             1 << 20);
    return PLAIT_ERR_UNSUPPORTED;
  }
  if (args->nranks == 1) {
    snprintf(detail, len, "one rank, nothing to open");
    return PLAIT_SUCCESS;
  }
  pin_libfabric();
  start_ctx_t c = {args, NULL, detail, len};
  struct fi_info *info = NULL;
  plait_result_t rc = choose(&c, &info); /* init's own choice, so probe and init agree */
  if (rc) return rc;
  snprintf(detail, len, "%s", info->fabric_attr->prov_name);
  fi_freeinfo(info);
  return PLAIT_SUCCESS;
}

plait_result_t ofi_start(const plait_transport_init_args_t *args, ofi_state_t **out, char *err,
                         size_t err_len) {
  if (!args || args->size < PLAIT_TRANSPORT_INIT_ARGS_SIZE_V1) {
    snprintf(err, err_len, "init: args is NULL or its size %zu is less than %zu, the first "
             "layout of plait_transport_init_args_t", args ? args->size : 0,
             (size_t)PLAIT_TRANSPORT_INIT_ARGS_SIZE_V1);
    return PLAIT_ERR_INVALID_ARGUMENT;
  }
  if (args->nranks < 1 || args->rank < 0 || args->rank >= args->nranks || !args->reduce ||
      !args->divide) {
    snprintf(err, err_len, "init: bad arguments (rank %d of %d, reduce %p, divide %p)",
             args->rank, args->nranks, (void *)args->reduce, (void *)args->divide);
    return PLAIT_ERR_INVALID_ARGUMENT;
  }
  if (args->nranks > (1 << 20)) {
    snprintf(err, err_len, "init: %d ranks; the ofi transport's tags take up to %d", args->nranks,
             1 << 20);
    return PLAIT_ERR_UNSUPPORTED;
  }
  ofi_state_t *st = calloc(1, sizeof *st);
  if (!st) {
    snprintf(err, err_len, "init: out of memory");
    return PLAIT_ERR_NO_MEMORY;
  }
  st->rank = args->rank;
  st->nranks = args->nranks;
  st->timeout_s = args->timeout_s > 0 ? args->timeout_s : 60;
  st->log = args->log;
  st->log_level = args->log_level;
  st->reduce = args->reduce;
  st->divide = args->divide;
  st->scale = args->scale;
  st->reduce_scale = PLAIT_INIT_ARGS_HAS(args, reduce_scale) ? args->reduce_scale : NULL;
  snprintf(st->provider, sizeof st->provider, "none");
  start_ctx_t c = {args, st, err, err_len};
  double t0 = ofi_now();
  ofi_parked_sweep(st); /* an earlier job's endpoints whose peers are gone by now */
  plait_result_t rc = start(&c);
  if (rc) {
    ofi_stop(st);
    return rc;
  }
  OFI_DEBUG(st, "rank %d of %d started in %.1f ms (provider %s)", st->rank, st->nranks,
            (ofi_now() - t0) * 1e3, st->provider);
  *out = st;
  return PLAIT_SUCCESS;
}

#define CLOSE(obj)                                                             \
  do {                                                                         \
    if (obj) fi_close(&(obj)->fid);                                            \
    (obj) = NULL;                                                              \
  } while (0)

void ofi_teardown(ofi_state_t *st) {
  if (!st) return;
  st->in_teardown = 1; /* stays 1 when a close in here is rescued (rescue.c) */
  if (st->parent) { /* a subset: only its own memory registrations; the rest is its parent's */
    if (!st->abandoned) ofi_mr_close_all(st);
    for (ofi_mr_t *m = st->mrs; m; m = m->next) m->mr = NULL;
    st->ep = NULL, st->av = NULL, st->cq = NULL, st->domain = NULL, st->fabric = NULL;
    st->info = NULL;
  }
  if (!st->parent && !st->abandoned && st->park_sends && st->ep)
    ofi_park(st, st->park_sends); /* its objects move there: NULL here (parked.h) */
  if (!st->parent && st->rescued && st->ep)
    ofi_park_rescued(st); /* closed at a later init, off this thread (parked.h) */
  if (st->abandoned) { /* rescued: left open, never touched again here (rescue.h) */
    st->ep = NULL, st->av = NULL, st->cq = NULL, st->domain = NULL, st->fabric = NULL;
    for (ofi_mr_t *m = st->mrs; m; m = m->next) m->mr = NULL;
  }
  CLOSE(st->ep);
  CLOSE(st->av);
  CLOSE(st->cq);
  ofi_mr_close_all(st);
  CLOSE(st->domain);
  CLOSE(st->fabric);
  if (st->info) fi_freeinfo(st->info);
  st->info = NULL;
  st->outstanding = NULL;
  st->done_head = st->done_tail = NULL;
  st->in_teardown = 0;
  /* No sweep here: an endpoint parked by this very teardown, whose peer was
   * killed a moment ago, crashed rxm in fi_close (test_blame_ofi_tcp, 1 run in
   * 4 under load); the next init sweeps, once rxm is long done with it. */
}

void ofi_stop(ofi_state_t *st) {
  if (!st) return;
  ofi_rescue_stop(st);
  ofi_teardown(st);
  free(st->global_ranks);
  free(st->park_peers);
  ofi_mr_free_all(st);
  free(st->addrs);
  free(st->peers);
  free(st);
}
