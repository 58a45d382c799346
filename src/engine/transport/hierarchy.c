/* The hierarchical allreduce's and allgather's local and cross sub-states,
 * made at engine start (hierarchy.h). */
#include "engine/transport/hierarchy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/log.h"

/* What every rank tells the others at start (little-endian on every rank
 * plait runs on; the bootstrap moves bytes). */
typedef struct {
  uint64_t host;
  uint64_t threshold;
  uint32_t mode;
  uint32_t ag_mode;
  uint32_t local;
  uint32_t pad;
} record_t;

void plait_hier_destroy(plait_hier_t *h) {
  if (!h) return;
  if (h->cross && h->t->finalize(h->cross))
    PLAIT_WARN("hier", "transport '%s' finalize of the cross set: %s", h->t->name,
               h->t->last_error(NULL));
  if (h->shm)
    plait_hier_shm_close(h->shm); /* the local set is its state */
  else if (h->local && h->t->finalize(h->local))
    PLAIT_WARN("hier", "transport '%s' finalize of the local set: %s", h->t->name,
               h->t->last_error(NULL));
  free(h->index_of);
  free(h->ag_scratch);
  free(h);
}

/* Each of the n sets of `of` (host_of: the hosts' local sets; index_of:
 * the cross sets) made on ts in order; *mine: this rank's sub-state. */
static plait_result_t make_sets(plait_hier_t *h, void *ts, const int *of, int size, int n,
                                int *buf, const char *what, void **mine) {
  for (int k = 0; k < n; k++) {
    int m = plait_hier_members(of, size, k, buf);
    void *sub = NULL;
    plait_result_t rc = h->t->subset(ts, buf, m, &sub);
    if (rc) {
      const char *msg = h->t->last_error(ts);
      return plait_error(rc, "making the %s set %d of %d ranks for the hierarchical allreduce "
                         "failed in transport '%s': %s", what, k, m, h->t->name,
                         msg && *msg ? msg : plait_strerror(rc));
    }
    if (sub) *mine = sub;
  }
  return PLAIT_SUCCESS;
}

/* Whether a mode could ever run on a layout of this gain, auto from min_gain. */
static int may_run(plait_hier_mode_t mode, double gain, double min_gain) {
  return mode == PLAIT_HIER_ON || (mode == PLAIT_HIER_AUTO && gain >= min_gain);
}

/* Whether the allreduce (auto: from h->min_gain) or the allgather (auto:
 * from PLAIT_HIER_AUTO_MIN_GAIN, whatever the local set runs on) could run. */
static int either_may_run(const plait_hier_t *h) {
  return may_run(h->mode, h->gain, h->min_gain) ||
         may_run(h->ag_mode, h->gain, PLAIT_HIER_AUTO_MIN_GAIN);
}

/* The layout from every rank's record: the sets made, or *out left NULL. */
/* The local set on its own ofi instance over shm, under rank 0's
 * PLAIT_HIERARCHICAL_LOCAL_TRANSPORT=auto, when every rank opens one
 * (hier_local.h; collective over the job); else h->lt stays the job's. */
static plait_result_t open_local(plait_hier_t *h, const record_t *all, int rank, int size,
                                 int *of, const plait_hier_settings_t *set) {
  h->lt = h->t;
  h->local_over = h->t->name;
  if (all[0].local == PLAIT_HIER_LOCAL_JOB) {
    PLAIT_DEBUG("hier", "the local set on the job's transport '%s' "
                "(PLAIT_HIERARCHICAL_LOCAL_TRANSPORT=job)", h->t->name);
    return PLAIT_SUCCESS;
  }
  int *members = of + 2 * size;
  plait_hier_local_args_t a = {h->boot, set->plugin_path, set->timeout_s, members, 0, h->index};
  a.n = plait_hier_members(of, size, of[rank], members);
  char why[512] = "";
  plait_result_t rc = plait_hier_shm_open(&a, &h->shm, why, sizeof why);
  if (rc) return plait_error_context(rc, "opening the hierarchical allreduce's local set on shm");
  if (h->shm) {
    h->lt = plait_hier_shm_table(h->shm);
    h->local = plait_hier_shm_state(h->shm);
    h->local_over = "ofi shm";
  } else {
    PLAIT_INFO("hier", "the hierarchical collectives' local set runs on the job's transport "
               "'%s', not on shared memory: %s", h->t->name, why);
  }
  return PLAIT_SUCCESS;
}

static plait_result_t from_records(const record_t *all, int rank, int size,
                                   const plait_hier_settings_t *set, const plait_bootstrap_t *boot,
                                   const plait_transport_t *t, void *ts, plait_hier_t **out) {
  uint64_t *host = malloc(sizeof *host * (size_t)size);
  int *of = malloc(sizeof *of * (size_t)size * 3);
  plait_hier_t *h = calloc(1, sizeof *h);
  plait_result_t rc = host && of && h ? PLAIT_SUCCESS
                                      : plait_error(PLAIT_ERR_NO_MEMORY, "out of memory for the "
                                                    "hierarchical allreduce's layout");
  char why[160] = "";
  int fits = 0;
  if (rc == PLAIT_SUCCESS) {
    for (int r = 0; r < size; r++) host[r] = all[r].host;
    h->t = t;
    h->boot = boot;
    h->mode = (plait_hier_mode_t)all[0].mode;
    h->ag_mode = (plait_hier_mode_t)all[0].ag_mode;
    h->threshold = all[0].threshold;
    fits = plait_hier_layout(host, size, of, of + size, &h->hosts, &h->per_host, why, sizeof why);
    if (fits) h->gain = plait_hier_flat_gain(of, size, h->hosts);
    /* neither would ever run (off, or auto where the layout gains too
     * little even with the local set on shm): no sub-states (their
     * connections) */
    h->min_gain = all[0].local == PLAIT_HIER_LOCAL_JOB ? plait_hier_auto_min_gain(0)
                                                       : plait_hier_auto_min_gain(1);
    if (fits && !either_may_run(h)) {
      fits = 0;
      snprintf(why, sizeof why, "off or auto, and the flat ring sends only %.2fx the bytes "
               "across hosts (auto's least: %.2f)", h->gain, h->min_gain);
    }
  }
  if (rc == PLAIT_SUCCESS && fits) {
    h->index = of[size + rank];
    rc = open_local(h, all, rank, size, of, set);
    /* the local set on the job's transport after all: auto's allreduce
     * needs the larger gain (every rank opened shm or none did) */
    h->min_gain = plait_hier_auto_min_gain(h->shm != NULL);
    if (rc == PLAIT_SUCCESS && !either_may_run(h)) {
      fits = 0;
      snprintf(why, sizeof why, "auto, the local set not on shared memory, and the flat ring "
               "sends only %.2fx the bytes across hosts (auto's least: %.2f)", h->gain,
               h->min_gain);
    }
  }
  if (rc == PLAIT_SUCCESS && fits) {
    if (!h->shm)
      rc = make_sets(h, ts, of, size, h->hosts, of + 2 * size, "local", &h->local);
    if (rc == PLAIT_SUCCESS)
      rc = make_sets(h, ts, of + size, size, h->per_host, of + 2 * size, "cross", &h->cross);
    if (rc == PLAIT_SUCCESS)
      PLAIT_INFO("hier", "hierarchical collectives (allreduce: %s, allgather: %s): %d hosts x "
                 "%d ranks, this rank's local index %d; %.2fx fewer bytes across hosts than "
                 "the flat ring; under auto from %llu bytes up where that is %.2fx or more "
                 "(allreduce); within the host over %s, across hosts over %s",
                 plait_hier_mode_name(h->mode), plait_hier_mode_name(h->ag_mode), h->hosts,
                 h->per_host, h->index, h->gain, (unsigned long long)h->threshold, h->min_gain,
                 h->local_over, t->name);
  } else if (rc == PLAIT_SUCCESS) {
    PLAIT_DEBUG("hier", "no hierarchical allreduce or allgather: %s", why);
  }
  if (rc == PLAIT_SUCCESS && h->local && h->cross) {
    h->index_of = of; /* of[size..2 size): index_of, moved to the front */
    memmove(of, of + size, sizeof *of * (size_t)size);
    of = NULL;
    *out = h;
    h = NULL;
  }
  plait_hier_destroy(h);
  free(host);
  free(of);
  return rc;
}

plait_result_t plait_hier_create(const plait_bootstrap_t *boot, const char *host,
                                 const plait_hier_settings_t *set,
                                 const plait_transport_t *t, void *ts, plait_hier_t **out) {
  plait_hier_mode_t mode = set->mode, ag_mode = set->ag_mode;
  uint64_t threshold = set->threshold;
  *out = NULL;
  /* the same on every rank: the transport is the job's */
  if (boot->nranks < 2 || !PLAIT_TRANSPORT_HAS(t, subset) || !(t->caps & PLAIT_CAP_HOST_MEMORY))
    return PLAIT_SUCCESS;
  record_t mine = {plait_hier_host_hash(host), threshold, (uint32_t)mode, (uint32_t)ag_mode,
                   (uint32_t)set->local, 0};
  record_t *all = malloc(sizeof *all * (size_t)boot->nranks);
  if (!all) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory for the hosts' records");
  plait_result_t rc = boot->allgather(boot->ctx, &mine, sizeof mine, all);
  if (rc) {
    free(all);
    return plait_error_context(rc, "exchanging host identities for the hierarchical allreduce");
  }
  if (all[0].local != mine.local)
    PLAIT_WARN("hier", "PLAIT_HIERARCHICAL_LOCAL_TRANSPORT=%s on this rank; rank 0's (%s) is "
               "the job's", plait_hier_local_name(set->local),
               plait_hier_local_name((plait_hier_local_t)all[0].local));
  if (all[0].mode != mine.mode || all[0].ag_mode != mine.ag_mode ||
      all[0].threshold != mine.threshold)
    PLAIT_WARN("hier", "PLAIT_HIERARCHICAL_ALLREDUCE=%s, PLAIT_HIERARCHICAL_ALLGATHER=%s, "
               "PLAIT_HIERARCHICAL_THRESHOLD=%llu on this rank; rank 0's (%s, %s, %llu) are the "
               "job's", plait_hier_mode_name(mode), plait_hier_mode_name(ag_mode),
               (unsigned long long)threshold, plait_hier_mode_name((plait_hier_mode_t)all[0].mode),
               plait_hier_mode_name((plait_hier_mode_t)all[0].ag_mode),
               (unsigned long long)all[0].threshold);
  rc = from_records(all, boot->rank, boot->nranks, set, boot, t, ts, out);
  free(all);
  return rc;
}
