/* A valid plugin whose init checks the bootstrap: allgather of every rank's
 * number, broadcast from the last rank, barrier. Used to test the loader and
 * the bootstrap through the real plugin path. */
#include <stdio.h>
#include <string.h>

#include "common.h"

static _Thread_local char err[256];
static const char *fixture_last_error(void *state) {
  (void)state;
  return err;
}

static plait_result_t fixture_init(const plait_transport_init_args_t *a, void **state) {
  const plait_bootstrap_t *b = a->bootstrap;
  int mine = 1000 + a->rank, all[64];
  if (a->nranks > 64) return PLAIT_ERR_UNSUPPORTED;
  plait_result_t rc = b->allgather(b->ctx, &mine, sizeof mine, all);
  if (rc) {
    snprintf(err, sizeof err, "allgather failed (%d)", rc);
    return rc;
  }
  for (int r = 0; r < a->nranks; r++)
    if (all[r] != 1000 + r) {
      snprintf(err, sizeof err, "allgather gave %d at %d", all[r], r);
      return PLAIT_ERR_INTERNAL;
    }
  char word[16] = "";
  if (a->rank == a->nranks - 1) strcpy(word, "from-last");
  if ((rc = b->broadcast(b->ctx, word, sizeof word, a->nranks - 1)) != PLAIT_SUCCESS) return rc;
  if (strcmp(word, "from-last")) {
    snprintf(err, sizeof err, "broadcast gave '%s'", word);
    return PLAIT_ERR_INTERNAL;
  }
  if ((rc = b->barrier(b->ctx)) != PLAIT_SUCCESS) return rc;
  if (a->log_level <= PLAIT_LOG_DEBUG)
    a->log(PLAIT_LOG_DEBUG, "fixture", __FILE__, __LINE__, "bootstrap checked on %d ranks",
           a->nranks);
  *state = (void *)a;
  return PLAIT_SUCCESS;
}

/* Built as a first-version plugin: its table ends before the appended
 * `algorithm` field (struct_size says so), which the core must not read. */
FX_EXPORT const plait_transport_v1_t plait_transport_v1 = {
    PLAIT_TRANSPORT_V1_ABI_VERSION, PLAIT_TRANSPORT_V1_MIN_SIZE, "fixture",
    PLAIT_CAP_HOST_MEMORY, 0, 0, fixture_init,
    fx_finalize, fixture_last_error, fx_allreduce, fx_allgatherv, fx_broadcast,
    fx_alltoallv, fx_reducescatter, fx_barrier, fx_alloc, fx_free, fx_copy, NULL, NULL, NULL};
